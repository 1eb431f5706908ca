"""A session's figures shown again: the turn, ``%agent_history``, the ``%agent_resume``
recap and the panel's details (design notes "Figures"). Real shells, the scripted server over HTTP,
the memory directory on ``tmp_path``."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer
from jupyter_agent.ui.panel import SessionsPanel
from jupyter_agent.ui.render import RECAP_WIDTH
from tests.shells import ShellFactory, magics_of


class ZMQInteractiveShell(InteractiveShell):  # the name is how Jupyter is detected
    pass


def kernel_shell(make_shell: ShellFactory) -> InteractiveShell:
    """A new shell that is taken for a Jupyter kernel's."""
    ZMQInteractiveShell.clear_instance()  # the base class's clear leaves the subclass's
    return make_shell(cls=ZMQInteractiveShell)


def png(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 150, 60)).save(out, format="PNG")
    return out.getvalue()


def figure_turn(shell: InteractiveShell, server: ScriptedModelServer, image: Path) -> str:
    """One turn whose code displays ``image``; the new session's ID."""
    code = f"from IPython.display import Image, display\ndisplay(Image(filename={str(image)!r}))"
    server.add_steps([{"tool_calls": [{"name": "run_python", "arguments": {"code": code}}]},
                      {"text": "A green rectangle."}])
    shell.run_line_magic("config", f'AgentMagics.base_url = "{server.base_url}"')
    shell.run_line_magic("config", 'AgentMagics.approve = "auto"')
    shell.run_cell_magic("agent", "", "show the picture")
    sid = magics_of(shell).controller.active_session_id
    assert sid is not None
    return str(sid)


def images(outputs: list[Any]) -> list[tuple[bytes, dict[str, Any]]]:
    return [(base64.b64decode(o.data["image/png"]), o.metadata or {})
            for o in outputs if "image/png" in o.data]


def test_the_turn_shows_the_figure_in_its_place(
        make_shell: ShellFactory, model_server: ScriptedModelServer, tmp_path: Path) -> None:
    (tmp_path / "g.png").write_bytes(png(40, 30))
    shell = kernel_shell(make_shell)
    with capture_output() as captured:
        figure_turn(shell, model_server, tmp_path / "g.png")
    kinds = ["image" if "image/png" in o.data else "md" for o in captured.outputs
             if "image/png" in o.data or "text/markdown" in o.data]
    assert kinds == ["md", "image", "md"]  # the call, the figure, then the reply
    assert [data for data, _ in images(captured.outputs)] == [png(40, 30)]
    assert "[figure 1: PNG, 40×30 px, shown to the user]" in str(model_server.requests[1])
    shown = "\n".join(o.data["text/markdown"] for o in captured.outputs
                      if "text/markdown" in o.data)
    assert "[figure 1" not in shown  # the model's line for the figure is not shown to you
    assert not any(line.strip() in ("→", "\\→") for line in shown.splitlines())


def test_history_and_a_resumed_session_show_the_figures_again(
        make_shell: ShellFactory, model_server: ScriptedModelServer, tmp_path: Path) -> None:
    (tmp_path / "g.png").write_bytes(png(40, 30))
    shell = kernel_shell(make_shell)
    sid = figure_turn(shell, model_server, tmp_path / "g.png")
    with capture_output() as captured:
        shell.run_line_magic("agent_history", "")
    assert [data for data, _ in images(captured.outputs)] == [png(40, 30)]
    assert "show the picture" in captured.stdout and "A green rectangle." in captured.stdout
    assert captured.stdout.index("show the picture") < captured.stdout.index("A green")
    with capture_output() as captured:
        shell.run_line_magic("agent_history", "--full")
    assert len(images(captured.outputs)) == 1
    shell.run_line_magic("unload_ext", "jupyter_agent")

    later = kernel_shell(make_shell)  # a new kernel
    with capture_output() as captured:
        later.run_line_magic("agent_resume", f"{sid} --base-url {model_server.base_url}")
    recap = [o.data["text/markdown"] for o in captured.outputs if "text/markdown" in o.data]
    assert any("**Last figure:** figure 1: PNG, 40×30 px" in text for text in recap)
    ((data, metadata),) = images(captured.outputs)
    assert data == png(40, 30)
    assert metadata == {"image/png": {"width": RECAP_WIDTH}}


def test_a_terminal_names_the_figures_in_text(
        shell: InteractiveShell, model_server: ScriptedModelServer, tmp_path: Path) -> None:
    (tmp_path / "g.png").write_bytes(png(40, 30))
    sid = figure_turn(shell, model_server, tmp_path / "g.png")
    with capture_output() as captured:
        shell.run_line_magic("agent_history", "")
    assert "[figure 1: PNG, 40×30 px, not shown to the user]" in captured.stdout
    assert captured.outputs == []
    magics_of(shell).controller.close()
    with capture_output() as captured:
        shell.run_line_magic("agent_resume", sid)
    assert "last figure: figure 1: PNG, 40×30 px" in captured.stdout


def test_a_missing_figure_file_is_named_not_fatal(
        make_shell: ShellFactory, model_server: ScriptedModelServer, tmp_path: Path,
        memory_dir: Path) -> None:
    (tmp_path / "g.png").write_bytes(png(40, 30))
    shell = kernel_shell(make_shell)
    sid = figure_turn(shell, model_server, tmp_path / "g.png")
    store = FileStore(memory_dir)
    for fid in store.figure_ids(sid):
        (store.figures_path(sid) / f"{fid}.png").unlink()
    with capture_output() as captured:
        shell.run_line_magic("agent_history", "")
    assert "[figure 1: PNG, 40×30 px: cannot be shown:" in captured.stdout
    assert "A green rectangle." in captured.stdout


def test_the_panel_details_show_the_last_figures(
        make_shell: ShellFactory, model_server: ScriptedModelServer, tmp_path: Path,
        memory_dir: Path) -> None:
    (tmp_path / "g.png").write_bytes(png(40, 30))
    shell = kernel_shell(make_shell)
    figure_turn(shell, model_server, tmp_path / "g.png")
    panel = SessionsPanel(FileStore(memory_dir))
    panel.rows[0].details.click()
    (figure,) = panel._details.figures.children
    image, caption = figure.children
    assert image.value == png(40, 30) and image.format == "png"
    assert "figure 1: PNG, 40×30 px" in caption.value
    assert not image.tooltip  # ipywidgets 8.1 cannot render an Image with a tooltip
    panel._details.close_button.click()
    assert panel._details.figures.children == ()
    panel.close()


def test_agent_export_writes_the_figures_into_the_notebook(
        shell: InteractiveShell, model_server: ScriptedModelServer, tmp_path: Path) -> None:
    import nbformat

    (tmp_path / "g.png").write_bytes(png(40, 30))
    figure_turn(shell, model_server, tmp_path / "g.png")
    shell.run_line_magic("agent_export", f"-o {tmp_path / 'out.ipynb'}")
    notebook = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    (cell,) = [c for c in notebook.cells if c.cell_type == "code"]
    (output,) = [o for o in cell.outputs if o.output_type == "display_data"]
    assert base64.b64decode(output.data["image/png"]) == png(40, 30)


def test_vision_is_per_session_and_kept_on_resume(
        make_shell: ShellFactory, model_server: ScriptedModelServer, tmp_path: Path) -> None:
    (tmp_path / "g.png").write_bytes(png(40, 30))
    shell = kernel_shell(make_shell)
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    shell.run_line_magic("agent_new", "--vision off")
    figure_turn(shell, model_server, tmp_path / "g.png")
    sid = magics_of(shell).controller.active_session_id
    assert model_server.images == [[], []]
    shell.run_line_magic("unload_ext", "jupyter_agent")

    later = kernel_shell(make_shell)  # AgentMagics.vision is "auto" here
    later.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    later.run_line_magic("agent_resume", str(sid))
    model_server.add_steps([{"text": "Still text only."}])
    later.run_line_magic("agent", "and now?")
    assert model_server.images[-1] == []
    later.run_line_magic("agent_resume", f"{sid} --vision on")
    model_server.add_steps([{"text": "Now I see it."}])
    later.run_line_magic("agent", "look")
    assert [p.media_type for p in model_server.images[-1]] == ["image/png"]


def test_a_fork_keeps_the_figures_of_its_turns(
        make_shell: ShellFactory, model_server: ScriptedModelServer, tmp_path: Path) -> None:
    (tmp_path / "g.png").write_bytes(png(40, 30))
    shell = kernel_shell(make_shell)
    parent = figure_turn(shell, model_server, tmp_path / "g.png")
    shell.run_line_magic("agent_fork", "")
    fork = magics_of(shell).controller.active_session_id
    assert fork is not None and fork != parent
    with capture_output() as captured:
        shell.run_line_magic("agent_history", "")
    assert [data for data, _ in images(captured.outputs)] == [png(40, 30)]
