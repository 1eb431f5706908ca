"""Pages of a listing: the newest ``limit`` sessions, or those after an earlier page.

Every backend orders its listing the same way: most recently changed first,
ties broken by session ID, descending. "Most recently" is :func:`listing_order`, the one
place that decides it: the JSON-file store orders by its clock (a count of changes that
never goes back, even when the wall clock does), other stores by ``updated_at``; so the
last entry of a page is a cursor. A page
*after* an entry holds what comes after it in that order, which neither repeats nor
skips a session that kept its place between the two calls (a session updated meanwhile
moves to the top: it is on the first page again, not on a later one). Pure functions,
shared by the backends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from jupyter_agent.store.records import SessionListing

T = TypeVar("T")

__all__ = ["check_limit", "entry_order", "listing_order", "page_of"]


def listing_order(clock: int | None, updated_at: datetime, session_id: str) -> tuple[int, str]:
    """Where a session goes in a listing, newest last (sort in reverse for a listing).

    Parameters
    ----------
    clock : int or None
        The store clock of the session's last change (microseconds since the epoch when
        the wall clock is ahead of every earlier change, else one more than the latest
        of them); ``None`` for a store without one.
    updated_at : datetime
        Used when there is no clock.
    session_id : str
        Breaks ties.
    """
    if clock is None:
        clock = int(updated_at.timestamp() * 1_000_000)
    return clock, session_id


def entry_order(entry: Any) -> tuple[int, str]:
    """:func:`listing_order` of a listing entry (a dict of the index, or a
    :class:`~jupyter_agent.store.records.SessionListing`)."""
    if isinstance(entry, dict):
        return listing_order(entry.get("clock"), entry["updated_at"], entry["id"])
    return listing_order(entry.clock, entry.updated_at, entry.id)


def check_limit(limit: int | None) -> None:
    """Refuse a page size below 1 (``None`` means no limit).

    Raises
    ------
    ValueError
        Naming the value given.
    """
    if limit is not None and (type(limit) is not int or limit < 1):
        raise ValueError(f"limit must be a whole number of at least 1 (got {limit!r})")


def page_of(entries: Sequence[T], key: Callable[[T], tuple[int, str]],
            limit: int | None, after: SessionListing | None) -> list[T]:
    """The page of a whole listing that is in listing order already.

    Parameters
    ----------
    entries : sequence
        Newest first, ties by ID descending.
    key : callable
        An entry's :func:`listing_order`.
    limit : int, optional
        At most this many entries (checked with :func:`check_limit`).
    after : SessionListing, optional
        The last entry of the previous page.

    Returns
    -------
    list
        The entries of the page, in order.

    Raises
    ------
    ValueError
        See :func:`check_limit`.
    """
    check_limit(limit)
    page = list(entries)
    if after is not None:
        cursor = entry_order(after)
        page = [e for e in page if key(e) < cursor]
    return page if limit is None else page[:limit]
