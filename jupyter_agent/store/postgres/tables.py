"""The SQL of the team store: every statement on one project's sessions and figures.

A read is one statement; a write is one transaction run after a ``check`` that the lease
is held on the connection about to be used. A listing page is read from the index
``(project, updated_at DESC, id DESC)``, so it costs the same however many sessions there
are; rows that do not validate or are dated past ``CLOCK_SKEW`` are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from jupyter_agent.errors import CorruptSessionError, TooLargeError
from jupyter_agent.store.figure_files import MAX_FIGURE_BYTES, FigureData
from jupyter_agent.store.postgres.locks import LIVE_LOCKS, LOCK_OF_ROW, row_holder
from jupyter_agent.store.postgres.rows import (
    HEAD_COLUMNS,
    MESSAGES,
    SESSIONS,
    Head,
    Plan,
    column_values,
    dumps,
    listing_entry,
)
from jupyter_agent.store.postgres.schema import SCHEMA
from jupyter_agent.store.postgres.url import Link, import_psycopg
from jupyter_agent.store.records import (
    CLOCK_SKEW,
    SCHEMA_VERSION,
    LeaseHolder,
    SessionListing,
    utc_now,
)

if TYPE_CHECKING:
    import psycopg

_OWN = "project = %(project)s AND id = %(id)s"
_HEAD = (f"SELECT {HEAD_COLUMNS}, (SELECT json_agg(m.body ORDER BY m.seq) FROM {MESSAGES} m "
         f"WHERE m.sid = s.sid AND m.seq >= s.context_from) FROM {SESSIONS} s WHERE {_OWN}")
# which session an ID names for a read: the project's, else one shared with this role
# (row-level security shows another role's session only when it is shared with it)
_READABLE = ("id = %(id)s AND (project = %(project)s OR owner_role <> current_user) "
             "ORDER BY project = %(project)s DESC, updated_at DESC LIMIT 1")
_OWNER = (f"SELECT sid, owner_role, owner_role = current_user FROM {SESSIONS} "
          f"WHERE {_READABLE}")
_RECORD = (f"SELECT {HEAD_COLUMNS}, (SELECT json_agg(m.body ORDER BY m.seq) FROM {MESSAGES} m "
           f"WHERE m.sid = s.sid) FROM {SESSIONS} s WHERE {_READABLE}")
_SHARES = f"SELECT grantee FROM {SCHEMA}.shares WHERE sid = %s ORDER BY grantee"
_SHARE = (f"INSERT INTO {SCHEMA}.shares (sid, grantee) SELECT %s, rolname FROM pg_roles "
          "WHERE rolname = %s ON CONFLICT DO NOTHING")
_UNSHARE = f"DELETE FROM {SCHEMA}.shares WHERE sid = %s AND grantee = %s"
_ROLE = "SELECT 1 FROM pg_roles WHERE rolname = %s"
_APPEND = f"INSERT INTO {MESSAGES} (sid, seq, body) VALUES (%s, %s, %s)"
# one statement (COPY does not take row-level security)
_APPEND_ALL = (f"INSERT INTO {MESSAGES} (sid, seq, body) SELECT %s, n - 1, b::json "
               "FROM unnest(%s::text[]) WITH ORDINALITY AS t(b, n)")
_DELETE = f"DELETE FROM {SESSIONS} WHERE {_OWN} RETURNING sid"

_FIGURES = f"{SCHEMA}.figures"
_SAVE_FIGURE = (f"INSERT INTO {_FIGURES} (sid, figure_id, media_type, data) "
                f"SELECT sid, %(figure)s, %(type)s, %(data)s FROM {SESSIONS} WHERE {_OWN} "
                "ON CONFLICT (sid, figure_id) DO UPDATE SET media_type = EXCLUDED.media_type, "
                "data = EXCLUDED.data, saved_at = now() RETURNING 1")
# the bytes of a figure over the cap are not even sent by the server
_OF = f"f.sid = (SELECT sid FROM {SESSIONS} WHERE {_READABLE})"
_READ_FIGURE = (f"SELECT f.media_type, octet_length(f.data), CASE WHEN octet_length(f.data) "
                f"<= %(cap)s THEN f.data END FROM {_FIGURES} f WHERE {_OF} "
                "AND f.figure_id = %(figure)s")
_FIGURE_IDS = f"SELECT f.figure_id FROM {_FIGURES} f WHERE {_OF} ORDER BY f.figure_id"
_DELETE_FIGURE = (f"DELETE FROM {_FIGURES} f USING {SESSIONS} s WHERE s.sid = f.sid AND "
                  "s.project = %(project)s AND s.id = %(id)s AND f.figure_id = %(figure)s "
                  "RETURNING 1")

# Python's datetimes cover years 1-9999; a row outside them (``infinity``) cannot be listed
_REPRESENTABLE = "BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00'"
_PAGE_COLUMNS = (
    "sid, project, id, created_at, updated_at, summary, title, archived, transcript_len, "
    "cost_usd, tool_calls, first_prompt, owner_user, owner_host, parent, state, compactions, "
    "owner_role")

Check = Callable[[], None]


def listing_query(*, include_archived: bool, limit: int | None,
                  after: tuple[datetime, str] | None, session_id: bool = False) -> str:
    """One listing page: the project's sessions, then those other roles share with this one.

    Parameters: ``project``, ``horizon`` (the latest ``updated_at`` believed), and
    ``after_at``, ``after_id``, ``limit`` and ``id`` when used; ``session_id=True`` lists
    the one session ``id``, archived or not, whatever its date.
    """
    where = [f"schema_version <= {SCHEMA_VERSION}",
             f"updated_at {_REPRESENTABLE}", f"created_at {_REPRESENTABLE}"]
    if session_id:
        where.append(_READABLE)
        page = f"SELECT {_PAGE_COLUMNS} FROM {SESSIONS} WHERE {' AND '.join(where)}"
    else:
        where.append("updated_at <= %(horizon)s")
        if not include_archived:
            where.append("NOT archived")
        if after is not None:
            where.append("(updated_at, id) < (%(after_at)s, %(after_id)s)")
        order = "ORDER BY updated_at DESC, id DESC" + (
            " LIMIT %(limit)s" if limit is not None else "")
        own = " AND ".join(["project = %(project)s", *where])
        # read from the shares, so the page never scans the sessions
        shared = " AND ".join([
            f"sid = ANY (ARRAY(SELECT h.sid FROM {SCHEMA}.shares h))",
            "owner_role <> current_user", "project <> %(project)s", *where])
        page = (f"(SELECT {_PAGE_COLUMNS} FROM {SESSIONS} WHERE {own} {order}) "
                f"UNION ALL (SELECT {_PAGE_COLUMNS} FROM {SESSIONS} WHERE {shared} "
                f"{order}) {order}")
    return f"""SELECT s.id, s.created_at, s.updated_at, s.summary, s.title, s.archived,
    s.transcript_len, s.cost_usd, s.tool_calls, s.first_prompt, s.owner_user, s.owner_host,
    s.parent, s.state, s.compactions, s.owner_role,
    ARRAY(SELECT h.grantee::text FROM {SCHEMA}.shares h WHERE h.sid = s.sid ORDER BY 1),
    k.pid, l.backend_pid, l.pid, l.user_name, l.host, l.since, l.label
FROM ({page}) s
LEFT JOIN {SCHEMA}.leases l ON l.project = s.project AND l.session_id = s.id
LEFT JOIN ({LIVE_LOCKS}) k ON {LOCK_OF_ROW}
ORDER BY s.updated_at DESC, s.id DESC"""


class SessionTable:
    """The statements on one project's sessions; ``where(id)`` names a session for errors."""

    def __init__(self, link: Link, project: str, where: Callable[[str], str]) -> None:
        self._link = link
        self._project = project
        self._where = where

    def _one(self, query: str, session_id: str, **params: Any) -> Any:
        psycopg = import_psycopg()
        try:
            rows = self._link.fetch(query, {"project": self._project, "id": session_id, **params})
        except psycopg.DataError as err:  # a value the driver cannot read (``infinity``)
            raise CorruptSessionError(self._where(session_id),
                                      f"a value cannot be read ({' '.join(str(err).split())})"
                                      ) from None
        return rows[0] if rows else None

    def record_row(self, session_id: str) -> Any:
        """The row and whole transcript of the project's session, else of one shared with
        this role; ``None`` when neither is."""
        return self._one(_RECORD, session_id)

    def head_row(self, session_id: str) -> Any:
        """The row and transcript from ``context_from`` on, or ``None``."""
        return self._one(_HEAD, session_id)

    def owner(self, session_id: str) -> tuple[int, str, bool] | None:
        """The row number and owner role of the session an ID names for a read (the
        project's, else one shared with this role), and whether that role is this one."""
        found = self._one(_OWNER, session_id)
        return None if found is None else (int(found[0]), str(found[1]), bool(found[2]))

    def share(self, sid: int, roles: Sequence[str], undo: bool) -> list[str]:
        """Share ``sid`` with ``roles`` (or stop); the roles it is shared with now.

        Raises
        ------
        LookupError
            Naming a role the database does not have (nothing is changed).
        """
        def op(conn: psycopg.Connection) -> list[str]:
            for role in roles:
                if not undo and conn.execute(_ROLE, (role,)).fetchone() is None:
                    raise LookupError(f"the database has no role {role!r}")
                conn.execute(_UNSHARE if undo else _SHARE, (sid, role))
            return [str(r[0]) for r in conn.execute(_SHARES, (sid,)).fetchall()]

        return self._link.write(op, lambda: None)

    def listing(self, mine: Callable[[str], LeaseHolder | None], *,
                include_archived: bool = False, limit: int | None = None,
                after: SessionListing | None = None,
                session_id: str | None = None) -> list[SessionListing]:
        """One page of the listing, or the entry of ``session_id`` alone (then a row that
        does not validate raises ``CorruptSessionError``); ``mine(id)`` is this store as
        the holder of a lease it holds (status "active"), else ``None``."""
        query = listing_query(include_archived=include_archived, limit=limit,
                              after=None if after is None else (after.updated_at, after.id),
                              session_id=session_id is not None)
        params: dict[str, Any] = {"project": self._project, "limit": limit, "id": session_id,
                                  "horizon": utc_now() + CLOCK_SKEW}
        if after is not None:
            params.update(after_at=after.updated_at, after_id=after.id)
        listing: list[SessionListing] = []
        for row in self._link.fetch(query, params):
            sid = row[0]
            holder = mine(sid) if isinstance(sid, str) else None
            status: Literal["active", "in use", "idle"] = "idle" if holder is None else "active"
            if holder is None and row[-7] is not None:
                status, holder = "in use", row_holder(*row[-7:])
            try:
                listing.append(listing_entry(row[:-7], status, holder, self._where(str(sid))))
            except CorruptSessionError:
                if session_id is not None:
                    raise
        return listing

    def apply(self, head: Head, plan: Plan, check: Check) -> int | None:
        """Write ``plan`` if the row still has ``head``'s revision; the new revision, or
        ``None`` (nothing written) when the row changed or vanished since."""
        values = column_values(plan.head, plan.columns)
        sets = ", ".join(f"{name} = %({name})s" for name in values)
        update = (f"UPDATE {SESSIONS} SET {sets}, revision = revision + 1 "
                  "WHERE sid = %(sid)s AND revision = %(revision)s RETURNING revision")
        params = {**values, "sid": head.sid, "revision": head.revision}
        rows = [(head.sid, head.transcript_len + i, dumps(m)) for i, m in enumerate(plan.appended)]

        def op(conn: psycopg.Connection) -> int | None:
            found = conn.execute(update, params).fetchone()
            if found is None:
                return None
            if rows:
                with conn.cursor() as cur:
                    cur.executemany(_APPEND, rows)
            return int(found[0])

        return self._link.write(op, check)

    def insert(self, values: dict[str, Any], transcript: Sequence[Any], check: Check) -> bool:
        """Add a session row and its transcript; False, writing nothing, when the ID is taken."""
        insert = (f"INSERT INTO {SESSIONS} ({', '.join(values)}) VALUES "
                  f"({', '.join(f'%({c})s' for c in values)}) "
                  "ON CONFLICT (project, id) DO NOTHING RETURNING sid")

        def op(conn: psycopg.Connection) -> bool:
            found = conn.execute(insert, values).fetchone()
            if found is None:
                return False
            if transcript:
                conn.execute(_APPEND_ALL, (found[0], [dumps(m) for m in transcript]))
            return True

        return self._link.write(op, check)

    def _write_one(self, query: str, session_id: str, check: Check, **params: Any) -> bool:
        values = {"project": self._project, "id": session_id, **params}
        return self._link.write(
            lambda conn: conn.execute(query, values).fetchone() is not None, check)

    def delete(self, session_id: str, check: Check) -> bool:
        return self._write_one(_DELETE, session_id, check)

    def save_figure(self, session_id: str, figure_id: str, data: bytes, media_type: str,
                    check: Check) -> bool:
        """Insert or replace a figure; False (nothing written) when the session is gone."""
        return self._write_one(_SAVE_FIGURE, session_id, check, figure=figure_id,
                               type=media_type, data=data)

    def delete_figure(self, session_id: str, figure_id: str, check: Check) -> bool:
        return self._write_one(_DELETE_FIGURE, session_id, check, figure=figure_id)

    def read_figure(self, session_id: str, figure_id: str) -> FigureData | None:
        """The figure, or ``None``; ``TooLargeError`` over ``MAX_FIGURE_BYTES`` (unfetched)."""
        row = self._one(_READ_FIGURE, session_id, cap=MAX_FIGURE_BYTES, figure=figure_id)
        if row is None:
            return None
        if row[2] is None:
            raise TooLargeError(f"{_FIGURES} (project {self._project!r}, session "
                                f"{session_id!r}, figure {figure_id!r})", int(row[1]),
                                MAX_FIGURE_BYTES, "figure")
        return FigureData(bytes(row[2]), str(row[0]))

    def figure_ids(self, session_id: str) -> list[str]:
        params = {"project": self._project, "id": session_id}
        return [str(r[0]) for r in self._link.fetch(_FIGURE_IDS, params)]
