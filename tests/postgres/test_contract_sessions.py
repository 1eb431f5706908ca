"""The store contract on the team store: create/load, saves, compaction, state,
summaries, metadata, delete, import (design §1-§6, §9).

Written against the ``store`` and ``make_store`` fixtures only (no file, no SQL), so
that the tests can join the contract suite shared by every backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from openai.types.chat import ChatCompletionMessage
from openai.types.chat.chat_completion_message_tool_call import ChatCompletionMessageToolCall

from jupyter_agent.errors import (
    ContextMismatchError,
    InvalidSessionIdError,
    SessionNotFoundError,
)
from jupyter_agent.store import ForkOrigin, SessionState, Store, TodoItem, Usage

SYSTEM = {"role": "system", "content": "You analyse data."}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def test_create_and_load(store: Store) -> None:
    sid = store.create_session([SYSTEM], title="Penguins", project_root="/proj")
    assert store.exists(sid)
    record = store.load_session(sid)
    assert record.id == sid
    assert record.messages == record.transcript == [SYSTEM]
    assert (record.title, record.project_root, record.summary) == ("Penguins", "/proj", "")
    assert record.created_at == record.updated_at
    assert record.created_at.tzinfo is not None
    assert not store.holds_lease(sid)  # create does not keep the lease
    assert store.lease_holder(sid) is None


def test_create_with_existing_id_raises_and_changes_nothing(store: Store) -> None:
    store.create_session([SYSTEM], session_id="fixed")
    before = store.load_session("fixed")
    with pytest.raises(FileExistsError):
        store.create_session([user("other")], session_id="fixed")
    assert store.load_session("fixed") == before


def test_invalid_ids_are_refused_before_anything_happens(store: Store) -> None:
    for bad in ("", "../x", "a b", "x" * 129, "é"):
        with pytest.raises(InvalidSessionIdError):
            store.exists(bad)
        with pytest.raises(InvalidSessionIdError):
            store.create_session([SYSTEM], session_id=bad)
        with pytest.raises(InvalidSessionIdError):
            store.acquire_lease(bad)
    assert store.list_sessions() == []


def test_unknown_session(store: Store) -> None:
    assert not store.exists("nope")
    with pytest.raises(SessionNotFoundError):
        store.load_session("nope")
    for op in (
        lambda: store.save_messages("nope", []),
        lambda: store.save("nope", [], {"tool_calls": 1}),
        lambda: store.delete_session("nope"),
        lambda: store.write_summary("nope", "s"),
        lambda: store.ensure_summary("nope"),
        lambda: store.set_title("nope", "t"),
    ):
        with pytest.raises(SessionNotFoundError):
            op()
    assert not store.exists("nope")
    assert not store.holds_lease("nope")
    assert store.lease_holder("nope") is None


def test_openai_objects_and_dicts_persist_tool_calls(
    store: Store, make_store: Callable[..., Store]
) -> None:
    sid = store.create_session([SYSTEM])
    call = ChatCompletionMessageToolCall(
        id="call_1", type="function",
        function={"name": "run_python", "arguments": '{"code": "2+2"}'},
    )
    messages: list[Any] = [
        SYSTEM,
        user("add"),
        ChatCompletionMessage(role="assistant", content=None, tool_calls=[call]),
        {"role": "tool", "tool_call_id": "call_1", "content": "4"},
        ChatCompletionMessage(role="assistant", content="It is 4."),
    ]
    store.save_messages(sid, messages)
    store.save_messages(sid, messages)  # same objects again: accepted, nothing new
    record = make_store().load_session(sid)  # another store object reads it back
    assert record.messages[2] == {
        "role": "assistant",
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "run_python", "arguments": '{"code": "2+2"}'}}],
    }
    assert record.messages[3]["tool_call_id"] == "call_1"
    assert record.messages[4] == {"role": "assistant", "content": "It is 4."}
    assert record.transcript == record.messages
    store.save_messages(sid, [*record.messages, user("thanks")])
    assert len(store.load_session(sid).transcript) == 6


@pytest.mark.parametrize(
    ("given", "index"),
    [
        ([SYSTEM, user("CHANGED"), user("new")], 1),
        ([SYSTEM], 1),
        ([], 0),
        ([assistant("x"), user("a"), user("b")], 0),
    ],
)
def test_context_mismatch_raises_and_writes_nothing(
    store: Store, given: list[dict[str, Any]], index: int
) -> None:
    sid = store.create_session([SYSTEM, user("a")])
    before = store.load_session(sid)
    with pytest.raises(ContextMismatchError) as info:
        store.save(sid, given, {"tool_calls": 9})
    assert isinstance(info.value, ValueError)
    assert info.value.index == index
    assert store.load_session(sid) == before


def test_surrogate_message_still_matches_its_saved_copy(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    messages = [SYSTEM, user("emoji cut \ud83d")]
    store.save_messages(sid, messages)
    store.save_messages(sid, [*messages, assistant("ok")])  # no ContextMismatchError
    record = store.load_session(sid)
    assert record.messages[1]["content"] == "emoji cut \ufffd"
    assert len(record.transcript) == 3


def test_text_is_kept_exactly(store: Store) -> None:
    odd = {"role": "tool", "tool_call_id": "c", "content": "nul \x00 tab\t é 😀 \\u0000 \"q\""}
    ordered = {"z": 1, "role": "user", "a": [1.5, None, True], "content": "keys in order"}
    sid = store.create_session([SYSTEM, odd])
    store.save_messages(sid, [SYSTEM, odd, ordered])
    record = store.load_session(sid)
    assert record.messages == [SYSTEM, odd, ordered]
    assert list(record.messages[2]) == ["z", "role", "a", "content"]


def test_compaction_replaces_working_context_only(store: Store) -> None:
    turns = [SYSTEM, user("q1"), assistant("a1"), user("q2"), assistant("a2"),
             user("q3"), assistant("a3")]
    sid = store.create_session([SYSTEM])
    store.save_messages(sid, turns)
    compacted = [SYSTEM, user("Summary: asked q1, q2."), user("q3"), assistant("a3")]
    store.compact(sid, compacted, summary="asked q1, q2")
    record = store.load_session(sid)
    assert record.messages == compacted
    assert record.transcript == turns
    (event,) = record.compactions
    assert (event.summary, event.replaced, event.transcript_length) == ("asked q1, q2", 4, 7)
    assert event.at.tzinfo is not None and event.at >= record.created_at
    store.save_messages(sid, [*compacted, user("q4")])
    record = store.load_session(sid)
    assert record.messages == [*compacted, user("q4")]
    assert record.transcript == [*turns, user("q4")]
    with pytest.raises(ContextMismatchError):
        store.save_messages(sid, [*turns, user("q4")])
    store.compact(sid, [SYSTEM, user("all")], summary="all", replaced=10)
    record = store.load_session(sid)
    assert record.compactions[1].replaced == 10
    assert record.compactions[1].transcript_length == 8
    assert record.messages == [SYSTEM, user("all")]


def test_save_records_messages_and_checkpoint_together(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    state = SessionState(tool_calls=2, usage=Usage(input_tokens=10, cost_usd=0.5, calls=1))
    store.save(sid, [SYSTEM, user("q")], state)
    record = store.load_session(sid)
    assert record.messages == [SYSTEM, user("q")]
    assert record.state == state
    before = record.updated_at
    store.save(sid, [SYSTEM, user("q")], state)  # nothing new at all
    assert store.load_session(sid).updated_at == before
    store.save(sid, [SYSTEM, user("q")], SessionState(tool_calls=3))  # only the state
    assert store.load_session(sid).state.tool_calls == 3
    assert store.load_session(sid).updated_at > before


def test_state_round_trip_and_isolation(store: Store, make_store: Callable[..., Store]) -> None:
    sid = store.create_session([SYSTEM])
    state = SessionState(
        scratchpad="notes \ud83d",
        todos=[TodoItem(id=1, text="load", status="done"),
               TodoItem(id=2, text="plot", retries=2, status="failed")],
        tool_calls=7,
        usage=Usage(input_tokens=1200, output_tokens=300, cost_usd=0.0123, calls=4,
                    price_unknown=True),
        model="m", base_url="http://localhost:1/v1",
    )
    store.save_state(sid, state)
    state.todos[0].text = "mutated after saving"
    loaded = make_store().load_session(sid).state
    assert loaded.todos[0].text == "load"
    assert loaded.scratchpad == "notes \ufffd"
    assert loaded.todos[1] == TodoItem(id=2, text="plot", retries=2, status="failed")
    assert (loaded.tool_calls, loaded.model, loaded.base_url) == (7, "m", "http://localhost:1/v1")
    assert loaded.usage == Usage(input_tokens=1200, output_tokens=300, cost_usd=0.0123,
                                 calls=4, price_unknown=True)
    store.save_state(sid, {"scratchpad": "x", "tool_calls": 1})
    assert store.load_session(sid).state.scratchpad == "x"


def test_unchanged_state_is_not_rewritten(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    store.save_state(sid, SessionState(tool_calls=3))
    updated = store.load_session(sid).updated_at
    store.save_state(sid, SessionState(tool_calls=3))
    store.save_messages(sid, [SYSTEM])
    assert store.load_session(sid).updated_at == updated


def test_write_summary_updates_timestamp(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    before = store.load_session(sid).updated_at
    store.write_summary(sid, "Goal: plots. Done: load. Left: fit.")
    record = store.load_session(sid)
    assert record.summary == "Goal: plots. Done: load. Left: fit."
    assert record.updated_at > before


def test_ensure_summary_fallback(store: Store) -> None:
    messages = [
        SYSTEM, user("first"), assistant("one"), user("second"),
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "tool output"},
        assistant("  two  "),
        {"role": "user", "content": [{"type": "text", "text": "third"},
                                     {"type": "image_url", "image_url": {"url": "x"}}]},
        assistant(""), assistant("three"), user("fourth"),
    ]
    sid = store.create_session(messages)
    expected = ("assistant: one\nuser: second\nassistant: two\nuser: third\n"
                "assistant: three\nuser: fourth")
    assert store.ensure_summary(sid) == expected
    assert store.load_session(sid).summary == expected
    store.write_summary(sid, "written by the model")
    assert store.ensure_summary(sid) == "written by the model"


def test_ensure_summary_reads_past_long_tool_runs(store: Store) -> None:
    tools = [{"role": "tool", "tool_call_id": f"c{i}", "content": "x"} for i in range(300)]
    sid = store.create_session([SYSTEM, user("the goal"), *tools])
    assert store.ensure_summary(sid) == "user: the goal"


def test_ensure_summary_is_at_most_2000_code_points(store: Store) -> None:
    sid = store.create_session([user("😀" * 3000)])
    summary = store.ensure_summary(sid)
    assert len(summary) == 2000
    assert summary.startswith("user: 😀")
    empty = store.create_session([SYSTEM])
    assert store.ensure_summary(empty) == ""


def test_title_and_archive_keep_updated_at(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    updated = store.load_session(sid).updated_at
    store.set_title(sid, "Penguin bills")
    store.set_archived(sid)
    record = store.load_session(sid)
    assert (record.title, record.archived, record.updated_at) == ("Penguin bills", True, updated)
    store.set_archived(sid, archived=False)
    assert store.load_session(sid).archived is False


def test_delete_and_reuse_the_id(store: Store) -> None:
    sid = store.create_session([SYSTEM, user("a")])
    store.delete_session(sid)
    assert not store.exists(sid)
    with pytest.raises(SessionNotFoundError):
        store.load_session(sid)
    store.create_session([SYSTEM], session_id=sid)  # the ID can be reused
    assert store.load_session(sid).transcript == [SYSTEM]


def test_import_session_keeps_everything(store: Store, make_store: Callable[..., Store]) -> None:
    sid = store.create_session([SYSTEM, user("q1"), assistant("a1")], title="T",
                               project_root="/p")
    store.compact(sid, [SYSTEM, user("summary")], summary="s", replaced=2)
    store.save(sid, [SYSTEM, user("summary"), user("q2")],
               SessionState(tool_calls=4, usage=Usage(cost_usd=1.25)))
    store.write_summary(sid, "the summary")
    store.set_archived(sid)
    record = store.load_session(sid).model_copy(
        update={"id": "copy", "parent": ForkOrigin(session_id=sid, turn=1)})
    other = make_store()
    other.import_session(record)
    assert other.load_session("copy") == record
    with pytest.raises(FileExistsError):
        other.import_session(record.model_copy(update={"title": "changed"}))
    assert other.load_session("copy") == record
    assert not other.holds_lease("copy")
