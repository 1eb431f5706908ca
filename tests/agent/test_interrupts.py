"""Interrupts and crashes leave a session the strict server accepts on the next run."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_agent.agent.conversation import RESUME_REPAIR
from jupyter_agent.agent.events import AgentEvent
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer
from tests.agent.helpers import (
    Recorder,
    interrupt_on_second_delta,
    make_agent,
    read_record,
    roles,
    tool_step,
)


def test_keyboard_interrupt_inside_a_tool_batch(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    def boom() -> str:
        """Simulate Ctrl-C while a tool runs."""
        raise KeyboardInterrupt

    model_server.add_steps(
        [tool_step(("add_todo", {"text": "a"}), ("boom", {}), ("list_todos", {}))]
    )
    agent = make_agent(model_server, store, tools=[boom])
    with pytest.raises(KeyboardInterrupt):
        agent.run("go")

    saved = read_record(store, agent.conversation.session_id or "")
    assert roles(saved["messages"]) == ["system", "user", "assistant", "tool", "tool", "tool"]
    first, running, pending = saved["messages"][3:]
    assert first["content"] == "added todo #1"
    assert "interrupted by the user while this tool call was running" in running["content"]
    assert "not executed: the tool batch was interrupted" in pending["content"]
    assert saved["state"]["tool_calls"] == 2  # the finished call and the interrupted one
    assert saved["state"]["todos"][0]["text"] == "a"

    model_server.add_steps([{"text": "continuing"}])
    assert agent.run("next").reply == "continuing"  # the strict server accepted the pairs
    again = make_agent(model_server, store, session_id=agent.conversation.session_id)
    model_server.add_steps([{"text": "resumed"}])
    assert again.run("and after a restart").reply == "resumed"


def test_keyboard_interrupt_inside_a_stream(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    deltas: list[str] = []
    on_event = interrupt_on_second_delta(deltas)

    model_server.add_steps(
        [tool_step(("list_todos", {}), text="one two three four five six", chunk_delay=0.01)]
    )
    agent = make_agent(model_server, store)
    with pytest.raises(KeyboardInterrupt):
        agent.run("talk", on_event=on_event)

    saved = read_record(store, agent.conversation.session_id or "")
    assert roles(saved["messages"]) == ["system", "user", "assistant"]
    partial = saved["messages"][-1]
    assert partial["content"].startswith("".join(deltas))
    assert partial["content"].endswith("(reply interrupted by the user)")
    assert "tool_calls" not in partial  # tool calls never executed are not kept

    model_server.add_steps([{"text": "fine"}])
    assert agent.run("go on").reply == "fine"


def test_resume_repairs_a_batch_missing_its_results(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "list_todos", "arguments": "{}"},
    }
    sid = store.create_session([{"role": "system", "content": "sys"}])
    store.save(
        sid,
        [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
        ],
    )
    agent = make_agent(model_server, store, session_id=sid)
    assert roles(agent.conversation.messages) == ["system", "user", "assistant", "tool"]
    assert agent.conversation.messages[-1]["content"] == f"[jupyter-agent] {RESUME_REPAIR}"
    assert "not executed" not in agent.conversation.messages[-1]["content"]  # it may have run
    record = store.load_session(sid)
    assert record.messages == agent.conversation.messages
    assert record.transcript == agent.conversation.messages  # only appended: a plain save
    model_server.add_steps([{"text": "ok"}])
    assert agent.run("next").reply == "ok"


def test_resume_repair_records_how_many_messages_it_replaced(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    function = {"name": "list_todos", "arguments": "{}"}
    call = {"id": "call_1", "type": "function", "function": function}
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "u"},
        {"role": "tool", "tool_call_id": "call_gone", "content": "orphan"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    sid = store.create_session(messages)
    agent = make_agent(model_server, store, session_id=sid)
    assert roles(agent.conversation.messages) == ["system", "user", "assistant", "tool"]
    event = store.load_session(sid).compactions[-1]
    # One orphan dropped; the answered call and its synthetic result replace nothing
    # (a prefix/suffix guess would count 2).
    assert event.replaced == 1
    assert event.transcript_length == 4


def test_resume_drops_an_orphan_result_from_the_working_context_only(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "u"},
        {"role": "tool", "tool_call_id": "call_gone", "content": "orphan"},
        {"role": "assistant", "content": "a"},
    ]
    sid = store.create_session(messages)
    agent = make_agent(model_server, store, session_id=sid)
    assert roles(agent.conversation.messages) == ["system", "user", "assistant"]
    record = store.load_session(sid)
    assert roles(record.messages) == ["system", "user", "assistant"]
    assert record.transcript == messages  # never dropped from the transcript
    assert "repaired tool pairs" in record.compactions[-1].summary
    model_server.add_steps([{"text": "ok"}])
    assert agent.run("next").reply == "ok"


CHILD = textwrap.dedent(
    """
    import pathlib, sys, time
    import openai
    from jupyter_agent.agent.adapters import ChatModel
    from jupyter_agent.agent.config import AgentConfig
    from jupyter_agent.agent.loop import Agent
    from jupyter_agent.store import FileStore

    base_url, root, marker = sys.argv[1:4]

    def slow() -> str:
        \"\"\"A tool that takes its time.\"\"\"
        pathlib.Path(marker).write_text("started")
        time.sleep(120)
        return "finished"

    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)
    agent = Agent(ChatModel(client, "scripted"), store=FileStore(root), session_id="crash-1",
                  tools=[slow], config=AgentConfig(approve="auto"))
    agent.run("please be slow")
    """
)


def test_sigkill_mid_batch_then_resume(
    model_server: ScriptedModelServer, store: FileStore, tmp_path: Path
) -> None:
    script, marker = tmp_path / "child.py", tmp_path / "started"
    script.write_text(CHILD)
    model_server.add_steps([tool_step(("add_todo", {"text": "t"}), ("slow", {}))])
    child = subprocess.Popen(
        [sys.executable, str(script), model_server.base_url, str(store.root), str(marker)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            if child.poll() is not None:
                pytest.fail(f"child exited early: {child.stderr.read().decode()}")  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                pytest.fail("the child never reached the slow tool")
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
        if child.stderr is not None:
            child.stderr.close()
    assert child.returncode == -signal.SIGKILL

    # On disk: the assistant's tool calls were saved, the unfinished batch was not.
    saved = read_record(store, "crash-1")
    assert roles(saved["messages"]) == ["system", "user", "assistant"]
    assert saved["state"]["usage"]["calls"] == 1

    agent = make_agent(model_server, store, session_id="crash-1")  # the lease was freed
    assert roles(agent.conversation.messages) == ["system", "user", "assistant", "tool", "tool"]
    # Whether add_todo or slow ran is unknown after the crash: never claim "not executed".
    assert [m["content"] for m in agent.conversation.messages[3:]] == [
        "[jupyter-agent] result unknown: the session ended while this tool batch was running; "
        "check before repeating it"
    ] * 2
    model_server.add_steps([{"text": "picked up again"}])
    assert agent.run("continue").reply == "picked up again"
    assert agent.conversation.state.usage.calls == 2
    last_request = model_server.requests[-1]["messages"]
    assert roles(last_request) == ["system", "user", "assistant", "tool", "tool", "user"]


@pytest.mark.parametrize(
    "exc",
    [SystemExit(3), asyncio.CancelledError(), GeneratorExit()],
    ids=lambda e: type(e).__name__,
)
def test_tools_raising_base_exceptions_become_error_results(
    model_server: ScriptedModelServer, store: FileStore, exc: BaseException
) -> None:
    def bail() -> str:
        """A tool that raises a BaseException that is not KeyboardInterrupt."""
        raise exc

    model_server.add_steps([tool_step(("bail", {}), ("add_todo", {"text": "after"})),
                            {"text": "handled"}])
    rec = Recorder()
    agent = make_agent(model_server, store, tools=[bail])
    assert agent.run("go", on_event=rec).reply == "handled"  # the turn went on
    first, second = rec.of("tool_call_end")
    assert not first.ok and first.result.startswith(f"error: {type(exc).__name__}")
    assert second.ok and second.result == "added todo #1"  # the rest of the batch ran
    assert "interrupted" not in first.result


def test_an_on_event_error_is_not_called_a_user_interrupt(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    def on_event(event: AgentEvent) -> None:
        if event.kind == "tool_call_end":
            raise RuntimeError("renderer broke")

    model_server.add_steps([tool_step(("add_todo", {"text": "a"}), ("list_todos", {}))])
    agent = make_agent(model_server, store)
    with pytest.raises(RuntimeError, match="renderer broke"):
        agent.run("go", on_event=on_event)
    saved = read_record(store, agent.conversation.session_id or "")
    assert roles(saved["messages"]) == ["system", "user", "assistant", "tool", "tool"]
    done, pending = saved["messages"][3:]
    assert done["content"] == "added todo #1"
    assert "by the user" not in pending["content"]
    assert pending["content"] == (
        "[jupyter-agent] not executed: the tool batch was stopped by an error "
        "(renderer broke)"
    )


def test_an_on_event_error_mid_stream_is_named_in_the_marker(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    def on_event(event: AgentEvent) -> None:
        if event.kind == "text_delta":
            raise ValueError("bad delta")

    model_server.add_steps([{"text": "one two three four", "chunk_delay": 0.01}])
    agent = make_agent(model_server, store)
    with pytest.raises(ValueError, match="bad delta"):
        agent.run("talk", on_event=on_event)
    last = read_record(store, agent.conversation.session_id or "")["messages"][-1]
    assert last["content"].endswith("(reply stopped by an error (bad delta))")
    assert "by the user" not in last["content"]


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """Ctrl-C raises ``KeyboardInterrupt`` in this process for the test, also where pytest
    was started with SIGINT ignored (a background job of a shell: ``pytest &``, nohup)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_in_run_python_keeps_what_it_printed_on_screen_and_for_the_model(
    model_server: ScriptedModelServer, store: FileStore, ishell: InteractiveShell
) -> None:
    # raise_signal delivers Ctrl-C to this (the main) thread at once; os.kill(getpid())
    # lets the system pick any thread, and the code could go on before Python sees it
    code = ("print('loaded 3 files')\nimport signal\n"
            "signal.raise_signal(signal.SIGINT)\nprint('never printed')")
    model_server.add_steps([tool_step(("run_python", {"code": code}), ("list_todos", {}))])
    agent = make_agent(model_server, store, shell=ishell)
    rec = Recorder()
    with pytest.raises(KeyboardInterrupt):
        agent.run("load the files", on_event=rec)
    running, pending = read_record(store, agent.conversation.session_id or "")["messages"][3:]
    assert running["content"] == ("[jupyter-agent] interrupted by the user while this tool "
                                  "call was running; it had printed:\nloaded 3 files")
    assert pending["content"] == ("[jupyter-agent] not executed: the tool batch was "
                                  "interrupted by the user")
    shown = rec.of("tool_call_end")
    assert [e.result for e in shown] == [running["content"]]  # on screen too
