"""Leases: fcntl locks between real processes and between stores (design §7)."""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent.errors import LeaseLostError, SessionLockedError, SessionNotFoundError
from jupyter_agent.store import SessionStore

CHILD = str(Path(__file__).with_name("child.py"))


def run_child(mode: str, root: Path, sid: str, *extra: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, CHILD, mode, str(root), sid, *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(out.stdout)
    assert isinstance(result, dict)
    return result


class Holder:
    """A child process holding a session's lease until told to stop."""

    def __init__(self, root: Path, sid: str, label: str = "") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, CHILD, "hold", str(root), sid, label],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line == f"held {self.proc.pid}\n", line

    def exit(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=60) == -signal.SIGKILL


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "mem"


@pytest.fixture
def sid(root: Path) -> Iterator[str]:
    store = SessionStore(root)
    yield store.create_session([{"role": "system", "content": "s"}], session_id="shared")
    store.release_all()


@pytest.fixture
def holder(root: Path, sid: str) -> Iterator[Holder]:
    h = Holder(root, sid)
    yield h
    if h.proc.poll() is None:
        h.kill()


def test_second_process_fails_at_once_naming_our_pid(root: Path, sid: str) -> None:
    store = SessionStore(root)
    with store.lease(sid):
        result = run_child("try", root, sid)
    assert result["error"] == "SessionLockedError"
    assert result["pid"] == os.getpid()
    assert str(os.getpid()) in str(result["message"])
    # released: the child now succeeds
    assert run_child("try", root, sid) == {"ok": True}
    assert len(store.load_session(sid).messages) == 2


def test_we_fail_naming_the_holder_then_succeed_after_it_exits(
    root: Path, sid: str, holder: Holder
) -> None:
    store = SessionStore(root)
    before = store.session_path(sid).read_bytes()
    with pytest.raises(SessionLockedError) as info:
        store.set_title(sid, "mine")
    assert info.value.pid == holder.proc.pid
    assert info.value.path == store.lock_path(sid)
    assert str(holder.proc.pid) in str(info.value)
    assert store.session_path(sid).read_bytes() == before
    assert store.list_sessions()[0].status == "in use"
    holder.exit()
    store.set_title(sid, "mine")
    assert store.load_session(sid).title == "mine"


def test_lease_is_free_after_the_holder_is_sigkilled(root: Path, sid: str, holder: Holder) -> None:
    store = SessionStore(root)
    with pytest.raises(SessionLockedError):
        store.acquire_lease(sid)
    holder.kill()
    store.acquire_lease(sid)
    assert store.holds_lease(sid)
    assert store.list_sessions()[0].status == "active"


def test_reentrant_within_one_store(root: Path, sid: str) -> None:
    store = SessionStore(root)
    store.acquire_lease(sid)
    with store.lease(sid), store.lease(sid):
        store.set_title(sid, "nested")  # takes the lease again inside
    assert store.holds_lease(sid)
    assert run_child("try", root, sid)["error"] == "SessionLockedError"
    store.acquire_lease(sid)
    store.release_lease(sid)
    assert store.holds_lease(sid)  # one acquire still outstanding
    store.release_lease(sid)
    assert not store.holds_lease(sid)
    store.release_lease(sid)  # releasing a lease not held does nothing
    assert run_child("try", root, sid) == {"ok": True}


def test_release_all_drops_every_lease(root: Path) -> None:
    store = SessionStore(root)
    a = store.create_session([], session_id="a")
    b = store.create_session([], session_id="b")
    store.acquire_lease(a)
    store.acquire_lease(a)
    store.acquire_lease(b)
    store.release_all()
    assert not store.holds_lease(a) and not store.holds_lease(b)
    assert run_child("try", root, a) == {"ok": True}
    assert run_child("try", root, b) == {"ok": True}


def test_two_stores_in_one_process_exclude_each_other(root: Path, sid: str) -> None:
    first, second = SessionStore(root), SessionStore(root)
    first.acquire_lease(sid)
    with pytest.raises(SessionLockedError) as info:
        second.save_messages(
            sid, [{"role": "system", "content": "s"}, {"role": "user", "content": "x"}]
        )
    assert info.value.pid == os.getpid()
    statuses = {s.id: s.status for s in second.list_sessions()}
    assert statuses == {sid: "in use"}
    assert first.list_sessions()[0].status == "active"
    first.release_lease(sid)
    assert second.list_sessions()[0].status == "idle"
    assert first.list_sessions()[0].status == "idle"


def test_listing_status_values(root: Path, holder: Holder) -> None:
    store = SessionStore(root)
    store.create_session([], session_id="mine")
    store.create_session([], session_id="nobody")
    store.acquire_lease("mine")
    statuses = {s.id: s.status for s in store.list_sessions()}
    assert statuses == {"mine": "active", "shared": "in use", "nobody": "idle"}
    holder.kill()
    statuses = {s.id: s.status for s in store.list_sessions()}
    assert statuses == {"mine": "active", "shared": "idle", "nobody": "idle"}


def test_lock_file_records_the_holder(root: Path, sid: str) -> None:
    store = SessionStore(root, holder_label="analysis.ipynb")
    store.lock_path(sid).write_text("999999999 stale junk\n")
    with store.lease(sid):
        recorded = json.loads(store.lock_path(sid).read_text())
    assert recorded["pid"] == os.getpid()
    assert recorded["label"] == "analysis.ipynb"
    assert recorded["host"] == socket.gethostname()
    assert set(recorded) == {"pid", "host", "user", "since", "label"}


def _forked_child(store: SessionStore, sid: str, queue: Any) -> None:
    held = store.holds_lease(sid)
    try:
        store.acquire_lease(sid)
        queue.put((held, "acquired"))
    except SessionLockedError as err:
        queue.put((held, err.pid))


def test_lease_is_not_inherited_through_fork(root: Path, sid: str) -> None:
    store = SessionStore(root)
    store.acquire_lease(sid)
    ctx = multiprocessing.get_context("fork")  # the child gets the store object as is
    queue = ctx.Queue()
    proc = ctx.Process(target=_forked_child, args=(store, sid, queue))
    proc.start()
    held, outcome = queue.get(timeout=60)
    proc.join(timeout=60)
    assert held is False  # the parent's lease is not the child's
    assert outcome == os.getpid()  # and the child is refused, naming the parent
    assert store.holds_lease(sid)


MUTATIONS: dict[str, Any] = {
    "save_messages": lambda s, sid: s.save_messages(
        sid, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    ),
    "compact": lambda s, sid: s.compact(sid, [{"role": "system", "content": "c"}], summary="x"),
    "save_state": lambda s, sid: s.save_state(sid, {"scratchpad": "new"}),
    "write_summary": lambda s, sid: s.write_summary(sid, "summary"),
    "ensure_summary": lambda s, sid: s.ensure_summary(sid),
    "set_title": lambda s, sid: s.set_title(sid, "title"),
    "set_archived": lambda s, sid: s.set_archived(sid),
    "delete_session": lambda s, sid: s.delete_session(sid),
}


def test_every_mutating_method_is_refused_while_another_process_holds_the_lease(
    root: Path, sid: str, holder: Holder
) -> None:
    """Design §7: short management operations also acquire the lock."""
    store = SessionStore(root)
    before = store.session_path(sid).read_bytes()
    refused = []
    for name, call in MUTATIONS.items():
        with pytest.raises(SessionLockedError) as info:
            call(store, sid)
        assert info.value.pid == holder.proc.pid, name
        assert str(holder.proc.pid) in str(info.value), name
        refused.append(name)
    assert refused == list(MUTATIONS)
    assert store.session_path(sid).read_bytes() == before  # nothing was written
    holder.exit()
    for call in MUTATIONS.values():  # free now: every one of them goes through
        call(store, sid)
    assert not store.session_path(sid).exists()  # delete_session ran last


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutating_an_unknown_session_creates_no_lock_file(root: Path, name: str) -> None:
    store = SessionStore(root)
    store.create_session([{"role": "system", "content": "s"}], session_id="real")
    with pytest.raises(SessionNotFoundError):
        MUTATIONS[name](store, "nosuchid")
    assert not store.lock_path("nosuchid").exists()
    assert not store.holds_lease("nosuchid")
    assert sorted(p.name for p in store.sessions_dir.iterdir()) == [
        "real.json", "real.jsonl", "real.lock"]


def test_the_holder_is_named_with_its_label_user_host_and_time(root: Path, sid: str) -> None:
    before = datetime.now(UTC)
    holder = Holder(root, sid, "analysis.ipynb")
    try:
        store = SessionStore(root)
        seen = store.lease_holder(sid)
        assert seen is not None
        assert (seen.pid, seen.label, seen.host) == (
            holder.proc.pid, "analysis.ipynb", socket.gethostname())
        assert seen.user == getpass.getuser()
        assert seen.since is not None and before - timedelta(seconds=1) <= seen.since
        (listed,) = store.list_sessions()
        assert (listed.status, listed.holder) == ("in use", seen)
        with pytest.raises(SessionLockedError) as info:
            store.set_title(sid, "x")
        assert info.value.holder == seen and info.value.pid == holder.proc.pid
        message = str(info.value)
        assert message.startswith(
            f"session {sid!r} is in use by {seen.user} on {seen.host} (pid {holder.proc.pid}, "
            f"analysis.ipynb, since ")
        assert f"UTC) (lock file {store.lock_path(sid)})" in message
        assert message.endswith("; close it there or end that process, then try again")
    finally:
        holder.exit()
    assert SessionStore(root).lease_holder(sid) is None
    assert SessionStore(root).list_sessions()[0].holder is None


def test_our_own_lease_is_reported_with_our_label(root: Path, sid: str) -> None:
    store = SessionStore(root, holder_label="kernel python3")
    with store.lease(sid):
        seen = store.lease_holder(sid)
        assert seen is not None and (seen.pid, seen.label) == (os.getpid(), "kernel python3")
        assert SessionStore(root).lease_holder(sid) == seen
    assert store.lease_holder(sid) is None


def test_a_forked_child_never_keeps_the_lease_alive(root: Path, sid: str) -> None:
    """The holder forks (user code in the kernel), then dies: the lease is free at once."""
    proc = subprocess.Popen([sys.executable, CHILD, "forkhold", str(root), sid],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    words = proc.stdout.readline().split()
    assert words[:2] == ["held", str(proc.pid)] and words[2] == "child", words
    child = int(words[3])
    try:
        store = SessionStore(root)
        with pytest.raises(SessionLockedError):
            store.acquire_lease(sid)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
        os.kill(child, 0)  # the forked child is still alive...
        store.acquire_lease(sid)  # ...and the session is free
        assert store.holds_lease(sid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_a_replaced_lock_file_stops_every_write(root: Path, sid: str) -> None:
    store = SessionStore(root)
    store.acquire_lease(sid)
    files = [store.session_path(sid), store.journal_path(sid)]
    before = [p.read_bytes() for p in files]
    lock = store.lock_path(sid)
    lock.unlink()  # e.g. someone cleaned the directory by hand...
    other = SessionStore(root)
    other.acquire_lease(sid)  # ...and another process took a lease on a new lock file
    with pytest.raises(LeaseLostError) as info:
        store.save_messages(sid, [{"role": "system", "content": "s"},
                                  {"role": "user", "content": "lost"}])
    assert info.value.path == lock and info.value.session_id == sid
    assert "was removed or replaced while this process held its lease" in str(info.value)
    assert [p.read_bytes() for p in files] == before
    assert not store.holds_lease(sid)  # the lost lease is dropped
    other.release_all()
    store.set_title(sid, "fresh lease")  # a new lease works again
    assert store.load_session(sid).title == "fresh lease"


def test_locking_retries_when_the_lock_path_changes_under_it(
    root: Path, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between open() and flock() the lock file is replaced: the lease is taken on the file
    the path names afterwards, never on the orphaned one."""
    store = SessionStore(root)
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
    assert run_child("try", root, sid)["error"] == "SessionLockedError"
    store.set_title(sid, "written")  # the lease is valid


def test_many_sessions_are_listed_with_the_right_status(root: Path, sid: str) -> None:
    """Every lock file is probed: held ones are "in use", our own "active"."""
    store = SessionStore(root)
    for k in range(210):
        store.create_session([], session_id=f"s{k:03d}")
    store.acquire_lease("s007")
    holder = Holder(root, "s100")
    try:
        statuses = {s.id: s.status for s in SessionStore(root).list_sessions()}
        mine = {s.id: s.status for s in store.list_sessions()}
    finally:
        holder.exit()
    assert statuses.pop("s100") == "in use" and statuses.pop("s007") == "in use"
    assert set(statuses.values()) == {"idle"} and len(statuses) == 209
    assert mine["s007"] == "active" and mine["s100"] == "in use"
    assert {s.status for s in store.list_sessions()} == {"idle", "active"}
