"""The store contract on the team store: leases between real processes and between
store objects (design §7).

Written against the ``store``/``make_store`` fixtures and a child process that opens
the same store (``child.py``), so that the tests can join the contract suite shared by
every backend once the child can build any of them.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent.errors import SessionLockedError, SessionNotFoundError
from jupyter_agent.store.postgres import PostgresStore
from tests.postgres.server import PgCluster

CHILD = str(Path(__file__).with_name("child.py"))
SYSTEM = {"role": "system", "content": "s"}


class Kernel:
    """Runs ``child.py`` for one store location (database URL, memory directory, project)."""

    def __init__(self, url: str, memory: Path, project: str) -> None:
        self.env = {**os.environ, "JUPYTER_AGENT_STORE_URL": url}
        self.memory = memory
        self.project = project

    def argv(self, mode: str, sid: str, *extra: str) -> list[str]:
        return [sys.executable, CHILD, mode, str(self.memory), self.project, sid, *extra]

    def run(self, mode: str, sid: str, *extra: str) -> dict[str, Any]:
        out = subprocess.run(self.argv(mode, sid, *extra), capture_output=True, text=True,
                             timeout=120, check=True, env=self.env)
        result = json.loads(out.stdout)
        assert isinstance(result, dict)
        return result

    def hold(self, sid: str, label: str = "child.ipynb") -> Holder:
        return Holder(subprocess.Popen(self.argv("hold", sid, label), stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True, env=self.env))


class Holder:
    """A child process holding a session's lease until told to stop."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == f"held {proc.pid}\n", line

    def exit(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=60) == -signal.SIGKILL


def eventually(check: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait until ``check()`` (the server notices a dropped connection within moments)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def kernel(pg: PgCluster, tmp_path: Path, project: str) -> Kernel:
    return Kernel(pg.url(), tmp_path / "mem", project)


@pytest.fixture
def sid(store: PostgresStore) -> str:
    return store.create_session([SYSTEM], session_id="shared")


@pytest.fixture
def holder(kernel: Kernel, sid: str) -> Iterator[Holder]:
    h = kernel.hold(sid)
    yield h
    if h.proc.poll() is None:
        h.kill()


def test_second_process_fails_at_once_naming_us(store: PostgresStore, kernel: Kernel,
                                                sid: str) -> None:
    with store.lease(sid):
        started = time.monotonic()
        result = kernel.run("try", sid)
    assert result["error"] == "SessionLockedError"
    assert result["pid"] == os.getpid()
    holder = result["holder"]
    assert (holder["pid"], holder["user"], holder["host"]) == (
        os.getpid(), store._leases.identity.user, store._leases.identity.host)
    assert holder["since"] is not None
    assert str(os.getpid()) in str(result["message"])
    assert time.monotonic() - started < 30  # refused, not waited (the child starts Python)
    assert kernel.run("try", sid) == {"ok": True}  # released: the child now succeeds
    assert len(store.load_session(sid).messages) == 2


def test_we_fail_naming_the_holder_then_succeed_after_it_exits(
    store: PostgresStore, sid: str, holder: Holder
) -> None:
    before = store.load_session(sid)
    started = time.monotonic()
    with pytest.raises(SessionLockedError) as info:
        store.set_title(sid, "mine")
    assert time.monotonic() - started < 1.0  # at once
    err = info.value
    assert err.pid == holder.proc.pid
    assert err.holder is not None and err.holder.pid == holder.proc.pid
    assert err.holder.label == "child.ipynb" and err.holder.since is not None
    assert str(holder.proc.pid) in str(err) and "child.ipynb" in str(err)
    assert store.load_session(sid) == before
    (entry,) = store.list_sessions()
    assert entry.status == "in use"
    assert entry.holder == err.holder
    assert store.lease_holder(sid) == err.holder
    holder.exit()
    store.set_title(sid, "mine")
    assert store.load_session(sid).title == "mine"
    assert store.list_sessions()[0].status == "idle"


def test_lease_is_free_after_the_holder_is_sigkilled(store: PostgresStore, sid: str,
                                                     holder: Holder) -> None:
    with pytest.raises(SessionLockedError):
        store.acquire_lease(sid)
    holder.kill()

    def taken() -> bool:
        try:
            store.acquire_lease(sid)
        except SessionLockedError:
            return False
        return True

    eventually(taken)
    assert store.holds_lease(sid)
    assert store.list_sessions()[0].status == "active"
    assert store.lease_holder(sid) is not None
    assert store.lease_holder(sid).pid == os.getpid()  # type: ignore[union-attr]


def test_reentrant_within_one_store(store: PostgresStore, kernel: Kernel, sid: str) -> None:
    store.acquire_lease(sid)
    with store.lease(sid), store.lease(sid):
        store.set_title(sid, "nested")  # takes the lease again inside
    assert store.holds_lease(sid)
    assert kernel.run("try", sid)["error"] == "SessionLockedError"
    store.acquire_lease(sid)
    store.release_lease(sid)
    assert store.holds_lease(sid)  # one acquire still outstanding
    store.release_lease(sid)
    assert not store.holds_lease(sid)
    store.release_lease(sid)  # releasing a lease not held does nothing
    assert kernel.run("try", sid) == {"ok": True}


def test_release_all_drops_every_lease(store: PostgresStore, kernel: Kernel) -> None:
    a = store.create_session([SYSTEM], session_id="a")
    b = store.create_session([SYSTEM], session_id="b")
    store.acquire_lease(a)
    store.acquire_lease(a)
    store.acquire_lease(b)
    store.release_all()
    assert not store.holds_lease(a) and not store.holds_lease(b)
    assert kernel.run("try", a) == {"ok": True}
    assert kernel.run("try", b) == {"ok": True}


def test_two_stores_in_one_process_exclude_each_other(
    make_store: Callable[..., PostgresStore], sid: str
) -> None:
    first, second = make_store(), make_store()
    first.acquire_lease(sid)
    with pytest.raises(SessionLockedError) as info:
        second.save_messages(sid, [SYSTEM, {"role": "user", "content": "x"}])
    assert info.value.pid == os.getpid()
    assert {s.id: s.status for s in second.list_sessions()} == {sid: "in use"}
    assert first.list_sessions()[0].status == "active"
    first.release_lease(sid)
    assert second.list_sessions()[0].status == "idle"
    assert first.list_sessions()[0].status == "idle"


def test_listing_status_values(store: PostgresStore, holder: Holder) -> None:
    store.create_session([], session_id="mine")
    store.create_session([], session_id="nobody")
    store.acquire_lease("mine")
    statuses = {s.id: s.status for s in store.list_sessions()}
    assert statuses == {"mine": "active", "shared": "in use", "nobody": "idle"}
    holder.kill()
    eventually(lambda: {s.id: s.status for s in store.list_sessions()}
               == {"mine": "active", "shared": "idle", "nobody": "idle"})
    assert store.collect_garbage() == ["shared"]  # the killed kernel's row, nobody's lock
    assert store.collect_garbage() == []


def _forked_child(store: PostgresStore, sid: str, queue: Any) -> None:
    held = store.holds_lease(sid)
    try:
        store.acquire_lease(sid)
        queue.put((held, "acquired"))
    except SessionLockedError as err:
        queue.put((held, err.pid))


def test_lease_is_not_inherited_through_fork(store: PostgresStore, sid: str) -> None:
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
    store.save_messages(sid, [SYSTEM, {"role": "user", "content": "parent still works"}])
    assert len(store.load_session(sid).transcript) == 2


MUTATIONS: dict[str, Any] = {
    "save_messages": lambda s, sid: s.save_messages(
        sid, [SYSTEM, {"role": "user", "content": "u"}]),
    "save": lambda s, sid: s.save(sid, [SYSTEM, {"role": "user", "content": "u"}],
                                  {"tool_calls": 2}),
    "compact": lambda s, sid: s.compact(sid, [{"role": "system", "content": "c"}], summary="x"),
    "save_state": lambda s, sid: s.save_state(sid, {"scratchpad": "new"}),
    "write_summary": lambda s, sid: s.write_summary(sid, "summary"),
    "ensure_summary": lambda s, sid: s.ensure_summary(sid),
    "set_title": lambda s, sid: s.set_title(sid, "title"),
    "set_archived": lambda s, sid: s.set_archived(sid),
    "delete_session": lambda s, sid: s.delete_session(sid),
}


def test_every_mutating_method_is_refused_while_another_process_holds_the_lease(
    store: PostgresStore, sid: str, holder: Holder
) -> None:
    before = store.load_session(sid)
    for name, call in MUTATIONS.items():
        with pytest.raises(SessionLockedError) as info:
            call(store, sid)
        assert info.value.pid == holder.proc.pid, name
        assert str(holder.proc.pid) in str(info.value), name
    assert store.load_session(sid) == before  # nothing was written
    holder.exit()
    for name, call in MUTATIONS.items():  # free now: every one of them goes through
        if name != "save":  # save_messages already saved the same messages
            call(store, sid)
    assert not store.exists(sid)  # delete_session ran last


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutating_an_unknown_session_leaves_nothing_behind(store: PostgresStore,
                                                           name: str) -> None:
    store.create_session([SYSTEM], session_id="real")
    with pytest.raises(SessionNotFoundError):
        MUTATIONS[name](store, "nosuchid")
    assert not store.holds_lease("nosuchid")
    assert store.lease_holder("nosuchid") is None
    assert [s.id for s in store.list_sessions()] == ["real"]
