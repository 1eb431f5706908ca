"""Exports of a session whose code made figures (design notes "Forks, exports and search",
"Figures"): the notebook shows
them as its code cell's image outputs, the Markdown embeds them, the JSON references
them. A real agent, shell and scripted server make the session; the magic and the CLI
export it."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from jupyter_agent.artefacts.export import render
from jupyter_agent.cli import main
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer
from tests.agent.helpers import make_agent, tool_step
from tests.shells import retire_shell

SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30"><rect/></svg>'


def png(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (90, 20, 160)).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture(name="session")
def session_fixture(model_server: ScriptedModelServer, store: FileStore,
                    tmp_path: Path) -> str:
    """A session with one call that prints, shows a PNG, prints, shows an SVG."""
    (tmp_path / "p.png").write_bytes(png(30, 20))
    code = ("from IPython.display import SVG, Image, display\nprint('first')\n"
            f"display(Image(filename={str(tmp_path / 'p.png')!r}))\nprint('second')\n"
            f"display(SVG({SVG!r}))\n")
    model_server.add_steps([tool_step(("run_python", {"code": code})), {"text": "Two figures."}])
    InteractiveShell.clear_instance()
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    try:
        agent = make_agent(model_server, store, shell=shell, title="Figures")
        agent.run("draw")
        agent.conversation.close()
    finally:
        retire_shell(shell)
    return agent.conversation.session_id


def reader(store: FileStore, sid: str):  # type: ignore[no-untyped-def]
    return lambda fid: store.read_figure(sid, fid)


def test_the_notebook_has_the_figures_as_image_outputs_in_place(
        store: FileStore, session: str) -> None:
    data, _ = render(store.load_session(session), "ipynb", figures=reader(store, session))
    notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
    (cell,) = [c for c in notebook.cells if c.cell_type == "code"]
    kinds = [o.output_type for o in cell.outputs]
    assert kinds == ["stream", "display_data", "stream", "display_data"]
    assert [o.text for o in cell.outputs if o.output_type == "stream"] == ["first\n", "second\n"]
    first, second = (o for o in cell.outputs if o.output_type == "display_data")
    assert base64.b64decode(first.data["image/png"]) == png(30, 20)
    assert first.data["text/plain"] == "[figure 1: PNG, 30×20 px]"
    assert second.data["image/svg+xml"] == SVG
    assert first.metadata["jupyter_agent"]["figure"]["n"] == 1
    nbformat.validate(notebook)


def test_without_the_files_the_notebook_names_each_figure(store: FileStore,
                                                           session: str) -> None:
    for fid in store.figure_ids(session):
        for path in store.figures_path(session).glob(f"{fid}.*"):
            path.unlink()
    data, _ = render(store.load_session(session), "ipynb", figures=reader(store, session))
    notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
    (cell,) = [c for c in notebook.cells if c.cell_type == "code"]
    assert [o.output_type for o in cell.outputs] == ["stream"] * 4
    assert cell.outputs[1].text.startswith("[figure 1: PNG, 30×20 px] (not exported: ")


def test_markdown_embeds_the_figures(store: FileStore, session: str) -> None:
    data, _ = render(store.load_session(session), "md", figures=reader(store, session))
    text = data.decode("utf-8")
    encoded = base64.b64encode(png(30, 20)).decode("ascii")
    assert f"![figure 1: PNG, 30×20 px](data:image/png;base64,{encoded})" in text
    svg = base64.b64encode(SVG.encode()).decode("ascii")
    assert f"![figure 2: SVG, 40×30 px](data:image/svg+xml;base64,{svg})" in text
    assert text.index("first") < text.index("![figure 1")


def test_json_references_the_figures(store: FileStore, session: str) -> None:
    data, _ = render(store.load_session(session), "json")
    record = json.loads(data)
    (tool,) = [m for m in record["transcript"] if m["role"] == "tool"]
    assert [(r["n"], r["media_type"]) for r in tool["figures"]] == [
        (1, "image/png"), (2, "image/svg+xml")]
    assert sorted(r["id"] for r in tool["figures"]) == store.figure_ids(session)
    assert "base64" not in data.decode("utf-8")


def test_the_cli_export_includes_the_figures(store: FileStore, session: str,
                                             tmp_path: Path, memory_dir: Path) -> None:
    out = tmp_path / "out.ipynb"
    assert main(["export", session, "-o", str(out), "--memory-dir", str(memory_dir)]) == 0
    notebook = nbformat.read(out, as_version=4)
    (cell,) = [c for c in notebook.cells if c.cell_type == "code"]
    assert sum(o.output_type == "display_data" for o in cell.outputs) == 2


def test_a_fork_takes_the_figures_it_refers_to(store: FileStore, session: str) -> None:
    from jupyter_agent.artefacts.fork import fork_session

    forked = fork_session(store, session)
    fid = forked.record.id
    assert store.figure_ids(fid) == store.figure_ids(session) and len(store.figure_ids(fid)) == 2
    for figure_id in store.figure_ids(fid):
        assert store.read_figure(fid, figure_id) == store.read_figure(session, figure_id)
    store.delete_session(session)  # the fork's figures are its own
    assert len(store.figure_ids(fid)) == 2
