"""The agent loop against the scripted server: save points, checkpoints, resume, events."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent.agent.events import Notice, TextDelta, ToolCallEnd, ToolCallStart, UsageUpdate
from jupyter_agent.agent.loop import Agent
from jupyter_agent.errors import CorruptSessionError, SessionLockedError
from jupyter_agent.store import FileStore, holding
from jupyter_agent.testing import ScriptedModelServer
from tests.agent.helpers import Recorder, make_agent, read_record, roles, tool_step


def test_each_save_point_is_on_disk_when_the_next_step_starts(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    seen: dict[str, Any] = {}
    agent: Agent | None = None

    def first(body: dict[str, Any]) -> dict[str, Any]:
        # The model is "thinking": the user message must already be saved.
        seen["first"] = read_record(store, agent.conversation.session_id)  # type: ignore[union-attr]
        return tool_step(("probe", {}), ("probe", {}))

    def probe() -> str:
        """Look at the session file while the batch runs."""
        seen.setdefault("probe", []).append(read_record(store, agent.conversation.session_id))  # type: ignore[union-attr]
        return "probed"

    def second(body: dict[str, Any]) -> dict[str, Any]:
        seen["second"] = read_record(store, agent.conversation.session_id)  # type: ignore[union-attr]
        return {"text": "done"}

    model_server.add_steps([first, second])
    agent = make_agent(model_server, store, tools=[probe])
    assert agent.run("go").reply == "done"

    # 1. after the user message (and the checkpoint before the request)
    assert roles(seen["first"]["messages"]) == ["system", "user"]
    assert seen["first"]["messages"][1]["content"] == "go"
    assert seen["first"]["state"]["usage"]["calls"] == 0
    # 2. after the model response: the tool calls are saved, no result yet (never half a batch)
    for during in seen["probe"]:
        assert roles(during["messages"]) == ["system", "user", "assistant"]
        assert len(during["messages"][2]["tool_calls"]) == 2
        assert during["state"]["usage"]["calls"] == 1  # checkpoint after the request
        assert during["state"]["tool_calls"] == 0
    # 3. after the completed batch: both results, saved together, and the checkpoint
    assert roles(seen["second"]["messages"]) == ["system", "user", "assistant", "tool", "tool"]
    assert seen["second"]["state"]["tool_calls"] == 2
    # after the final reply
    final = read_record(store, agent.conversation.session_id or "")
    assert roles(final["messages"])[-1] == "assistant"
    assert final["messages"][-1]["content"] == "done"
    assert final["state"]["usage"]["calls"] == 2
    assert final["transcript"] == final["messages"]
    assert final["summary"]  # fallback summary written after the turn


def test_resume_sends_the_same_context_and_continues_the_counts(
    model_server: ScriptedModelServer, store: FileStore, tmp_path: Path
) -> None:
    model_server.add_steps(
        [
            tool_step(("add_todo", {"text": "check data"}), ("write_scratchpad", {"text": "n=3"})),
            {"text": "first answer"},
        ]
    )
    first = make_agent(model_server, store)
    first.run("turn one")
    sid = first.conversation.session_id or ""
    # A copy of the store, as another process would find it after a restart.
    copy = tmp_path / "copy"
    shutil.copytree(store.root, copy)

    model_server.add_steps([{"text": "again"}, {"text": "again"}])
    first.run("turn two")
    resumed = make_agent(model_server, FileStore(copy), session_id=sid)
    assert resumed.conversation.state.tool_calls == 2
    assert resumed.conversation.state.scratchpad == "n=3"
    assert [t.text for t in resumed.conversation.state.todos] == ["check data"]
    assert resumed.conversation.state.usage.calls == 2
    resumed.run("turn two")

    original, replay = model_server.requests[-2], model_server.requests[-1]
    assert replay["messages"] == original["messages"]
    assert replay["tools"] == original["tools"]
    assert resumed.conversation.state.usage.calls == 3
    assert (resumed.conversation.state.usage.input_tokens
            == first.conversation.state.usage.input_tokens)


def test_new_session_system_prompt_includes_notes(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    store.notes.write("project", "- data lives in data/penguins.csv\n")
    store.notes.write("user", "- answer in French\n")
    model_server.add_steps([{"text": "ok"}])
    agent = make_agent(model_server, store, system_prompt="Base prompt.", title="T")
    agent.run("hi")
    system = model_server.requests[0]["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("Base prompt.")
    assert "data/penguins.csv" in system["content"]
    assert "answer in French" in system["content"]
    assert store.load_session(agent.conversation.session_id or "").title == "T"


def test_without_notes_the_system_prompt_has_no_notes_section(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    agent = make_agent(model_server, store)
    assert "Project notes" not in agent.conversation.messages[0]["content"]


def test_explicit_new_session_id_is_created(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    agent = make_agent(model_server, store, session_id="my-session_1")
    assert agent.conversation.session_id == "my-session_1"
    assert store.exists("my-session_1")


def test_in_memory_agent_keeps_no_files(model_server: ScriptedModelServer, tmp_path: Path) -> None:
    model_server.add_steps([tool_step(("add_todo", {"text": "a"})), {"text": "ok"}])
    agent = make_agent(model_server, None)
    assert agent.run("hi").reply == "ok"
    assert agent.conversation.session_id is None
    assert roles(agent.conversation.messages) == [
        "system", "user", "assistant", "tool", "assistant"]
    assert agent.conversation.state.todos[0].text == "a"
    assert list(tmp_path.rglob("*.json")) == []


@pytest.mark.parametrize("stream", [True, False])
def test_events_in_stream_and_plain_mode(
    model_server: ScriptedModelServer, store: FileStore, stream: bool
) -> None:
    model_server.add_steps(
        [tool_step(("list_todos", {}), text="Let me look."), {"text": "All good here."}]
    )
    rec = Recorder()
    agent = make_agent(model_server, store, stream=stream)
    assert agent.run("hi", on_event=rec).reply == "All good here."
    assert model_server.requests[0].get("stream", False) is stream
    if stream:
        assert model_server.requests[0]["stream_options"] == {"include_usage": True}
    text = "".join(e.text for e in rec.of("text_delta"))
    assert text == "Let me look.All good here."
    start, end = rec.of("tool_call_start")[0], rec.of("tool_call_end")[0]
    assert isinstance(start, ToolCallStart) and isinstance(end, ToolCallEnd)
    assert start.name == end.name == "list_todos"
    assert start.call_id == end.call_id
    assert end.ok and end.result == "(no todos)"
    usage = rec.of("usage")
    assert len(usage) == 2 and isinstance(usage[-1], UsageUpdate)
    assert usage[-1].session.calls == 2 and usage[-1].turn.calls == 2
    assert usage[-1].turn.input_tokens > 0 and usage[-1].turn.output_tokens > 0
    # the first reply's text and tool call are one assistant message
    assert agent.conversation.messages[2]["content"] == "Let me look."
    assert isinstance(rec.events[0], TextDelta | UsageUpdate)


def test_summary_tool_and_fallback_summary(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    model_server.add_steps([{"text": "plain answer"}])
    agent = make_agent(model_server, store)
    agent.run("what is up")
    assert store.load_session(agent.conversation.session_id or "").summary == (
        "user: what is up\nassistant: plain answer"
    )
    args = {"goal": "G", "completed": "C", "decisions": "D", "remaining": "R"}
    model_server.add_steps([tool_step(("write_summary", args)), {"text": "summarized"}])
    agent.run("summarize please")
    summary = store.load_session(agent.conversation.session_id or "").summary
    assert summary == "Goal: G\nCompleted: C\nDecisions: D\nRemaining: R"


def test_remember_appends_to_notes(model_server: ScriptedModelServer, store: FileStore) -> None:
    model_server.add_steps(
        [
            tool_step(
                ("remember", {"note": "uses  pandas"}),
                ("remember", {"note": "terse", "kind": "user"}),
            ),
            {"text": "noted"},
        ]
    )
    make_agent(model_server, store).run("remember things")
    assert store.notes.read("project") == "- uses pandas\n"
    assert store.notes.read("user") == "- terse\n"
    model_server.add_steps([tool_step(("remember", {"note": "second"})), {"text": "ok"}])
    make_agent(model_server, store).run("more")
    assert store.notes.read("project") == "- uses pandas\n- second\n"


def test_the_run_holds_the_session_lease(
    model_server: ScriptedModelServer, store: FileStore, tmp_path: Path
) -> None:
    other = FileStore(store.root)
    outcome: dict[str, Any] = {}
    agent: Agent | None = None

    def step(body: dict[str, Any]) -> dict[str, Any]:
        try:
            with holding(other, agent.conversation.session_id):  # type: ignore[union-attr, arg-type]
                outcome["locked"] = False
        except SessionLockedError:
            outcome["locked"] = True
        return {"text": "ok"}

    model_server.add_steps([step])
    agent = make_agent(model_server, store)
    with agent:
        agent.run("hi")
    assert outcome == {"locked": True}
    with holding(other, agent.conversation.session_id or ""):  # released by close()
        pass


_OTHER_PROCESS_AGENT = """
import json, sys, openai
from jupyter_agent.agent.adapters import ChatModel
from jupyter_agent.agent.loop import Agent
from jupyter_agent.errors import CorruptSessionError, SessionLockedError
from jupyter_agent.store import FileStore
from jupyter_agent.store import holding
client = openai.OpenAI(base_url=sys.argv[3], api_key="k", max_retries=0)
try:
    agent = Agent(ChatModel(client, "scripted"), store=FileStore(sys.argv[1]),
                  session_id=sys.argv[2])
except SessionLockedError as err:
    print(json.dumps({"locked": True, "pid": err.pid}))
else:
    agent.conversation.close()
    print(json.dumps({"locked": False}))
"""


def _agent_in_other_process(root: Path, sid: str, base_url: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _OTHER_PROCESS_AGENT, str(root), sid, base_url],
        capture_output=True, text=True, timeout=120, check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


@pytest.mark.slow
def test_the_agent_holds_the_lease_for_its_whole_life(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    """Design "Leases": the running agent holds the lease for its entire run,
    also between turns; close() lets the session go."""
    model_server.add_steps([{"text": "one"}, {"text": "two"}])
    first = make_agent(model_server, store)
    sid = first.conversation.session_id or ""
    assert first.run("turn 1").reply == "one"
    # Between turns: another store object in this process is refused ...
    with pytest.raises(SessionLockedError) as info:
        make_agent(model_server, FileStore(store.root), session_id=sid)
    assert info.value.pid == os.getpid()
    # ... and so is another process, naming this one.
    assert _agent_in_other_process(store.root, sid, model_server.base_url) == {
        "locked": True, "pid": os.getpid()
    }
    # A second agent on the *same* store nests its count (the controller's case).
    nested = make_agent(model_server, store, session_id=sid)
    nested.conversation.close()
    nested.conversation.close()  # idempotent
    assert store.holds_lease(sid)  # the first agent still holds it
    assert first.run("turn 2").reply == "two"
    first.conversation.close()
    first.conversation.close()
    assert not store.holds_lease(sid)
    with pytest.raises(RuntimeError, match="closed"):
        first.run("turn 3")
    assert _agent_in_other_process(store.root, sid, model_server.base_url) == {"locked": False}
    with make_agent(model_server, FileStore(store.root), session_id=sid) as again:
        assert again.conversation.messages == first.conversation.messages
    assert again.conversation.closed


def test_a_failed_resume_releases_the_lease(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    agent = make_agent(model_server, store)
    sid = agent.conversation.session_id or ""
    agent.conversation.close()
    store.session_path(sid).write_text("{not json", "utf-8")
    with pytest.raises(CorruptSessionError):
        make_agent(model_server, store, session_id=sid)
    assert not store.holds_lease(sid)


def test_unknown_tool_and_bad_arguments_are_results(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    model_server.add_steps(
        [tool_step(("nope", {}), ("update_todo", {"id": "x", "status": "weird"})), {"text": "ok"}]
    )
    rec = Recorder()
    agent = make_agent(model_server, store)
    assert agent.run("hi", on_event=rec).reply == "ok"
    ends = rec.of("tool_call_end")
    assert [e.ok for e in ends] == [False, False]
    assert "no tool named 'nope'" in ends[0].result
    assert "invalid arguments for update_todo" in ends[1].result
    assert agent.conversation.state.tool_calls == 2


def test_price_unknown_notice_once(model_server: ScriptedModelServer, store: FileStore) -> None:
    model_server.add_steps([{"text": "a"}, {"text": "b"}])
    rec = Recorder()
    agent = make_agent(model_server, store)
    agent.run("1", on_event=rec)
    agent.run("2", on_event=rec)
    notices = [e.text for e in rec.of("notice") if isinstance(e, Notice)]
    assert len(notices) == 1 and "price unknown" in notices[0]
    assert agent.conversation.state.usage.price_unknown
    assert agent.conversation.state.usage.cost_usd == 0.0


def test_helpers_build_a_working_agent(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    model_server.add_steps([{"text": "hello"}])
    agent = make_agent(model_server, store)
    assert agent.run("hi").reply == "hello"
    assert roles(read_record(store, agent.conversation.session_id or "")["messages"]) == [
        "system",
        "user",
        "assistant",
    ]
