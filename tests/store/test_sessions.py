"""FileStore: create/load, saves, compaction, state, summaries, metadata, delete."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent.errors import (
    ContextMismatchError,
    CorruptSessionError,
    SessionNotFoundError,
    UnsafeFileError,
)
from jupyter_agent.store import FileStore, SessionState, TodoItem, Usage, ensure_summary, holding
from jupyter_agent.store.journal import encode_line

SYSTEM = {"role": "system", "content": "You analyse data."}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    return FileStore(tmp_path / "mem")


def test_create_and_load(store: FileStore) -> None:
    sid = store.create_session([SYSTEM], title="Penguins", project_root="/proj")
    assert store.exists(sid)
    record = store.load_session(sid)
    assert record.id == sid
    assert record.messages == record.transcript == [SYSTEM]
    assert (record.title, record.project_root, record.summary) == ("Penguins", "/proj", "")
    assert record.created_at == record.updated_at
    assert not store.holds_lease(sid)  # create does not keep the lease


def test_create_with_existing_id_raises(store: FileStore) -> None:
    store.create_session([SYSTEM], session_id="fixed")
    before = store.session_path("fixed").read_bytes()
    with pytest.raises(FileExistsError):
        store.create_session([user("other")], session_id="fixed")
    assert store.session_path("fixed").read_bytes() == before


def test_unknown_session(store: FileStore) -> None:
    assert not store.exists("nope")
    with pytest.raises(SessionNotFoundError) as info:
        store.load_session("nope")
    assert info.value.path == store.session_path("nope")
    for op in (
        lambda: store.save("nope", []),
        lambda: store.delete_session("nope"),
        lambda: store.update("nope", summary="s"),
        lambda: ensure_summary(store, "nope"),
    ):
        with pytest.raises(SessionNotFoundError):
            op()
    assert not store.session_path("nope").exists()


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
    store: FileStore, given: list[dict[str, Any]], index: int
) -> None:
    sid = store.create_session([SYSTEM, user("a")])
    paths = [store.session_path(sid), store.journal_path(sid)]
    before = [(p.read_bytes(), p.stat().st_ino) for p in paths]
    with pytest.raises(ContextMismatchError) as info:
        store.save(sid, given)
    assert isinstance(info.value, ValueError)
    assert info.value.index == index
    assert [(p.read_bytes(), p.stat().st_ino) for p in paths] == before


def test_surrogate_message_still_matches_its_saved_copy(store: FileStore) -> None:
    sid = store.create_session([SYSTEM])
    messages = [SYSTEM, user("emoji cut \ud83d")]
    store.save(sid, messages)
    store.save(sid, [*messages, assistant("ok")])  # no ContextMismatchError
    raw = store.journal_path(sid).read_bytes()
    raw.decode("utf-8")  # strict: no surrogates on disk
    record = store.load_session(sid)
    assert record.messages[1]["content"] == "emoji cut \ufffd"
    assert len(record.transcript) == 3


def test_compaction_replaces_working_context_only(store: FileStore) -> None:
    turns = [
        SYSTEM,
        user("q1"),
        assistant("a1"),
        user("q2"),
        assistant("a2"),
        user("q3"),
        assistant("a3"),
    ]
    sid = store.create_session([SYSTEM])
    store.save(sid, turns)
    summary_msg = user("Summary: asked q1, q2.")
    compacted = [SYSTEM, summary_msg, user("q3"), assistant("a3")]
    store.compact(sid, compacted, summary="asked q1, q2")
    record = store.load_session(sid)
    assert record.messages == compacted
    assert record.transcript == turns
    (event,) = record.compactions
    assert (event.summary, event.replaced, event.transcript_length) == ("asked q1, q2", 4, 7)
    assert event.at.tzinfo is not None and event.at >= record.created_at
    # later saves extend the compacted context; only new messages reach the transcript
    store.save(sid, [*compacted, user("q4")])
    record = store.load_session(sid)
    assert record.messages == [*compacted, user("q4")]
    assert record.transcript == [*turns, user("q4")]
    # the old, longer context no longer matches
    with pytest.raises(ContextMismatchError):
        store.save(sid, [*turns, user("q4")])
    store.compact(sid, [SYSTEM, user("all")], summary="all", replaced=10)
    assert store.load_session(sid).compactions[1].replaced == 10


def test_state_round_trip_and_isolation(store: FileStore) -> None:
    sid = store.create_session([SYSTEM])
    state = SessionState(
        scratchpad="notes \ud83d",
        todos=[
            TodoItem(id=1, text="load", status="done"),
            TodoItem(id=2, text="plot", retries=2, status="failed"),
        ],
        tool_calls=7,
        usage=Usage(
            input_tokens=1200, output_tokens=300, cost_usd=0.0123, calls=4, price_unknown=True
        ),
    )
    store.save(sid, state=state)
    state.todos[0].text = "mutated after saving"
    loaded = FileStore(store.root).load_session(sid).state
    assert loaded.todos[0].text == "load"
    assert loaded.scratchpad == "notes \ufffd"
    assert loaded.todos[1] == TodoItem(id=2, text="plot", retries=2, status="failed")
    assert loaded.tool_calls == 7
    assert loaded.usage == Usage(
        input_tokens=1200, output_tokens=300, cost_usd=0.0123, calls=4, price_unknown=True
    )
    store.save(sid, state={"scratchpad": "x", "tool_calls": 1})
    assert store.load_session(sid).state.scratchpad == "x"


def test_unchanged_state_is_not_rewritten(store: FileStore) -> None:
    sid = store.create_session([SYSTEM])
    store.save(sid, state=SessionState(tool_calls=3))
    files = [store.session_path(sid), store.journal_path(sid)]
    before = [p.stat() for p in files]
    store.save(sid, state=SessionState(tool_calls=3))
    store.save(sid, [SYSTEM])
    store.save(sid, [SYSTEM], SessionState(tool_calls=3))
    assert [(p.stat().st_ino, p.stat().st_size) for p in files] == [
        (st.st_ino, st.st_size) for st in before]


def test_write_summary_updates_timestamp(store: FileStore) -> None:
    sid = store.create_session([SYSTEM])
    before = store.load_session(sid).updated_at
    store.update(sid, summary="Goal: plots. Done: load. Left: fit.")
    record = store.load_session(sid)
    assert record.summary == "Goal: plots. Done: load. Left: fit."
    assert record.updated_at > before
    FileStore(store.root).update(sid, summary="from another store")
    assert store.load_session(sid).summary == "from another store"


def test_title_and_archive_keep_updated_at(store: FileStore) -> None:
    sid = store.create_session([SYSTEM])
    updated = store.load_session(sid).updated_at
    store.update(sid, title="Penguin bills")
    store.update(sid, archived=True)
    record = store.load_session(sid)
    assert (record.title, record.archived, record.updated_at) == ("Penguin bills", True, updated)
    store.update(sid, archived=False)
    assert store.load_session(sid).archived is False


def test_delete_keeps_the_lock_file(store: FileStore) -> None:
    sid = store.create_session([SYSTEM])
    store.delete_session(sid)
    assert not store.exists(sid)
    assert not store.journal_path(sid).exists()
    assert store.lock_path(sid).exists()
    with pytest.raises(SessionNotFoundError):
        store.load_session(sid)
    store.create_session([SYSTEM], session_id=sid)  # the ID can be reused
    assert store.exists(sid)


CORRUPT = {
    "empty": b"",
    "truncated": b'{"schema_version": 1, "id": "bad", "messages": [{"role": "us',
    "not json": b"hello",
    "array": b"[1, 2]",
    "wrong types": b'{"schema_version": 1, "id": "bad", "created_at": "yesterday", '
    b'"updated_at": 5, "messages": "x"}',
    "invalid utf-8": b'{"id": "bad\xff"}',
    "other id": b'{"id": "other", "created_at": "2025-01-01T00:00:00Z", '
    b'"updated_at": "2025-01-01T00:00:00Z", "summary": "", "messages": []}',
}


@pytest.mark.parametrize("content", CORRUPT.values(), ids=CORRUPT.keys())
def test_corrupt_file_raises_naming_path_and_is_untouched(
    store: FileStore, content: bytes
) -> None:
    store.create_session([SYSTEM], session_id="bad")
    path = store.session_path("bad")
    path.write_bytes(content)
    with pytest.raises(CorruptSessionError) as info:
        store.load_session("bad")
    assert info.value.path == path and str(path) in str(info.value)
    with pytest.raises(CorruptSessionError):
        store.save("bad", [SYSTEM])
    assert path.read_bytes() == content
    assert "bad" not in [s.id for s in store.list_sessions()]


@pytest.mark.parametrize("kind", ["directory", "FIFO"])
def test_non_regular_session_file_is_refused_not_a_hang(store: FileStore, kind: str) -> None:
    store.create_session([SYSTEM], session_id="other")
    path = store.session_path("odd")
    if kind == "FIFO":
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(UnsafeFileError, match=f"it is a {kind}") as info:
        store.load_session("odd")
    assert str(path) in str(info.value)


def test_in_memory_copy_notices_a_non_cooperating_writer(store: FileStore) -> None:
    sid = store.create_session([SYSTEM])
    path = store.journal_path(sid)
    with holding(store, sid):
        store.save(sid, [SYSTEM, user("a")])
        number = path.read_bytes().count(b"\n") + 1
        with path.open("ab") as journal:  # someone appends by hand, in the journal's format
            journal.write(encode_line(number, {"add": [assistant("edited")]}))
        with pytest.raises(ContextMismatchError):
            store.save(sid, [SYSTEM, user("a"), user("b")])
        store.save(sid, [SYSTEM, user("a"), assistant("edited"), user("b")])
    assert len(store.load_session(sid).transcript) == 4


def test_message_with_null_optional_fields_is_saved_and_loaded_back(store: FileStore) -> None:
    odd = {"role": "assistant", "content": "x", "tool_calls": None, "name": None}
    sid = store.create_session([{"role": "user", "content": "hi"}, odd])
    store.save(sid, [{"role": "user", "content": "hi"}, odd, odd])
    for reader in (store, FileStore(store.root)):
        record = reader.load_session(sid)
        assert record.messages[1:] == record.transcript[1:] == [odd, odd]
