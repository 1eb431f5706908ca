"""Pages of a listing: the newest ``limit`` sessions, or those after an earlier page.

Every backend orders its listing the same way (design §10): most recently updated first,
ties broken by session ID, descending; so ``(updated_at, id)`` is a cursor. A page
*after* an entry holds what comes after it in that order, which neither repeats nor
skips a session that kept its place between the two calls (a session updated meanwhile
moves to the top: it is on the first page again, not on a later one). Pure functions,
shared by the backends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

from jupyter_agent.store.records import SessionListing

T = TypeVar("T")

__all__ = ["check_limit", "page_of"]


def check_limit(limit: int | None) -> None:
    """Refuse a page size below 1 (``None`` means no limit).

    Raises
    ------
    ValueError
        Naming the value given.
    """
    if limit is not None and (type(limit) is not int or limit < 1):
        raise ValueError(f"limit must be a whole number of at least 1 (got {limit!r})")


def page_of(entries: Sequence[T], key: Callable[[T], tuple[datetime, str]],
            limit: int | None, after: SessionListing | None) -> list[T]:
    """The page of a whole listing that is in listing order already.

    Parameters
    ----------
    entries : sequence
        Newest first, ties by ID descending.
    key : callable
        An entry's ``(updated_at, id)``.
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
        cursor = (after.updated_at, after.id)
        page = [e for e in page if key(e) < cursor]
    return page if limit is None else page[:limit]
