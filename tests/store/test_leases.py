"""Leases of the session files: fcntl locks on lock files, between real processes
(design notes "Leases").

What every backend does with leases is the contract (``tests/store_contract/test_leases.py``,
run on these files too); here is what only files do: the lock file and what it records, a
lock file replaced or removed under a holder, the lease free at once (no server to notice),
and the session files left byte for byte as they were.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_agent.errors import LeaseLostError, SessionLockedError, SessionNotFoundError
from jupyter_agent.store import FileStore, holding
from tests.processes import Holder, run_child, store_env
from tests.store_contract.cases import MUTATIONS


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "mem"


@pytest.fixture
def sid(root: Path) -> Iterator[str]:
    store = FileStore(root)
    yield store.create_session([{"role": "system", "content": "s"}], session_id="shared")
    store.release_all()


@pytest.fixture
def holder(root: Path, sid: str) -> Iterator[Holder]:
    held = Holder(store_env(root), sid)
    yield held
    held.stop()


def test_we_fail_naming_the_holder_then_succeed_after_it_exits(
    root: Path, sid: str, holder: Holder
) -> None:
    store = FileStore(root)
    before = store.session_path(sid).read_bytes()
    with pytest.raises(SessionLockedError) as info:
        store.update(sid, title="mine")
    assert info.value.pid == holder.pid
    assert info.value.path == store.lock_path(sid)
    assert str(holder.pid) in str(info.value)
    assert f"UTC) (lock file {store.lock_path(sid)})" in str(info.value)
    assert store.session_path(sid).read_bytes() == before
    assert store.list_sessions()[0].status == "in use"
    holder.exit()
    store.update(sid, title="mine")
    assert store.load_session(sid).title == "mine"


def test_lease_is_free_after_the_holder_is_sigkilled(root: Path, sid: str, holder: Holder) -> None:
    store = FileStore(root)
    with pytest.raises(SessionLockedError):
        store.acquire_lease(sid)
    holder.kill()
    store.acquire_lease(sid)
    assert store.holds_lease(sid)
    assert store.list_sessions()[0].status == "active"


def test_listing_status_values(root: Path, holder: Holder) -> None:
    store = FileStore(root)
    store.create_session([], session_id="mine")
    store.create_session([], session_id="nobody")
    store.acquire_lease("mine")
    statuses = {s.id: s.status for s in store.list_sessions()}
    assert statuses == {"mine": "active", "shared": "in use", "nobody": "idle"}
    holder.kill()
    statuses = {s.id: s.status for s in store.list_sessions()}
    assert statuses == {"mine": "active", "shared": "idle", "nobody": "idle"}


def test_lock_file_records_the_holder(root: Path, sid: str) -> None:
    store = FileStore(root, holder_label="analysis.ipynb")
    store.lock_path(sid).write_text("999999999 stale junk\n")
    with holding(store, sid):
        recorded = json.loads(store.lock_path(sid).read_text())
    assert recorded["pid"] == os.getpid()
    assert recorded["label"] == "analysis.ipynb"
    assert recorded["host"] == socket.gethostname()
    assert set(recorded) == {"pid", "host", "user", "since", "label"}




def test_a_refused_change_leaves_every_session_file_byte_for_byte(
    root: Path, sid: str, holder: Holder
) -> None:
    """What the contract cannot see: no refused change touches the files (design notes "Leases")."""
    store = FileStore(root)
    paths = [store.session_path(sid), store.journal_path(sid)]
    before = [p.read_bytes() for p in paths]
    for name, call in MUTATIONS.items():
        with pytest.raises(SessionLockedError):
            call(store, sid)
        assert [p.read_bytes() for p in paths] == before, name


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutating_an_unknown_session_creates_no_lock_file(root: Path, name: str) -> None:
    store = FileStore(root)
    store.create_session([{"role": "system", "content": "s"}], session_id="real")
    with pytest.raises(SessionNotFoundError):
        MUTATIONS[name](store, "nosuchid")
    assert not store.lock_path("nosuchid").exists()
    assert not store.holds_lease("nosuchid")
    assert sorted(p.name for p in store.sessions_dir.iterdir()) == [
        "real.json", "real.jsonl", "real.lock"]


def test_a_replaced_lock_file_stops_every_write(root: Path, sid: str) -> None:
    store = FileStore(root)
    store.acquire_lease(sid)
    files = [store.session_path(sid), store.journal_path(sid)]
    before = [p.read_bytes() for p in files]
    lock = store.lock_path(sid)
    lock.unlink()  # e.g. someone cleaned the directory by hand...
    other = FileStore(root)
    other.acquire_lease(sid)  # ...and another process took a lease on a new lock file
    with pytest.raises(LeaseLostError) as info:
        store.save(sid, [{"role": "system", "content": "s"},
                                  {"role": "user", "content": "lost"}])
    assert info.value.path == lock and info.value.session_id == sid
    assert "was removed or replaced while this process held its lease" in str(info.value)
    assert [p.read_bytes() for p in files] == before
    assert not store.holds_lease(sid)  # the lost lease is dropped
    other.release_all()
    store.update(sid, title="fresh lease")  # a new lease works again
    assert store.load_session(sid).title == "fresh lease"


def test_locking_retries_when_the_lock_path_changes_under_it(
    root: Path, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between open() and flock() the lock file is replaced: the lease is taken on the file
    the path names afterwards, never on the orphaned one."""
    store = FileStore(root)
    lock = store.lock_path(sid)
    real_flock = fcntl.flock
    swapped = []

    def swapping_flock(fd: int, op: int) -> None:
        if not swapped and op & fcntl.LOCK_EX:
            lock.unlink()
            lock.write_text("")
            swapped.append(os.fstat(fd).st_ino)
        real_flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", swapping_flock)
    store.acquire_lease(sid)
    monkeypatch.undo()
    assert swapped and lock.stat().st_ino != swapped[0]
    assert run_child(store_env(root), "try", sid)["error"] == "SessionLockedError"
    store.update(sid, title="written")  # the lease is valid


@pytest.mark.slow
def test_many_sessions_are_listed_with_the_right_status(root: Path, sid: str) -> None:
    """Every lock file is probed: held ones are "in use", our own "active"."""
    store = FileStore(root)
    for k in range(210):
        store.create_session([], session_id=f"s{k:03d}")
    store.acquire_lease("s007")
    holder = Holder(store_env(root), "s100")
    try:
        statuses = {s.id: s.status for s in FileStore(root).list_sessions()}
        mine = {s.id: s.status for s in store.list_sessions()}
    finally:
        holder.exit()
    assert statuses.pop("s100") == "in use" and statuses.pop("s007") == "in use"
    assert set(statuses.values()) == {"idle"} and len(statuses) == 209
    assert mine["s007"] == "active" and mine["s100"] == "in use"
    assert {s.status for s in store.list_sessions()} == {"idle", "active"}
