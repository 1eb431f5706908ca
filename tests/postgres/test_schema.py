"""Tables created and upgraded by the ordered migrations list, recorded in a table."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_agent.errors import CorruptSessionError, StoreSchemaError
from jupyter_agent.store.postgres import PostgresStore, prepare_database
from jupyter_agent.store.postgres.schema import MIGRATIONS, Migration
from tests.postgres.server import PgCluster

EXTRA = Migration(len(MIGRATIONS) + 1, "a column for a later feature", (
    "ALTER TABLE jupyter_agent.sessions ADD COLUMN later text",
))


def applied(pg: PgCluster, dbname: str) -> list[tuple[object, ...]]:
    return pg.admin("SELECT version, name FROM jupyter_agent.migrations ORDER BY version",
                    dbname=dbname)


def test_migrations_are_numbered_in_order() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert all(m.name and m.statements for m in MIGRATIONS)


def test_first_connection_creates_the_tables_once(pg: PgCluster, tmp_path: Path) -> None:
    dbname = pg.new_database()
    url = pg.url(dbname=dbname)
    first = PostgresStore(url, tmp_path, project="p")
    second = PostgresStore(url, tmp_path, project="p")
    try:
        assert first.list_sessions() == [] and second.list_sessions() == []
        assert applied(pg, dbname) == [(m.version, m.name) for m in MIGRATIONS]
    finally:
        first.close()
        second.close()


def test_later_migrations_are_applied_in_order_and_newer_databases_refused(
    pg: PgCluster, tmp_path: Path
) -> None:
    dbname = pg.new_database()
    url = pg.url(dbname=dbname)
    old = PostgresStore(url, tmp_path, project="p")
    sid = old.create_session([{"role": "user", "content": "kept"}])
    old.close()
    new = PostgresStore(url, tmp_path, project="p", migrations=(*MIGRATIONS, EXTRA))
    assert new.load_session(sid).transcript == [{"role": "user", "content": "kept"}]
    new.close()
    assert [v for v, _ in applied(pg, dbname)] == [*[m.version for m in MIGRATIONS], EXTRA.version]
    again = PostgresStore(url, tmp_path, project="p")  # code that knows fewer migrations
    with pytest.raises(StoreSchemaError) as info:
        again.list_sessions()
    assert (info.value.found, info.value.known) == (EXTRA.version, MIGRATIONS[-1].version)
    assert "upgrade jupyter-agent" in str(info.value) and pg.password not in str(info.value)
    again.close()
    assert len(applied(pg, dbname)) == len(MIGRATIONS) + 1  # nothing changed


def test_prepare_database_for_users_who_may_not_create_schemas(pg: PgCluster,
                                                              tmp_path: Path) -> None:
    dbname = pg.new_database()
    assert prepare_database(pg.url(dbname=dbname)) == MIGRATIONS[-1].version
    assert prepare_database(pg.url(dbname=dbname)) == MIGRATIONS[-1].version


def test_a_record_from_a_newer_jupyter_agent_is_refused_not_rewritten(
    pg: PgCluster, store: PostgresStore, project: str
) -> None:
    sid = store.create_session([{"role": "user", "content": "x"}])
    pg.admin(f"UPDATE jupyter_agent.sessions SET schema_version = 99 WHERE project = '{project}'",
             dbname=pg.dbname)
    with pytest.raises(CorruptSessionError) as info:
        store.load_session(sid)
    assert sid in str(info.value) and "schema_version 99" in str(info.value)
    with pytest.raises(CorruptSessionError):
        store.save(sid, [{"role": "user", "content": "x"},
                                  {"role": "user", "content": "y"}])
    assert store.list_sessions() == []  # listing leaves it out
    rows = pg.admin(f"SELECT schema_version, transcript_len FROM jupyter_agent.sessions "
                    f"WHERE project = '{project}'", dbname=pg.dbname)
    assert rows == [(99, 1)]


def test_rows_made_before_roles_keep_working_after_the_migration(pg: PgCluster,
                                                                  tmp_path: Path) -> None:
    """Migration 4 gives old rows to the migrating role and renames their project keys."""
    from jupyter_agent.paths import project_key
    from jupyter_agent.store.postgres.schema import ensure_schema
    from jupyter_agent.store.postgres.url import Link

    dbname = pg.new_database()
    user = f"carol_{dbname}"  # roles are the cluster's: a name of this test's own
    url = pg.url(dbname=dbname)
    link = Link(url, lambda conn, first: None)
    ensure_schema(link.connection(), link.shown_url, MIGRATIONS[:3])
    link.close()
    for project, sid in (("/home/jovyan/work", "by-path"), ("github.com/acme/a", "by-remote")):
        pg.admin("INSERT INTO jupyter_agent.sessions (project, id, schema_version, created_at, "
                 "updated_at, owner_user, owner_host) VALUES "
                 f"('{project}', '{sid}', 1, now(), now(), '{user}', 'node-1')", dbname=dbname)
    assert prepare_database(url) == MIGRATIONS[-1].version
    by_path = PostgresStore(url, tmp_path, project=project_key("/home/jovyan/work",
                                                               user=user, host="node-1"))
    repo = tmp_path / "clone"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:acme/a\n')
    by_remote = PostgresStore(url, tmp_path, project=project_key(repo, user=user))
    try:
        assert [e.id for e in by_path.list_sessions()] == ["by-path"]
        assert [e.id for e in by_remote.list_sessions()] == ["by-remote"]
        assert by_remote.describe_session("by-remote").owner_role == pg.user
    finally:
        by_path.close()
        by_remote.close()
    pg.admin(f"CREATE ROLE {user}", dbname=dbname)
    try:  # the reassignment docs/teams.md gives
        pg.admin("UPDATE jupyter_agent.sessions s SET owner_role = r.rolname "
                 "FROM pg_roles r WHERE r.rolname = s.owner_user", dbname=dbname)
        assert pg.admin("SELECT DISTINCT owner_role::text FROM jupyter_agent.sessions",
                        dbname=dbname) == [(user,)]
    finally:
        pg.admin(f"DROP OWNED BY {user}; DROP ROLE {user}", dbname=dbname)
