"""Finding sessions by what was discussed (docs/design.md "Forks, exports and search"): the
listing index, or with a deep search every transcript too, read without a lease. An empty
query matches every session, with no excerpt.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jupyter_agent.artefacts.steps import Progress, call_arguments, no_progress
from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.store import SessionListing, Store
from jupyter_agent.store.messages import message_text

EXCERPT_CHARS = 90  # about how many characters an excerpt shows around a match
MAX_MATCHES = 3  # matches kept per session (all are counted)


@dataclass(frozen=True)
class SearchMatch:
    """One place a query was found: ``field`` is ``"title"``, ``"summary"``, ``"first
    prompt"``, ``"ID"`` or ``"message N (role)"`` (1-based); ``excerpt[start:end]`` is the
    matched text."""

    field: str
    excerpt: str
    start: int
    end: int


@dataclass(frozen=True)
class SearchHit:
    """A session that matched: up to :data:`MAX_MATCHES` places (index fields first, then
    transcript order; none for an empty query) and the ``count`` of all."""

    session: SessionListing
    matches: tuple[SearchMatch, ...] = ()
    count: int = 0

    @property
    def where(self) -> str:
        return f"{self.matches[0].field}: {self.matches[0].excerpt}" if self.matches else ""


def compile_query(text: str) -> re.Pattern[str] | None:
    """The pattern of a query; None for an empty one."""
    words = text.split()
    return re.compile(r"\s+".join(map(re.escape, words)), re.IGNORECASE) if words else None


def _flat(text: str) -> str:
    return " ".join(text.split())


def excerpt(text: str, match: re.Match[str], field: str = "") -> SearchMatch:
    """One line of about :data:`EXCERPT_CHARS` characters around ``match`` (a third before
    it), with ``…`` at each cut."""
    found = _flat(match.group())
    room = max(EXCERPT_CHARS - len(found), 20)
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
    return SearchMatch(field, before + found + after, len(before), len(before) + len(found))


def search_listings(listings: Iterable[SessionListing], text: str, store: Store | None = None,
                    progress: Progress = no_progress) -> list[SearchHit]:
    """Search listing entries, keeping their order; with ``store``, also each session's
    transcript (a session that cannot be read, or vanished, is searched by its entry only),
    ``progress`` wrapping that walk."""
    pattern = compile_query(text)
    if pattern is None:
        return [SearchHit(listing) for listing in listings]
    if store is not None:
        listings = list(listings)
        listings = progress(listings, len(listings))
    hits: list[SearchHit] = []
    for listing in listings:
        fields = [("title", listing.title), ("summary", listing.summary),
                  ("first prompt", listing.first_prompt), ("ID", listing.id)]
        transcript: list[dict[str, Any]] = []
        if store is not None:
            with contextlib.suppress(JupyterAgentError):
                transcript = store.load_session(listing.id).transcript
        for index, message in enumerate(transcript):
            role = message.get("role")
            if role == "system":
                continue
            texts = [message_text(message)]
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                args = call_arguments(str(function.get("arguments") or ""))
                values = args.values() if isinstance(args, dict) else [args]
                texts.append(" ".join([str(function.get("name", "")), *(
                    v if isinstance(v, str) else json.dumps(v) for v in values)]))
            fields += [(f"message {index + 1} ({role})", t) for t in texts if t]
        found = [(field, value, match) for field, value in fields
                 if value and (match := pattern.search(value)) is not None]
        if found:
            matches = tuple(excerpt(value, match, field) for field, value, match
                            in found[:MAX_MATCHES])
            hits.append(SearchHit(listing, matches, len(found)))
    return hits


def search_sessions(store: Store, text: str, *, deep: bool = False,
                    include_archived: bool = False,
                    progress: Progress = no_progress) -> list[SearchHit]:
    """Search a store's sessions, most recently updated first (see :func:`search_listings`;
    ``deep`` reads the transcripts, without their leases)."""
    listings = store.list_sessions(include_archived=include_archived)
    return search_listings(listings, text, store if deep else None, progress)
