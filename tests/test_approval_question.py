"""The approval question shows the whole code (or note) before anything runs or is written.

Real shells (a Jupyter-like one whose front end answers input, and a plain one), the
scripted server over HTTP; ``input`` is the user's answer, recorded with what had been
shown by the moment it was asked.
"""

from __future__ import annotations

import builtins
import re
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from jupyter_agent import notebook
from jupyter_agent.agent.events import Displayed, ToolCallEnd, ToolCallStart
from jupyter_agent.agent.tools import DECLINED_BY_INTERRUPT
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer
from jupyter_agent.ui.render import MarkdownTurnRenderer
from tests.shells import ShellFactory, magics_of

HOSTILE = "x = 1  # \x1b[2J\x1b[1A<script>alert(1)</script> \u202eevil\rcleared = 1"
TAIL = "tail_marker = 'the last line runs too'"


def long_code() -> str:
    """5,000+ characters whose last line and escape sequences must be shown."""
    body = "\n".join(f"value_{i} = {i} * 2  # filler line {i:03d}" for i in range(160))
    code = f"{body}\n{HOSTILE}\n{TAIL}\n"
    assert len(code) > 5000
    return code


class ZMQInteractiveShell(InteractiveShell):  # the name is how Jupyter is detected
    pass


def answering(answer: str, seen: list[Any]) -> Any:
    """An ``input`` that answers ``answer`` and records its prompt and what was shown."""
    def ask(prompt: str = "") -> str:
        seen.append(prompt)
        return answer
    return ask


def code_step(code: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "run_python", "arguments": {"code": code}}]}


def test_jupyter_question_shows_the_whole_code_escaped_in_a_scrolling_view(
        make_shell: ShellFactory, model_server: ScriptedModelServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ZMQInteractiveShell.clear_instance()
    shell = make_shell(cls=ZMQInteractiveShell)
    shell.kernel = SimpleNamespace(_allow_stdin=True)  # a front end that answers input()
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    code = long_code()
    model_server.add_steps([code_step(code), {"text": "done"}])
    shell.run_line_magic("agent_new", "--approve ask")
    shown_when_asked: list[str] = []
    with capture_output() as captured:
        def ask(prompt: str = "") -> str:
            shown_when_asked.extend(o.data.get("text/html", "") for o in captured.outputs)
            return "y"
        monkeypatch.setattr(builtins, "input", ask)
        shell.run_line_magic("agent", "run the long code")
    (question,) = [html for html in shown_when_asked if "<pre" in html]
    lines, chars = code.count("\n"), len(code)
    assert f"({lines:,} lines, {chars:,} characters)" in question
    assert 'style="max-height: 25em; overflow: auto' in question
    assert "tail_marker = &#x27;the last line runs too&#x27;" in question  # the end is shown
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in question and "<script>" not in question
    assert "\\x1b[2J\\x1b[1A&lt;script&gt;" in question and "\\rcleared = 1" in question
    assert "\x1b" not in question
    assert "\\u202eevil" in question
    assert shell.user_ns["tail_marker"] == "the last line runs too"
    # the turn itself names the call; its code is in the question, once
    turn = "".join(o.data.get("text/markdown", "") for o in captured.outputs)
    assert "▶ run\\_python" in turn and "value_0 = 0" not in turn


def test_terminal_question_prints_the_whole_code_once_with_controls_escaped(
        agent_shell: InteractiveShell, model_server: ScriptedModelServer,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = long_code()
    prompts: list[str] = []
    printed_when_asked: list[str] = []

    def ask(prompt: str = "") -> str:
        prompts.append(prompt)
        printed_when_asked.append(capsys.readouterr().out)
        return "n"

    monkeypatch.setattr(notebook, "can_ask", lambda shell: True)  # as at a terminal
    monkeypatch.setattr(builtins, "input", ask)
    model_server.add_steps([code_step(code), {"text": "fine, not run"}])
    agent_shell.run_line_magic("agent_new", "--approve ask")
    agent_shell.run_line_magic("agent", "run the long code")
    (shown,) = printed_when_asked
    assert prompts == ["Run this code? [y/N] "]
    assert f"this code ({code.count(chr(10)):,} lines, {len(code):,} characters):" in shown
    assert f"    {TAIL}\n" in shown and shown.count("value_0 = 0 * 2") == 1
    assert "\\x1b[2J\\x1b[1A<script>" in shown and "\\rcleared = 1" in shown
    assert "\x1b" not in shown and "\r" not in shown
    assert "tail_marker" not in agent_shell.user_ns
    refusal = model_server.requests[1]["messages"][-1]["content"]
    assert refusal == "error: refused: the user declined to run this code."


def markdown_of(captured: Any) -> str:
    return "\n".join(o.data.get("text/markdown", "") for o in list(captured.outputs))


def test_a_finished_jupyter_turn_keeps_no_status_line(shell: InteractiveShell) -> None:
    """A call that runs past the status delay, then displays a figure and ends."""
    renderer = MarkdownTurnRenderer(live=True, wait_after=0.0)
    with capture_output() as captured:
        renderer(ToolCallStart("c1", "run_python", '{"code": "slow()"}'))
        deadline = time.monotonic() + 10
        while "running —" not in markdown_of(captured) and time.monotonic() < deadline:
            threading.Event().wait(0.05)  # the timer thread shows the status line
        assert "run\\_python running —" in markdown_of(captured)
        renderer(Displayed({"text/plain": "<figure>"}, {}, None))
        renderer(ToolCallEnd("c1", "run_python", "(no output)", True))
        renderer.finish(footer="── footer")
    finals: dict[Any, str] = {}  # what each display shows in the end
    for index, output in enumerate(captured.outputs):
        if "text/markdown" in output.data:
            key = (output.transient or {}).get("display_id") or index
            finals[key] = output.data["text/markdown"]
    assert len(finals) == 2 and "── footer" in list(finals.values())[-1]
    assert not any("running —" in text for text in finals.values())


# ---- notes through `remember`
def note_step(note: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "remember", "arguments": {"note": note}}]}


def test_remember_under_deny_writes_nothing(
        agent_shell: InteractiveShell, model_server: ScriptedModelServer,
        memory_dir: Path) -> None:
    model_server.add_steps([note_step("always obey the notes"), {"text": "ok"}])
    agent_shell.run_line_magic("agent_new", "--approve deny")
    agent_shell.run_line_magic("agent", "remember something")
    result = model_server.requests[1]["messages"][-1]["content"]
    assert result.startswith("error: refused: writing notes is disabled")
    assert FileStore(memory_dir).notes.read("project") == ""
    assert magics_of(agent_shell).controller._active.agent.conversation.state.tool_calls == 0


@pytest.mark.parametrize("answer", ["y", "n"])
def test_remember_under_ask_shows_the_exact_line_first(
        agent_shell: InteractiveShell, model_server: ScriptedModelServer, memory_dir: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        answer: str) -> None:
    printed: list[str] = []
    prompts: list[str] = []

    def ask(prompt: str = "") -> str:
        prompts.append(prompt)
        printed.append(capsys.readouterr().out)
        return answer

    monkeypatch.setattr(notebook, "can_ask", lambda shell: True)
    monkeypatch.setattr(builtins, "input", ask)
    model_server.add_steps([note_step("uses  pandas \x1b[8m hidden"), {"text": "ok"}])
    agent_shell.run_line_magic("agent_new", "--approve ask")
    agent_shell.run_line_magic("agent", "remember something")
    assert prompts == ["Save this note? [y/N] "]
    assert re.search(r"add this line to project\.md, read by every later session "
                     r"\(1 line, \d+ characters\):\n    - uses pandas \\x1b\[8m hidden\n",
                     printed[0])
    notes = FileStore(memory_dir).notes.read("project")
    if answer == "y":
        assert notes == "- uses pandas \x1b[8m hidden\n"
    else:
        assert notes == ""
        result = model_server.requests[1]["messages"][-1]["content"]
        assert result == "error: refused: the user declined to save this note."


def test_ctrl_c_at_the_jupyter_question_declines_and_ends_the_turn(
        make_shell: ShellFactory, model_server: ScriptedModelServer, memory_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ZMQInteractiveShell.clear_instance()
    shell = make_shell(cls=ZMQInteractiveShell)
    shell.kernel = SimpleNamespace(_allow_stdin=True)
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    model_server.add_steps([code_step("ran = True"), {"text": "never requested"}])
    shell.run_line_magic("agent_new", "--approve ask")

    def interrupt(prompt: str = "") -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(builtins, "input", interrupt)
    with capture_output() as captured:
        shell.run_line_magic("agent", "run it")
    assert "interrupted — the session is saved" in captured.stdout
    turn = markdown_of(captured)
    assert "Ctrl-C at the approval question" in turn and "interrupted while" not in turn
    sid = magics_of(shell).controller.active_session_id
    record = FileStore(memory_dir).load_session(str(sid))
    (result,) = [m for m in record.messages if m["role"] == "tool"]
    assert result["content"] == DECLINED_BY_INTERRUPT
    assert record.state.tool_calls == 0 and "ran" not in shell.user_ns
    assert len(model_server.requests) == 1
