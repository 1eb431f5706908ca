"""The store contract on the team store: listing (design §10).

Written against the ``store`` and ``make_store`` fixtures only, so that the tests can
join the contract suite shared by every backend.
"""

from __future__ import annotations

from collections.abc import Callable

from jupyter_agent.store import SessionListing, SessionState, Store, Usage


def test_newest_first(store: Store) -> None:
    for sid in ("b", "c", "a"):
        store.create_session([], session_id=sid)
    assert [s.id for s in store.list_sessions()] == ["a", "c", "b"]
    store.write_summary("c", "now the newest")
    assert [s.id for s in store.list_sessions()] == ["c", "a", "b"]
    store.save_messages("b", [{"role": "user", "content": "new message"}])
    assert [s.id for s in store.list_sessions()] == ["b", "c", "a"]
    store.set_title("a", "a title does not move it")
    assert [s.id for s in store.list_sessions()] == ["b", "c", "a"]
    entry = store.list_sessions()[1]
    assert (entry.id, entry.summary) == ("c", "now the newest")
    assert entry.updated_at == store.load_session("c").updated_at


def test_listing_fields(store: Store) -> None:
    sid = store.create_session(
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": "x" * 300}]},
            {"role": "assistant", "content": "ok"},
        ],
        title="T",
    )
    store.save_state(sid, SessionState(tool_calls=4, usage=Usage(cost_usd=0.25)))
    (entry,) = store.list_sessions()
    assert isinstance(entry, SessionListing)
    record = store.load_session(sid)
    assert entry.model_dump(exclude={"owner_user", "owner_host"}) == {
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
        "holder": None, "parent": None,
    }


def test_first_prompt_is_the_first_user_message(store: Store) -> None:
    sid = store.create_session([{"role": "system", "content": "s"}])
    assert store.list_sessions()[0].first_prompt == ""
    store.save_messages(sid, [{"role": "system", "content": "s"},
                              {"role": "user", "content": "  the question  "},
                              {"role": "user", "content": "a later one"}])
    assert store.list_sessions()[0].first_prompt == "the question"


def test_message_count_is_the_transcript_length(store: Store) -> None:
    sid = store.create_session(
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    )
    store.compact(sid, [{"role": "user", "content": "summary"}], summary="s")
    (entry,) = store.list_sessions()
    assert entry.message_count == 2
    assert entry.first_prompt == "a"


def test_archived_sessions_are_filtered(store: Store) -> None:
    store.create_session([], session_id="kept")
    store.create_session([], session_id="old")
    store.set_archived("old")
    assert [s.id for s in store.list_sessions()] == ["kept"]
    listed = {s.id: s.archived for s in store.list_sessions(include_archived=True)}
    assert listed == {"kept": False, "old": True}


def test_listing_sees_changes_made_by_another_store(
    store: Store, make_store: Callable[..., Store]
) -> None:
    sid = store.create_session([], session_id="s1")
    assert store.list_sessions()[0].summary == ""
    other = make_store()
    other.write_summary(sid, "changed elsewhere")
    assert store.list_sessions()[0].summary == "changed elsewhere"
    other.delete_session(sid)
    assert store.list_sessions() == []


def test_empty_store_lists_nothing(store: Store) -> None:
    assert store.list_sessions() == []
    assert store.list_sessions(include_archived=True) == []
