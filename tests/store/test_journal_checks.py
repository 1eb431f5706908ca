"""The journal's line checks, its older format, the store clock, the index as a checked
cache, and the leftovers a lease or a notes write removes (JSON-file backend)."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jupyter_agent.project import newest_session
from jupyter_agent.store import FileStore, SessionState, Usage, holding
from jupyter_agent.store.index import INDEX_LIMIT
from jupyter_agent.store.journal import check_lines, upgraded_journal
from jupyter_agent.store.records import utc_now
from jupyter_agent.store.sweep import collect_garbage

SYSTEM = {"role": "system", "content": "s"}


def _saved(store: FileStore, title: str = "") -> str:
    sid = store.create_session([SYSTEM], title=title)
    store.save(sid, [SYSTEM, {"role": "user", "content": "q"}],
               SessionState(usage=Usage(cost_usd=0.5)))
    store.update(sid, title=title or "t")
    return sid


def _downgrade(store: FileStore, sid: str) -> None:
    """Rewrite a session's files as jupyter-agent 0.2 wrote them (no n, c, lines, clock)."""
    journal, snapshot = store.journal_path(sid), store.session_path(sid)
    head = json.loads(snapshot.read_bytes())
    lines = []
    for k, raw in enumerate(journal.read_bytes().split(b"\n")[:-1]):
        value = {key: v for key, v in json.loads(raw).items() if key not in ("n", "c", "clock")}
        if k == 0:
            value["jupyter_agent_journal"] = 2
        lines.append(json.dumps(value, ensure_ascii=False).encode() + b"\n")
    covered = head["journal"].pop("lines")
    head["journal"].pop("clock")
    head["journal"]["offset"] = len(b"".join(lines[:covered]))
    journal.write_bytes(b"".join(lines))
    snapshot.write_text(json.dumps(head))
    (store.root / "index.jsonl").unlink()


def test_every_line_is_numbered_and_checksummed(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    sid = _saved(store)
    lines = store.journal_path(sid).read_bytes().split(b"\n")[:-1]
    check_lines(lines, 1, store.journal_path(sid))
    assert [json.loads(line)["n"] for line in lines] == [1, 2, 3, 4]


def test_a_journal_of_the_previous_format_loads_unchanged_and_its_next_write_upgrades_it(
        tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    sid = _saved(store, "old")
    before = store.load_session(sid)
    _downgrade(store, sid)
    fresh = FileStore(tmp_path)
    assert fresh.load_session(sid) == before
    assert [s.title for s in fresh.list_sessions()] == ["old"]
    fresh.update(sid, summary="upgraded")
    lines = store.journal_path(sid).read_bytes().split(b"\n")[:-1]
    assert json.loads(lines[0])["jupyter_agent_journal"] == 3
    check_lines(lines, 1, store.journal_path(sid))
    after = FileStore(tmp_path).load_session(sid)
    assert after.summary == "upgraded"
    assert after.transcript == before.transcript and after.state == before.state


def test_a_kill_at_either_step_of_the_upgrade_leaves_files_that_load(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    sid = _saved(store)
    before = store.load_session(sid)
    _downgrade(store, sid)
    with store._changing(sid) as at:  # step 1: the snapshot counts lines
        store._write_snapshot(at[1], store._head(at, sid))
    assert FileStore(tmp_path).load_session(sid) == before
    journal = store.journal_path(sid)  # step 2: the journal gets its checks
    journal.write_bytes(upgraded_journal(journal.read_bytes()))
    assert FileStore(tmp_path).load_session(sid) == before


def test_newest_follows_the_store_clock_when_the_wall_clock_steps_back(tmp_path: Path) -> None:
    """A session saved while the clock ran an hour ahead, then one changed after the clock
    was set back: the later change is the newest, whatever the timestamps say."""
    store = FileStore(tmp_path)
    later = _saved(store, "changed after the clock stepped back")
    ahead = store.load_session(_saved(store, "saved while the clock was ahead"))
    ahead.id = "aheadOfTime"
    ahead.updated_at = utc_now() + timedelta(hours=1)
    # what the writes made while the clock ran ahead left in the store clock
    (tmp_path / "clock.lock").write_text(f"{time.time_ns() // 1000 + 3_600_000_000}\n")
    store.create_session(record=ahead)  # keeps its time: it was saved "an hour from now"
    assert newest_session(FileStore(tmp_path)) == "aheadOfTime"
    store.save(later, [*store.load_session(later).messages, {"role": "user", "content": "x"}])
    assert store.load_session(later).updated_at < ahead.updated_at
    fresh = FileStore(tmp_path)
    assert fresh.list_sessions()[0].id == later
    assert newest_session(fresh) == later
    page = fresh.list_sessions(limit=1)
    assert fresh.list_sessions(limit=1, after=page[0])[0].id == "aheadOfTime"


def test_resume_without_an_id_takes_the_newest_session_nobody_else_holds(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    free = _saved(store)
    held = _saved(store)
    other = FileStore(tmp_path)
    other.acquire_lease(held)
    try:
        assert store.list_sessions()[0].id == held
        assert newest_session(store) == free
    finally:
        other.release_all()
    assert newest_session(store) == held


def test_a_lease_removes_what_a_killed_writer_left_by_name(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    sid = _saved(store)
    sessions = tmp_path / "sessions"
    left = [sessions / f".{sid}.json.next.tmp", sessions / f".{sid}.jsonl.next.tmp",
            tmp_path / ".project.md.next.tmp", tmp_path / ".user.md.1a2b3c4d.tmp"]
    older = sessions / f".{sid}.json.5e6f7a8b.tmp"  # an older version's name: left to gc
    for path in [*left, older]:
        path.write_bytes(b"x" * 1000)
    with holding(FileStore(tmp_path), sid):
        pass
    assert [p for p in left if p.exists()] == [] and older.exists()
    assert older in collect_garbage(store)


def test_a_notes_write_removes_what_killed_notes_writers_left(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.notes.write("user", "first")
    left = [tmp_path / ".user.md.next.tmp", tmp_path / ".project.md.0badf00d.tmp"]
    for path in left:
        path.write_bytes(b"x" * 1000)
    store.notes.append("project", "kept")
    assert [p for p in left if p.exists()] == []
    assert store.notes.read("project") == "- kept\n" and store.notes.read("user") == "first"


def _index_lines(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "index.jsonl").read_bytes().splitlines()]


def test_an_index_entry_that_does_not_match_the_journal_is_rebuilt(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    sid = _saved(store, "true title")
    entry = [line for line in _index_lines(tmp_path) if line.get("set")][-1]
    generation, lines, _check = entry["set"]["at"]
    forged = {"id": sid, "sig": entry["sig"],  # the signature matches, the checksum does not
              "set": {"title": "forged", "at": [generation, lines, "0" * 8]}}
    with (tmp_path / "index.jsonl").open("a") as index:
        index.write(json.dumps(forged) + "\n")
    assert [s.title for s in FileStore(tmp_path).list_sessions()] == ["true title"]


def test_an_unparseable_time_in_the_index_does_not_hide_a_session(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    sid = _saved(store, "shown")
    entry = [line for line in _index_lines(tmp_path) if line.get("set")][-1]
    with (tmp_path / "index.jsonl").open("a") as index:
        index.write(json.dumps({"id": sid, "sig": entry["sig"],
                                "set": {"updated_at": "not a time"}}) + "\n")
    assert [s.title for s in FileStore(tmp_path).list_sessions()] == ["shown"]


@pytest.mark.parametrize("forge", ["no at", "a holder", "an owner"])
def test_an_index_entry_lists_what_the_files_say(tmp_path: Path, forge: str) -> None:
    """A whole entry but for ``at`` is rebuilt; a holder, an owner or roles shared with,
    which the index never records (a team store's fields), are not listed."""
    store = FileStore(tmp_path)
    sid = _saved(store, "shown")
    fields: dict = {}
    for line in _index_lines(tmp_path):
        fields.update(line.get("set", {}))
    if forge == "no at":
        del fields["at"]
    elif forge == "a holder":
        fields["holder"] = {"pid": 1, "label": "forged"}
    else:
        fields.update(owner_user="mallory", owner_host="evil", owner_role="admin",
                      shared_with=["everyone"])
    forged = {"id": sid, "sig": _index_lines(tmp_path)[-1]["sig"], "set": fields}
    (tmp_path / "index.jsonl").write_text(json.dumps(forged) + "\n")
    reader = FileStore(tmp_path)
    for _ in range(2):  # the entry as read, then as kept in memory
        listed = reader.list_sessions()
        assert [(s.title, s.status, s.holder) for s in listed] == [("shown", "idle", None)]
        assert [(s.owner_user, s.owner_host, s.owner_role, s.shared_with)
                for s in listed] == [("", "", "", ())]
    assert "at" in _index_lines(tmp_path)[-1]["set"]


@pytest.mark.parametrize("bad", ["oversized", "unreadable"])
def test_an_oversized_or_unreadable_index_is_rebuilt_once_small(tmp_path: Path,
                                                                bad: str) -> None:
    store = FileStore(tmp_path)
    ids = {_saved(store, f"s{k}") for k in range(3)}
    index = tmp_path / "index.jsonl"
    if bad == "oversized":
        with index.open("r+b") as handle:
            handle.truncate(INDEX_LIMIT + 1)
    else:
        index.write_bytes(b"\xff\xfe not json\n" * 10 + index.read_bytes())
    assert {s.id for s in FileStore(tmp_path).list_sessions()} == ids
    size = index.stat().st_size
    assert size < 10_000 and len(_index_lines(tmp_path)) == 3
    assert {s.id for s in FileStore(tmp_path).list_sessions()} == ids
    assert index.stat().st_size == size  # nothing appended: the entries are good


def test_creating_a_session_does_not_depend_on_other_sessions_files(tmp_path: Path) -> None:
    """Leftovers of other sessions are neither read nor removed by a new lease."""
    store = FileStore(tmp_path)
    sid = _saved(store)
    stranger = tmp_path / "sessions" / f".{sid}.jsonl.0123abcd.tmp"
    stranger.write_bytes(b"x")
    os.utime(stranger, (0, 0))
    store.create_session([SYSTEM])
    assert stranger.exists()


def test_a_record_or_a_store_clock_from_the_future_never_makes_a_session_the_newest(
        tmp_path: Path) -> None:
    """A cloned repository may ship a record dated (or clocked) in year 9999 and a
    ``clock.lock`` to vouch for it: the store clock vouches for a day at most, and a
    record imported from the future never sets the store clock ahead."""
    store = FileStore(tmp_path)
    mine = _saved(store, "mine")
    crafted = store.load_session(_saved(store, "crafted"))
    store.delete_session(crafted.id)
    crafted.id = "crafted"
    crafted.updated_at = datetime(9999, 12, 31, tzinfo=UTC)
    store.create_session(record=crafted)
    assert int((tmp_path / "clock.lock").read_text()) <= time.time_ns() // 1000
    (tmp_path / "clock.lock").write_text("253402214400000000\n")  # year 9999, planted
    fresh = FileStore(tmp_path)
    assert [s.id for s in fresh.list_sessions()] == [mine]
    assert "in the future" in fresh.damaged_sessions()["crafted"]
    assert newest_session(fresh) == mine
