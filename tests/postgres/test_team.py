"""The team store as a team uses it: several machines on one database, projects, owners,
pages of a long listing, and how saves touch the tables (design notes "The team store
(PostgreSQL)")."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from jupyter_agent.paths import current_user
from jupyter_agent.store.engine import holding
from jupyter_agent.store.postgres import PostgresStore
from tests.postgres.server import PgCluster
from tests.processes import CHILD, Holder, eventually, store_env

SYSTEM = {"role": "system", "content": "s"}


def xmins(pg: PgCluster, project: str, sid: str) -> list[tuple[object, ...]]:
    """``(seq, xmin)`` of a session's transcript rows: which transaction wrote each."""
    return pg.admin(
        "SELECT m.seq, m.xmin::text FROM jupyter_agent.messages m JOIN jupyter_agent.sessions s "
        f"USING (sid) WHERE s.project = '{project}' AND s.id = '{sid}' ORDER BY m.seq",
        dbname=pg.dbname)


def session_xmin(pg: PgCluster, project: str, sid: str) -> object:
    return pg.admin(f"SELECT xmin::text FROM jupyter_agent.sessions WHERE project = "
                    f"'{project}' AND id = '{sid}'", dbname=pg.dbname)[0][0]


def test_two_machines_share_one_database(pg: PgCluster, tmp_path: Path, project: str,
                                         store: PostgresStore) -> None:
    """Two kernels with their own memory directories (two "machines") write at once."""
    envs = {name: store_env(tmp_path / name, url=pg.url(), project=project)
            for name in ("alpha", "beta")}
    procs = {name: subprocess.Popen([sys.executable, CHILD, "create", name, "20"],
                                    stdout=subprocess.PIPE, text=True, env=env)
             for name, env in envs.items()}
    outputs = {name: proc.communicate(timeout=120)[0] for name, proc in procs.items()}
    assert all(proc.returncode == 0 for proc in procs.values())
    for name, out in outputs.items():  # each machine lists the project's sessions
        assert name in {e["id"] for e in json.loads(out)["listing"]}
    listing = {e.id: e for e in store.list_sessions()}
    assert set(listing) == {"alpha", "beta"}
    for name in ("alpha", "beta"):
        entry = listing[name]
        assert (entry.message_count, entry.tool_calls, entry.title) == (41, 20, f"{name} title")
        assert (entry.owner_user, entry.owner_host) == (current_user(), socket.gethostname())
        record = store.load_session(name)
        assert record.messages[0]["content"] == f"from {tmp_path / name}"
        assert len(record.transcript) == 41
    assert not (tmp_path / "alpha" / "sessions").exists()  # no session files on the machines


def test_rows_of_killed_kernels_are_collected(
    make_store: Callable[..., PostgresStore], pg: PgCluster, project: str, tmp_path: Path
) -> None:
    """A killed kernel's lock is released by the server; its lease row stays, ignored,
    until collect_garbage removes it."""
    store = make_store()
    store.create_session([SYSTEM], session_id="shared")
    holder = Holder(store_env(tmp_path / "mem", url=pg.url(), project=project), "shared")
    try:
        assert store.collect_garbage() == []  # its row is backed by a live connection
        holder.kill()
        eventually(lambda: store.describe_session("shared").holder is None)
    finally:
        holder.stop()
    assert store.list_sessions()[0].status == "idle"
    assert store.collect_garbage() == ["shared"]
    assert store.collect_garbage() == []


def test_projects_do_not_see_each_other(make_store: Callable[..., PostgresStore]) -> None:
    north, south = make_store("github.com/acme/north"), make_store("github.com/acme/south")
    north.create_session([SYSTEM], session_id="same-id")
    south.create_session([SYSTEM, {"role": "user", "content": "south"}], session_id="same-id")
    assert [s.id for s in north.list_sessions()] == ["same-id"]
    assert north.load_session("same-id").transcript == [SYSTEM]
    assert len(south.load_session("same-id").transcript) == 2
    north.acquire_lease("same-id")
    south.update("same-id", title="leases are per project too")
    north.delete_session("same-id")
    assert south.exists("same-id") and not north.exists("same-id")


def test_owner_is_the_hub_user_when_there_is_one(
    make_store: Callable[..., PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTERHUB_USER", "alice@example.org")
    store = make_store(label="analysis.ipynb")
    sid = store.create_session([SYSTEM])
    with holding(store, sid):
        holder = store.describe_session(sid).holder
    (entry,) = store.list_sessions()
    assert entry.owner_user == "alice@example.org"
    assert holder is not None and (holder.user, holder.label) == ("alice@example.org",
                                                                   "analysis.ipynb")


def test_listing_pages(store: PostgresStore) -> None:
    for k in range(7):
        store.create_session([SYSTEM], session_id=f"s{k}")
    store.update("s3", archived=True)
    first = store.list_sessions(limit=3)
    assert [e.id for e in first] == ["s6", "s5", "s4"]
    second = store.list_sessions(limit=3, after=first[-1])
    assert [e.id for e in second] == ["s2", "s1", "s0"]
    assert store.list_sessions(limit=3, after=second[-1]) == []
    everything = store.list_sessions(include_archived=True, limit=4)
    assert [e.id for e in everything] == ["s6", "s5", "s4", "s3"]
    with pytest.raises(ValueError, match="at least 1"):
        store.list_sessions(limit=0)


def test_newest_page_of_many_sessions_is_read_from_the_index(
    pg: PgCluster, store: PostgresStore, project: str
) -> None:
    pg.admin(
        "INSERT INTO jupyter_agent.sessions (project, id, schema_version, created_at, "
        "updated_at, summary, archived, owner_role) SELECT "
        f"'{project}', 'bulk' || g, 1, now() - g * interval '1 second', "
        "now() - g * interval '1 second', 'summary ' || g, g % 10 = 0, "
        f"'{pg.user}' "
        "FROM generate_series(1, 100000) g", dbname=pg.dbname)
    pg.admin("ANALYZE jupyter_agent.sessions", dbname=pg.dbname)
    page = store.list_sessions(limit=50)
    assert [e.id for e in page[:3]] == ["bulk1", "bulk2", "bulk3"]
    assert len(page) == 50 and all(not e.archived for e in page)
    assert page[0].summary == "summary 1"
    from jupyter_agent.store.postgres.rows import listing_query

    for archived in (False, True):
        sql = listing_query(include_archived=archived, limit=50, after=False)
        plan = "\n".join(str(r[0]) for r in pg.admin(
            "EXPLAIN " + sql.replace("%(project)s", f"'{project}'").replace("%(limit)s", "50")
            .replace("%(horizon)s", "now() + interval '5 minutes'"),
            dbname=pg.dbname))
        assert "Index Scan" in plan and "sessions_newest" in plan, plan
        assert "Seq Scan on sessions" not in plan, plan


def test_a_save_point_appends_rows_and_rewrites_none(pg: PgCluster, store: PostgresStore,
                                                     project: str) -> None:
    sid = store.create_session([SYSTEM])
    store.acquire_lease(sid)
    messages = [SYSTEM]
    for k in range(5):
        messages = [*messages, {"role": "user", "content": f"q{k}"},
                    {"role": "assistant", "content": f"a{k}"}]
        store.save(sid, messages, {"tool_calls": k})
    before = xmins(pg, project, sid)
    assert [seq for seq, _ in before] == list(range(11))
    messages = [*messages, {"role": "user", "content": "one more"}]
    store.save(sid, messages, {"tool_calls": 9})
    after = xmins(pg, project, sid)
    assert after[:11] == before  # old rows untouched
    (new_seq, new_xmin), = after[11:]
    assert new_seq == 11
    assert session_xmin(pg, project, sid) == new_xmin  # one transaction: rows, state, row
    store.compact(sid, [SYSTEM, {"role": "user", "content": "summary"}], summary="s")
    assert xmins(pg, project, sid) == after  # compaction writes no transcript row
    assert store.load_session(sid).transcript == messages
