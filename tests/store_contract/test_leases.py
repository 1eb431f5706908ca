"""Contract: leases between store objects and between real processes (design notes "Leases").

The second kernel is a real process on the same storage (``store_child.py``, driven
through :mod:`tests.processes`), so what is checked is what another notebook on
this machine -- or, for a database, on another one -- would see.
"""

from __future__ import annotations

import getpass
import multiprocessing
import os
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from jupyter_agent.errors import SessionLockedError, SessionNotFoundError
from jupyter_agent.store import Store, holding
from tests.processes import Holder, eventually, run_child
from tests.store_contract.cases import MUTATIONS
from tests.store_contract.conftest import StoreFactory

SYSTEM = {"role": "system", "content": "s"}


def me() -> str:
    return getpass.getuser()


@pytest.fixture(autouse=True)
def _no_hub_user(monkeypatch: pytest.MonkeyPatch) -> None:
    """Holders name the OS user here (on a JupyterHub the team store names the hub user)."""
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)


@pytest.fixture
def sid(store: Store) -> str:
    return store.create_session([SYSTEM], session_id="shared")


@pytest.fixture
def holder(store_factory: StoreFactory, sid: str) -> Iterator[Holder]:
    held = Holder(store_factory.child_env(), sid, "child.ipynb")
    yield held
    held.stop()


def test_a_lease_excludes_other_store_objects_and_names_its_holder(
    store_factory: StoreFactory,
) -> None:
    mine, theirs = store_factory("analysis.ipynb"), store_factory("other.ipynb")
    sid = mine.create_session([SYSTEM])
    mine.acquire_lease(sid)
    assert mine.holds_lease(sid) and not theirs.holds_lease(sid)
    with pytest.raises(SessionLockedError) as info:
        theirs.save(sid, [SYSTEM, {"role": "user", "content": "x"}])
    assert info.value.holder is not None and info.value.holder.label == "analysis.ipynb"
    assert info.value.pid == os.getpid()
    holder = theirs.describe_session(sid).holder
    assert holder is not None and (holder.pid, holder.label) == (os.getpid(), "analysis.ipynb")
    assert [(s.status, s.holder) for s in theirs.list_sessions()] == [("in use", holder)]
    assert [s.status for s in mine.list_sessions()] == ["active"]
    with holding(mine, sid):  # re-entrant
        mine.update(sid, title="nested")
    assert mine.holds_lease(sid)
    mine.release_lease(sid)
    assert not mine.holds_lease(sid) and theirs.describe_session(sid).holder is None
    assert [s.status for s in theirs.list_sessions()] == ["idle"]
    assert [s.status for s in mine.list_sessions()] == ["idle"]
    theirs.update(sid, title="theirs")
    assert mine.load_session(sid).title == "theirs"


def test_our_own_lease_is_reported_with_our_label(store_factory: StoreFactory, sid: str) -> None:
    store = store_factory("kernel python3")
    with holding(store, sid):
        seen = store.describe_session(sid).holder
        assert seen is not None and (seen.pid, seen.label) == (os.getpid(), "kernel python3")
        assert store_factory().describe_session(sid).holder == seen
    assert store.describe_session(sid).holder is None


def test_release_all_and_leases_on_new_ids(store_factory: StoreFactory) -> None:
    store = store_factory()
    store.acquire_lease("fresh")  # before the session exists (a new Agent does this)
    store.create_session([SYSTEM], session_id="fresh")
    store.acquire_lease("fresh")
    store.release_all()
    assert not store.holds_lease("fresh")
    store_factory().update("fresh", title="free")


def test_a_second_process_is_refused_at_once_naming_us(store_factory: StoreFactory,
                                                       sid: str) -> None:
    store = store_factory("analysis.ipynb")
    with holding(store, sid):
        result = run_child(store_factory.child_env(), "try", sid)
    assert result["error"] == "SessionLockedError"
    assert result["pid"] == os.getpid()
    holder = result["holder"]
    assert (holder["pid"], holder["user"], holder["host"], holder["label"]) == (
        os.getpid(), me(), socket.gethostname(), "analysis.ipynb")
    assert holder["since"] is not None
    assert str(os.getpid()) in str(result["message"])
    assert run_child(store_factory.child_env(), "try", sid) == {"ok": True}  # released
    assert len(store.load_session(sid).messages) == 2


def test_we_are_refused_naming_the_holder_then_succeed_after_it_exits(
    store_factory: StoreFactory, sid: str
) -> None:
    store = store_factory()
    before_hold = datetime.now(UTC)
    holder = Holder(store_factory.child_env(), sid, "child.ipynb")
    try:
        before = store.load_session(sid)
        started = time.monotonic()
        with pytest.raises(SessionLockedError) as info:
            store.update(sid, title="mine")
        assert time.monotonic() - started < 1.0  # at once, not after waiting
        err = info.value
        assert err.pid == holder.pid
        seen = err.holder
        assert seen is not None
        assert (seen.pid, seen.label, seen.host, seen.user) == (
            holder.pid, "child.ipynb", socket.gethostname(), me())
        assert seen.since is not None and before_hold - timedelta(seconds=1) <= seen.since
        message = str(err)
        assert message.startswith(
            f"session {sid!r} is in use by {seen.user} on {seen.host} (pid {holder.pid}, "
            "child.ipynb, since ")
        assert message.endswith("; close it there or end that process, then try again")
        assert store.load_session(sid) == before  # nothing was written
        (entry,) = store.list_sessions()
        assert (entry.status, entry.holder) == ("in use", seen)
        assert store.describe_session(sid).holder == seen
    finally:
        holder.exit()
    store.update(sid, title="mine")
    assert store.load_session(sid).title == "mine"
    assert store.describe_session(sid).holder is None
    assert [(s.status, s.holder) for s in store.list_sessions()] == [("idle", None)]


def test_the_lease_is_free_after_the_holder_is_killed(store_factory: StoreFactory, sid: str,
                                                      holder: Holder) -> None:
    store = store_factory()
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
    seen = store.describe_session(sid).holder
    assert seen is not None and seen.pid == os.getpid()


def test_a_forked_child_never_keeps_the_lease_alive(store_factory: StoreFactory,
                                                    sid: str) -> None:
    """The holder forks (user code in the kernel), then dies: the lease is freed as if
    the child did not exist."""
    holder = Holder(store_factory.child_env(), sid, fork=True)
    try:
        store = store_factory()
        with pytest.raises(SessionLockedError):
            store.acquire_lease(sid)
        holder.kill()
        assert holder.forked is not None
        os.kill(holder.forked, 0)  # the forked child is still alive...

        def taken() -> bool:
            try:
                store.acquire_lease(sid)
            except SessionLockedError:
                return False
            return True

        eventually(taken)  # ...and the session is free
        assert store.holds_lease(sid)
        os.kill(holder.forked, 0)
    finally:
        holder.stop()


def test_reentrant_within_one_store(store_factory: StoreFactory, sid: str) -> None:
    store = store_factory()
    store.acquire_lease(sid)
    with holding(store, sid), holding(store, sid):
        store.update(sid, title="nested")  # takes the lease again inside
    assert store.holds_lease(sid)
    assert run_child(store_factory.child_env(), "try", sid)["error"] == "SessionLockedError"
    store.acquire_lease(sid)
    store.release_lease(sid)
    assert store.holds_lease(sid)  # one acquire still outstanding
    store.release_lease(sid)
    assert not store.holds_lease(sid)
    store.release_lease(sid)  # releasing a lease not held does nothing
    assert run_child(store_factory.child_env(), "try", sid) == {"ok": True}


def test_release_all_drops_every_lease(store_factory: StoreFactory) -> None:
    store = store_factory()
    a = store.create_session([SYSTEM], session_id="a")
    b = store.create_session([SYSTEM], session_id="b")
    store.acquire_lease(a)
    store.acquire_lease(a)
    store.acquire_lease(b)
    store.release_all()
    assert not store.holds_lease(a) and not store.holds_lease(b)
    assert run_child(store_factory.child_env(), "try", a) == {"ok": True}
    assert run_child(store_factory.child_env(), "try", b) == {"ok": True}


def test_listing_status_values(store_factory: StoreFactory, holder: Holder) -> None:
    store = store_factory()
    store.create_session([], session_id="mine")
    store.create_session([], session_id="nobody")
    store.acquire_lease("mine")
    statuses = {s.id: s.status for s in store.list_sessions()}
    assert statuses == {"mine": "active", "shared": "in use", "nobody": "idle"}
    assert {s.id: s.status for s in store_factory().list_sessions()} == {
        "mine": "in use", "shared": "in use", "nobody": "idle"}
    holder.kill()
    eventually(lambda: {s.id: s.status for s in store.list_sessions()}
               == {"mine": "active", "shared": "idle", "nobody": "idle"})


def _forked_child(store: Store, sid: str, queue: Any) -> None:
    held = store.holds_lease(sid)
    try:
        store.acquire_lease(sid)
        queue.put((held, "acquired"))
    except SessionLockedError as err:
        queue.put((held, err.pid))


def test_a_lease_is_not_inherited_through_fork(store_factory: StoreFactory, sid: str) -> None:
    store = store_factory()
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
    store.save(sid, [SYSTEM, {"role": "user", "content": "parent still works"}])
    assert len(store.load_session(sid).transcript) == 2




def test_every_change_is_refused_while_another_process_holds_the_lease(
    store_factory: StoreFactory, sid: str, holder: Holder
) -> None:
    """Short management operations take the lease too (design notes "Leases")."""
    store = store_factory()
    before = store.load_session(sid)
    refused = []
    for name, call in MUTATIONS.items():
        with pytest.raises(SessionLockedError) as info:
            call(store, sid)
        assert info.value.pid == holder.pid, name
        assert str(holder.pid) in str(info.value), name
        refused.append(name)
    assert refused == list(MUTATIONS)
    assert store.load_session(sid) == before  # nothing was written
    holder.exit()
    for call in MUTATIONS.values():  # free now: every one of them goes through, in order
        call(store, sid)
    assert not store.exists(sid)  # delete_session ran last


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_changing_an_unknown_session_leaves_nothing_behind(store: Store, name: str) -> None:
    store.create_session([SYSTEM], session_id="real")
    with pytest.raises(SessionNotFoundError):
        MUTATIONS[name](store, "nosuchid")
    assert not store.holds_lease("nosuchid")
    with pytest.raises(SessionNotFoundError):  # nobody holds it: it is not there
        store.describe_session("nosuchid")
    assert not store.exists("nosuchid")
    assert [s.id for s in store.list_sessions()] == ["real"]
