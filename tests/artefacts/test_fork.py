"""Forks: whole or cut after a user turn, compared with the parent as it really was then.

The parent sessions are made by a real agent against the scripted model server; a
fork cut after turn N must hold the working context, scratchpad, todos, tool-call count
and summary the parent had right after turn N (design notes "Forks, exports and search").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_agent.artefacts.fork import fork_label, fork_record, fork_session
from jupyter_agent.artefacts.steps import turn_starts
from jupyter_agent.errors import ForkPointError, SessionNotFoundError
from jupyter_agent.store import FileStore, ForkOrigin
from jupyter_agent.testing import ScriptedModelServer
from tests.agent.helpers import make_agent, tool_step
from tests.artefacts.helpers import Snapshot, run_turns
from tests.processes import Hold


def assert_same_state(fork_state: object, snapshot: Snapshot) -> None:
    state = snapshot.state
    assert fork_state.scratchpad == state.scratchpad  # type: ignore[attr-defined]
    assert fork_state.todos == state.todos  # type: ignore[attr-defined]
    assert fork_state.tool_calls == state.tool_calls  # type: ignore[attr-defined]


def test_fork_at_each_turn_is_the_parent_as_it_was_after_that_turn(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    sid, snapshots = run_turns(model_server, store)
    parent = store.load_session(sid)
    for n, snapshot in enumerate(snapshots, start=1):
        forked = fork_record(parent, at=n)
        fork = forked.record
        assert fork.messages == snapshot.messages
        assert fork.transcript == snapshot.messages  # no compaction: both lists agree
        assert_same_state(fork.state, snapshot)
        assert fork.state.usage == parent.state.usage  # usage is not split by turn
        assert fork.parent == ForkOrigin(session_id=sid, turn=n)
        assert (forked.turns, forked.parent_turns, forked.rebuilt) == (n, 4, False)
        assert len(turn_starts(fork.transcript)) == n
        if n >= 2:  # write_summary was called in turn 2 and again in turn 3
            assert fork.summary == snapshot.summary
    assert fork_record(parent, at=1).record.summary.startswith("user: Plan the analysis")


@pytest.mark.parametrize("window", [800, 940])
def test_fork_of_a_compacted_session(
    model_server: ScriptedModelServer, store: FileStore, window: int
) -> None:
    """800 tokens: a compaction in turns 2, 3 and 4; 940: one, in the middle of turn 3
    (windows this small get the short request: three tools, the short system prompt)."""
    sid, snapshots = run_turns(model_server, store, context_window=window, keep_turns=1)
    parent = store.load_session(sid)
    assert parent.compactions and parent.messages != parent.transcript
    for n, snapshot in enumerate(snapshots, start=1):
        forked = fork_record(parent, at=n)
        fork = forked.record
        cut = len(fork.transcript)
        assert fork.transcript == parent.transcript[:cut]
        assert [c.transcript_length for c in fork.compactions] == [
            c.transcript_length for c in parent.compactions if c.transcript_length <= cut]
        assert_same_state(fork.state, snapshot)
        earlier = any(c.transcript_length <= cut for c in parent.compactions)
        later = any(c.transcript_length > cut for c in parent.compactions)
        assert forked.rebuilt == later
        if not (earlier and later):
            # the context the parent's model would have been sent next, exactly
            assert fork.messages == snapshot.messages
        else:
            # compacted before and after the cut: rebuilt verbatim from the transcript
            assert fork.messages == parent.transcript[:cut]


def test_whole_fork_copies_everything_and_the_parent_is_untouched(
    model_server: ScriptedModelServer, store: FileStore, memory_dir: Path
) -> None:
    sid, _ = run_turns(model_server, store, context_window=1800, keep_turns=1)
    store.update(sid, title="Numbers")
    before = store.session_path(sid).read_bytes()
    forked = fork_session(store, sid)
    fork, parent = store.load_session(forked.record.id), store.load_session(sid)
    assert fork.id != sid
    for field in ("messages", "transcript", "compactions", "state", "summary", "project_root"):
        assert getattr(fork, field) == getattr(parent, field), field
    assert fork.title == "Numbers (fork)" and fork.parent == ForkOrigin(session_id=sid)
    assert fork.created_at > parent.created_at and not fork.archived
    assert store.session_path(sid).read_bytes() == before
    assert fork_label(fork.parent) == f"fork of {sid}"
    assert fork_label(ForkOrigin(session_id=sid, turn=2)) == f"fork of {sid} after turn 2"


def test_fork_leaves_out_a_tool_batch_still_running(store: FileStore) -> None:
    sid = store.create_session([{"role": "system", "content": "s"}])
    running = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "run_python", "arguments": '{"code": "1"}'}}]},
    ]
    store.save(sid, running)
    fork = fork_session(store, sid).record
    assert fork.messages == fork.transcript == running[:2]


def test_a_refused_call_is_not_counted_in_a_fork(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    """The fork counts tool calls by the rule resuming uses (design notes, "Failures during a
    turn")."""
    model_server.add_steps([tool_step(("run_python", {"code": "1 + 1"})), "refused, fine",
                            tool_step(("add_todo", {"text": "plot"})), "added"])
    agent = make_agent(model_server, store, approve="deny")
    agent.run("compute")
    agent.run("plan")
    parent = store.load_session(agent.conversation.session_id)
    assert parent.state.tool_calls == 1  # the refused run_python never ran
    assert fork_record(parent, at=1).record.state.tool_calls == 0
    assert fork_record(parent, at=2).record.state.tool_calls == 1
    assert fork_session(store, parent.id).record.state.tool_calls == 1


def test_fork_point_is_checked(model_server: ScriptedModelServer, store: FileStore) -> None:
    sid, _ = run_turns(model_server, store)
    for at in (0, -1, 5):
        with pytest.raises(ForkPointError, match=r"use 1 to 4") as info:
            fork_session(store, sid, at=at)
        assert (info.value.at, info.value.turns, info.value.session_id) == (at, 4, sid)
    assert len(store.list_sessions()) == 1  # nothing was created
    empty = store.create_session([{"role": "system", "content": "s"}])
    with pytest.raises(ForkPointError, match="no user turns yet"):
        fork_session(store, empty, at=1)
    with pytest.raises(SessionNotFoundError):
        fork_session(store, "nosuchsession")


def test_fork_while_another_process_holds_the_parent(
    model_server: ScriptedModelServer, store: FileStore, memory_dir: Path, hold: Hold
) -> None:
    sid, _ = run_turns(model_server, store)
    before = store.session_path(sid).read_bytes()
    holder = hold(sid)
    fork = fork_session(FileStore(memory_dir), sid, at=2, title="second try").record
    holder.exit()
    assert store.load_session(fork.id).title == "second try"
    assert store.session_path(sid).read_bytes() == before
