"""Contract: sessions, save points, compaction, summaries, metadata (design notes "Sessions and
session IDs", "Working context and transcript"-"Checkpointed state", "Summaries",
"Validation of what is loaded")."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.chat import ChatCompletionMessage
from openai.types.chat.chat_completion_message_tool_call import ChatCompletionMessageToolCall

from jupyter_agent.errors import (
    ContextMismatchError,
    InvalidMessageError,
    InvalidSessionIdError,
    SessionNotFoundError,
)
from jupyter_agent.store import (
    ForkOrigin,
    SessionRecord,
    SessionState,
    Store,
    TodoItem,
    Usage,
    ensure_summary,
)
from tests.store_contract.conftest import StoreFactory

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
    assert not store.holds_lease(sid)  # create does not keep the lease
    assert store.describe_session(sid).holder is None
    with pytest.raises(FileExistsError):
        store.create_session([user("again")], session_id=sid)
    assert store.load_session(sid) == record  # nothing changed


@pytest.mark.parametrize("bad", ["", "../x", "a b", "x" * 129, "é"])
def test_invalid_ids_are_refused_before_anything(store: Store, bad: str) -> None:
    for call in (lambda: store.load_session(bad), lambda: store.exists(bad),
                 lambda: store.acquire_lease(bad), lambda: store.save(bad, []),
                 lambda: store.create_session([], session_id=bad),
                 lambda: store.describe_session(bad)):
        with pytest.raises(InvalidSessionIdError):
            call()
    assert store.list_sessions() == []


def test_unknown_sessions(store: Store) -> None:
    store.create_session([SYSTEM], session_id="real")
    assert not store.exists("nope")
    for call in (lambda: store.load_session("nope"), lambda: store.save("nope", [SYSTEM]),
                 lambda: store.save("nope", [], {"tool_calls": 1}),
                 lambda: store.save("nope", []),
                 lambda: store.update("nope", summary="s"), lambda: store.update("nope", title="t"),
                 lambda: store.update("nope", archived=True), lambda: store.delete_session("nope"),
                 lambda: store.compact("nope", [], summary="s"),
                 lambda: ensure_summary(store, "nope"),
                 lambda: store.describe_session("nope")):
        with pytest.raises(SessionNotFoundError):
            call()
    assert not store.exists("nope")
    assert not store.holds_lease("nope")
    with pytest.raises(SessionNotFoundError):
        store.describe_session("nope")
    assert [s.id for s in store.list_sessions()] == ["real"]


def test_a_save_point_records_messages_and_checkpoint_together(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    state = SessionState(scratchpad="notes", tool_calls=3,
                         todos=[TodoItem(id=1, text="load", status="done")],
                         usage=Usage(input_tokens=10, output_tokens=2, cost_usd=0.5, calls=1))
    store.save(sid, [SYSTEM, user("q"), assistant("a")], state)
    saved = state.model_copy(deep=True)
    state.scratchpad = "changed after saving"
    record = store.load_session(sid)
    assert record.state == saved
    assert record.messages == record.transcript == [SYSTEM, user("q"), assistant("a")]
    assert record.state.scratchpad == "notes" and record.state.tool_calls == 3
    assert record.state.usage.cost_usd == 0.5
    assert record.updated_at > record.created_at
    before = record.updated_at
    store.save(sid, record.messages, SessionState(tool_calls=4))  # only the checkpoint
    record = store.load_session(sid)
    assert record.state.tool_calls == 4 and record.updated_at > before
    store.save(sid, [*record.messages, user("more")])
    store.save(sid, state={"scratchpad": "mapping", "tool_calls": 4})
    record = store.load_session(sid)
    assert len(record.transcript) == 4 and record.state.scratchpad == "mapping"


def test_saving_nothing_new_changes_nothing(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    store.save(sid, [SYSTEM], SessionState(tool_calls=1))
    updated = store.load_session(sid).updated_at
    store.save(sid, [SYSTEM], SessionState(tool_calls=1))
    store.save(sid, state=SessionState(tool_calls=1))
    store.save(sid, [SYSTEM])
    assert store.load_session(sid).updated_at == updated


@pytest.mark.parametrize(("given", "index"), [
    ([SYSTEM, user("CHANGED"), user("new")], 1), ([SYSTEM], 1), ([], 0),
    ([assistant("x"), user("a"), user("b")], 0),
])
def test_a_save_that_does_not_extend_the_context_is_refused(
    store: Store, given: list[dict[str, Any]], index: int
) -> None:
    sid = store.create_session([SYSTEM, user("a")])
    before = store.load_session(sid)
    with pytest.raises(ContextMismatchError) as info:
        store.save(sid, given, SessionState(tool_calls=9))
    assert isinstance(info.value, ValueError)
    assert info.value.index == index
    assert store.load_session(sid) == before


@pytest.mark.parametrize("bad", [
    {"role": 5, "content": "x"}, {"role": "user", "content": 5},
    {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]},
    {"role": "tool", "tool_call_id": 7, "content": "x"},
    {"role": "user", "content": "x", "n": 2**70},
    {"role": "user", "content": "x", "score": float("nan")},
    {"role": "user", "content": "x", "data": object()},
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
        store.create_session([bad], session_id="never")
    with pytest.raises(InvalidMessageError):
        store.compact(sid, [SYSTEM, bad], summary="s")
    assert not store.exists("never")
    assert store.load_session(sid).messages == [SYSTEM]
    assert store.load_session(sid).compactions == []


def test_nesting_is_saved_as_deep_as_it_loads_back(store: Store) -> None:
    def nested(depth: int) -> dict[str, Any]:
        value: Any = "bottom"
        for _ in range(depth):
            value = [value]
        return {"role": "tool", "tool_call_id": "c", "content": "x", "data": value}

    sid = store.create_session([SYSTEM])
    store.save(sid, [SYSTEM, nested(200)])
    assert store.load_session(sid).messages[1] == nested(200)
    with pytest.raises(InvalidMessageError, match="nested too deeply") as info:
        store.save(sid, [SYSTEM, nested(200), nested(5_000)])
    assert info.value.index == 2
    assert len(store.load_session(sid).transcript) == 2


def test_openai_objects_and_dicts_persist_tool_calls(store_factory: StoreFactory) -> None:
    store = store_factory()
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
    store.save(sid, messages)
    store.save(sid, messages)  # same objects again: accepted, nothing new
    record = store_factory().load_session(sid)  # another store object reads it back
    assert record.messages[2] == {
        "role": "assistant",
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "run_python", "arguments": '{"code": "2+2"}'}}],
    }
    assert record.messages[3]["tool_call_id"] == "call_1"
    assert record.messages[4] == {"role": "assistant", "content": "It is 4."}
    assert record.transcript == record.messages
    # the agent continues with the loaded dicts plus a new message
    store.save(sid, [*record.messages, user("thanks")])
    assert len(store.load_session(sid).transcript) == 6


def test_surrogate_message_still_matches_its_saved_copy(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    messages = [SYSTEM, user("emoji cut \ud83d")]
    store.save(sid, messages)
    store.save(sid, [*messages, assistant("ok")])  # no ContextMismatchError
    record = store.load_session(sid)
    assert record.messages[1]["content"] == "emoji cut \ufffd"
    assert len(record.transcript) == 3


def test_text_is_kept_exactly(store: Store) -> None:
    odd = {"role": "tool", "tool_call_id": "c", "content": "nul \x00 tab\t é 😀 \\u0000 \"q\""}
    ordered = {"z": 1, "role": "user", "a": [1.5, None, True, 2**63], "content": "keys in order"}
    sid = store.create_session([SYSTEM, odd])
    store.save(sid, [SYSTEM, odd, ordered])
    record = store.load_session(sid)
    assert record.messages == [SYSTEM, odd, ordered]
    assert list(record.messages[2]) == ["z", "role", "a", "content"]


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
    assert event.at.tzinfo is not None and event.at >= record.created_at
    assert record.updated_at == event.at
    store.save(sid, [*compacted, assistant("a3")])
    record = store.load_session(sid)
    assert record.messages == [*compacted, assistant("a3")]
    assert record.transcript == [*turns, assistant("a3")]
    with pytest.raises(ContextMismatchError):
        store.save(sid, [*turns, assistant("a3")])
    store.compact(sid, [SYSTEM, user("all")], summary="all", replaced=10)
    record = store.load_session(sid)
    assert (record.compactions[1].replaced, record.compactions[1].transcript_length) == (10, 7)
    assert record.messages == [SYSTEM, user("all")]
    assert record.transcript == [*turns, assistant("a3")]


def test_state_round_trip_and_isolation(store_factory: StoreFactory) -> None:
    store = store_factory()
    sid = store.create_session([SYSTEM])
    state = SessionState(
        scratchpad="notes \ud83d",
        todos=[TodoItem(id=1, text="load", status="done"),
               TodoItem(id=2, text="plot", retries=2, status="failed")],
        tool_calls=7,
        usage=Usage(input_tokens=1200, output_tokens=300, cost_usd=0.0123, calls=4,
                    price_unknown=True),
        model="m", base_url="http://localhost:1/v1", api="responses",
    )
    store.save(sid, state=state)
    state.todos[0].text = "mutated after saving"
    loaded = store_factory().load_session(sid).state
    assert loaded.todos[0].text == "load"
    assert loaded.scratchpad == "notes \ufffd"
    assert loaded.todos[1] == TodoItem(id=2, text="plot", retries=2, status="failed")
    assert (loaded.tool_calls, loaded.model, loaded.base_url, loaded.api) == (
        7, "m", "http://localhost:1/v1", "responses")
    assert loaded.usage == Usage(input_tokens=1200, output_tokens=300, cost_usd=0.0123,
                                 calls=4, price_unknown=True)
    store.save(sid, state={"scratchpad": "x", "tool_calls": 1})
    assert store.load_session(sid).state.scratchpad == "x"


def test_summaries_titles_and_archiving(store_factory: StoreFactory) -> None:
    store = store_factory()
    sid = store.create_session([SYSTEM, user("first"), assistant("one")])
    assert ensure_summary(store, sid) == "user: first\nassistant: one"
    before = store.load_session(sid).updated_at
    store.update(sid, summary="Goal: plots")
    assert ensure_summary(store, sid) == "Goal: plots"
    assert store.load_session(sid).updated_at > before
    store_factory().update(sid, summary="from another store")
    assert store.load_session(sid).summary == "from another store"
    updated = store.load_session(sid).updated_at
    store.update(sid, title="Penguin bills")
    store.update(sid, archived=True)
    record = store.load_session(sid)
    assert (record.title, record.archived, record.updated_at) == ("Penguin bills", True, updated)
    store.update(sid, archived=False)
    assert store.load_session(sid).archived is False


def test_ensure_summary_falls_back_to_the_last_six_messages_with_text(store: Store) -> None:
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
    assert ensure_summary(store, sid) == expected
    assert store.load_session(sid).summary == expected
    store.update(sid, summary="written by the model")
    assert ensure_summary(store, sid) == "written by the model"


def test_ensure_summary_reads_past_long_tool_runs(store: Store) -> None:
    tools = [{"role": "tool", "tool_call_id": f"c{i}", "content": "x"} for i in range(300)]
    sid = store.create_session([SYSTEM, user("the goal"), *tools])
    assert ensure_summary(store, sid) == "user: the goal"


def test_ensure_summary_is_at_most_2000_code_points(store: Store) -> None:
    sid = store.create_session([user("😀" * 3000)])
    summary = ensure_summary(store, sid)
    assert len(summary) == 2000
    assert summary.startswith("user: 😀")
    summary.encode("utf-8")  # never cut inside a character
    empty = store.create_session([SYSTEM])
    assert ensure_summary(store, empty) == ""
    assert store.load_session(empty).summary == ""


def test_delete(store: Store) -> None:
    sid = store.create_session([SYSTEM, user("a")])
    store.delete_session(sid)
    assert not store.exists(sid)
    with pytest.raises(SessionNotFoundError):
        store.load_session(sid)
    assert store.list_sessions() == []
    store.create_session([SYSTEM], session_id=sid)  # the ID can be used again
    assert store.exists(sid)
    assert store.load_session(sid).transcript == [SYSTEM]


def test_import_keeps_the_whole_record(store_factory: StoreFactory) -> None:
    store = store_factory()
    sid = store.create_session([SYSTEM, user("q1"), assistant("a1")], title="T",
                               project_root="/p")
    store.save(sid, [SYSTEM, user("q1"), assistant("a1"), user("q"), assistant("a")],
               SessionState(tool_calls=2, usage=Usage(cost_usd=1.25)))
    store.compact(sid, [SYSTEM, user("summary")], summary="s", replaced=2)
    store.save(sid, [SYSTEM, user("summary"), user("q2")])
    store.update(sid, summary="the parent")
    store.update(sid, archived=True)
    original = store.load_session(sid)
    fork = original.model_copy(update={"id": "forked", "parent": ForkOrigin(session_id=sid,
                                                                             turn=1)})
    other = store_factory()
    other.create_session(record=fork)
    copy = store.load_session("forked")
    assert copy == fork
    assert copy.model_dump(exclude={"id", "parent"}) == original.model_dump(
        exclude={"id", "parent"})
    assert copy.parent == ForkOrigin(session_id=sid, turn=1)
    assert not other.holds_lease("forked")
    listed = {s.id: s for s in store.list_sessions(include_archived=True)}
    assert listed["forked"].parent == ForkOrigin(session_id=sid, turn=1)
    assert listed[sid].parent is None
    with pytest.raises(FileExistsError):
        other.create_session(record=fork.model_copy(update={"title": "changed"}))
    assert store.load_session("forked") == fork


def test_import_keeps_keys_this_version_does_not_know(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    record = store.load_session(sid)
    newer = SessionRecord.model_validate({
        **record.model_dump(mode="json"), "id": "newer",
        "labels": ["penguins", {"colour": "blue"}], "review": None})
    store.create_session(record=newer)
    loaded = store.load_session("newer")
    assert loaded == newer
    assert loaded.model_extra == {"labels": ["penguins", {"colour": "blue"}], "review": None}
    store.update("newer", title="changes keep them")
    assert store.load_session("newer").model_extra == loaded.model_extra


def test_import_refuses_what_could_not_be_loaded_back(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    record = store.load_session(sid)
    bad = record.model_copy(update={"id": "bad", "transcript": [SYSTEM, {"role": 3}]})
    with pytest.raises(InvalidMessageError) as info:
        store.create_session(record=bad)
    assert info.value.index == 1 and "transcript" in info.value.reason
    odd = SessionRecord.model_validate({**record.model_dump(mode="json"), "id": "odd",
                                        "extra": float("inf")})
    with pytest.raises(ValueError, match="cannot be saved"):
        store.create_session(record=odd)
    assert not store.exists("bad") and not store.exists("odd")


def test_records_returned_are_fresh_objects(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    record: SessionRecord = store.load_session(sid)
    record.messages.append(user("not saved"))
    record.state.tool_calls = 99
    again = store.load_session(sid)
    assert again.messages == [SYSTEM] and again.state.tool_calls == 0
