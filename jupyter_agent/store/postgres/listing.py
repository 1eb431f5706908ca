"""Listing a project's sessions from the team store: newest first, one page at a time.

One statement reads the page from the ``sessions`` index
``(project, updated_at DESC, id DESC)`` (its partial twin when archived sessions are
left out) -- so the newest page costs the same for ten sessions or a hundred thousand
-- and joins, for that page only, the ``leases`` rows and the advisory locks granted
now (``pg_locks``), which tell who has each session in use. No message row is read:
the transcript length, first prompt, cost and tool-call count are columns kept up to
date by every save. A row written by a newer jupyter-agent, or one that does not
validate (:func:`~jupyter_agent.store.postgres.decode.listing_entry`), is left out,
never raised (loading it says why); so is a row dated more than
:data:`~jupyter_agent.store.records.CLOCK_SKEW` after this machine's clock (a time
ahead of the clock is not believed, and would otherwise always be the newest). A page
after ``after`` continues where an earlier page ended, by ``(updated_at, id)``, so it
neither repeats nor skips a session that kept its place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal

from jupyter_agent.errors import CorruptSessionError
from jupyter_agent.store.paging import check_limit
from jupyter_agent.store.postgres.decode import listing_entry
from jupyter_agent.store.postgres.leases import LIVE_LOCKS
from jupyter_agent.store.postgres.schema import SCHEMA
from jupyter_agent.store.postgres.tables import READABLE, SessionTable
from jupyter_agent.store.records import (
    CLOCK_SKEW,
    SCHEMA_VERSION,
    LeaseHolder,
    SessionListing,
    utc_now,
)

__all__ = ["listing_from_rows", "listing_query", "read_listing"]

#: Python's datetimes cover years 1-9999; a row outside them (``infinity``, set by hand)
#: cannot be listed. The connection's time zone is UTC.
_REPRESENTABLE = "BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00'"


_PAGE_COLUMNS = (
    "sid, project, id, created_at, updated_at, summary, title, archived, transcript_len, "
    "cost_usd, tool_calls, first_prompt, owner_user, owner_host, parent, state, compactions, "
    "owner_role")


def listing_query(*, include_archived: bool, limit: int | None,
                  after: tuple[datetime, str] | None, session_id: bool = False) -> str:
    """The SQL of one listing page: the project's sessions and, after them in date order,
    those of other projects that other roles share with this one.

    Parameters: ``project``, ``horizon`` (the latest ``updated_at`` believed: now plus
    :data:`~jupyter_agent.store.records.CLOCK_SKEW`), and ``after_at``, ``after_id``,
    ``limit`` and ``id`` when used; ``session_id=True`` lists the one session ``id``
    (archived or not, whatever its date: :func:`listing_entry` says what is wrong), the
    project's, else one shared with this role.
    """
    where = [f"schema_version <= {SCHEMA_VERSION}",
             f"updated_at {_REPRESENTABLE}", f"created_at {_REPRESENTABLE}"]
    if session_id:
        where.append(READABLE)
        page = f"SELECT {_PAGE_COLUMNS} FROM {SCHEMA}.sessions WHERE {' AND '.join(where)}"
    else:
        where.append("updated_at <= %(horizon)s")
        if not include_archived:
            where.append("NOT archived")
        if after is not None:
            where.append("(updated_at, id) < (%(after_at)s, %(after_id)s)")
        order = "ORDER BY updated_at DESC, id DESC" + (
            " LIMIT %(limit)s" if limit is not None else "")
        own = " AND ".join(["project = %(project)s", *where])
        # row-level security shows another role's session only when it is shared with
        # this role; read from the shares, so the page never scans the sessions
        shared = " AND ".join([
            f"sid = ANY (ARRAY(SELECT h.sid FROM {SCHEMA}.shares h))",
            "owner_role <> current_user", "project <> %(project)s", *where])
        page = (f"(SELECT {_PAGE_COLUMNS} FROM {SCHEMA}.sessions WHERE {own} {order}) "
                f"UNION ALL (SELECT {_PAGE_COLUMNS} FROM {SCHEMA}.sessions WHERE {shared} "
                f"{order}) {order}")
    return f"""SELECT s.id, s.created_at, s.updated_at, s.summary, s.title, s.archived,
    s.transcript_len, s.cost_usd, s.tool_calls, s.first_prompt, s.owner_user, s.owner_host,
    s.parent, s.state, s.compactions, s.owner_role,
    ARRAY(SELECT h.grantee::text FROM {SCHEMA}.shares h WHERE h.sid = s.sid ORDER BY 1),
    k.pid, l.backend_pid, l.pid, l.user_name, l.host, l.since, l.label
FROM ({page}) s
LEFT JOIN {SCHEMA}.leases l ON l.project = s.project AND l.session_id = s.id
LEFT JOIN ({LIVE_LOCKS}) k
    ON k.hi = ((l.lock_key >> 32) & 4294967295) AND k.lo = (l.lock_key & 4294967295)
ORDER BY s.updated_at DESC, s.id DESC"""


def listing_from_rows(rows: Sequence[Sequence[Any]], holds: Callable[[str], bool],
                      where: Callable[[str], str], *, strict: bool = False
                      ) -> list[SessionListing]:
    """Listing entries from the rows of :func:`listing_query`.

    Parameters
    ----------
    rows : sequence of rows
    holds : callable
        Whether this store holds a session's lease (status ``"active"``).
    where : callable
        Names a session (database, project, ID).
    strict : bool
        Raise :class:`CorruptSessionError` for a row that does not validate instead of
        leaving it out.

    Returns
    -------
    list of SessionListing
        ``status`` ``"active"`` (this store holds the lease), ``"in use"`` (another
        connection holds its advisory lock; ``holder`` as its lease row says, or an
        empty :class:`LeaseHolder` while the row is being written), else ``"idle"``.
        Rows that do not validate are left out.
    """
    listing: list[SessionListing] = []
    for row in rows:
        sid = row[0]
        lock_pid, backend_pid, pid, user, host, since, label = row[-7:]
        holder = None
        status: Literal["active", "in use", "idle"] = "idle"
        if isinstance(sid, str) and holds(sid):
            status = "active"
        elif lock_pid is not None:
            status = "in use"
            holder = (LeaseHolder(pid=pid, user=user or "", host=host or "", since=since,
                                  label=label or "")
                      if lock_pid == backend_pid else LeaseHolder())
        try:
            listing.append(listing_entry(row[:-7], status, holder, where(str(sid))))
        except CorruptSessionError:
            if strict:
                raise
            continue  # loading it says why
    return listing


def read_listing(table: SessionTable, project: str, *, holds: Callable[[str], bool],
                 where: Callable[[str], str], include_archived: bool = False,
                 limit: int | None = None, after: SessionListing | None = None,
                 session_id: str | None = None) -> list[SessionListing]:
    """One page of the project's listing (or the entry of ``session_id`` alone).

    Raises
    ------
    ValueError
        ``limit`` below 1.
    CorruptSessionError
        With ``session_id``: its row does not validate or is dated in the future.
    StoreUnavailableError
    """
    check_limit(limit)
    query = listing_query(include_archived=include_archived, limit=limit,
                          after=None if after is None else (after.updated_at, after.id),
                          session_id=session_id is not None)
    params: dict[str, Any] = {"project": project, "limit": limit, "id": session_id,
                              "horizon": utc_now() + CLOCK_SKEW}
    if after is not None:
        params.update(after_at=after.updated_at, after_id=after.id)
    return listing_from_rows(table.page(query, params), holds, where,
                             strict=session_id is not None)
