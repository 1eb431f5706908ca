"""The store protocol: what the agent, controller, panel, built-in tools and CLI call.

:class:`Store` names every operation on saved sessions and notes that code outside
``jupyter_agent.store`` may use. Backends implement it by composition (the JSON-file
backend, :class:`~jupyter_agent.store.SessionStore`; a database backend later) and are
held to the same contract tests (``tests/store_contract``). Code that talks to a store
annotates it as :class:`Store`, never as a concrete backend.

The rules every backend keeps:

* session IDs are validated before use: an invalid one raises
  :class:`~jupyter_agent.errors.InvalidSessionIdError` before anything is touched;
* every method that changes a session holds its lease while it does so; a
  lease held by another process or another store object raises
  :class:`~jupyter_agent.errors.SessionLockedError` at once, naming the holder;
* a method that changes an unknown session raises
  :class:`~jupyter_agent.errors.SessionNotFoundError` and leaves nothing behind;
* :meth:`Store.save` is one save point: new messages and, when given, the
  checkpoint are recorded by one durable write; a crash leaves either all of it or none;
* reads (:meth:`Store.load_session`, :meth:`Store.exists`, :meth:`Store.list_sessions`,
  :meth:`Store.lease_holder`, :meth:`Store.read_notes`) take no lease and change nothing;
* a record that cannot be read raises :class:`~jupyter_agent.errors.CorruptSessionError`
  naming where it is, and is left untouched; listing skips it. Records are validated
  completely when loaded, and a message that could not be loaded back is
  refused before it is saved (:class:`~jupyter_agent.errors.InvalidMessageError`);
* a session's figures are image files kept with it, written under its
  lease and deleted with it; :meth:`Store.read_figure` never follows a link;
* a lease refusal carries who holds the session (``SessionLockedError.holder``: pid, host,
  user, since, label) and :meth:`Store.list_sessions` reports it for sessions in use;
* listing is ordered by ``(updated_at, id)``, newest first, and can be read a page at a
  time (``limit``, ``after``); a store shared by a team fills ``owner_user`` and
  ``owner_host`` of each entry, the files of one user leave them "".
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol, runtime_checkable

from jupyter_agent.store.figures import FigureData
from jupyter_agent.store.records import LeaseHolder, SessionListing, SessionRecord, SessionState

__all__ = ["NoteKind", "Store", "holding"]

NoteKind = Literal["project", "user"]
"""The two notes of a memory directory: ``project.md`` and ``user.md``."""


@runtime_checkable
class Store(Protocol):
    """Saved sessions, their leases, and the notes of one memory directory.

    See the module docstring for the rules every implementation keeps; each method's
    own docstring on :class:`~jupyter_agent.store.SessionStore` (or on the part it
    delegates to, which that docstring names) gives its parameters, return values and
    errors in full.
    """

    # ---- notes
    def read_notes(self, kind: NoteKind) -> str:
        """The notes of ``kind`` ("" when there are none)."""
        ...

    def write_notes(self, kind: NoteKind, text: str) -> None:
        """Replace the notes of ``kind`` with ``text``."""
        ...

    def append_note(self, kind: NoteKind, line: str) -> None:
        """Append one line to the notes of ``kind``; concurrent appenders lose nothing."""
        ...

    # ---- sessions
    def create_session(
        self,
        messages: Sequence[Any],
        *,
        session_id: str | None = None,
        title: str = "",
        project_root: str | None = None,
    ) -> str:
        """Create a session whose working context and transcript start as ``messages``."""
        ...

    def import_session(self, record: SessionRecord) -> None:
        """Add a whole record as a new session under its own ID (forks, migrations)."""
        ...

    def exists(self, session_id: str) -> bool:
        """Whether a session with this ID is saved."""
        ...

    def load_session(self, session_id: str) -> SessionRecord:
        """The whole record of a session (a fresh object)."""
        ...

    def save(
        self,
        session_id: str,
        messages: Sequence[Any],
        state: SessionState | Mapping[str, Any] | None = None,
    ) -> None:
        """One save point: extend the working context with ``messages`` and record
        ``state`` (when given) in one write."""
        ...

    def save_messages(self, session_id: str, messages: Sequence[Any]) -> None:
        """:meth:`save` without a checkpoint."""
        ...

    def save_state(self, session_id: str, state: SessionState | Mapping[str, Any]) -> None:
        """Record the checkpoint alone (nothing is written when it is unchanged)."""
        ...

    def compact(
        self,
        session_id: str,
        messages: Sequence[Any],
        *,
        summary: str,
        replaced: int | None = None,
    ) -> None:
        """Replace the working context after a compaction; the transcript is untouched
        and a compaction event is recorded."""
        ...

    def write_summary(self, session_id: str, summary: str) -> None:
        """Replace the summary."""
        ...

    def ensure_summary(self, session_id: str) -> str:
        """The summary, after writing the fallback excerpt if there was none."""
        ...

    def set_title(self, session_id: str, title: str) -> None:
        """Set the title."""
        ...

    def set_archived(self, session_id: str, archived: bool = True) -> None:
        """Archive or unarchive."""
        ...

    def delete_session(self, session_id: str) -> None:
        """Delete the session for good."""
        ...

    def list_sessions(self, include_archived: bool = False, *, limit: int | None = None,
                      after: SessionListing | None = None) -> list[SessionListing]:
        """One entry per readable session, most recently updated first.

        A session dated more than ``CLOCK_SKEW`` (5 minutes) after this machine's clock
        is left out like an unreadable one (:func:`~jupyter_agent.store.records.
        check_not_future`): a time ahead of the clock is never the newest.

        ``limit`` (at least 1; ``ValueError`` otherwise) keeps the newest ``limit``
        entries; ``after`` (an entry of an earlier page) lists what comes after it in
        the order ``(updated_at, id)``. Where only the newest session is needed, ask for
        ``limit=1``: a team store then reads one row, not the whole project.
        """
        ...

    def describe_session(self, session_id: str) -> SessionListing:
        """What :meth:`list_sessions` shows of one session, archived or not (status,
        holder, owner, fork origin), without reading its messages; raises
        ``SessionNotFoundError`` or ``CorruptSessionError`` as a load would, and
        ``CorruptSessionError`` for a session the listing leaves out (one dated in the
        future included)."""
        ...

    # ---- figures
    def save_figure(self, session_id: str, figure_id: str, data: bytes, media_type: str) -> None:
        """Keep a figure with a saved session, under its lease (replacing one of that ID).

        Parameters
        ----------
        session_id : str
        figure_id : str
            1-128 letters, digits, ``_`` or ``-``.
        data : bytes
            The image file, at most ``MAX_FIGURE_BYTES`` (16 MiB).
        media_type : str
            ``"image/png"``, ``"image/jpeg"`` or ``"image/svg+xml"``; ``data`` must be one.

        Raises
        ------
        InvalidFigureError
            Before anything is written: a bad ID, media type, content or size.
        InvalidSessionIdError, SessionNotFoundError, SessionLockedError
        """
        ...

    def read_figure(self, session_id: str, figure_id: str) -> FigureData:
        """A figure of a session (no lease): its bytes and media type.

        Raises
        ------
        FigureNotFoundError
            The session has no such figure.
        InvalidSessionIdError, InvalidFigureError
        """
        ...

    def figure_ids(self, session_id: str) -> list[str]:
        """The IDs of the figures kept for a session, sorted (``[]`` when none)."""
        ...

    def delete_figure(self, session_id: str, figure_id: str) -> bool:
        """Delete one figure, under the session's lease; whether it existed."""
        ...

    # ---- leases
    def acquire_lease(self, session_id: str) -> None:
        """Take (or re-enter) the session's lease, without waiting."""
        ...

    def release_lease(self, session_id: str) -> None:
        """Undo one :meth:`acquire_lease`."""
        ...

    def lease(self, session_id: str) -> AbstractContextManager[None]:
        """Hold the lease for a ``with`` block."""
        ...

    def holds_lease(self, session_id: str) -> bool:
        """Whether this store object holds the session's lease."""
        ...

    def lease_holder(self, session_id: str) -> LeaseHolder | None:
        """Who holds the session's lease (``None`` when nobody does)."""
        ...

    def release_all(self) -> None:
        """Release every lease this store object holds."""
        ...


@contextlib.contextmanager
def holding(store: Store, session_id: str) -> Iterator[None]:
    """Hold ``store``'s lease on ``session_id`` for a ``with`` block (what every backend's
    :meth:`Store.lease` does): :meth:`Store.acquire_lease` on entry,
    :meth:`Store.release_lease` on exit, also when the block raises.

    Parameters
    ----------
    store : Store
    session_id : str

    Raises
    ------
    InvalidSessionIdError, SessionLockedError
        As :meth:`Store.acquire_lease` (the block is not entered).
    """
    store.acquire_lease(session_id)
    try:
        yield
    finally:
        store.release_lease(session_id)
