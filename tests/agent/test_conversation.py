"""The conversation: one store call per save point, one read per resume, one lease owner."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from jupyter_agent.agent.config import AgentConfig
from jupyter_agent.agent.conversation import Conversation
from jupyter_agent.agent.loop import Agent
from jupyter_agent.errors import SessionLockedError, SessionNotFoundError
from jupyter_agent.store import FileStore, Store
from jupyter_agent.testing import ScriptedModel
from tests.agent.helpers import CountingStore, read_record, roles, tool_step


def counting(tmp_path: Path) -> tuple[CountingStore, Store]:
    store = CountingStore(FileStore(tmp_path / "memory"))
    return store, cast(Store, store)


def test_each_save_point_is_one_store_call(tmp_path: Path) -> None:
    counter, store = counting(tmp_path)
    model = ScriptedModel([{"text": "plain"},
                           tool_step(("add_todo", {"text": "t"})), {"text": "done"}])
    with Agent(model, store=store, config=AgentConfig(approve="auto")) as agent:
        counter.calls.clear()
        agent.run("a plain turn")
        # the user message (with the checkpoint), then the reply (with the checkpoint)
        assert counter.writes() == ["save", "save", "update"]  # the fallback summary
        counter.calls.clear()
        agent.run("a turn with a tool batch")
        assert counter.writes() == ["save", "save", "save", "save"]
    saved = read_record(counter.inner, agent.conversation.session_id or "")
    assert roles(saved["messages"]) == ["system", "user", "assistant", "user", "assistant",
                                        "tool", "assistant"]
    assert saved["state"]["todos"][0]["text"] == "t"
    assert (saved["state"]["tool_calls"], saved["state"]["usage"]["calls"]) == (1, 3)


def test_nothing_changed_means_no_store_call(tmp_path: Path) -> None:
    counter, store = counting(tmp_path)
    conversation = Conversation.create(store)
    counter.calls.clear()
    conversation.save()
    assert counter.calls == []
    conversation.state.scratchpad = "note"
    conversation.save()
    assert counter.writes() == ["save"]
    conversation.close()


def test_a_resume_reads_the_record_once_and_holds_the_one_lease(tmp_path: Path) -> None:
    counter, store = counting(tmp_path)
    first = Agent(ScriptedModel(["hello"]), store=store)
    first.run("hi")
    sid = first.conversation.session_id or ""
    first.conversation.close()
    counter.calls.clear()
    conversation = Conversation.open(store, sid)
    assert counter.count("load_session") == 1
    assert counter.count("acquire_lease") == 1
    assert [m["content"] for m in conversation.messages[1:]] == ["hi", "hello"]
    agent = Agent(ScriptedModel(["again"]), conversation)
    assert agent.run("more").reply == "again"
    assert counter.count("load_session") == 1
    with pytest.raises(SessionLockedError):
        FileStore(tmp_path / "memory").acquire_lease(sid)
    agent.conversation.close()  # lets the open lease go (each turn re-entered it)
    assert counter.count("release_lease") == counter.count("acquire_lease")
    other = FileStore(tmp_path / "memory")
    other.acquire_lease(sid)  # one close() released it: nobody else counted it
    other.release_all()


def test_open_refuses_an_unknown_session_without_leaving_a_lock_file(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "memory")
    with pytest.raises(SessionNotFoundError):
        Conversation.open(store, "nobody")
    assert not (tmp_path / "memory" / "sessions" / "nobody.lock").exists()


def test_the_recap_record_comes_from_the_one_read(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "memory")
    sid = store.create_session([{"role": "system", "content": "s"},
                                {"role": "user", "content": "q"},
                                {"role": "assistant", "content": None, "tool_calls": [
                                    {"id": "c1", "type": "function",
                                     "function": {"name": "f", "arguments": "{}"}}]}],
                               title="Old")
    store.update(sid, archived=True)
    conversation = Conversation.open(store, sid)  # answers the dangling call ("unknown")
    conversation.update(title="New")
    conversation.update(archived=False)
    record = conversation.record()
    assert (record.title, record.archived) == ("New", False)
    assert roles(record.messages) == ["system", "user", "assistant", "tool"]
    assert record.transcript == record.messages
    conversation.close()
    again = store.load_session(sid)
    assert (again.title, again.archived, again.messages) == ("New", False, record.messages)


def test_in_memory_conversation_needs_no_store() -> None:
    agent = Agent(ScriptedModel(["hi"]))
    assert agent.run("hello").reply == "hi" and agent.conversation.session_id is None
    assert roles(agent.conversation.messages) == ["system", "user", "assistant"]
    agent.conversation.close()
    assert not agent.conversation.closed


def test_an_agent_that_cannot_be_built_lets_its_conversation_go(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "memory")
    conversation = Conversation.create(store)

    def run_python(code: str) -> str:
        """Clashes with the built-in tool."""
        return code

    with pytest.raises(ValueError, match="already registered"):
        Agent(ScriptedModel(), conversation, tools=[run_python])
    assert conversation.closed
    FileStore(tmp_path / "memory").acquire_lease(conversation.session_id or "")
