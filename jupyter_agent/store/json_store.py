"""SessionStore: the JSON-file backend of the store protocol.

Layout of a memory directory (the store's ``root``)::

    <root>/                 0700 when created; must be yours and writable only by you
        .gitignore          written once if missing, never overwritten
        project.md          project notes (shareable)
        user.md             user notes (private)
        notes.lock          serializes note writers
        index.jsonl         the listing index, a cache (index.py)
        index.lock
        sessions/           0700; same rules
            <id>.json       the session's snapshot (snapshot.py, journal.py)
            <id>.jsonl      its journal, append-only
            <id>.lock       its lease (leases.py)
            <id>.figures/   its figures, one image file each (figures.py), 0700

The store is composed of parts it holds -- no base classes: :class:`~jupyter_agent.
store.session_files.SessionFiles` (every file access through :class:`~jupyter_agent.
store.files.SafeDir`: no-follow, non-blocking, checked; the listing index),
:class:`~jupyter_agent.store.leases.Leases`, and the parts it delegates to:
``json_writes.py`` (every change to a session), ``json_figures.py`` (figures),
``json_leasing.py`` (taking and releasing leases), ``memory.py`` (notes) and
``sweep.py`` (garbage collection).

Invariants
----------
* Every method that changes a session holds its lease while it does so and checks,
  before writing, that the lock file is still the one it locked. A change is one
  journal line, ``fsync``-ed before the method returns (a save point included:
  messages and checkpoint together); the snapshot is rewritten atomically when the
  journal has grown past it (journal.py). Reads take no lease and change nothing.
* While it holds a lease, the store keeps what it last read or wrote of the session in
  memory and reuses it for the next change, after checking with two ``lstat`` calls that
  the files are still the ones it knows. The copy is dropped when the lease is released
  or a write fails.
* A record of the one-file form (jupyter-agent 0.1, or a copied export) loads as it is
  and is converted to snapshot + journal by its first change.
* A method that changes an unknown session raises
  :class:`~jupyter_agent.errors.SessionNotFoundError` and creates no lock file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NoReturn

from jupyter_agent.errors import SessionNotFoundError
from jupyter_agent.store.base import NoteKind, holding
from jupyter_agent.store.figures import FigureData
from jupyter_agent.store.ids import validate_session_id
from jupyter_agent.store.json_figures import FigureFiles
from jupyter_agent.store.json_leasing import LeaseControl
from jupyter_agent.store.json_writes import SessionWriter, is_saved
from jupyter_agent.store.leases import Leases, lock_name
from jupyter_agent.store.memory import MemoryStore
from jupyter_agent.store.records import LeaseHolder, SessionListing, SessionRecord, SessionState
from jupyter_agent.store.session_files import SessionFiles
from jupyter_agent.store.sweep import SessionCheck, check_sessions, collect_garbage

__all__ = ["SessionStore"]


def _iso(value: Any) -> str:
    return str(value.isoformat(timespec="microseconds"))


class SessionStore:
    """Saved sessions, their leases and the notes of one memory directory.

    Implements :class:`~jupyter_agent.store.base.Store` with JSON files (module docstring).
    Constructing a store does no I/O; directories are created by the first write.

    Parameters
    ----------
    root : str or os.PathLike
        The memory directory (``~`` is expanded).
    holder_label : str, optional
        What this store's holder is, for people who find a session in use (a notebook
        path, a kernel name, a command); recorded with each lease. Never a secret.

    Attributes
    ----------
    root : pathlib.Path
    sessions_dir : pathlib.Path
        ``root / "sessions"``.
    holder_label : str
    """

    def __init__(self, root: str | os.PathLike[str], *, holder_label: str = "") -> None:
        self.root = Path(root).expanduser()
        self.sessions_dir = self.root / "sessions"
        self.holder_label = holder_label
        self._leases = Leases(holder_label)
        self._files = SessionFiles(self.root, self._leases)
        self._notes = MemoryStore(self.root)
        self._writer = SessionWriter(self._files, self._leases)
        self._figures = FigureFiles(self._files, self._leases)
        self._leasing = LeaseControl(self._files, self._leases)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    # ------------------------------------------------------------------ paths
    def session_path(self, session_id: str) -> Path:
        """``sessions/<id>.json`` (the snapshot) after validating the ID; nothing is created.

        Raises
        ------
        InvalidSessionIdError
        """
        return self.sessions_dir / f"{validate_session_id(session_id)}.json"

    def journal_path(self, session_id: str) -> Path:
        """``sessions/<id>.jsonl`` (the journal) after validating the ID."""
        return self.sessions_dir / f"{validate_session_id(session_id)}.jsonl"

    def lock_path(self, session_id: str) -> Path:
        """``sessions/<id>.lock`` after validating the ID."""
        return self.sessions_dir / lock_name(validate_session_id(session_id))

    def figures_path(self, session_id: str) -> Path:
        """``sessions/<id>.figures`` (the session's figures) after validating the ID."""
        return self._figures.path(session_id)

    def notes_path(self, kind: NoteKind) -> Path:
        """``project.md`` or ``user.md`` in the memory directory.

        Raises
        ------
        ValueError
            For any other ``kind``.
        """
        return self._notes.notes_path(kind)

    # ------------------------------------------------------------------ notes
    def read_notes(self, kind: NoteKind) -> str:
        """The notes of ``kind`` (see :meth:`MemoryStore.read_notes`)."""
        return self._notes.read_notes(kind)

    def write_notes(self, kind: NoteKind, text: str) -> None:
        """Replace the notes of ``kind`` (see :meth:`MemoryStore.write_notes`)."""
        self._notes.write_notes(kind, text)

    def append_note(self, kind: NoteKind, line: str) -> None:
        """Append one line to the notes of ``kind``; concurrent appenders lose nothing
        (see :meth:`MemoryStore.append_note`)."""
        self._notes.append_note(kind, line)

    # ------------------------------------------------------------------ reads
    def exists(self, session_id: str) -> bool:
        """Whether a session with this ID is saved (no lease, nothing created).

        Raises
        ------
        InvalidSessionIdError
        UnsafeDirectoryError
            If the memory directory may not be used.
        """
        return is_saved(self._files, validate_session_id(session_id))

    def load_session(self, session_id: str) -> SessionRecord:
        """The whole record of a session, read once from its files (no lease).

        Returns
        -------
        SessionRecord
            A fresh object; changing it changes nothing on disk.

        Raises
        ------
        InvalidSessionIdError
        SessionNotFoundError
            If no session has this ID.
        CorruptSessionError
            Naming the file, if it cannot be read or validated (also for a record from a
            newer jupyter-agent); the files are left untouched.
        UnsafePathError
            If the file or its directory may not be used (a link, FIFO, ...).
        """
        validate_session_id(session_id)
        with self._files.dirs(create=False) as dirs:
            if dirs is None:
                _raise_not_found(self, session_id)
            return self._files.read(*dirs, session_id).record

    def list_sessions(self, include_archived: bool = False, *, limit: int | None = None,
                      after: SessionListing | None = None) -> list[SessionListing]:
        """One entry per session that loads, most recently changed first by the store
        clock (:func:`~jupyter_agent.store.paging.listing_order`).

        Reads the listing index and checks each entry with two ``lstat`` calls and one
        ``pread`` of the journal's last checksum; entries that are missing or stale are
        rebuilt from the session's files (every line checked, never the transcript
        parsed). Damaged sessions are left out (:meth:`damaged_sessions` says why).

        Parameters
        ----------
        include_archived : bool
            Include archived sessions (left out by default).
        limit : int, optional
            At most this many entries (default: all); only they are probed for a holder.
        after : SessionListing, optional
            The last entry of the previous page: list what comes after it (see
            :mod:`jupyter_agent.store.paging`).

        Returns
        -------
        list of SessionListing
            ``status`` is ``"active"`` when this store holds the lease, ``"in use"`` (with
            ``holder``) when anyone else does, ``"idle"`` otherwise. ``owner_user`` and
            ``owner_host`` are "": the files of one user do not record an owner.

        Raises
        ------
        ValueError
            ``limit`` below 1.
        UnsafePathError
            If the memory directory, ``sessions/`` or the index may not be used.
        """
        return self._files.listing(include_archived, limit, after)

    def describe_session(self, session_id: str) -> SessionListing:
        """What :meth:`list_sessions` shows of one session (archived or not), from the
        listing index or the snapshot and the end of the journal (never the transcript).

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError, UnsafePathError
            As :meth:`load_session`.
        """
        validate_session_id(session_id)
        return self._files.describe(session_id)

    def collect_garbage(self) -> list[Path]:
        """Remove temporary files of killed writers and lock files of deleted sessions.

        Only under the lock their writers would hold, and never a lease someone holds
        (this store's included); see :mod:`jupyter_agent.store.sweep`.

        Returns
        -------
        list of pathlib.Path
            The files removed.

        Raises
        ------
        UnsafeDirectoryError, OSError
        """
        return collect_garbage(self._files)

    def damaged_sessions(self) -> dict[str, str]:
        """The sessions the last listing of this store left out because they do not
        load, each with its one-line reason (``jupyter agent fsck`` says more)."""
        return dict(self._files.index.damaged)

    def check_sessions(self, *, repair: bool = False) -> list[SessionCheck]:
        """Check every session and report its state; with ``repair``, make the safe
        repairs (``jupyter agent fsck``; see :func:`jupyter_agent.store.sweep.
        check_sessions`, which lists them). Every byte a repair takes out of a journal
        is kept in ``sessions/<id>.jsonl.damaged``.

        Raises
        ------
        UnsafeDirectoryError, OSError
        """
        return check_sessions(self._files, repair=repair)

    # ------------------------------------------------------------------ writes
    def create_session(self, messages: Sequence[Any], *, session_id: str | None = None,
                       title: str = "", project_root: str | os.PathLike[str] | None = None) -> str:
        """Create and save a new session; its ID (:meth:`SessionWriter.create_session
        <jupyter_agent.store.json_writes.SessionWriter.create_session>`)."""
        return self._writer.create_session(messages, session_id=session_id, title=title,
                                           project_root=project_root)

    def import_session(self, record: SessionRecord) -> None:
        """Save a whole record as a new session under its own ID (:meth:`SessionWriter.
        import_session <jupyter_agent.store.json_writes.SessionWriter.import_session>`)."""
        self._writer.import_session(record)

    def save(self, session_id: str, messages: Sequence[Any],
             state: SessionState | Mapping[str, Any] | None = None) -> None:
        """One save point (:meth:`SessionWriter.save
        <jupyter_agent.store.json_writes.SessionWriter.save>`)."""
        self._writer.save(session_id, messages, state)

    def save_messages(self, session_id: str, messages: Sequence[Any]) -> None:
        """:meth:`save` without a checkpoint (same parameters and errors)."""
        self._writer.save(session_id, messages)

    def save_state(self, session_id: str, state: SessionState | Mapping[str, Any]) -> None:
        """Record the checkpoint alone (:meth:`SessionWriter.save_state
        <jupyter_agent.store.json_writes.SessionWriter.save_state>`)."""
        self._writer.save_state(session_id, state)

    def compact(self, session_id: str, messages: Sequence[Any], *, summary: str,
                replaced: int | None = None) -> None:
        """Replace the working context after a compaction (:meth:`SessionWriter.compact
        <jupyter_agent.store.json_writes.SessionWriter.compact>`)."""
        self._writer.compact(session_id, messages, summary=summary, replaced=replaced)

    def write_summary(self, session_id: str, summary: str) -> None:
        """Replace the summary (:meth:`SessionWriter.write_summary
        <jupyter_agent.store.json_writes.SessionWriter.write_summary>`)."""
        self._writer.write_summary(session_id, summary)

    def ensure_summary(self, session_id: str) -> str:
        """The summary, after writing the fallback excerpt if there was none
        (:meth:`SessionWriter.ensure_summary
        <jupyter_agent.store.json_writes.SessionWriter.ensure_summary>`)."""
        return self._writer.ensure_summary(session_id)

    def set_title(self, session_id: str, title: str) -> None:
        """Set the title (:meth:`SessionWriter.set_title
        <jupyter_agent.store.json_writes.SessionWriter.set_title>`)."""
        self._writer.set_title(session_id, title)

    def set_archived(self, session_id: str, archived: bool = True) -> None:
        """Archive or unarchive (:meth:`SessionWriter.set_archived
        <jupyter_agent.store.json_writes.SessionWriter.set_archived>`)."""
        self._writer.set_archived(session_id, archived)

    def delete_session(self, session_id: str) -> None:
        """Delete the session for good (:meth:`SessionWriter.delete_session
        <jupyter_agent.store.json_writes.SessionWriter.delete_session>`)."""
        self._writer.delete_session(session_id)

    # ------------------------------------------------------------------ figures
    def save_figure(self, session_id: str, figure_id: str, data: bytes, media_type: str) -> None:
        """Keep a figure with the session (:meth:`FigureFiles.save
        <jupyter_agent.store.json_figures.FigureFiles.save>`)."""
        self._figures.save(session_id, figure_id, data, media_type)

    def read_figure(self, session_id: str, figure_id: str) -> FigureData:
        """A figure of the session (:meth:`FigureFiles.read
        <jupyter_agent.store.json_figures.FigureFiles.read>`)."""
        return self._figures.read(session_id, figure_id)

    def figure_ids(self, session_id: str) -> list[str]:
        """The IDs of the session's figures, sorted (:meth:`FigureFiles.ids
        <jupyter_agent.store.json_figures.FigureFiles.ids>`)."""
        return self._figures.ids(session_id)

    def delete_figure(self, session_id: str, figure_id: str) -> bool:
        """Delete one figure; whether it existed (:meth:`FigureFiles.delete
        <jupyter_agent.store.json_figures.FigureFiles.delete>`)."""
        return self._figures.delete(session_id, figure_id)

    # ------------------------------------------------------------------ leases
    def acquire_lease(self, session_id: str) -> None:
        """Take (or re-enter) the session's lease without waiting (:meth:`LeaseControl.
        acquire <jupyter_agent.store.json_leasing.LeaseControl.acquire>`)."""
        self._leasing.acquire(session_id)

    def release_lease(self, session_id: str) -> None:
        """Undo one :meth:`acquire_lease` (:meth:`LeaseControl.release
        <jupyter_agent.store.json_leasing.LeaseControl.release>`)."""
        self._leasing.release(session_id)

    def lease(self, session_id: str) -> AbstractContextManager[None]:
        """Hold the session's lease for a ``with`` block (re-entrant within this store).

        Raises
        ------
        As :meth:`acquire_lease`.
        """
        return holding(self, session_id)

    def holds_lease(self, session_id: str) -> bool:
        """Whether this store (in this process) holds the session's lease."""
        return self._leasing.holds(session_id)

    def lease_holder(self, session_id: str) -> LeaseHolder | None:
        """Who holds the session's lease; ``None`` when nobody does
        (:meth:`LeaseControl.holder <jupyter_agent.store.json_leasing.LeaseControl.holder>`)."""
        return self._leasing.holder(session_id)

    def release_all(self) -> None:
        """Release every lease this store holds, whatever the counts (extension unload)."""
        self._leasing.release_all()


def _raise_not_found(store: SessionStore, session_id: str) -> NoReturn:
    """Raise :class:`~jupyter_agent.errors.SessionNotFoundError` for ``session_id``."""
    raise SessionNotFoundError(session_id, store.session_path(session_id))
