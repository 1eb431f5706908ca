"""Records that parse but make no sense are refused at load, naming the file (design notes
"Validation of what is loaded")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent.errors import CorruptSessionError
from jupyter_agent.store import FileStore, holding

GOOD: dict[str, Any] = {
    "schema_version": 1, "id": "rec", "created_at": "2026-01-01T00:00:00+00:00",
    "updated_at": "2026-01-01T00:00:00+00:00", "summary": "", "title": "", "archived": False,
    "project_root": None, "messages": [{"role": "user", "content": "hi"}],
    "transcript": [{"role": "user", "content": "hi"}], "compactions": [],
    "state": {"scratchpad": "", "todos": [], "tool_calls": 0,
              "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "calls": 0}},
}


def with_(path: str, value: Any) -> bytes:
    """GOOD with the value at a dotted path replaced (``"raw:..."`` = raw JSON text)."""
    data = json.loads(json.dumps(GOOD))
    *parents, last = path.split(".")
    target: Any = data
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    marker = "@@RAW@@"
    raw = isinstance(value, str) and value.startswith("raw:")
    if isinstance(target, list):
        target[int(last)] = marker if raw else value
    else:
        target[last] = marker if raw else value
    text = json.dumps(data)
    return text.replace(f'"{marker}"', value[4:]).encode() if raw else text.encode()


BAD = {
    "NaN cost": (with_("state.usage.cost_usd", "raw:NaN"), "not valid JSON"),
    "infinite tokens": (with_("state.usage.input_tokens", "raw:Infinity"), "not valid JSON"),
    "overflowing number": (with_("state.usage.cost_usd", "raw:1e400"), "not valid JSON"),
    "negative tokens": (with_("state.usage.output_tokens", -5), "output_tokens"),
    "negative cost": (with_("state.usage.cost_usd", -0.5), "cost_usd"),
    "negative calls": (with_("state.usage.calls", -1), "calls"),
    "negative tool calls": (with_("state.tool_calls", -3), "tool_calls"),
    "negative retries": (with_("state.todos", [{"id": 1, "text": "t", "retries": -1}]),
                         "retries"),
    "unconvertible timestamp": (with_("created_at", "0001-01-01T00:00:00+05:00"),
                                "cannot be converted to UTC"),
    "far future offset": (with_("updated_at", "9999-12-31T23:59:59-05:00"),
                          "cannot be converted to UTC"),
    "not a timestamp": (with_("updated_at", "yesterday"), "updated_at"),
    "role not a string": (with_("messages.0", {"role": 3, "content": "x"}), "messages[0]"),
    "content an object": (with_("transcript.0", {"role": "user", "content": {"a": 1}}),
                          "transcript[0]: content must be"),
    "part without type": (with_("messages.0", {"role": "user", "content": [{"text": "x"}]}),
                          "content part"),
    "tool_calls a string": (with_("messages.0", {"role": "assistant", "tool_calls": "x"}),
                            "tool_calls must be a list"),
    "arguments an object": (with_("messages.0", {"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}]}),
        "arguments must be a string"),
    "tool_call_id a number": (with_("messages.0", {"role": "tool", "tool_call_id": 1,
                                                   "content": "r"}), "tool_call_id"),
    "message not an object": (with_("messages.0", "hello"), "messages[0]"),
    "negative compaction": (with_("compactions", [{"at": "2026-01-01T00:00:00+00:00",
                                                   "summary": "s", "replaced": -1,
                                                   "transcript_length": 0}]), "replaced"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_nonsense_is_refused_naming_the_file_and_left_untouched(tmp_path: Path,
                                                                name: str) -> None:
    content, reason = BAD[name]
    store = FileStore(tmp_path / "mem")
    store.create_session([], session_id="fine")
    path = store.session_path("rec")
    path.write_bytes(content)
    with pytest.raises(CorruptSessionError) as info:
        store.load_session("rec")
    assert info.value.path == path and str(path) in str(info.value)
    assert reason in info.value.reason
    with pytest.raises(CorruptSessionError):
        store.update("rec", title="x")
    assert path.read_bytes() == content
    assert not store.journal_path("rec").exists()
    assert [s.id for s in store.list_sessions()] == ["fine"]


def test_todos_without_an_id_get_one(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.session_path("rec").parent.mkdir(parents=True)
    store.session_path("rec").write_bytes(with_("state.todos", [
        {"text": "a"}, {"id": 4, "text": "b"}, {"id": None, "text": "c", "status": "done"}]))
    todos = store.load_session("rec").state.todos
    assert [(t.id, t.text, t.status) for t in todos] == [
        (5, "a", "pending"), (4, "b", "pending"), (6, "c", "done")]
    store.update("rec", title="converted")
    assert [t.id for t in FileStore(tmp_path).load_session("rec").state.todos] == [5, 4, 6]


# --------------------------------------------------------------------------- journal damage
@pytest.fixture
def saved(tmp_path: Path) -> tuple[FileStore, str]:
    store = FileStore(tmp_path / "mem")
    sid = store.create_session([{"role": "system", "content": "s"}])
    store.save(sid, [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}])
    return store, sid


def test_a_cut_short_last_line_is_ignored_then_cut_off_by_the_next_write(
    saved: tuple[FileStore, str],
) -> None:
    store, sid = saved
    journal = store.journal_path(sid)
    whole = journal.read_bytes()
    journal.write_bytes(whole + b'{"n":4,"add":[{"role":"user","content":"never acknow')
    assert len(store.load_session(sid).transcript) == 2  # a reader ignores it...
    assert journal.read_bytes() != whole  # ...and changes nothing
    with holding(store, sid):
        assert journal.read_bytes() != whole  # nor does taking the lease
        store.save(sid, [*store.load_session(sid).messages, {"role": "user", "content": "n"}])
    assert journal.read_bytes().startswith(whole)  # the write cut it off, then appended
    assert [m["content"] for m in store.load_session(sid).transcript] == ["s", "q", "n"]


def test_a_garbled_complete_last_line_is_damage_not_a_torn_write(
    saved: tuple[FileStore, str],
) -> None:
    store, sid = saved
    journal = store.journal_path(sid)
    damaged = journal.read_bytes() + b"\x00\x00\x00\n"
    journal.write_bytes(damaged)
    with pytest.raises(CorruptSessionError, match="line 4: it has no checksum") as info:
        store.load_session(sid)
    assert info.value.path == journal
    with pytest.raises(CorruptSessionError, match="line 4"):
        store.update(sid, summary="written")
    assert journal.read_bytes() == damaged


@pytest.mark.parametrize("damage", ["middle line", "truncated", "other generation",
                                    "other session", "missing"])
def test_other_journal_damage_is_reported_by_path(saved: tuple[FileStore, str],
                                                  damage: str) -> None:
    store, sid = saved
    journal = store.journal_path(sid)
    lines = journal.read_bytes().split(b"\n")
    if damage == "middle line":
        journal.write_bytes(b"\n".join([lines[0], b"{oops", *lines[1:]]))
    elif damage == "truncated":
        journal.write_bytes(lines[0] + b"\n")
    elif damage == "other generation":
        header = json.loads(lines[0])
        header["generation"] = "0" * 16
        journal.write_bytes(b"\n".join([json.dumps(header).encode(), *lines[1:]]))
    elif damage == "other session":
        journal.write_bytes(journal.read_bytes().replace(sid.encode(), b"someone"))
    else:
        journal.unlink()
    before = journal.read_bytes() if journal.exists() else None
    with pytest.raises(CorruptSessionError) as info:
        store.load_session(sid)
    assert info.value.path in (journal, store.session_path(sid))
    with pytest.raises(CorruptSessionError):
        store.update(sid, summary="x")
    assert (journal.read_bytes() if journal.exists() else None) == before
