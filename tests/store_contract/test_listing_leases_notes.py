"""Contract: listing, leases and notes (design §2, §7, §10)."""

from __future__ import annotations

import os
import threading

import pytest

from jupyter_agent.errors import SessionLockedError
from jupyter_agent.store import SessionListing, SessionState, Store, Usage
from tests.store_contract.conftest import StoreFactory

SYSTEM = {"role": "system", "content": "s"}


def test_listing_entries_order_and_archive_filter(store: Store) -> None:
    a = store.create_session([SYSTEM, {"role": "user", "content": "x" * 300}], title="A")
    store.save_state(a, SessionState(tool_calls=4, usage=Usage(cost_usd=0.25)))
    b = store.create_session([SYSTEM], title="B")
    c = store.create_session([SYSTEM], title="C")
    store.set_archived(c)
    store.write_summary(a, "newest")
    listing = store.list_sessions()
    assert [s.id for s in listing] == [a, b]
    first = listing[0]
    assert isinstance(first, SessionListing)
    record = store.load_session(a)
    assert (first.summary, first.title, first.status, first.archived) == (
        "newest", "A", "idle", False)
    assert (first.message_count, first.cost_usd, first.tool_calls) == (2, 0.25, 4)
    assert first.first_prompt == "x" * 200 and first.holder is None
    assert (first.created_at, first.updated_at) == (record.created_at, record.updated_at)
    assert [s.id for s in store.list_sessions(include_archived=True)] == [a, c, b]


def test_a_lease_excludes_other_store_objects_and_names_its_holder(
    store_factory: StoreFactory,
) -> None:
    mine, theirs = store_factory("analysis.ipynb"), store_factory("other.ipynb")
    sid = mine.create_session([SYSTEM])
    mine.acquire_lease(sid)
    assert mine.holds_lease(sid) and not theirs.holds_lease(sid)
    with pytest.raises(SessionLockedError) as info:
        theirs.set_title(sid, "mine now")
    assert info.value.holder is not None and info.value.holder.label == "analysis.ipynb"
    assert info.value.pid == os.getpid()
    holder = theirs.lease_holder(sid)
    assert holder is not None and (holder.pid, holder.label) == (os.getpid(), "analysis.ipynb")
    assert [(s.status, s.holder) for s in theirs.list_sessions()] == [("in use", holder)]
    assert [s.status for s in mine.list_sessions()] == ["active"]
    with mine.lease(sid):  # re-entrant
        mine.set_title(sid, "nested")
    assert mine.holds_lease(sid)
    mine.release_lease(sid)
    assert not mine.holds_lease(sid) and theirs.lease_holder(sid) is None
    theirs.set_title(sid, "theirs")
    assert mine.load_session(sid).title == "theirs"


def test_release_all_and_leases_on_new_ids(store_factory: StoreFactory) -> None:
    store = store_factory()
    store.acquire_lease("fresh")  # before the session exists (a new Agent does this)
    store.create_session([SYSTEM], session_id="fresh")
    store.acquire_lease("fresh")
    store.release_all()
    assert not store.holds_lease("fresh")
    store_factory().set_title("fresh", "free")


def test_notes(store_factory: StoreFactory) -> None:
    store = store_factory()
    assert store.read_notes("project") == ""
    store.write_notes("project", "uses pandas\n")
    store.append_note("project", "plots  with\nseaborn")
    store.append_note("user", "likes short answers")
    assert store.read_notes("project") == "uses pandas\n- plots with seaborn\n"
    assert store.read_notes("user") == "- likes short answers\n"
    with pytest.raises(ValueError):
        store.read_notes("team")  # type: ignore[arg-type]


def test_notes_appended_at_once_are_all_kept(store_factory: StoreFactory) -> None:
    stores = [store_factory() for _ in range(4)]

    def append(k: int) -> None:
        for i in range(10):
            stores[k].append_note("project", f"note {k}-{i}")

    threads = [threading.Thread(target=append, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = stores[0].read_notes("project").splitlines()
    assert sorted(lines) == sorted(f"- note {k}-{i}" for k in range(4) for i in range(10))
