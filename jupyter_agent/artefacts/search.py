"""Finding sessions by what was discussed.

Two depths:

* the default search looks at what the listing index holds for each session -- its ID,
  title, summary and first prompt -- through ``store.list_sessions``, so it never
  reads a transcript and stays fast with thousands of sessions;
* the deep search also reads every transcript (``store.load_session``, no lease): the
  text of each user and assistant message, the names and arguments (e.g. the code) of
  tool calls, and tool results. System messages are skipped (they hold the notes,
  which every session shares).

Matching is case-insensitive and the words of the query must appear in this order,
any run of whitespace matching any other (``"body  mass"`` finds ``"body\\nmass"``).
Each hit says where the text was found and shows a short excerpt around it; an empty
query matches every session (and shows no excerpt).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from jupyter_agent.artefacts.steps import Progress, no_progress
from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.store import SessionListing, Store
from jupyter_agent.store.messages import message_text

__all__ = [
    "EXCERPT_CHARS",
    "SearchHit",
    "SearchMatch",
    "compile_query",
    "excerpt",
    "search_listings",
    "search_sessions",
]

EXCERPT_CHARS = 90
"""About how many characters an excerpt shows around a match."""

MAX_MATCHES = 3
"""Matches kept per session (the count of all matching places is kept as well)."""


@dataclass(frozen=True)
class SearchMatch:
    """One place a query was found.

    Attributes
    ----------
    field : str
        ``"ID"``, ``"title"``, ``"summary"``, ``"first prompt"`` or, for a deep
        search, ``"message N (role)"`` (N is the 1-based position in the transcript).
    excerpt : str
        One line around the match, with ``…`` where it was cut.
    start, end : int
        Where the matched text is in ``excerpt`` (for highlighting).
    """

    field: str
    excerpt: str
    start: int
    end: int

    def describe(self) -> str:
        """``"<field>: <excerpt>"``."""
        return f"{self.field}: {self.excerpt}"


@dataclass(frozen=True)
class SearchHit:
    """A session that matched, with where.

    Attributes
    ----------
    session : SessionListing
        The session's listing entry.
    matches : tuple of SearchMatch
        Up to :data:`MAX_MATCHES` places, index fields first, then transcript order;
        empty for an empty query.
    count : int
        How many places matched in all.
    """

    session: SessionListing
    matches: tuple[SearchMatch, ...] = ()
    count: int = 0

    @property
    def where(self) -> str:
        """The first match as ``"<field>: <excerpt>"`` ("" when there is none)."""
        return self.matches[0].describe() if self.matches else ""


def compile_query(text: str) -> re.Pattern[str] | None:
    """The pattern of a query (see the module docstring); ``None`` for an empty one."""
    words = text.split()
    if not words:
        return None
    return re.compile(r"\s+".join(re.escape(w) for w in words), re.IGNORECASE)


def _flat(text: str) -> str:
    return " ".join(text.split())


def excerpt(text: str, match: re.Match[str], width: int = EXCERPT_CHARS) -> SearchMatch:
    """A one-line excerpt of ``text`` around ``match`` (field left empty).

    Whitespace runs become one space; about a third of ``width`` is kept before the
    match and the rest after it; ``…`` marks each cut.
    """
    found = _flat(match.group())
    room = max(width - len(found), 20)
    keep_before = room // 3
    head, tail = text[: match.start()], text[match.end():]
    window = head[-(keep_before * 4 + 8):]
    before = _flat(window) + (" " if head[-1:].isspace() and window.strip() else "")
    if len(before) > keep_before or len(window) < len(head):
        cut = before[-(keep_before - 1):]
        space = cut.find(" ")
        if 0 <= space < len(cut) - 1 and space < len(cut) // 2:
            cut = cut[space:]  # start at a word
        before = "…" + cut if before else ""
    window = tail[: room * 4 + 8]
    after = (" " if tail[:1].isspace() and window.strip() else "") + _flat(window)
    keep_after = room - len(before)
    if len(after) > keep_after or (len(window) < len(tail) and after):
        cut = after[: keep_after - 1]
        space = cut.rfind(" ")
        if space > len(cut) // 2:
            cut = cut[:space]  # end at a word
        after = cut + "…"
    return SearchMatch("", before + found + after, len(before), len(before) + len(found))


def _find(pattern: re.Pattern[str], field: str, text: str) -> SearchMatch | None:
    found = pattern.search(text) if text else None
    if found is None:
        return None
    place = excerpt(text, found)
    return SearchMatch(field, place.excerpt, place.start, place.end)


def _index_fields(listing: SessionListing) -> list[tuple[str, str]]:
    return [("title", listing.title), ("summary", listing.summary),
            ("first prompt", listing.first_prompt), ("ID", listing.id)]


def _message_texts(message: dict[str, Any]) -> list[str]:
    """The searchable texts of a message: its text, then each tool call."""
    texts = [message_text(message)]
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        raw = str(function.get("arguments") or "")
        try:
            args = json.loads(raw) if raw else {}
        except (ValueError, RecursionError):
            args = raw
        values = args.values() if isinstance(args, dict) else [args]
        texts.append(" ".join([str(function.get("name", "")),
                               *(v if isinstance(v, str) else json.dumps(v) for v in values)]))
    return [t for t in texts if t]


def _search_one(pattern: re.Pattern[str], listing: SessionListing,
                transcript: Sequence[dict[str, Any]] | None) -> SearchHit | None:
    matches: list[SearchMatch] = []
    count = 0
    fields = list(_index_fields(listing))
    for index, message in enumerate(transcript or ()):
        role = message.get("role")
        if role != "system":
            fields += [(f"message {index + 1} ({role})", t) for t in _message_texts(message)]
    for field, text in fields:
        found = _find(pattern, field, text)
        if found is not None:
            count += 1
            if len(matches) < MAX_MATCHES:
                matches.append(found)
    return SearchHit(listing, tuple(matches), count) if count else None


def search_listings(listings: Iterable[SessionListing], text: str) -> list[SearchHit]:
    """Search listing entries' ID, title, summary and first prompt (no I/O).

    Parameters
    ----------
    listings : iterable of SessionListing
        E.g. ``store.list_sessions()``; the order is kept.
    text : str
        The query; an empty one matches everything.

    Returns
    -------
    list of SearchHit
    """
    pattern = compile_query(text)
    if pattern is None:
        return [SearchHit(listing) for listing in listings]
    hits = (_search_one(pattern, listing, None) for listing in listings)
    return [hit for hit in hits if hit is not None]


def search_sessions(store: Store, text: str, *, deep: bool = False,
                    include_archived: bool = False,
                    progress: Progress = no_progress) -> list[SearchHit]:
    """Search the sessions of a store (see the module docstring).

    Parameters
    ----------
    store : Store
    text : str
        The query; an empty one matches every session.
    deep : bool
        Also search every transcript (reads each session; no lease is taken).
    include_archived : bool
        Search archived sessions too.
    progress : Progress, optional
        Wraps the walk over the sessions of a deep search.

    Returns
    -------
    list of SearchHit
        Most recently updated first. A session that cannot be read (or vanished)
        during a deep search is searched by its listing entry only.
    """
    listings = store.list_sessions(include_archived=include_archived)
    pattern = compile_query(text)
    if not deep or pattern is None:
        return search_listings(listings, text)
    hits: list[SearchHit] = []
    for listing in progress(listings, len(listings)):
        try:
            transcript: list[dict[str, Any]] | None = store.load_session(listing.id).transcript
        except JupyterAgentError:
            transcript = None
        hit = _search_one(pattern, listing, transcript)
        if hit is not None:
            hits.append(hit)
    return hits
