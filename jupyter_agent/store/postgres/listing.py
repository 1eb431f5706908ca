"""Listing a project's sessions from the team store: newest first, one page at a time.

One statement (design §10, §16) reads the page from the ``sessions`` index
``(project, updated_at DESC, id DESC)`` (its partial twin when archived sessions are
left out) -- so the newest page costs the same for ten sessions or a hundred thousand
-- and joins, for that page only, the ``leases`` rows and the advisory locks granted
now (``pg_locks``), which tell who has each session in use. No message row is read:
the transcript length, first prompt, cost and tool-call count are columns kept up to
date by every save. A row written by a newer jupyter-agent, or one that does not
validate, is left out, never raised (loading it says why).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from jupyter_agent.store.postgres.leases import LIVE_LOCKS
from jupyter_agent.store.postgres.schema import SCHEMA
from jupyter_agent.store.records import SCHEMA_VERSION, LeaseHolder, SessionListing

__all__ = ["listing_from_rows", "listing_query"]


def listing_query(*, include_archived: bool, limit: int | None,
                  after: tuple[datetime, str] | None) -> str:
    """The SQL of one listing page (parameters: ``project``, and ``after_at``,
    ``after_id``, ``limit`` when used)."""
    where = ["project = %(project)s", f"schema_version <= {SCHEMA_VERSION}"]
    if not include_archived:
        where.append("NOT archived")
    if after is not None:
        where.append("(updated_at, id) < (%(after_at)s, %(after_id)s)")
    page = (
        "SELECT id, created_at, updated_at, summary, title, archived, transcript_len, "
        "cost_usd, tool_calls, first_prompt, owner_user, owner_host "
        f"FROM {SCHEMA}.sessions WHERE {' AND '.join(where)} "
        "ORDER BY updated_at DESC, id DESC" + (" LIMIT %(limit)s" if limit is not None else "")
    )
    return f"""SELECT s.*, k.pid, l.backend_pid, l.pid, l.user_name, l.host, l.since, l.label
FROM ({page}) s
LEFT JOIN {SCHEMA}.leases l ON l.project = %(project)s AND l.session_id = s.id
LEFT JOIN ({LIVE_LOCKS}) k
    ON k.hi = ((l.lock_key >> 32) & 4294967295) AND k.lo = (l.lock_key & 4294967295)
ORDER BY s.updated_at DESC, s.id DESC"""


def listing_from_rows(rows: Sequence[Sequence[Any]],
                      holds: Callable[[str], bool]) -> list[SessionListing]:
    """Listing entries from the rows of :func:`listing_query`.

    Parameters
    ----------
    rows : sequence of rows
    holds : callable
        Whether this store holds a session's lease (status ``"active"``).

    Returns
    -------
    list of SessionListing
        ``status`` ``"active"`` (this store holds the lease), ``"in use"`` (another
        connection holds its advisory lock; ``holder`` as its lease row says, or an
        empty :class:`LeaseHolder` while the row is being written), else ``"idle"``.
    """
    listing: list[SessionListing] = []
    for row in rows:
        (sid, created_at, updated_at, summary, title, archived, count, cost, tool_calls,
         first, owner_user, owner_host, lock_pid, backend_pid, pid, user, host, since,
         label) = row
        holder = None
        if holds(sid):
            status = "active"
        elif lock_pid is not None:
            status = "in use"
            holder = (LeaseHolder(pid=pid, user=user or "", host=host or "", since=since,
                                  label=label or "")
                      if lock_pid == backend_pid else LeaseHolder())
        else:
            status = "idle"
        try:
            listing.append(SessionListing(
                id=sid, updated_at=updated_at, summary=summary, title=title, archived=archived,
                status=status, created_at=created_at, message_count=count, cost_usd=cost,
                tool_calls=tool_calls, first_prompt=first or "", holder=holder,
                owner_user=owner_user, owner_host=owner_host,
            ))
        except ValidationError:
            continue
    return listing
