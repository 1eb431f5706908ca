"""Listing saved sessions (design notes "Listing", "The listing index")."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest

from jupyter_agent.errors import CorruptSessionError
from jupyter_agent.store import FileStore


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    return FileStore(tmp_path / "mem")


def set_updated(store: FileStore, sid: str, when: datetime) -> None:
    with store.journal_path(sid).open("a") as journal:  # as if written then
        journal.write(json.dumps({"updated_at": when.isoformat()}) + "\n")


def test_archived_sessions_are_filtered(store: FileStore) -> None:
    store.create_session([], session_id="kept")
    store.create_session([], session_id="old")
    store.update("old", archived=True)
    assert [s.id for s in store.list_sessions()] == ["kept"]
    listed = {s.id: s.archived for s in store.list_sessions(include_archived=True)}
    assert listed == {"kept": False, "old": True}


def test_malformed_entries_are_skipped(store: FileStore) -> None:
    store.create_session([{"role": "user", "content": "fine"}], session_id="good")
    sessions = store.sessions_dir
    bad_files = {
        "empty.json": b"",
        "truncated.json": store.session_path("good").read_bytes()[:40],
        "notjson.json": b"not json at all",
        "array.json": b"[]",
        "string.json": b'"a string"',
        "types.json": b'{"id": "types", "created_at": "2025-01-01T00:00:00Z", "updated_at": [], '
        b'"summary": 5, "messages": {}}',
        "noid.json": b'{"created_at": "2025-01-01T00:00:00Z"}',
        "newer.json": json.dumps(
            {
                **json.loads(store.session_path("good").read_text()),
                "id": "newer",
                "schema_version": 99,
            }
        ).encode(),
        "mismatch.json": store.session_path("good").read_bytes(),  # holds id "good"
        "bad.name.json": store.session_path("good").read_bytes(),
        ".good.json.abc123.tmp": b"{",
        "good.json.tmp": b"{",
        "deep.json": b"[" * 100_000,
    }
    for name, content in bad_files.items():
        (sessions / name).write_bytes(content)
    (sessions / "adir.json").mkdir()
    os.mkfifo(sessions / "fifo.json")  # opening it must not block the listing
    os.symlink(sessions / "missing-target.json", sessions / "dangling.json")
    legacy = {
        "id": "legacy",
        "created_at": "2025-01-01T00:00:00",
        "updated_at": "2025-01-02T00:00:00",
        "summary": "old",
        "messages": [{"role": "user", "content": "from before"}],
    }
    (sessions / "legacy.json").write_text(json.dumps(legacy))

    listing = store.list_sessions()
    assert [s.id for s in listing] == ["good", "legacy"]
    old = listing[1]
    assert (old.summary, old.message_count, old.first_prompt, old.archived, old.title) == (
        "old",
        1,
        "from before",
        False,
        "",
    )
    assert [i.id for i in FileStore(store.root).list_sessions()] == ["good", "legacy"]


def test_describing_a_session_the_listing_marked_bad_names_the_file(
        store: FileStore) -> None:
    store.create_session([{"role": "user", "content": "fine"}], session_id="good")
    good = store.session_path("good").read_bytes()
    bad = {"notjson": b"not json at all",
           "types": b'{"id": "types", "created_at": "2025-01-01T00:00:00Z", "updated_at": [],'
                    b' "summary": 5, "messages": {}}',
           "newer": json.dumps({**json.loads(good), "id": "newer", "schema_version": 99}
                               ).encode()}
    for sid, content in bad.items():
        store.session_path(sid).write_bytes(content)
    assert [s.id for s in store.list_sessions()] == ["good"]  # the index marks them bad
    for sid in bad:
        for fresh in (store, FileStore(store.root)):  # cached in memory, or read again
            with pytest.raises(CorruptSessionError) as info:
                fresh.describe_session(sid)
            assert info.value.path == store.session_path(sid)
    # a bad mark that no longer holds (the file was repaired in place) is not believed
    index = store.root / "index.jsonl"
    sig = [json.loads(line) for line in index.read_text().splitlines()
           if json.loads(line)["id"] == "good"][-1]["sig"]
    with index.open("a") as out:
        out.write(json.dumps({"id": "good", "sig": sig, "bad": True}) + "\n")
    assert store.describe_session("good").first_prompt == "fine"


def test_file_that_cannot_be_opened_is_skipped(store: FileStore) -> None:
    store.create_session([], session_id="secret")
    store.create_session([], session_id="open")
    path = store.session_path("secret")
    if os.geteuid() != 0:
        os.chmod(path, 0)  # unreadable
    else:  # root reads any file: make open(2) itself fail (ELOOP) instead
        path.unlink()
        path.symlink_to(path.name)
    with pytest.raises(OSError):
        path.read_bytes()
    assert [s.id for s in store.list_sessions()] == ["open"]


def test_listing_sees_changes_to_files(store: FileStore) -> None:
    sid = store.create_session([], session_id="s1")
    assert store.list_sessions()[0].summary == ""
    other = FileStore(store.root)
    other.update(sid, summary="changed elsewhere")
    assert store.list_sessions()[0].summary == "changed elsewhere"
    other.delete_session(sid)
    assert store.list_sessions() == []


def test_missing_sessions_dir_lists_nothing(tmp_path: Path) -> None:
    assert FileStore(tmp_path / "nothing").list_sessions() == []
