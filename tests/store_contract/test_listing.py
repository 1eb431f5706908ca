"""Contract: listing, pages of it, one session's entry (design notes "Listing")."""

from __future__ import annotations

import pytest

from jupyter_agent.errors import SessionNotFoundError
from jupyter_agent.store import ForkOrigin, SessionListing, SessionState, Store, Usage, holding
from tests.store_contract.conftest import StoreFactory

SYSTEM = {"role": "system", "content": "s"}


def ids(listing: list[SessionListing]) -> list[str]:
    return [s.id for s in listing]


def test_listing_entries_order_and_archive_filter(store: Store) -> None:
    a = store.create_session([SYSTEM, {"role": "user", "content": "x" * 300}], title="A")
    store.save(a, state=SessionState(tool_calls=4, usage=Usage(cost_usd=0.25)))
    b = store.create_session([SYSTEM], title="B")
    c = store.create_session([SYSTEM], title="C")
    store.update(c, archived=True)
    store.update(a, summary="newest")
    listing = store.list_sessions()
    assert ids(listing) == [a, b]
    first = listing[0]
    assert isinstance(first, SessionListing)
    record = store.load_session(a)
    assert (first.summary, first.title, first.status, first.archived) == (
        "newest", "A", "idle", False)
    assert (first.message_count, first.cost_usd, first.tool_calls) == (2, 0.25, 4)
    assert first.first_prompt == "x" * 200 and first.holder is None
    assert (first.created_at, first.updated_at) == (record.created_at, record.updated_at)
    assert ids(store.list_sessions(include_archived=True)) == [a, c, b]
    listed = {s.id: s.archived for s in store.list_sessions(include_archived=True)}
    assert listed == {a: False, b: False, c: True}


def test_every_field_of_an_entry(store: Store) -> None:
    sid = store.create_session(
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": "x" * 300}]},
            {"role": "assistant", "content": "ok"},
        ],
        title="T",
    )
    store.save(sid, state=SessionState(tool_calls=4, usage=Usage(cost_usd=0.25)))
    (entry,) = store.list_sessions()
    record = store.load_session(sid)
    assert entry.shared_with == ()  # the owner's role, where the backend has roles, varies
    # the clock is the store's own order of changes (None for a store without one)
    assert entry.clock is None or type(entry.clock) is int
    assert entry.model_dump(exclude={"owner_user", "owner_host", "owner_role", "clock"}) == {
        "id": sid,
        "updated_at": record.updated_at,
        "summary": "",
        "title": "T",
        "archived": False,
        "status": "idle",
        "created_at": record.created_at,
        "message_count": 3,
        "cost_usd": 0.25,
        "tool_calls": 4,
        "first_prompt": "x" * 200,
        "holder": None,
        "parent": None,
        "shared_with": (),
    }


def test_newest_first(store: Store) -> None:
    for sid in ("b", "c", "a"):
        store.create_session([], session_id=sid)
    assert ids(store.list_sessions()) == ["a", "c", "b"]
    store.update("c", summary="now the newest")
    assert ids(store.list_sessions()) == ["c", "a", "b"]
    store.save("b", [{"role": "user", "content": "new message"}])
    assert ids(store.list_sessions()) == ["b", "c", "a"]
    store.save("a", state=SessionState(tool_calls=1))
    assert ids(store.list_sessions()) == ["a", "b", "c"]
    store.update("c", title="a title does not move it")
    store.update("b", archived=True)
    store.update("b", archived=False)  # nor does archiving and back
    assert ids(store.list_sessions()) == ["a", "b", "c"]
    entry = store.list_sessions()[2]
    assert (entry.id, entry.summary) == ("c", "now the newest")
    assert entry.updated_at == store.load_session("c").updated_at


def test_first_prompt_is_the_first_user_message(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    assert store.list_sessions()[0].first_prompt == ""
    store.save(sid, [SYSTEM, {"role": "user", "content": "  the question  "},
                              {"role": "user", "content": "a later one"}])
    assert store.list_sessions()[0].first_prompt == "the question"


@pytest.mark.parametrize("content", ["nul \x00 here", [{"type": "text", "text": "\x00"}]])
def test_a_session_that_starts_with_a_nul_in_its_prompt_is_saved_and_listed(
    store: Store, content: object
) -> None:
    """Text columns of the team store cannot hold NUL; the message itself keeps it."""
    first = {"role": "user", "content": content}
    sid = store.create_session([first])
    assert store.load_session(sid).messages == [first]
    (entry,) = store.list_sessions()
    assert entry.id == sid and entry.first_prompt.replace("\ufffd", "\x00") in (
        "nul \x00 here", "\x00")


def test_message_count_is_the_transcript_length(store: Store) -> None:
    sid = store.create_session(
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    )
    store.compact(sid, [{"role": "user", "content": "summary"}], summary="s")
    (entry,) = store.list_sessions()
    assert entry.message_count == 2
    assert entry.first_prompt == "a"


def test_listing_sees_changes_made_by_another_store(store_factory: StoreFactory) -> None:
    store, other = store_factory(), store_factory()
    sid = store.create_session([], session_id="s1")
    assert store.list_sessions()[0].summary == ""
    other.update(sid, summary="changed elsewhere")
    assert store.list_sessions()[0].summary == "changed elsewhere"
    other.delete_session(sid)
    assert store.list_sessions() == []


def test_empty_store_lists_nothing(store: Store) -> None:
    assert store.list_sessions() == []
    assert store.list_sessions(include_archived=True) == []
    assert store.list_sessions(limit=1) == []


def test_pages(store: Store) -> None:
    for k in range(7):
        store.create_session([SYSTEM], session_id=f"s{k}")
    store.update("s3", archived=True)
    first = store.list_sessions(limit=3)
    assert ids(first) == ["s6", "s5", "s4"]
    second = store.list_sessions(limit=3, after=first[-1])
    assert ids(second) == ["s2", "s1", "s0"]
    assert store.list_sessions(limit=3, after=second[-1]) == []
    assert ids(store.list_sessions(after=first[0])) == ["s5", "s4", "s2", "s1", "s0"]
    everything = store.list_sessions(include_archived=True, limit=4)
    assert ids(everything) == ["s6", "s5", "s4", "s3"]
    assert ids(store.list_sessions(include_archived=True, limit=2, after=everything[-1])) == [
        "s2", "s1"]
    assert store.list_sessions(limit=1) == store.list_sessions()[:1]
    assert first[0] == store.list_sessions()[0]  # same entries, fields and all
    for bad in (0, -1):
        with pytest.raises(ValueError, match="at least 1"):
            store.list_sessions(limit=bad)


def test_a_page_continues_where_the_last_one_ended(store: Store) -> None:
    for k in range(4):
        store.create_session([SYSTEM], session_id=f"s{k}")
    first = store.list_sessions(limit=2)
    assert ids(first) == ["s3", "s2"]
    store.update("s0", summary="updated meanwhile")  # moves to the top: the first page
    assert ids(store.list_sessions(limit=2, after=first[-1])) == ["s1"]
    assert ids(store.list_sessions(limit=2)) == ["s0", "s3"]


def test_describe_one_session(store_factory: StoreFactory) -> None:
    store = store_factory()
    sid = store.create_session([SYSTEM, {"role": "user", "content": "hello"}], title="T")
    store.save(sid, state=SessionState(tool_calls=2, usage=Usage(cost_usd=0.5)))
    store.create_session(record=store.load_session(sid).model_copy(
        update={"id": "fork", "parent": ForkOrigin(session_id=sid, turn=1)}))
    store.update("fork", archived=True)
    (listed,) = store.list_sessions()
    assert store.describe_session(sid) == listed
    fork = store.describe_session("fork")  # archived: described all the same
    assert fork == {s.id: s for s in store.list_sessions(include_archived=True)}["fork"]
    assert fork.parent == ForkOrigin(session_id=sid, turn=1) and fork.archived
    with holding(store, sid):
        assert store.describe_session(sid).status == "active"
        other = store_factory().describe_session(sid)
        assert other.status == "in use" and other.holder == store.describe_session(sid).holder
    store.delete_session("fork")
    with pytest.raises(SessionNotFoundError):
        store.describe_session("fork")


def test_a_session_dated_in_the_future_is_never_listed_nor_the_newest(store: Store) -> None:
    """A record claiming a time ahead of the clock (a crafted ``updated_at`` in year 9999,
    so that it would always be resumed first) is left out of every listing, as an
    unreadable session is; describing it says why; loading it by ID still works, and its
    next change dates it by the clock again."""
    from datetime import UTC, datetime, timedelta

    from jupyter_agent.errors import CorruptSessionError
    from jupyter_agent.project import newest_session
    from jupyter_agent.store.records import CLOCK_SKEW, utc_now

    mine = store.create_session([SYSTEM, {"role": "user", "content": "mine"}], title="mine")
    record = store.load_session(mine)
    far = datetime(9999, 12, 31, tzinfo=UTC)
    store.create_session(record=record.model_copy(update={"id": "future", "updated_at": far,
                                                   "title": "crafted"}))
    near = utc_now() + CLOCK_SKEW - timedelta(minutes=1)  # a clock a little ahead: believed
    store.create_session(record=record.model_copy(update={"id": "skewed", "updated_at": near}))
    assert ids(store.list_sessions()) == ["skewed", mine]
    assert ids(store.list_sessions(limit=1)) == ["skewed"]
    assert ids(store.list_sessions(include_archived=True)) == ["skewed", mine]
    store.delete_session("skewed")
    assert newest_session(store) == mine
    with pytest.raises(CorruptSessionError, match=r"updated_at 9999-12-31T00:00:00.*is in the "
                                                  r"future"):
        store.describe_session("future")
    assert store.load_session("future").title == "crafted"  # by its ID, on purpose
    store.update("future", summary="now dated by the clock")
    assert ids(store.list_sessions()) == ["future", mine]
