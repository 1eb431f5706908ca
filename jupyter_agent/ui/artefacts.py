"""Text for forks, exports and search results: pure formatting functions.

Shared by the magics (``%agent_fork``, ``%agent_export``, ``%agent_sessions --search``),
the sessions panel's plain-text form and the ``jupyter agent`` command.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from jupyter_agent.ui.display import one_line, relative_time

if TYPE_CHECKING:
    from jupyter_agent.artefacts.export import Exported
    from jupyter_agent.artefacts.fork import Forked
    from jupyter_agent.artefacts.search import SearchHit

__all__ = ["format_exported", "format_forked", "format_search_results", "format_size"]

_KINDS = {"ipynb": "a notebook", "md": "Markdown", "json": "JSON"}


def format_size(size: int) -> str:
    """``"812 bytes"``, ``"12.3 kB"``, ``"4.1 MB"`` (powers of 1000)."""
    if size < 1000:
        return f"{size} bytes"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


def format_forked(forked: Forked, *, active: bool = True) -> str:
    """What ``%agent_fork`` prints: the fork, its parent and where it was cut.

    ``active``: the fork became this kernel's active session (the magic), or was only
    saved (the command line).
    """
    record = forked.record
    origin = record.parent
    parent = origin.session_id if origin is not None else "?"
    if origin is not None and origin.turn is not None:
        cut = f" after turn {origin.turn} of {forked.parent_turns}"
    else:
        cut = f" ({forked.turns} turn{'s' if forked.turns != 1 else ''})"
    title = f" — {record.title}" if record.title else ""
    lines = [f"Forked session {parent}{cut} into session {record.id}{title}."]
    if forked.rebuilt:
        lines.append("Its working context is the full transcript up to that turn (the parent's "
                     "was compacted later); it is compacted again if it is too long.")
    if active:
        lines.append(f"It is this kernel's active session now; {parent} is unchanged. "
                     "Continue with %%agent.")
    else:
        lines.append(f"{parent} is unchanged. Resume the fork with %agent_resume {record.id}.")
    return "\n".join(lines)


def format_exported(done: Exported) -> str:
    """What ``%agent_export`` prints: format, path and size, and any redactions."""
    text = (f"Exported session {done.session_id} as {_KINDS.get(done.format, done.format)} "
            f"to {done.path} ({format_size(done.size)}).")
    if done.redacted:
        what = "secret" if done.redacted == 1 else "distinct secrets"
        text += f" {done.redacted} {what} (keys, tokens, passwords) became [redacted]."
    return text


def format_search_results(hits: Sequence[SearchHit], *, query: str,
                          active_id: str | None = None, now: datetime | None = None) -> str:
    """A table of search results: ID, last update, name, and where the text was found.

    Parameters
    ----------
    hits : sequence of SearchHit
    query : str
        The query, for the heading.
    active_id : str, optional
        Marked with ``*``.
    now : datetime, optional
        Reference for the relative update times.

    Returns
    -------
    str
        ``no sessions match "..."`` when there are no hits.
    """
    if not hits:
        return f'no sessions match "{query}"'
    count = f"{len(hits)} session{'s' if len(hits) != 1 else ''}"
    rows = [("", "ID", "UPDATED", "TITLE / FIRST PROMPT", "FOUND IN")]
    for hit in hits:
        s = hit.session
        name = one_line(s.title or s.first_prompt, 40) or "(empty)"
        where = one_line(hit.where, 100)
        if hit.count > 1:
            where += f" (+{hit.count - 1} more)"
        rows.append(("*" if s.id == active_id else "", s.id, relative_time(s.updated_at, now),
                     name, where))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    table = [" ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + " " + r[4]
             for r in rows]
    verb = "matches" if len(hits) == 1 else "match"
    return "\n".join([f'{count} {verb} "{query}":', *(line.rstrip() for line in table)])
