"""Contract: sessions, save points, compaction, summaries, metadata (design §3-§6, §9)."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_agent.errors import (
    ContextMismatchError,
    InvalidMessageError,
    InvalidSessionIdError,
    SessionNotFoundError,
)
from jupyter_agent.store import ForkOrigin, SessionRecord, SessionState, Store, TodoItem, Usage

SYSTEM = {"role": "system", "content": "You analyse data."}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def test_create_load_and_exists(store: Store) -> None:
    sid = store.create_session([SYSTEM], title="Penguins", project_root="/proj")
    assert store.exists(sid)
    record = store.load_session(sid)
    assert (record.id, record.title, record.project_root, record.summary) == (
        sid, "Penguins", "/proj", "")
    assert record.messages == record.transcript == [SYSTEM]
    assert record.created_at == record.updated_at and record.created_at.tzinfo is not None
    assert not store.holds_lease(sid)
    with pytest.raises(FileExistsError):
        store.create_session([user("again")], session_id=sid)
    assert store.load_session(sid).messages == [SYSTEM]


@pytest.mark.parametrize("bad", ["", "../x", "a b", "x" * 129, "é"])
def test_invalid_ids_are_refused_before_anything(store: Store, bad: str) -> None:
    for call in (lambda: store.load_session(bad), lambda: store.exists(bad),
                 lambda: store.acquire_lease(bad), lambda: store.save(bad, []),
                 lambda: store.create_session([], session_id=bad)):
        with pytest.raises(InvalidSessionIdError):
            call()
    assert store.list_sessions() == []


def test_unknown_sessions(store: Store) -> None:
    store.create_session([SYSTEM], session_id="real")
    assert not store.exists("nope")
    for call in (lambda: store.load_session("nope"), lambda: store.save("nope", [SYSTEM]),
                 lambda: store.write_summary("nope", "s"), lambda: store.set_title("nope", "t"),
                 lambda: store.set_archived("nope"), lambda: store.delete_session("nope"),
                 lambda: store.compact("nope", [], summary="s"),
                 lambda: store.ensure_summary("nope")):
        with pytest.raises(SessionNotFoundError):
            call()
    assert [s.id for s in store.list_sessions()] == ["real"]


def test_a_save_point_records_messages_and_checkpoint_together(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    state = SessionState(scratchpad="notes", tool_calls=3,
                         todos=[TodoItem(id=1, text="load", status="done")],
                         usage=Usage(input_tokens=10, output_tokens=2, cost_usd=0.5, calls=1))
    store.save(sid, [SYSTEM, user("q"), assistant("a")], state)
    state.scratchpad = "changed after saving"
    record = store.load_session(sid)
    assert record.messages == record.transcript == [SYSTEM, user("q"), assistant("a")]
    assert record.state.scratchpad == "notes" and record.state.tool_calls == 3
    assert record.state.usage.cost_usd == 0.5
    assert record.updated_at > record.created_at
    store.save_messages(sid, [*record.messages, user("more")])
    store.save_state(sid, {"scratchpad": "mapping", "tool_calls": 4})
    record = store.load_session(sid)
    assert len(record.transcript) == 4 and record.state.scratchpad == "mapping"


def test_saving_nothing_new_changes_nothing(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    store.save(sid, [SYSTEM], SessionState(tool_calls=1))
    updated = store.load_session(sid).updated_at
    store.save(sid, [SYSTEM], SessionState(tool_calls=1))
    store.save_state(sid, SessionState(tool_calls=1))
    assert store.load_session(sid).updated_at == updated


@pytest.mark.parametrize(("given", "index"), [
    ([SYSTEM, user("CHANGED"), user("new")], 1), ([SYSTEM], 1), ([], 0),
])
def test_a_save_that_does_not_extend_the_context_is_refused(
    store: Store, given: list[dict[str, Any]], index: int
) -> None:
    sid = store.create_session([SYSTEM, user("a")])
    before = store.load_session(sid)
    with pytest.raises(ContextMismatchError) as info:
        store.save(sid, given, SessionState(tool_calls=9))
    assert info.value.index == index
    assert store.load_session(sid) == before


@pytest.mark.parametrize("bad", [
    {"role": 5, "content": "x"}, {"role": "user", "content": 5},
    {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]},
    {"role": "tool", "tool_call_id": 7, "content": "x"},
    {"role": "user", "content": "x", "n": 2**70},
])
def test_a_message_that_could_not_be_loaded_is_never_saved(
    store: Store, bad: dict[str, Any]
) -> None:
    sid = store.create_session([SYSTEM])
    with pytest.raises(InvalidMessageError) as info:
        store.save(sid, [SYSTEM, user("fine"), bad])
    assert info.value.index == 2 and "cannot be saved" in str(info.value)
    assert store.load_session(sid).transcript == [SYSTEM]
    with pytest.raises(InvalidMessageError):
        store.create_session([bad])


def test_compaction_replaces_the_working_context_only(store: Store) -> None:
    turns = [SYSTEM, user("q1"), assistant("a1"), user("q2"), assistant("a2"), user("q3")]
    sid = store.create_session([SYSTEM])
    store.save(sid, turns)
    compacted = [SYSTEM, user("Summary: q1, q2"), user("q3")]
    store.compact(sid, compacted, summary="q1, q2")
    record = store.load_session(sid)
    assert record.messages == compacted and record.transcript == turns
    (event,) = record.compactions
    assert (event.summary, event.replaced, event.transcript_length) == ("q1, q2", 4, 6)
    store.save(sid, [*compacted, assistant("a3")])
    record = store.load_session(sid)
    assert record.messages == [*compacted, assistant("a3")]
    assert record.transcript == [*turns, assistant("a3")]
    with pytest.raises(ContextMismatchError):
        store.save(sid, [*turns, assistant("a3")])


def test_summaries_titles_and_archiving(store: Store) -> None:
    sid = store.create_session([SYSTEM, user("first"), assistant("one")])
    assert store.ensure_summary(sid) == "user: first\nassistant: one"
    store.write_summary(sid, "Goal: plots")
    assert store.ensure_summary(sid) == "Goal: plots"
    updated = store.load_session(sid).updated_at
    store.set_title(sid, "Penguin bills")
    store.set_archived(sid)
    record = store.load_session(sid)
    assert (record.title, record.archived, record.updated_at) == ("Penguin bills", True, updated)
    store.set_archived(sid, False)
    assert store.load_session(sid).archived is False


def test_delete(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    store.delete_session(sid)
    assert not store.exists(sid)
    with pytest.raises(SessionNotFoundError):
        store.load_session(sid)
    assert store.list_sessions() == []
    store.create_session([SYSTEM], session_id=sid)  # the ID can be used again
    assert store.exists(sid)


def test_import_keeps_the_whole_record(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    store.save(sid, [SYSTEM, user("q"), assistant("a")], SessionState(tool_calls=2))
    store.compact(sid, [SYSTEM, user("summary")], summary="s")
    store.write_summary(sid, "the parent")
    original = store.load_session(sid)
    fork = original.model_copy(update={"id": "forked", "parent": ForkOrigin(session_id=sid,
                                                                             turn=1)})
    store.import_session(fork)
    copy = store.load_session("forked")
    assert copy.model_dump(exclude={"id", "parent"}) == original.model_dump(
        exclude={"id", "parent"})
    assert copy.parent == ForkOrigin(session_id=sid, turn=1)
    listed = {s.id: s for s in store.list_sessions()}
    assert listed["forked"].parent == ForkOrigin(session_id=sid, turn=1)
    assert listed[sid].parent is None
    with pytest.raises(FileExistsError):
        store.import_session(fork)


def test_records_returned_are_fresh_objects(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    record: SessionRecord = store.load_session(sid)
    record.messages.append(user("not saved"))
    record.state.tool_calls = 99
    again = store.load_session(sid)
    assert again.messages == [SYSTEM] and again.state.tool_calls == 0
