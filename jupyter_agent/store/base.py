"""The store protocol: what the agent, controller, panel, built-in tools and CLI call.

Both backends (files: :class:`~jupyter_agent.store.file_store.FileStore`; PostgreSQL) run
on the session engine (``engine.py``) and pass ``tests/store_contract``. The rules:

* an invalid session ID raises ``InvalidSessionIdError`` before anything is touched;
* a change holds the session's lease; a lease held elsewhere raises ``SessionLockedError``
  at once, naming the holder; changing an unknown session raises ``SessionNotFoundError``
  and leaves nothing behind;
* :meth:`Store.save` is one save point: messages and checkpoint in one durable write;
* reads take no lease and change nothing; a record that cannot be read raises
  ``CorruptSessionError`` naming where it is (listing skips it); what is saved could be
  loaded back (``InvalidMessageError`` otherwise, before anything is written);
* listing is ordered by ``(updated_at, id)``, newest first, a page at a time.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from jupyter_agent.store.figure_files import FigureData
from jupyter_agent.store.messages import fallback_summary
from jupyter_agent.store.notes import Notes
from jupyter_agent.store.records import SessionListing, SessionRecord, SessionState


@runtime_checkable
class Store(Protocol):
    """Saved sessions and their leases; ``notes`` holds the memory directory's notes."""

    notes: Notes

    def create_session(self, messages: Sequence[Any] = (), *, session_id: str | None = None,
                       title: str = "", project_root: str | os.PathLike[str] | None = None,
                       record: SessionRecord | None = None) -> str:
        """Create a session whose working context and transcript start as ``messages``.

        With ``record``, add that whole record under its own ID (forks, migrations); the
        other arguments must then keep their defaults (``ValueError``). Raises
        ``FileExistsError`` if the ID is taken. Returns the ID.
        """
        ...

    def exists(self, session_id: str) -> bool: ...

    def load_session(self, session_id: str) -> SessionRecord: ...

    def describe_session(self, session_id: str) -> SessionListing:
        """The listing entry of one session (archived or not, its lease holder included)."""
        ...

    def list_sessions(self, include_archived: bool = False, *, limit: int | None = None,
                      after: SessionListing | None = None) -> list[SessionListing]:
        """Newest first; ``limit`` (>= 1, ``ValueError`` otherwise) entries after ``after``.

        A session dated more than ``CLOCK_SKEW`` ahead of this machine's clock is left out.
        """
        ...

    def save(self, session_id: str, messages: Sequence[Any] = (),
             state: SessionState | Mapping[str, Any] | None = None) -> None:
        """One save point: ``messages`` (the whole working context, extending the saved one;
        ``()``, the default: keep it) and the checkpoint ``state``. Nothing is written when neither
        changed. Raises ``ContextMismatchError`` if the saved context is not a prefix."""
        ...

    def compact(self, session_id: str, messages: Sequence[Any], *, summary: str,
                replaced: int | None = None) -> None:
        """Replace the working context (the transcript is untouched; an event is recorded)."""
        ...

    def update(self, session_id: str, *, title: str | None = None, summary: str | None = None,
               archived: bool | None = None) -> None:
        """Change the given fields in one change (``None``: leave as is); a new summary
        moves ``updated_at`` to now, a title or the archived flag does not."""
        ...

    def delete_session(self, session_id: str) -> None: ...

    def save_figure(self, session_id: str, figure_id: str, data: bytes, media_type: str) -> None:
        """Keep an image (PNG, JPEG or SVG, at most 16 MiB) with a session, replacing one of
        that ID; ``InvalidFigureError`` before anything is written."""
        ...

    def read_figure(self, session_id: str, figure_id: str) -> FigureData:
        """Raises ``FigureNotFoundError``."""
        ...

    def figure_ids(self, session_id: str) -> list[str]: ...

    def acquire_lease(self, session_id: str) -> None:
        """Take (or re-enter) the lease without waiting."""
        ...

    def release_lease(self, session_id: str) -> None: ...

    def release_all(self) -> None: ...


@contextlib.contextmanager
def holding(store: Store, session_id: str) -> Iterator[None]:
    """Hold ``store``'s lease on ``session_id`` for a ``with`` block."""
    store.acquire_lease(session_id)
    try:
        yield
    finally:
        store.release_lease(session_id)


def ensure_summary(store: Store, session_id: str) -> str:
    """The session's summary, after writing the fallback excerpt of its last messages if
    there was none ("" when no message has text)."""
    record = store.load_session(session_id)  # unknown: raises before a lease is taken
    if record.summary.strip():
        return record.summary
    with holding(store, session_id):
        record = store.load_session(session_id)
        if record.summary.strip():
            return record.summary
        text = fallback_summary(record.transcript)
        if text:
            store.update(session_id, summary=text)
        return text
