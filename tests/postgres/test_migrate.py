"""Copying every session between the JSON files and PostgreSQL, verified and idempotent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from jupyter_agent.store import FileStore, SessionState, Usage
from jupyter_agent.store.migrate import migrate_sessions
from jupyter_agent.store.postgres import PostgresStore

SYSTEM = {"role": "system", "content": "s"}


def fill(store: FileStore) -> list[str]:
    a = store.create_session([SYSTEM, {"role": "user", "content": "penguins"}], title="A")
    store.save(a, [SYSTEM, {"role": "user", "content": "penguins"},
                   {"role": "assistant", "content": "bills"}],
               SessionState(tool_calls=3, usage=Usage(cost_usd=0.5, calls=2)))
    store.compact(a, [SYSTEM, {"role": "user", "content": "summary"}], summary="s")
    store.update(a, summary="Goal: penguins.")
    b = store.create_session([SYSTEM, {"role": "tool", "tool_call_id": "c", "content": "\x00"}])
    store.update(b, archived=True)
    c = store.create_session([])
    return [a, b, c]


def test_files_to_postgres_and_back(tmp_path: Path, store: PostgresStore) -> None:
    files = FileStore(tmp_path / "files")
    ids = fill(files)
    seen: list[tuple[str, str]] = []
    result = migrate_sessions(files, store, on_session=lambda sid, what: seen.append((sid, what)))
    assert sorted(result.copied) == sorted(ids) and result.ok
    assert (result.verified, result.source_count) == (3, 3)
    assert sorted(seen) == sorted((sid, "copied") for sid in ids)
    for sid in ids:
        assert store.load_session(sid) == files.load_session(sid)
    again = migrate_sessions(files, store)  # running twice copies nothing twice
    assert again.copied == () and sorted(again.skipped) == sorted(ids) and again.ok
    assert len(store.list_sessions(include_archived=True)) == 3
    back = FileStore(tmp_path / "back")
    result = migrate_sessions(store, back)
    assert result.ok and len(result.copied) == 3
    for sid in ids:
        assert back.load_session(sid) == files.load_session(sid)


def test_a_session_that_differs_in_the_target_is_left_alone(
    tmp_path: Path, make_store: Callable[..., PostgresStore]
) -> None:
    files = FileStore(tmp_path / "files")
    sid = files.create_session([SYSTEM], session_id="same")
    target = make_store()
    target.create_session([SYSTEM, {"role": "user", "content": "other work"}], session_id="same")
    result = migrate_sessions(files, target)
    assert result.conflicts == ("same",) and not result.ok
    assert "left alone: same" in result.summary()
    assert len(target.load_session(sid).transcript) == 2


def test_unreadable_sessions_are_reported(tmp_path: Path, store: PostgresStore) -> None:
    files = FileStore(tmp_path / "files")
    files.create_session([SYSTEM], session_id="good")
    files.create_session([SYSTEM], session_id="locked")
    other = PostgresStore(store._link._url, tmp_path, project=store.project)
    try:
        other.acquire_lease("locked")  # someone holds that ID in the target
        result = migrate_sessions(files, store)
    finally:
        other.close()
    assert result.copied == ("good",)
    assert [sid for sid, _ in result.unreadable] == ["locked"]
    assert "in use" in result.unreadable[0][1]
    assert migrate_sessions(files, store).copied == ("locked",)
