"""The team store's tables in the schema ``jupyter_agent``, made by ordered migrations
(design notes, "The team store (PostgreSQL)"). JSON columns are ``json``: text kept as
written. Row-level security (migration 4) shows a role its own rows and those shared with
it, to read only; ``team.sql`` gives each user a role.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jupyter_agent.errors import StoreSchemaError, StoreUnavailableError
from jupyter_agent.store.postgres.url import driver

if TYPE_CHECKING:
    import psycopg

SCHEMA = "jupyter_agent"
_MINE = "owner_role = current_user"
# the advisory lock taken while migrating ("jupyter-" in ASCII); a lease key (a 64-bit
# hash) equals it only by chance
_MIGRATION_LOCK = 0x6A7570797465722D


@dataclass(frozen=True)
class Migration:
    """One step of the schema, applied once in order (versions 1, 2, 3, ... without gaps)."""

    version: int
    name: str
    statements: tuple[str, ...]


# the schema's history, oldest first: add steps at the end, never change a shipped one
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "sessions, transcript messages and leases", (
        f"""CREATE TABLE {SCHEMA}.sessions (
            sid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            project text NOT NULL,
            id text NOT NULL,
            schema_version integer NOT NULL,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            summary text NOT NULL DEFAULT '',
            title text NOT NULL DEFAULT '',
            archived boolean NOT NULL DEFAULT false,
            project_root text,
            owner_user text NOT NULL DEFAULT '',
            owner_host text NOT NULL DEFAULT '',
            context_head json NOT NULL DEFAULT '[]',
            context_from integer NOT NULL DEFAULT 0,
            transcript_len integer NOT NULL DEFAULT 0,
            compactions json NOT NULL DEFAULT '[]',
            state json NOT NULL DEFAULT '{{}}',
            parent json,
            first_prompt text,
            cost_usd double precision NOT NULL DEFAULT 0,
            tool_calls bigint NOT NULL DEFAULT 0,
            revision bigint NOT NULL DEFAULT 0,
            UNIQUE (project, id)
        )""",
        f"""CREATE INDEX sessions_newest ON {SCHEMA}.sessions
            (project, updated_at DESC, id DESC)""",
        f"""CREATE INDEX sessions_newest_unarchived ON {SCHEMA}.sessions
            (project, updated_at DESC, id DESC) WHERE NOT archived""",
        f"""CREATE TABLE {SCHEMA}.messages (
            sid bigint NOT NULL REFERENCES {SCHEMA}.sessions (sid) ON DELETE CASCADE,
            seq integer NOT NULL,
            body json NOT NULL,
            PRIMARY KEY (sid, seq)
        )""",
        f"""CREATE TABLE {SCHEMA}.leases (
            project text NOT NULL,
            session_id text NOT NULL,
            lock_key bigint NOT NULL,
            backend_pid integer NOT NULL,
            pid integer,
            user_name text NOT NULL DEFAULT '',
            host text NOT NULL DEFAULT '',
            since timestamptz,
            label text NOT NULL DEFAULT '',
            PRIMARY KEY (project, session_id)
        )""",
    )),
    Migration(2, "keys of a record this version does not know", (
        f"ALTER TABLE {SCHEMA}.sessions ADD COLUMN extra json",
    )),
    Migration(3, "figures of sessions", (
        f"""CREATE TABLE {SCHEMA}.figures (
            sid bigint NOT NULL REFERENCES {SCHEMA}.sessions (sid) ON DELETE CASCADE,
            figure_id text NOT NULL,
            media_type text NOT NULL,
            data bytea NOT NULL,
            saved_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (sid, figure_id)
        )""",
    )),
    Migration(4, "each role its own sessions (row-level security), shares, per-user keys", (
        # rows made before belong to the role that migrates (see docs/teams.md)
        f"ALTER TABLE {SCHEMA}.sessions ADD COLUMN owner_role name NOT NULL "
        "DEFAULT current_user",
        f"ALTER TABLE {SCHEMA}.leases ADD COLUMN owner_role name NOT NULL DEFAULT current_user",
        f"DELETE FROM {SCHEMA}.leases",  # hints only; their lock keys change with the keys
        # a row another role wrote (unseen) never stands in the way of one's own
        f"ALTER TABLE {SCHEMA}.leases DROP CONSTRAINT leases_pkey, "
        "ADD PRIMARY KEY (project, session_id, owner_role)",
        # project keys name the user: user@remote, or user@host:path (paths.project_key)
        f"""UPDATE {SCHEMA}.sessions SET project = CASE WHEN project LIKE '/%'
            THEN owner_user || '@' || owner_host || ':' || project
            ELSE owner_user || '@' || project END""",
        # a share names its session's owner: the key checks it (keys see every row)
        f"ALTER TABLE {SCHEMA}.sessions ADD UNIQUE (sid, owner_role)",
        f"""CREATE TABLE {SCHEMA}.shares (
            sid bigint NOT NULL,
            grantee name NOT NULL,
            owner_role name NOT NULL DEFAULT current_user,
            PRIMARY KEY (sid, grantee),
            FOREIGN KEY (sid, owner_role) REFERENCES {SCHEMA}.sessions (sid, owner_role)
                ON DELETE CASCADE ON UPDATE CASCADE
        )""",
        *(statement for table in ("sessions", "messages", "figures", "leases", "shares")
          for statement in (f"ALTER TABLE {SCHEMA}.{table} ENABLE ROW LEVEL SECURITY",
                            f"ALTER TABLE {SCHEMA}.{table} FORCE ROW LEVEL SECURITY")),
        f"CREATE POLICY own ON {SCHEMA}.sessions USING ({_MINE}) WITH CHECK ({_MINE})",
        f"""CREATE POLICY shared ON {SCHEMA}.sessions FOR SELECT USING (
            EXISTS (SELECT 1 FROM {SCHEMA}.shares h WHERE h.sid = sessions.sid))""",
        *(policy for table in ("messages", "figures") for policy in (
            f"""CREATE POLICY readable ON {SCHEMA}.{table} FOR SELECT USING (
                EXISTS (SELECT 1 FROM {SCHEMA}.sessions s WHERE s.sid = {table}.sid))""",
            f"""CREATE POLICY own ON {SCHEMA}.{table} USING (
                EXISTS (SELECT 1 FROM {SCHEMA}.sessions s
                        WHERE s.sid = {table}.sid AND s.{_MINE}))
                WITH CHECK (EXISTS (SELECT 1 FROM {SCHEMA}.sessions s
                                    WHERE s.sid = {table}.sid AND s.{_MINE}))""",
        )),
        f"CREATE POLICY own ON {SCHEMA}.leases USING ({_MINE}) WITH CHECK ({_MINE})",
        f"CREATE POLICY own ON {SCHEMA}.shares USING ({_MINE}) WITH CHECK ({_MINE})",
        f"""CREATE POLICY mine ON {SCHEMA}.shares FOR SELECT USING (grantee IN (
            SELECT rolname FROM pg_roles WHERE pg_has_role(current_user, oid, 'MEMBER')))""",
        # anyone may read which migrations ran; only the tables' owner records one
        f"ALTER TABLE {SCHEMA}.migrations ENABLE ROW LEVEL SECURITY",
        f"CREATE POLICY readable ON {SCHEMA}.migrations FOR SELECT USING (true)",
    )),
)


def current_version(conn: psycopg.Connection) -> int:
    """The newest migration applied to the database (0 when there is none)."""
    if conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.migrations",)).fetchone() == (None,):
        return 0
    found = conn.execute(f"SELECT coalesce(max(version), 0) FROM {SCHEMA}.migrations").fetchone()
    return int(found[0]) if found is not None else 0


def ensure_schema(conn: psycopg.Connection, shown_url: str,
                  migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Apply the migrations the database lacks, in one transaction under an advisory lock
    (two kernels starting at once do not both apply them); return the version. Nothing
    changes on ``StoreSchemaError`` (a newer schema) or ``StoreUnavailableError`` (a
    migration failed, e.g. no privilege)."""
    psycopg = driver(shown_url)
    latest = migrations[-1].version if migrations else 0
    try:
        version = current_version(conn)
        if version < latest:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                if conn.execute("SELECT to_regnamespace(%s)", (SCHEMA,)).fetchone() == (None,):
                    conn.execute(f"CREATE SCHEMA {SCHEMA}")  # needs CREATE on the database
                conn.execute(f"""CREATE TABLE IF NOT EXISTS {SCHEMA}.migrations (
                    version integer PRIMARY KEY,
                    name text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now())""")
                version = current_version(conn)  # again, under the lock
                for step in [m for m in migrations if m.version > version]:
                    for statement in step.statements:
                        conn.execute(statement)  # DDL, no parameters
                    conn.execute(f"INSERT INTO {SCHEMA}.migrations (version, name) "
                                 "VALUES (%s, %s)", (step.version, step.name))
        if version > latest:  # a newer jupyter-agent's: nothing was changed
            raise StoreSchemaError(shown_url, version, latest)
        return latest
    except psycopg.OperationalError:
        raise  # the connection: the caller knows what to do
    except psycopg.Error as err:
        reason = " ".join(str(err).split())
        raise StoreUnavailableError(
            shown_url, f"cannot create or upgrade the {SCHEMA} tables ({reason}); a user who "
                       "may create schemas in this database must connect once first",
        ) from None
