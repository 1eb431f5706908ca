"""The team store on a JupyterHub: two login roles (not superusers, not the tables' owner)
set up with the administrator SQL that docs/teams.md quotes; each sees and changes only
its own sessions, and what is shared with it it may read and fork, never change."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from jupyter_agent.artefacts.fork import fork_session
from jupyter_agent.cli import main as cli_main
from jupyter_agent.errors import SessionNotFoundError, SessionReadOnlyError
from jupyter_agent.paths import project_key
from jupyter_agent.project import find_project_root
from jupyter_agent.store.engine import holding
from jupyter_agent.store.postgres import PostgresStore, prepare_database
from tests.postgres.server import PgCluster
from tests.shells import magics_of

SYSTEM = {"role": "system", "content": "s"}
ASK = {"role": "user", "content": "penguins by island"}
TEAM_SQL = files("jupyter_agent.store.postgres").joinpath("team.sql").read_text()
DOCS = Path(__file__).parents[2] / "docs" / "teams.md"
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 32


@dataclass
class Hub:
    pg: PgCluster
    dbname: str
    passwords: dict[str, str]

    def url(self, role: str) -> str:
        return (f"postgresql://{role}:{quote(self.passwords[role], safe='')}@127.0.0.1:"
                f"{self.pg.port}/{self.dbname}")

    def sql(self, role: str, query: str, params: tuple[object, ...] = ()) -> list[tuple]:
        """Run SQL as ``role`` itself, as any client of the database could."""
        with psycopg.connect(self.url(role), autocommit=True) as conn:
            cur = conn.execute(query, params)  # type: ignore[arg-type]
            return list(cur.fetchall()) if cur.description else [("rows", cur.rowcount)]


@pytest.fixture(scope="module")
def hub(pg: PgCluster) -> Iterator[Hub]:
    """A database set up exactly as docs/teams.md says, with users alice and bob."""
    dbname = pg.new_database()
    passwords = {"alice": "a-" + secrets.token_hex(8), "bob": "b-" + secrets.token_hex(8)}
    pg.admin(TEAM_SQL.replace("'change me'", f"'{passwords['alice']}'"), dbname=dbname)
    per_user = [line for line in TEAM_SQL.splitlines() if line.startswith("CREATE ROLE alice")]
    pg.admin(per_user[0].replace("alice", "bob").replace("'change me'", f"'{passwords['bob']}'"),
             dbname=dbname)
    admin_url = f"postgresql://{pg.superuser}@/{dbname}?host={pg.socket_dir}&port={pg.port}"
    prepare_database(admin_url, role="agent_owner")
    yield Hub(pg, dbname, passwords)


@pytest.fixture
def stores(hub: Hub, tmp_path: Path) -> Iterator[dict[str, PostgresStore]]:
    """Alice's and Bob's stores, both working in ``/home/jovyan/work`` (no git remote)."""
    host = f"node-{secrets.token_hex(4)}"  # a cluster of this test's own
    made = {role: PostgresStore(hub.url(role), tmp_path / role, project=project_key(
        "/home/jovyan/work", user=role, host=host)) for role in ("alice", "bob")}
    yield made
    for store in made.values():
        store.close()


def test_the_docs_quote_the_administrator_sql() -> None:
    assert TEAM_SQL.strip() in DOCS.read_text()


def test_users_are_neither_superusers_nor_owners(hub: Hub) -> None:
    roles = hub.pg.admin("SELECT rolname, rolsuper, rolbypassrls FROM pg_roles WHERE "
                         "rolname IN ('alice', 'bob')", dbname=hub.dbname)
    assert sorted(roles) == [("alice", False, False), ("bob", False, False)]
    owners = hub.pg.admin("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = "
                          "'jupyter_agent'", dbname=hub.dbname)
    assert owners == [("agent_owner",)]


def test_each_user_sees_and_changes_only_their_own(hub: Hub,
                                                    stores: dict[str, PostgresStore]) -> None:
    alice, bob = stores["alice"], stores["bob"]
    assert alice.project != bob.project  # same folder, two users: two keys
    mine = alice.create_session([SYSTEM, ASK], title="alice's")
    alice.save_figure(mine, "fig1", PNG, "image/png")
    theirs = bob.create_session([SYSTEM], title="bob's")
    assert [e.id for e in alice.list_sessions()] == [mine]
    assert [e.id for e in bob.list_sessions()] == [theirs]
    assert alice.list_sessions()[0].owner_role == "alice"
    for attempt in (lambda: bob.load_session(mine),
                    lambda: bob.save(mine, [SYSTEM, ASK, ASK]),
                    lambda: bob.delete_session(mine),
                    lambda: bob.read_figure(mine, "fig1"),
                    lambda: bob.share_session(mine, ["bob"])):
        with pytest.raises((SessionNotFoundError, LookupError)) as info:
            attempt()
        assert "\n" not in str(info.value) and hub.passwords["bob"] not in str(info.value)
    with pytest.raises(SessionNotFoundError, match=f"no saved session '{mine}'"):
        bob.load_session(mine)
    assert alice.load_session(mine).transcript == [SYSTEM, ASK]  # untouched


def test_the_database_enforces_it_whatever_the_client(hub: Hub,
                                                       stores: dict[str, PostgresStore]) -> None:
    mine = stores["alice"].create_session([SYSTEM, ASK])
    stores["alice"].save_figure(mine, "fig1", PNG, "image/png")
    (sid,) = hub.sql("alice", "SELECT sid FROM jupyter_agent.sessions WHERE id = %s", (mine,))[0]
    for table in ("sessions", "messages", "figures"):  # bob's own rows only
        rows = hub.sql("bob", f"SELECT count(*) FROM jupyter_agent.{table} WHERE sid = %s",
                       (sid,))
        assert rows == [(0,)], table
    assert hub.sql("bob", "UPDATE jupyter_agent.sessions SET title = 'x' WHERE sid = %s",
                   (sid,)) == [("rows", 0)]
    assert hub.sql("bob", "DELETE FROM jupyter_agent.sessions WHERE sid = %s",
                   (sid,)) == [("rows", 0)]
    assert hub.sql("bob", "DELETE FROM jupyter_agent.leases") == [("rows", 0)]
    for forged in (
        ("INSERT INTO jupyter_agent.messages (sid, seq, body) VALUES (%s, 9, '{}')", (sid,)),
        ("INSERT INTO jupyter_agent.shares (sid, grantee, owner_role) "
         "VALUES (%s, 'bob', 'alice')", (sid,)),
        ("INSERT INTO jupyter_agent.sessions (project, id, schema_version, created_at, "
         "updated_at, owner_role) VALUES ('p', 'x', 1, now(), now(), 'alice')", ()),
        ("INSERT INTO jupyter_agent.migrations (version, name) VALUES (99, 'x')", ()),
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            hub.sql("bob", *forged)
    # a lease row bob writes for alice's session does not stand in her way
    hub.sql("bob", "INSERT INTO jupyter_agent.leases (project, session_id, lock_key, "
                   "backend_pid) VALUES (%s, %s, 0, 0)", (stores["alice"].project, mine))
    with holding(stores["alice"], mine):
        assert stores["alice"].holds_lease(mine)
    with pytest.raises(psycopg.errors.ForeignKeyViolation):  # a share of one's own only
        hub.sql("bob", "INSERT INTO jupyter_agent.shares (sid, grantee) VALUES (%s, 'bob')",
                (sid,))
    assert stores["alice"].load_session(mine).transcript == [SYSTEM, ASK]


def test_the_same_project_key_is_kept_apart_too(hub: Hub, tmp_path: Path) -> None:
    """Rows filed under one key (made before keys named the user) stay each role's own."""
    key = f"/home/jovyan/work/{secrets.token_hex(4)}"
    alice = PostgresStore(hub.url("alice"), tmp_path, project=key)
    bob = PostgresStore(hub.url("bob"), tmp_path, project=key)
    try:
        mine = alice.create_session([SYSTEM])
        assert bob.list_sessions() == [] and not bob.exists(mine)
        with pytest.raises(SessionNotFoundError):
            bob.update(mine, title="taken over")
    finally:
        alice.close()
        bob.close()


def test_a_shared_session_is_read_and_forked_never_changed(
    hub: Hub, stores: dict[str, PostgresStore]
) -> None:
    alice, bob = stores["alice"], stores["bob"]
    mine = alice.create_session([SYSTEM, ASK], title="shared work")
    alice.save_figure(mine, "fig1", PNG, "image/png")
    assert alice.share_session(mine, ["agent_users"]) == ["agent_users"]
    (entry,) = bob.list_sessions()
    assert (entry.id, entry.owner_role, entry.shared_with) == (mine, "alice", ("agent_users",))
    assert alice.list_sessions()[0].shared_with == ("agent_users",)
    assert bob.load_session(mine).transcript == [SYSTEM, ASK]
    assert bob.read_figure(mine, "fig1").data == PNG
    forked = fork_session(bob, mine)
    copy = bob.load_session(forked.record.id)
    assert copy.transcript == [SYSTEM, ASK] and copy.parent is not None
    assert bob.describe_session(copy.id).owner_role == "bob"
    for attempt in (lambda: bob.save(mine, [SYSTEM, ASK, ASK]),
                    lambda: bob.update(mine, title="mine now"),
                    lambda: bob.delete_session(mine),
                    lambda: bob.share_session(mine, ["bob"], undo=True),
                    lambda: bob.acquire_lease(mine)):  # as %agent_resume does
        with pytest.raises(SessionReadOnlyError) as info:
            attempt()
        assert str(info.value) == (f"session '{mine}' is 'alice''s, shared with you to read "
                                   f"only: fork it to continue (%agent_fork {mine})")
    assert hub.sql("bob", "UPDATE jupyter_agent.sessions SET title = 'x' WHERE id = %s",
                   (mine,)) == [("rows", 0)]
    assert hub.sql("bob", "DELETE FROM jupyter_agent.shares") == [("rows", 0)]
    assert alice.load_session(mine).title == "shared work"
    assert alice.share_session(mine, ["agent_users"], undo=True) == []
    assert [e.id for e in bob.list_sessions()] == [copy.id]
    with pytest.raises(SessionNotFoundError):
        bob.load_session(mine)


def test_sharing_with_a_role_the_database_lacks_is_refused(
    stores: dict[str, PostgresStore]
) -> None:
    mine = stores["alice"].create_session([SYSTEM])
    with pytest.raises(ValueError, match="the database has no role 'nobody'"):
        stores["alice"].share_session(mine, ["bob", "nobody"])
    assert stores["alice"].list_sessions()[0].shared_with == ()  # nothing changed


def test_share_magic_and_listing(hub: Hub, agent_shell: InteractiveShell, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    agent_shell.run_line_magic("config", f'AgentMagics.store_url = "{hub.url("alice")}"')
    store = magics_of(agent_shell).controller.store
    assert store.project.startswith("alice@")
    sid = store.create_session([SYSTEM, ASK], title="for the team")
    with capture_output() as out:
        agent_shell.run_line_magic("agent_share", f"{sid} bob agent_users")
    assert out.stdout == f"Session {sid} is shared with 'agent_users', 'bob'.\n"
    with capture_output() as out:
        agent_shell.run_line_magic("agent_sessions", "")
    assert "shared with agent_users, bob" in out.stdout
    for line, message in ((f"{sid} nobody", "the database has no role 'nobody'"),
                          ("nope bob", "no saved session 'nope'")):
        with pytest.raises(UsageError, match=message) as info:
            agent_shell.run_line_magic("agent_share", line)
        assert "\n" not in str(info.value)
    with capture_output() as out:
        agent_shell.run_line_magic("agent_share", f"{sid} bob agent_users --undo")
    assert out.stdout == f"Session {sid} is shared with nobody.\n"


def test_share_command_then_the_reader_lists_and_forks(
    hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_DIR", str(tmp_path / "mem"))
    as_alice = PostgresStore(hub.url("alice"), tmp_path, project=project_key(
        find_project_root(tmp_path), user="alice"))
    try:
        sid = as_alice.create_session([SYSTEM, ASK], title="look at this")
    finally:
        as_alice.close()
    for role in ("alice", "bob"):
        monkeypatch.setenv("JUPYTERHUB_USER", role)
        monkeypatch.setenv("JUPYTER_AGENT_STORE_URL", hub.url(role))
        if role == "alice":
            assert cli_main(["share", sid, "bob"]) == 0
            assert capsys.readouterr().out == f"Session {sid} is shared with 'bob'.\n"
    assert cli_main(["list"]) == 0
    listed = capsys.readouterr().out
    assert sid in listed and "as alice, shared with bob" in listed
    assert cli_main(["share", sid, "bob", "--undo"]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "shared with you to read only" in error
    assert cli_main(["fork", sid]) == 0
    with PostgresStore(hub.url("bob"), tmp_path, project=project_key(
            find_project_root(tmp_path), user="bob")) as as_bob:
        (fork, shared) = as_bob.list_sessions()
    assert (fork.owner_role, fork.parent and fork.parent.session_id) == ("bob", sid)
    assert (shared.id, shared.owner_role) == (sid, "alice")


def test_a_hostile_share_row_is_shown_as_inert_text(hub: Hub,
                                                    stores: dict[str, PostgresStore]) -> None:
    from jupyter_agent.ui.display import format_row, format_sessions_table

    sid = stores["alice"].create_session([SYSTEM])
    hub.sql("alice", "INSERT INTO jupyter_agent.shares (sid, grantee) SELECT sid, %s FROM "
                     "jupyter_agent.sessions WHERE id = %s", ("\x1b[2J<b>x</b>\n", sid))
    (entry,) = stores["alice"].list_sessions()
    assert entry.shared_with == ("\x1b[2J<b>x</b>\n",)  # the data, as stored
    for shown in (format_sessions_table([entry]), format_row(entry).owner):
        assert "\x1b" not in shown and "shared with" in shown
