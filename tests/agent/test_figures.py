"""Figures: what agent-run code displays is named in the tool result, kept with the
session and sent to the model as images when it can take them (design notes "Figures").

Real parts only: an ``InteractiveShell`` running the code (matplotlib's inline backend,
``IPython.display``), the scripted model server over HTTP with the ``openai`` client, a
session store on ``tmp_path``.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from jupyter_agent.agent.adapters import ResponsesModel
from jupyter_agent.agent.config import AgentConfig
from jupyter_agent.agent.events import Notice
from jupyter_agent.agent.loop import Agent
from jupyter_agent.agent.working_context import IMAGES_CAPTION, clip_reason
from jupyter_agent.errors import UnsafeFileError
from jupyter_agent.images import MAX_IMAGE_SIDE, image_tokens
from jupyter_agent.store import FileStore
from jupyter_agent.store.sweep import collect_garbage
from jupyter_agent.testing import ScriptedModelServer
from tests.agent.helpers import Recorder, make_agent, make_client, tool_step
from tests.shells import retire_shell

PLOT = """\
import matplotlib.pyplot as plt
print("before")
plt.figure(figsize=(6.4, 4.8), dpi=100)
plt.plot([1, 2, 3])
plt.show()
print("between")
plt.figure(figsize=(3, 2), dpi=100)
plt.plot([3, 2, 1])
print("after")
"""


class ZMQInteractiveShell(InteractiveShell):
    """A shell named as a Jupyter kernel's is (how the user's seeing images is told)."""

    def enable_gui(self, gui: str | None = None) -> None:
        """The inline backend needs no GUI event loop."""


@pytest.fixture(name="kshell")
def kshell_fixture() -> Iterator[InteractiveShell]:
    """A real shell, named like a kernel's, with matplotlib's inline backend."""
    InteractiveShell.clear_instance()
    ZMQInteractiveShell.clear_instance()
    config = Config()
    config.HistoryManager.enabled = False
    shell = ZMQInteractiveShell.instance(config=config)
    from matplotlib_inline import backend_inline

    # matplotlib-inline sets a new shell's figure formats only on its first "inline" in
    # the process; every test has a new shell, as every kernel has a new process
    backend_inline.configure_inline_support.current_backend = "unset"  # type: ignore[attr-defined]
    shell.run_line_magic("matplotlib", "inline")
    yield shell
    import matplotlib.pyplot as plt

    plt.close("all")
    retire_shell(shell)


def png(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (20, 120, 200)).save(out, format="PNG")
    return out.getvalue()


def run_code(code: str, then: str = "Done.") -> list[dict[str, Any]]:
    return [tool_step(("run_python", {"code": code})), {"text": then}]


def tool_contents(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_the_tool_result_names_each_figure_in_order_with_the_printed_lines(
        model_server: ScriptedModelServer, store: FileStore, kshell: InteractiveShell) -> None:
    model_server.add_steps(run_code(PLOT))
    agent = make_agent(model_server, store, shell=kshell)
    agent.run("plot it")
    (result,) = tool_contents(model_server.requests[1])
    refs = store.load_session(agent.conversation.session_id).transcript[3]["figures"]
    assert [(r["n"], r["media_type"], r["shown"]) for r in refs] == [
        (1, "image/png", True), (2, "image/png", True)]
    (w1, h1), (w2, h2) = [(r["width"], r["height"]) for r in refs]
    assert w1 > w2 > 100 and h1 > h2 > 100  # the inline backend crops to the drawing
    assert result.splitlines() == [
        "before", f"[figure 1: PNG, {w1}×{h1} px, shown to the user]",
        "between", "after", f"[figure 2: PNG, {w2}×{h2} px, shown to the user]"]
    assert store.figure_ids(agent.conversation.session_id) == sorted(r["id"] for r in refs)


def test_displayed_images_and_a_dataframe(model_server: ScriptedModelServer,
                                          store: FileStore, kshell: InteractiveShell,
                                          tmp_path: Path) -> None:
    from PIL import Image

    Image.new("RGB", (50, 40)).save(tmp_path / "photo.jpg", format="JPEG")
    (tmp_path / "p.png").write_bytes(png(30, 20))
    code = f"""\
import pandas as pd
from IPython.display import SVG, Image, display
display(Image(filename={str(tmp_path / "p.png")!r}))
display(Image(filename={str(tmp_path / "photo.jpg")!r}))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30"><rect/></svg>'))
display(pd.DataFrame({{"a": [1, 2]}}))
"""
    model_server.add_steps(run_code(code))
    agent = make_agent(model_server, store, shell=kshell)
    agent.run("show")
    (result,) = tool_contents(model_server.requests[1])
    assert result.splitlines() == [
        "[figure 1: PNG, 30×20 px, shown to the user]",
        "[figure 2: JPEG, 50×40 px, shown to the user]",
        "[figure 3: SVG, 40×30 px, shown to the user]",
        "   a", "0  1", "1  2"]
    # PNG and JPEG go to the model as images; an SVG is named only
    assert [p.media_type for p in model_server.images[1]] == ["image/png", "image/jpeg"]


def test_vision_on_sends_the_images_after_the_tool_results(
        model_server: ScriptedModelServer, store: FileStore, kshell: InteractiveShell) -> None:
    model_server.add_steps(run_code(PLOT))
    agent = make_agent(model_server, store, shell=kshell, vision="on")
    agent.run("plot it")
    second = model_server.requests[1]
    assert model_server.images[0] == []
    messages = second["messages"]
    assert [m["role"] for m in messages[-3:]] == ["assistant", "tool", "user"]
    parts = messages[-1]["content"]
    assert [p["type"] for p in parts] == ["text", "text", "image_url", "text", "image_url"]
    assert parts[0]["text"] == IMAGES_CAPTION
    assert (parts[1]["text"], parts[3]["text"]) == ("figure 1:", "figure 2:")
    images = model_server.images[1]
    refs = agent.conversation.messages[-2]["figures"]
    assert [(p.media_type, p.width, p.height) for p in images] == [
        ("image/png", r["width"], r["height"]) for r in refs]
    assert all(p.where.startswith(f"messages[{len(messages) - 1}]") for p in images)
    # the saved working context keeps references, never image bytes
    saved = store.load_session(agent.conversation.session_id)
    assert "base64" not in str(saved.messages) and "base64" not in str(saved.transcript)


def test_vision_off_sends_no_image(model_server: ScriptedModelServer, store: FileStore,
                                   kshell: InteractiveShell) -> None:
    model_server.add_steps(run_code(PLOT))
    agent = make_agent(model_server, store, shell=kshell, vision="off")
    agent.run("plot it")
    assert model_server.images == [[], []]
    assert "[figure 2: PNG" in tool_contents(model_server.requests[1])[0]


def test_responses_api_puts_the_images_in_the_function_call_output(
        model_server: ScriptedModelServer, store: FileStore, kshell: InteractiveShell) -> None:
    model_server.add_steps(run_code(PLOT))
    model = ResponsesModel(make_client(model_server), "gpt-4.1")
    agent = Agent(model, store=store, shell=kshell,
                  config=AgentConfig(approve="auto", vision="on"))
    agent.run("plot it")
    items = model_server.requests[1]["input"]
    (output,) = [i for i in items if i.get("type") == "function_call_output"]
    kinds = [p["type"] for p in output["output"]]
    assert kinds == ["input_text", "input_image", "input_image"]
    assert "[figure 1: PNG, " in output["output"][0]["text"]
    index = items.index(output)
    assert [p.where for p in model_server.images[1]] == [
        f"input[{index}].output[1]", f"input[{index}].output[2]"]


def test_auto_resends_without_images_once_and_remembers_it_across_resume(
        store: FileStore, kshell: InteractiveShell) -> None:
    with ScriptedModelServer(accept_images=False) as server:
        server.add_steps(run_code(PLOT, "I see two figures named."))
        rec = Recorder()
        agent = make_agent(server, store, shell=kshell)  # vision "auto" by default
        assert agent.run("plot it", on_event=rec).reply == "I see two figures named."
        sid = agent.conversation.session_id
        # refused with images, then sent again without them
        assert [len(x) for x in server.images] == [0, 2, 0]
        assert [e.status for e in server.exchanges] == [200, 400, 200]
        notices = [e.text for e in rec.events if isinstance(e, Notice) and "image" in e.text]
        assert len([n for n in notices if "refused the images" in n]) == 1
        assert "\n" not in notices[0]
        notice = notices[0]
        assert notice.startswith("the model endpoint refused the images of figures (400: ")
        assert "so scripted is told about figures in text only" in notice
        assert "--vision on" in notice and "--vision off" in notice
        assert notice.count("400") == 1 and "refused the request" not in notice
        assert notice.count("(") == notice.count(")")
        refused = store.load_session(sid).state.images_refused
        assert refused.startswith("scripted at " + server.base_url)
        agent.conversation.close()

        server.add_steps(run_code(PLOT, "again"))
        resumed = make_agent(server, store, shell=kshell, session_id=sid)
        rec = Recorder()
        resumed.run("once more", on_event=rec)
        assert [len(x) for x in server.images[3:]] == [0, 0]  # not tried again
        assert not [e for e in rec.events if isinstance(e, Notice) and "image" in e.text]
        resumed.conversation.close()


def test_large_images_are_downscaled_to_the_bound(
        model_server: ScriptedModelServer, store: FileStore, kshell: InteractiveShell,
        tmp_path: Path) -> None:
    (tmp_path / "big.png").write_bytes(png(3000, 1500))
    code = ("from IPython.display import Image, display\n"
            f"display(Image(filename={str(tmp_path / 'big.png')!r}))\n")
    model_server.add_steps(run_code(code))
    agent = make_agent(model_server, store, shell=kshell, vision="on")
    agent.run("show")
    assert "[figure 1: PNG, 3000×1500 px" in tool_contents(model_server.requests[1])[0]
    (part,) = model_server.images[1]
    assert (part.width, part.height) == (MAX_IMAGE_SIDE, MAX_IMAGE_SIDE // 2)
    # the stored figure is the original
    (fid,) = store.figure_ids(agent.conversation.session_id)
    assert store.read_figure(agent.conversation.session_id, fid).data == png(3000, 1500)


def test_image_tokens_are_counted_in_the_session_usage(
        store: FileStore, kshell: InteractiveShell) -> None:
    totals, expected = {}, 0
    for vision in ("on", "off"):
        with ScriptedModelServer(run_code(PLOT)) as server:
            agent = make_agent(server, store, shell=kshell, vision=vision)
            agent.run("plot it")
            totals[vision] = agent.conversation.state.usage.input_tokens
            if vision == "on":
                expected = sum(image_tokens(p.width, p.height) for p in server.images[1]
                               if p.width and p.height)
            agent.conversation.close()
    assert expected > 0
    assert totals["on"] - totals["off"] >= expected


def test_a_request_carries_at_most_max_images_the_newest(
        model_server: ScriptedModelServer, store: FileStore, kshell: InteractiveShell) -> None:
    one = "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n"
    model_server.add_steps([tool_step(("run_python", {"code": one})) for _ in range(4)]
                           + [{"text": "four plots"}])
    agent = make_agent(model_server, store, shell=kshell, vision="on", max_images=2)
    agent.run("plot four times")
    assert [len(x) for x in model_server.images] == [0, 1, 2, 2, 2]
    last = model_server.requests[-1]["messages"]
    captions = [p["text"] for m in last if m["role"] == "user" and isinstance(m["content"], list)
                for p in m["content"] if p["type"] == "text" and p["text"].startswith("figure")]
    assert captions == ["figure 3:", "figure 4:"]


def test_compaction_drops_old_images_first_and_the_transcript_keeps_them(
        model_server: ScriptedModelServer, store: FileStore, kshell: InteractiveShell) -> None:
    model_server.add_steps([*run_code(PLOT, "two plots"), {"text": "ok"}])
    agent = make_agent(model_server, store, shell=kshell, vision="on")
    agent.run("plot it")
    agent.conversation.append({"role": "user", "content": "next"})  # a later request
    from jupyter_agent.agent.conversation import drop_old_images

    with agent.conversation.lease():
        assert drop_old_images(agent.conversation) == 2
    record = store.load_session(agent.conversation.session_id)
    assert not any("figures" in m for m in record.messages)
    assert [len(m["figures"]) for m in record.transcript if "figures" in m] == [2]
    assert any("[figure 1: PNG" in str(m.get("content")) for m in record.messages)


def test_figure_files_live_next_to_the_session_and_go_with_it(
        model_server: ScriptedModelServer, store: FileStore, kshell: InteractiveShell) -> None:
    model_server.add_steps(run_code(PLOT))
    agent = make_agent(model_server, store, shell=kshell)
    agent.run("plot it")
    sid = agent.conversation.session_id
    agent.conversation.close()
    folder = store.figures_path(sid)
    assert folder.parent == store.session_path(sid).parent
    files = sorted(p.name for p in folder.iterdir())
    assert files == sorted(f"{fid}.png" for fid in store.figure_ids(sid)) and len(files) == 2
    assert os.stat(folder).st_mode & 0o777 == 0o700
    assert all(os.stat(folder / f).st_mode & 0o777 == 0o600 for f in files)
    store.delete_session(sid)
    assert not folder.exists()


def test_figures_of_a_vanished_session_are_collected(
        model_server: ScriptedModelServer, store: FileStore, kshell: InteractiveShell) -> None:
    model_server.add_steps(run_code(PLOT))
    agent = make_agent(model_server, store, shell=kshell)
    agent.run("plot it")
    sid = agent.conversation.session_id
    agent.conversation.close()
    folder = store.figures_path(sid)
    for suffix in (".json", ".jsonl"):
        path = store.session_path(sid).with_suffix(suffix)
        if path.exists():
            path.unlink()
    removed = collect_garbage(store)
    assert folder in removed or any(folder in p.parents for p in removed)
    assert not folder.exists()


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_figure_file_replaced_by_a_link_or_fifo_is_refused(
        model_server: ScriptedModelServer, store: FileStore, kshell: InteractiveShell,
        tmp_path: Path, kind: str) -> None:
    model_server.add_steps(run_code(PLOT))
    agent = make_agent(model_server, store, shell=kshell)
    agent.run("plot it")
    sid = agent.conversation.session_id
    agent.conversation.close()
    fid = store.figure_ids(sid)[0]
    path = store.figures_path(sid) / f"{fid}.png"
    path.unlink()
    if kind == "symlink":
        secret = tmp_path / "secret.png"
        secret.write_bytes(png(5, 5))
        path.symlink_to(secret)
    else:
        os.mkfifo(path)
    with pytest.raises(UnsafeFileError) as caught:
        store.read_figure(sid, fid)
    assert str(path) in str(caught.value)


def test_a_long_context_drops_old_images_before_summarising(
        store: FileStore, kshell: InteractiveShell) -> None:
    from jupyter_agent.agent.endpoint import ContextWindow
    from jupyter_agent.agent.working_context import estimate_schema_tokens, estimate_tokens

    def first_turn(window: int) -> tuple[Agent, ScriptedModelServer]:
        server = ScriptedModelServer([*run_code(PLOT, "two plots"), {"text": "ok"}]).start()
        agent = make_agent(server, store, shell=kshell, vision="on", context_window=window)
        agent.run("plot it")
        return agent, server

    # how large the request is with the images counted (the endpoint's report) and without
    # (the tool schemas stay), under a small window like the one the test then uses
    probe, server = first_turn(4096)
    nxt = {"role": "user", "content": "next"}
    with_images = probe.conversation.estimated_tokens() + estimate_tokens([nxt])
    plain = [{k: v for k, v in m.items() if k != "figures"} for m in probe.conversation.messages]
    without = estimate_tokens([*plain, nxt]) + estimate_schema_tokens(probe.request_tools()[0])
    probe.conversation.close()
    server.stop()
    assert with_images > without + 400

    middle = (with_images + without) / 2  # compaction starts there: images go, no summary
    window = next(w for w in range(1024, 8192)
                  if 0.8 * w - ContextWindow(w, "setting").reserve >= middle)
    agent, server = first_turn(window)
    rec = Recorder()
    assert agent.run("next", on_event=rec).reply == "ok"
    notices = [e.text for e in rec.events if isinstance(e, Notice)]
    assert any("the images of 2 earlier figure(s) left the working context" in n for n in notices)
    assert len(server.requests) == 3  # no summarising request was needed
    assert server.images[2] == []
    record = store.load_session(agent.conversation.session_id)
    assert not any("figures" in m for m in record.messages)
    assert [len(m["figures"]) for m in record.transcript if "figures" in m] == [2]
    assert len(record.compactions) == 1
    agent.conversation.close()
    server.stop()


@pytest.mark.parametrize(("text", "clipped"), [
    ("Invalid content type.", "Invalid content type."),
    ("a (b) c", "a (b) c"),
    ("Invalid content type. image_url is only supported by certain models (see docs) ok",
     "Invalid content type. image_url is only supported by certain models…"),
    ("x) unmatched closer", "x unmatched closer"),
])
def test_a_reason_is_cut_at_a_word_with_balanced_brackets(text: str, clipped: str) -> None:
    assert clip_reason(text, limit=75) == clipped


@given(st.text(alphabet="ab ()[]{}.", max_size=200))
def test_a_clipped_reason_is_short_and_balanced(text: str) -> None:
    out = clip_reason(text, limit=40)
    assert len(out) <= 41
    depth = 0
    for char in out:
        depth += 1 if char in "([{" else -1 if char in ")]}" else 0
        assert depth >= 0
    assert depth == 0


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """A 20000×20000 PNG of 48 KB: 400 megapixels, a decompression bomb to Pillow."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("1", (20000, 20000)).save(out, format="PNG")
    return out.getvalue()


def test_a_decompression_bomb_from_the_agents_code_is_named_too_large_and_not_sent(
        model_server: ScriptedModelServer, store: FileStore, kshell: InteractiveShell,
        tmp_path: Path, bomb: bytes) -> None:
    (tmp_path / "bomb.png").write_bytes(bomb)
    (tmp_path / "ok.png").write_bytes(png(30, 20))
    code = ("from IPython.display import Image, display\n"
            f"display(Image(filename={str(tmp_path / 'bomb.png')!r}))\n"
            f"display(Image(filename={str(tmp_path / 'ok.png')!r}))\n")
    model_server.add_steps(run_code(code, "One figure was too large."))
    agent = make_agent(model_server, store, shell=kshell, vision="on")
    assert agent.run("show both").reply == "One figure was too large."
    (result,) = tool_contents(model_server.requests[1])
    first, second = result.splitlines()
    assert first.startswith("[figure 1: PNG, 20000×20000 px, shown to the user; not kept: ")
    assert "20000×20000 px is over the 40,000,000-pixel cap (too large to decode)" in first
    assert second == "[figure 2: PNG, 30×20 px, shown to the user]"
    assert [(p.width, p.height) for p in model_server.images[1]] == [(30, 20)]
    model_server.add_steps([{"text": "Still here."}])
    assert agent.run("and now?").reply == "Still here."  # the session keeps working


def test_a_bomb_in_a_stored_session_is_named_in_text_and_never_decoded(
        model_server: ScriptedModelServer, store: FileStore, kshell: InteractiveShell,
        tmp_path: Path, bomb: bytes) -> None:
    """A figure file replaced by a bomb (a cloned repository's session, say) is not sent;
    every later request goes through."""
    (tmp_path / "ok.png").write_bytes(png(30, 20))
    code = ("from IPython.display import Image, display\n"
            f"display(Image(filename={str(tmp_path / 'ok.png')!r}))\n")
    model_server.add_steps(run_code(code))
    agent = make_agent(model_server, store, shell=kshell, vision="on")
    agent.run("show")
    sid = agent.conversation.session_id
    agent.conversation.close()
    (fid,) = store.figure_ids(sid)
    (store.figures_path(sid) / f"{fid}.png").write_bytes(bomb)
    model_server.add_steps([{"text": "Named only."}])
    resumed = make_agent(model_server, store, shell=kshell, session_id=sid, vision="on")
    assert resumed.run("look again").reply == "Named only."
    assert model_server.images[-1] == []
    resumed.conversation.close()
