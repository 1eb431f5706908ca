"""Exports of real agent sessions: a valid notebook replaying the analysis, a Markdown
transcript with compaction markers, the one-file JSON record; no keys, no overwrite."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

from jupyter_agent.agent.working_context import DEFAULT_SYSTEM_PROMPT
from jupyter_agent.artefacts.export import choose_format, export_record, render
from jupyter_agent.artefacts.redact import REDACTED, Redactor, secrets_from_environ
from jupyter_agent.errors import ExportError, ExportExistsError
from jupyter_agent.store import FileStore
from jupyter_agent.store.records import parse_record
from jupyter_agent.testing import ScriptedModelServer
from tests.artefacts.helpers import run_turns, tool_step

FAKE_KEY = "sk-proj-" + "A1b2C3d4E5" * 4


@pytest.fixture
def session(model_server: ScriptedModelServer, store: FileStore) -> str:
    """The four-turn analysis, compacted once in the middle of turn 3."""
    sid, _ = run_turns(model_server, store, context_window=940, keep_turns=1)
    store.update(sid, title="Numbers, $5 and $10")
    return sid


def code_cells(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in notebook.cells if c.cell_type == "code"]


def test_notebook_replays_the_analysis(store: FileStore, session: str, tmp_path: Path) -> None:
    record = store.load_session(session)
    done = export_record(record, "ipynb", tmp_path / "numbers.ipynb")
    notebook = nbformat.read(done.path, as_version=4)
    nbformat.validate(notebook)
    assert (done.format, done.session_id, done.size) == ("ipynb", session, done.path.stat().st_size)
    meta = notebook.metadata["jupyter_agent"]
    assert (meta["session_id"], meta["model"], meta["title"]) == (session, "scripted",
                                                                 "Numbers, $5 and $10")
    assert notebook.metadata.kernelspec.name == "python3"
    head = notebook.cells[0].source
    assert "# Numbers, $5 and $10" in head and "mathjax_ignore" in head
    assert "Completed: sum and mean" in head  # the summary is on top
    cells = code_cells(notebook)
    assert [c.source for c in cells] == [
        "numbers = list(range(1, 11))\nsum(numbers)",
        "mean = sum(nums) / len(nums)",
        "mean = sum(numbers) / len(numbers)\nprint(mean)",
    ]
    outputs = [[(o.output_type, o.get("name"), o.get("text")) for o in c.outputs] for c in cells]
    assert [(o.output_type, o.data) for o in cells[0].outputs] == [  # the value, as Out[]
        ("execute_result", {"text/plain": "55"})]
    assert outputs[2] == [("stream", "stdout", "5.5\n")]
    assert outputs[1][0][1] == "stderr" and "NameError" in outputs[1][0][2]
    assert cells[1].metadata.tags == ["raises-exception"]
    assert all(c.execution_count is None for c in cells)  # recorded, not run
    markdown = [c.source for c in notebook.cells if c.cell_type == "markdown"]
    assert [m.split("\n")[0] for m in markdown if m.startswith("## Request")] == [
        f"## Request {n}" for n in range(1, 5)]
    assert "The mean is 5.5 (one retry)." in markdown
    assert any("update_todo(id=2, status=\"failed\")" in m for m in markdown)
    text = done.path.read_text("utf-8")
    assert DEFAULT_SYSTEM_PROMPT.splitlines()[0] not in text  # the notes stay private


def test_markdown_transcript_marks_compactions(store: FileStore, session: str) -> None:
    record = store.load_session(session)
    text, redacted = render(record, "md")
    md = text.decode("utf-8")
    assert redacted == 0
    assert md.startswith("# Numbers, $5 and $10\n")
    assert md.count("**Context compacted**") == len(record.compactions) == 1
    assert "> - earlier work summarised" in md
    # the marker sits where the compaction happened: after the failed call of turn 3
    assert md.index("NameError") < md.index("**Context compacted**") < md.index("5.5")
    assert "```python\nmean = sum(numbers) / len(numbers)\nprint(mean)\n```" in md
    assert [line for line in md.splitlines() if line.startswith("## Request")] == [
        f"## Request {n}" for n in range(1, 5)]


def test_json_is_the_one_file_record(store: FileStore, session: str, tmp_path: Path) -> None:
    record = store.load_session(session)
    done = export_record(record, output=tmp_path / "numbers.json")
    assert done.format == "json"
    again = parse_record(done.path.read_bytes(), done.path)
    assert again == record
    assert list(json.loads(done.path.read_bytes()))[:3] == ["schema_version", "id", "created_at"]


def test_no_api_key_in_any_format(model_server: ScriptedModelServer, store: FileStore,
                                  tmp_path: Path) -> None:
    env_key = "local-Key_with.dots-0123456789"
    turns = [(f"my key is {env_key}, keep it safe", [
        tool_step(("run_python", {"code": f"print('{FAKE_KEY}')"})),
        {"text": f"Printed {FAKE_KEY}."},
    ])]
    sid, _ = run_turns(model_server, store, turns)
    record = store.load_session(sid)
    secrets = secrets_from_environ({"MY_SERVICE_TOKEN": env_key, "HOME": "/root/somewhere"})
    assert secrets == [env_key]
    for fmt in ("ipynb", "md", "json"):
        done = export_record(record, fmt, tmp_path / f"s.{fmt}", secrets=secrets)
        content = done.path.read_text("utf-8")
        assert FAKE_KEY not in content and env_key not in content
        assert REDACTED in content and done.redacted == 2, fmt  # two distinct keys
    clean = Redactor()
    assert clean.text("no keys here, sk-short") == "no keys here, sk-short" and not clean.found


def test_refused_code_is_not_a_code_cell(model_server: ScriptedModelServer,
                                         store: FileStore) -> None:
    turns = [("delete everything", [
        tool_step(("run_python", {"code": "import shutil; shutil.rmtree('/data')"})),
        {"text": "I was not allowed to run that."},
    ])]
    sid, _ = run_turns(model_server, store, turns, approve="deny")
    data, _ = render(store.load_session(sid), "ipynb")
    notebook = nbformat.reads(data.decode("utf-8"), as_version=4)
    assert code_cells(notebook) == []
    refused = [c.source for c in notebook.cells if "rmtree" in c.source]
    assert len(refused) == 1 and refused[0].startswith("*The agent's code below did not run: "
                                                       "refused:")


def test_never_overwrites_without_force(store: FileStore, session: str,
                                        tmp_path: Path) -> None:
    record = store.load_session(session)
    target = tmp_path / "out.md"
    target.write_text("mine")
    with pytest.raises(ExportExistsError, match="use --force") as info:
        export_record(record, "md", target)
    assert info.value.path == target and target.read_text() == "mine"
    done = export_record(record, "md", target, force=True)
    assert done.path == target and target.read_text("utf-8").startswith("# Numbers")
    in_folder = export_record(record, "md", tmp_path)  # a folder: the default name in it
    assert in_folder.path == tmp_path / f"session-{session}.md"
    (tmp_path / "sub").mkdir()
    default = export_record(record, cwd=tmp_path / "sub")  # no output: the default name
    assert default.path == tmp_path / "sub" / f"session-{session}.ipynb"
    with pytest.raises(ExportError, match="does not exist"):
        export_record(record, "md", tmp_path / "missing" / "x.md")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_format_follows_the_file_name() -> None:
    assert choose_format(None, "analysis.md") == "md"
    assert choose_format(None, "analysis.JSON") == "json"
    assert choose_format(None, "analysis.txt") == "ipynb"
    assert choose_format(None, None) == "ipynb"
    assert choose_format("md", "x.json") == "md"
    with pytest.raises(ValueError, match="unknown export format 'pdf'"):
        choose_format("pdf")


def test_exports_show_session_text_as_text(store: FileStore) -> None:
    """An exported notebook's Markdown cells (and the Markdown file) hold no HTML, image
    or unsafe link from the session: Jupyter would render them when the file is opened."""
    from tests.ui.test_untrusted_text import HTML_PAYLOAD, assert_inert_markdown

    call = {"id": "c1", "type": "function",
            "function": {"name": "add_todo", "arguments": json.dumps({"text": "a`<b>`"})}}
    sid = store.create_session([{"role": "system", "content": "sys"}],
                               title="<img src=x onerror=alert(1)>")
    store.save(sid, [
        {"role": "system", "content": "sys"}, {"role": "user", "content": HTML_PAYLOAD},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": HTML_PAYLOAD[:150]},
        {"role": "assistant", "content": HTML_PAYLOAD + " costs $5 and $10"}])
    store.update(sid, summary=HTML_PAYLOAD)
    record = store.load_session(sid)
    notebook = nbformat.reads(render(record, "ipynb")[0].decode(), as_version=4)
    cells = [c.source for c in notebook.cells if c.cell_type == "markdown"]
    assert len(cells) >= 4
    for source in cells:
        ours = source.replace('<div class="mathjax_ignore tex2jax_ignore">', "")
        ours = ours.replace("</div>", "").replace("<small>", "").replace("</small>", "")
        assert_inert_markdown(ours)
    assert any("costs $5 and $10" in source for source in cells)  # maths left as written
    text = render(record, "md")[0].decode()
    assert_inert_markdown(text)
    assert "\\<img src=x onerror=alert(1)>" in text and "[image: ](https://evil" in text
