"""The SQL of the team store's sessions: every statement that reads or writes them.

:class:`SessionTable` runs each statement through the store's
:class:`~jupyter_agent.store.postgres.link.Link` (reconnecting as that module says)
and knows nothing of leases or plans beyond a ``check`` callable that every write
calls first, on the connection it is about to use, so that a write never happens
after a reconnect lost the session's lease. Every write is one transaction
(:meth:`Link.transaction <jupyter_agent.store.postgres.link.Link.transaction>`);
every read is one statement, so it sees one consistent state of the session. A value
the driver cannot turn into Python (a timestamp of ``infinity``, written by hand) is
reported as :class:`~jupyter_agent.errors.CorruptSessionError` naming the session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from jupyter_agent.errors import CorruptSessionError
from jupyter_agent.store.messages import message_text
from jupyter_agent.store.postgres.decode import transcript_message
from jupyter_agent.store.postgres.leases import LIVE_LOCKS
from jupyter_agent.store.postgres.link import Link
from jupyter_agent.store.postgres.rows import HEAD_COLUMNS, Head, Plan, column_values, dumps
from jupyter_agent.store.postgres.schema import SCHEMA

if TYPE_CHECKING:
    import psycopg

__all__ = ["INSERT_COLUMNS", "READABLE", "SessionTable"]

_S = f"{SCHEMA}.sessions"
_M = f"{SCHEMA}.messages"
#: Columns of a new ``sessions`` row, as :meth:`SessionTable.insert` expects them.
INSERT_COLUMNS = (
    "project", "id", "owner_user", "owner_host", "schema_version", "created_at", "updated_at",
    "summary", "title", "archived", "project_root", "context_head", "context_from",
    "transcript_len", "compactions", "state", "parent", "first_prompt", "cost_usd", "tool_calls",
    "extra",
)
_INSERT = (f"INSERT INTO {_S} ({', '.join(INSERT_COLUMNS)}) VALUES "
           f"({', '.join(f'%({c})s' for c in INSERT_COLUMNS)}) "
           "ON CONFLICT (project, id) DO NOTHING RETURNING sid")
_EXISTS = f"SELECT 1 FROM {_S} WHERE project = %s AND id = %s"
_SID = f"SELECT sid FROM {_S} WHERE project = %s AND id = %s"
_HEAD = (f"SELECT {HEAD_COLUMNS}, (SELECT json_agg(m.body ORDER BY m.seq) FROM {_M} m "
         "WHERE m.sid = s.sid AND m.seq >= s.context_from) "
         f"FROM {_S} s WHERE project = %s AND id = %s")
#: Which session an ID names for a read: the project's, else one shared with this role
#: (row-level security shows another role's session only when it is shared with it).
READABLE = ("id = %(id)s AND (project = %(project)s OR owner_role <> current_user) "
            "ORDER BY project = %(project)s DESC, updated_at DESC LIMIT 1")
_RECORD = (f"SELECT {HEAD_COLUMNS}, (SELECT json_agg(m.body ORDER BY m.seq) FROM {_M} m "
           f"WHERE m.sid = s.sid) FROM {_S} s WHERE {READABLE}")
_SHARED_OWNER = f"SELECT owner_role FROM {_S} WHERE id = %s AND owner_role <> current_user"
_SHARES = f"SELECT grantee FROM {SCHEMA}.shares WHERE sid = %s ORDER BY grantee"
_SHARE = (f"INSERT INTO {SCHEMA}.shares (sid, grantee) SELECT %s, rolname FROM pg_roles "
          "WHERE rolname = %s ON CONFLICT DO NOTHING")
_UNSHARE = f"DELETE FROM {SCHEMA}.shares WHERE sid = %s AND grantee = %s"
_ROLE = "SELECT 1 FROM pg_roles WHERE rolname = %s"
_RECENT = f"SELECT body FROM {_M} WHERE sid = %s AND seq < %s ORDER BY seq DESC LIMIT %s"
_APPEND = f"INSERT INTO {_M} (sid, seq, body) VALUES (%s, %s, %s)"
_APPEND_ALL = (f"INSERT INTO {_M} (sid, seq, body) SELECT %s, n - 1, b::json "
               "FROM unnest(%s::text[]) WITH ORDINALITY AS t(b, n)")
_DELETE = f"DELETE FROM {_S} WHERE project = %s AND id = %s RETURNING sid"
_STALE_LEASES = (
    f"DELETE FROM {SCHEMA}.leases l WHERE project = %s AND NOT EXISTS ("
    f"SELECT 1 FROM ({LIVE_LOCKS}) k WHERE k.pid = l.backend_pid "
    "AND k.hi = ((l.lock_key >> 32) & 4294967295) AND k.lo = (l.lock_key & 4294967295)) "
    "RETURNING session_id"
)

#: Transcript messages read per round trip by :meth:`SessionTable.recent`.
_RECENT_PAGE = 64

Check = Callable[[], None]


class SessionTable:
    """The statements on one project's sessions (see the module docstring).

    Parameters
    ----------
    link : Link
    project : str
        The project key every statement is limited to.
    where : callable
        Names a session (database, project, ID) for error messages.
    """

    def __init__(self, link: Link, project: str, where: Callable[[str], str]) -> None:
        self._link = link
        self._project = project
        self._where = where

    def _read(self, query: str, params: Sequence[Any] | dict[str, Any]) -> Any:
        return self._link.run(lambda c: c.execute(query, params).fetchone(), idempotent=True)

    def _session_row(self, query: str, session_id: str,
                     params: Sequence[Any] | dict[str, Any] | None = None) -> Any:
        import psycopg

        try:
            return self._read(query, params or (self._project, session_id))
        except psycopg.DataError as err:
            raise CorruptSessionError(self._where(session_id),
                                      f"a value cannot be read ({' '.join(str(err).split())})"
                                      ) from None

    def _all(self, query: str, params: Sequence[Any] | dict[str, Any]) -> list[Any]:
        return self._link.run(lambda c: c.execute(query, params).fetchall(), idempotent=True)

    # ---- reads
    def exists(self, session_id: str) -> bool:
        """Whether the project has this session."""
        return self._read(_EXISTS, (self._project, session_id)) is not None

    def record_row(self, session_id: str) -> Any:
        """The row (:data:`HEAD_COLUMNS`) and whole transcript (raw JSON) of the session
        the project has, else of one shared with this role; ``None`` when neither is.

        Raises
        ------
        CorruptSessionError
            A value of the row cannot be read at all.
        """
        return self._session_row(_RECORD, session_id,
                                 {"project": self._project, "id": session_id})

    def sid_of(self, session_id: str) -> int | None:
        """The row number of the project's session with this ID, or ``None``."""
        found = self._read(_SID, (self._project, session_id))
        return None if found is None else int(found[0])

    def shared_owner(self, session_id: str) -> str | None:
        """The role of another project's session with this ID shared with this role
        (it may be read, never changed), or ``None``."""
        found = self._read(_SHARED_OWNER, (session_id,))
        return None if found is None else str(found[0])

    def share(self, sid: int, roles: Sequence[str], undo: bool, check: Check) -> list[str]:
        """Share the session ``sid`` read-only with ``roles`` (or stop sharing it, with
        ``undo``) in one transaction; return the roles it is shared with now.

        Raises
        ------
        LookupError
            Naming a role the database does not have (nothing is changed).
        """
        def op(conn: psycopg.Connection) -> list[str]:
            check()
            with self._link.transaction(conn):
                for role in roles:
                    if not undo and conn.execute(_ROLE, (role,)).fetchone() is None:
                        raise LookupError(f"the database has no role {role!r}")
                    conn.execute(_UNSHARE if undo else _SHARE, (sid, role))
                return [str(r[0]) for r in conn.execute(_SHARES, (sid,)).fetchall()]

        return list(self._link.run(op))

    def head_row(self, session_id: str) -> Any:
        """The session's row and its transcript from ``context_from`` on (raw JSON), or
        ``None``; errors as :meth:`record_row`."""
        return self._session_row(_HEAD, session_id)

    def recent(self, session_id: str, sid: int, length: int,
               wanted: int) -> list[dict[str, Any]]:
        """The transcript's tail, oldest first, holding ``wanted`` user or assistant
        messages with text (or the whole transcript when it has fewer).

        ``sid`` is the session's row number and ``length`` its transcript length; the
        tail is read backwards, :data:`_RECENT_PAGE` messages per round trip, and each
        message is checked as a load checks it.

        Raises
        ------
        CorruptSessionError
            Naming the session and the transcript row that does not validate.
        """
        picked: list[dict[str, Any]] = []
        found, before = 0, length
        while found < wanted and before > 0:
            rows = self._all(_RECENT, (sid, before, _RECENT_PAGE))
            if not rows:
                break
            for k, (body,) in enumerate(rows):
                message = transcript_message(body, self._where(session_id), before - 1 - k)
                picked.append(message)
                if message.get("role") in ("user", "assistant") and message_text(message):
                    found += 1
            before -= len(rows)
        return picked[::-1]

    def page(self, query: str, params: dict[str, Any]) -> list[Any]:
        """The rows of a listing query."""
        return self._all(query, params)

    # ---- writes
    def apply(self, head: Head, plan: Plan, check: Check) -> int | None:
        """Write ``plan`` if the row still has ``head``'s revision; return the new revision.

        One transaction: the row's changed columns, then one row per appended message.
        ``None`` (nothing written) when the row changed or vanished since ``head``.
        """
        values = column_values(plan.head, plan.columns)
        sets = ", ".join(f"{name} = %({name})s" for name in values)
        update = (f"UPDATE {_S} SET {sets}, revision = revision + 1 "
                  "WHERE sid = %(sid)s AND revision = %(revision)s RETURNING revision")
        params = {**values, "sid": head.sid, "revision": head.revision}
        rows = [(head.sid, head.transcript_len + i, dumps(m)) for i, m in enumerate(plan.appended)]

        def op(conn: psycopg.Connection) -> int | None:
            check()
            with self._link.transaction(conn):
                found = conn.execute(update, params).fetchone()
                if found is None:
                    return None
                if rows:
                    with conn.cursor() as cur:
                        cur.executemany(_APPEND, rows)
                return int(found[0])

        return self._link.run(op)

    def insert(self, values: dict[str, Any], transcript: Sequence[Any], check: Check) -> bool:
        """Add a session row (:data:`INSERT_COLUMNS`) and its transcript in one transaction.

        Returns False, writing nothing, when the project already has the ID.
        """
        def op(conn: psycopg.Connection) -> bool:
            check()
            with self._link.transaction(conn):
                found = conn.execute(_INSERT, values).fetchone()
                if found is None:
                    return False
                if transcript:  # one statement (COPY does not take row-level security)
                    conn.execute(_APPEND_ALL, (found[0], [dumps(m) for m in transcript]))
                return True

        return bool(self._link.run(op))

    def delete(self, session_id: str, check: Check) -> bool:
        """Delete a session and its transcript; False when there was none."""
        def op(conn: psycopg.Connection) -> bool:
            check()
            with self._link.transaction(conn):
                return conn.execute(_DELETE, (self._project, session_id)).fetchone() is not None

        return bool(self._link.run(op))

    def delete_stale_leases(self) -> list[str]:
        """Delete the project's lease rows that no live connection backs; return their IDs."""
        return [r[0] for r in self._all(_STALE_LEASES, (self._project,))]
