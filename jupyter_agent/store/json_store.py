"""SessionStore: the JSON-file backend of the store protocol (design §20).

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
store.files.SafeDir` for every file access (no-follow, non-blocking, checked),
:class:`~jupyter_agent.store.leases.Leases`, the :class:`~jupyter_agent.store.index.
ListingIndex` and the functions of ``notes.py``, ``snapshot.py`` and ``changes.py``.

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

import contextlib
import errno
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from stat import S_ISREG
from typing import Any, NoReturn

from jupyter_agent.errors import (
    FigureNotFoundError,
    SessionNotFoundError,
)
from jupyter_agent.store.base import NoteKind
from jupyter_agent.store.changes import check_importable, normalized
from jupyter_agent.store.entries import compaction, save_point
from jupyter_agent.store.figures import (
    FigureData,
    check_figure,
    figure_file,
    figures_dir,
    list_figure_ids,
    read_figure_file,
    remove_figure_file,
    remove_figures_dir,
    validate_figure_id,
    write_figure_file,
)
from jupyter_agent.store.ids import new_session_id, validate_session_id
from jupyter_agent.store.leases import Leases, lock_name
from jupyter_agent.store.memory import MemoryStore
from jupyter_agent.store.messages import clean_text, fallback_summary
from jupyter_agent.store.records import (
    LeaseHolder,
    SessionListing,
    SessionRecord,
    SessionState,
    utc_now,
)
from jupyter_agent.store.session_files import SessionFiles, storage_errors
from jupyter_agent.store.sweep import collect_garbage

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
        return self.sessions_dir / figures_dir(validate_session_id(session_id))

    def notes_path(self, kind: NoteKind) -> Path:
        """``project.md`` or ``user.md`` in the memory directory.

        Raises
        ------
        ValueError
            For any other ``kind``.
        """
        return self._notes.notes_path(kind)

    # ------------------------------------------------------------------ notes (design §2)
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

    # ------------------------------------------------------------------ sessions
    def create_session(
        self,
        messages: Sequence[Any],
        *,
        session_id: str | None = None,
        title: str = "",
        project_root: str | os.PathLike[str] | None = None,
    ) -> str:
        """Create and save a new session (under its lease).

        Parameters
        ----------
        messages : sequence of dict or pydantic objects
            The initial working context (e.g. the system message); also the start of the
            transcript.
        session_id : str, optional
            Defaults to a fresh :func:`~jupyter_agent.store.new_session_id`.
        title : str
        project_root : str or os.PathLike, optional

        Returns
        -------
        str
            The session ID.

        Raises
        ------
        InvalidSessionIdError
            Before any file is touched.
        InvalidMessageError
            For a message that could not be saved (nothing is written).
        FileExistsError
            If a session with that ID exists.
        SessionLockedError, UnsafePathError, StorageError
        """
        if session_id is not None:
            validate_session_id(session_id)
        converted = normalized(messages)
        root = None if project_root is None else os.fspath(project_root)
        now = utc_now()
        with self._files.mutex:
            if session_id is None:
                session_id = new_session_id()
                while self.exists(session_id):
                    session_id = new_session_id()
            record = SessionRecord(id=session_id, created_at=now, updated_at=now,
                                   title=title, project_root=root)
            record.messages, record.transcript = converted, list(converted)
            self._add(record)
        return session_id

    def import_session(self, record: SessionRecord) -> None:
        """Save a whole record as a new session under its own ID (forks, migrations).

        Everything is kept as given: working context, transcript, compactions, state,
        summary, title, archived flag, parent, timestamps and unknown keys.

        Parameters
        ----------
        record : SessionRecord
            ``record.id`` must not exist in this store yet.

        Raises
        ------
        FileExistsError
            If a session with that ID exists (nothing is changed).
        InvalidMessageError
            If a message of the record could not be saved.
        ValueError
            If another part of it holds something JSON cannot.
        InvalidSessionIdError, SessionLockedError, UnsafePathError, StorageError
        """
        check_importable(record)
        self._add(record.model_copy(deep=True))

    def _add(self, record: SessionRecord) -> None:
        with self._files.leased(record.id, create=True) as (root, sessions):
            if sessions.lstat(f"{record.id}.json") is not None:
                raise FileExistsError(errno.EEXIST, "session already exists",
                                      str(self.session_path(record.id)))
            loaded = self._files.write_fresh(sessions, record)
            self._files.index.note(root, sessions, record.id, self._files.all_fields(loaded))

    def exists(self, session_id: str) -> bool:
        """Whether a session with this ID is saved (no lease, nothing created).

        Raises
        ------
        InvalidSessionIdError
        UnsafeDirectoryError
            If the memory directory may not be used.
        """
        validate_session_id(session_id)
        with self._files.dirs(create=False) as dirs:
            if dirs is None:
                return False
            st = dirs[1].lstat(f"{session_id}.json")
            return st is not None and _is_regular(st)

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
            return self._files.read(dirs[1], session_id).record

    def save(
        self,
        session_id: str,
        messages: Sequence[Any],
        state: SessionState | Mapping[str, Any] | None = None,
    ) -> None:
        """One save point: new messages and (when given) the checkpoint in one write.

        Parameters
        ----------
        session_id : str
        messages : sequence of dict or pydantic objects
            The whole current working context; it must extend the saved one (design §3):
            its first ``len(saved)`` messages equal the saved ones, the rest are appended
            to the working context and the transcript.
        state : SessionState or mapping, optional
            The checkpoint to record with them (design §6).

        Raises
        ------
        ContextMismatchError
            If the messages do not extend the saved context; nothing is written.
        InvalidMessageError
            For a new message that could not be saved; nothing is written.
        pydantic.ValidationError
            If ``state`` does not describe a valid checkpoint (negative counts, ...).
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError,
        SessionLockedError, LeaseLostError, UnsafePathError, StorageError
        """
        incoming = messages if isinstance(messages, list) else list(messages)
        snapshot = None
        if state is not None:
            data = state.model_dump() if isinstance(state, SessionState) else state
            snapshot = SessionState.model_validate(data)
        with self._files.leased(session_id) as (root, sessions):
            loaded = self._files.current(sessions, session_id)
            change = save_point(loaded, incoming, snapshot)
            if change is not None:
                self._files.append(root, sessions, loaded, *change)

    def save_messages(self, session_id: str, messages: Sequence[Any]) -> None:
        """:meth:`save` without a checkpoint (same parameters and errors)."""
        self.save(session_id, messages)

    def save_state(self, session_id: str, state: SessionState | Mapping[str, Any]) -> None:
        """Record the checkpoint alone; nothing is written when it is unchanged.

        A copy is saved: later changes to ``state`` do not leak in. Errors as :meth:`save`.
        """
        with self._files.leased(session_id) as (_root, sessions):
            saved = self._files.current(sessions, session_id).record.messages
            self.save(session_id, saved, state)

    def compact(
        self,
        session_id: str,
        messages: Sequence[Any],
        *,
        summary: str,
        replaced: int | None = None,
    ) -> None:
        """Replace the working context after a compaction; the transcript is untouched.

        Save pending messages with :meth:`save` first: only they reach the transcript.
        The journal records what the new context keeps of the old one (a prefix and a
        suffix) and the messages between, never the transcript again.

        Parameters
        ----------
        session_id : str
        messages : sequence of dict or pydantic objects
            The new working context (e.g. system message, summary message, recent turns).
        summary : str
            The summary that replaced the older turns (recorded in the event).
        replaced : int, optional
            How many working messages were replaced; by default those of the saved
            context not kept as a common prefix or suffix of ``messages``.

        Raises
        ------
        InvalidMessageError, InvalidSessionIdError, SessionNotFoundError,
        CorruptSessionError, SessionLockedError, LeaseLostError, UnsafePathError,
        StorageError
        """
        new_context = normalized(messages)
        with self._files.leased(session_id) as (root, sessions):
            loaded = self._files.current(sessions, session_id)
            change = compaction(loaded, new_context, clean_text(summary), replaced)
            self._files.append(root, sessions, loaded, *change)

    def write_summary(self, session_id: str, summary: str) -> None:
        """Replace the summary (design §9) and set ``updated_at`` to now.

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError,
        SessionLockedError, LeaseLostError, UnsafePathError, StorageError
        """
        text, now = clean_text(summary), utc_now()
        self._files.change(session_id, {"set": {"summary": text}, "updated_at": _iso(now)},
                           summary=text, updated_at=now)

    def ensure_summary(self, session_id: str) -> str:
        """The summary, after writing the fallback excerpt if there was none (design §9).

        The fallback is the text of the last six user and assistant messages of the
        transcript that have text, as ``"user: ...\\nassistant: ..."``, at most 2,000
        characters. Runs under the lease.

        Returns
        -------
        str
            The summary ("" if there is none and no message has text).

        Raises
        ------
        As :meth:`write_summary`.
        """
        with self._files.leased(session_id) as (_root, sessions):
            record = self._files.current(sessions, session_id).record
            if record.summary.strip():
                return record.summary
            text = fallback_summary(record.transcript)
            if text:
                self.write_summary(session_id, text)
            return text

    def set_title(self, session_id: str, title: str) -> None:
        """Set the title (``updated_at`` is not changed). Errors as :meth:`write_summary`."""
        text = clean_text(title)
        self._files.change(session_id, {"set": {"title": text}}, title=text)

    def set_archived(self, session_id: str, archived: bool = True) -> None:
        """Archive (or with ``archived=False`` unarchive) a session; ``updated_at`` is not
        changed, so unarchiving restores its place. Errors as :meth:`write_summary`."""
        flag = bool(archived)
        self._files.change(session_id, {"set": {"archived": flag}}, archived=flag)

    def delete_session(self, session_id: str) -> None:
        """Delete the session for good: its snapshot (the session is gone at that moment),
        then its journal, then its figures. The lock file stays (see
        :meth:`collect_garbage`).

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, SessionLockedError, LeaseLostError,
        UnsafePathError, StorageError
        """
        with self._files.leased(session_id) as (root, sessions):
            self._leases.verify(sessions, session_id)
            with storage_errors(self.session_path(session_id)):
                if not sessions.unlink(f"{session_id}.json"):
                    _raise_not_found(self, session_id)
                sessions.fsync()
                sessions.unlink(f"{session_id}.jsonl")
                sessions.fsync()
            with storage_errors(self.figures_path(session_id)):
                remove_figures_dir(sessions, session_id)
            self._files.cache.pop(session_id, None)
            self._files.index.forget(root, session_id)

    # ------------------------------------------------------------------ figures (design §23)
    def save_figure(self, session_id: str, figure_id: str, data: bytes, media_type: str) -> None:
        """Keep a figure as ``sessions/<id>.figures/<figure id>.<suffix>``, written
        atomically under the session's lease (see :meth:`Store.save_figure
        <jupyter_agent.store.base.Store.save_figure>` for parameters and errors)."""
        check_figure(figure_id, data, media_type)
        with self._files.leased(session_id) as (_root, sessions):
            self._leases.verify(sessions, session_id)
            path = self.figures_path(session_id) / figure_file(figure_id, media_type)
            with storage_errors(path):
                write_figure_file(sessions, session_id, figure_id, data, media_type)

    def read_figure(self, session_id: str, figure_id: str) -> FigureData:
        """A figure's file, read without following links and without a lease (see
        :meth:`Store.read_figure <jupyter_agent.store.base.Store.read_figure>`)."""
        validate_session_id(session_id)
        validate_figure_id(figure_id)
        with self._files.dirs(create=False) as dirs:
            found = None if dirs is None else read_figure_file(dirs[1], session_id, figure_id)
        if found is None:
            raise FigureNotFoundError(session_id, figure_id, self.figures_path(session_id))
        return found[0]

    def figure_ids(self, session_id: str) -> list[str]:
        """The IDs of a session's figures, sorted (no lease; ``[]`` when it has none)."""
        validate_session_id(session_id)
        with self._files.dirs(create=False) as dirs:
            return [] if dirs is None else list_figure_ids(dirs[1], session_id)

    def delete_figure(self, session_id: str, figure_id: str) -> bool:
        """Delete one figure (under the session's lease); whether it existed."""
        validate_figure_id(figure_id)
        with self._files.leased(session_id) as (_root, sessions):
            self._leases.verify(sessions, session_id)
            with storage_errors(self.figures_path(session_id)):
                return remove_figure_file(sessions, session_id, figure_id)

    def list_sessions(self, include_archived: bool = False, *, limit: int | None = None,
                      after: SessionListing | None = None) -> list[SessionListing]:
        """One entry per readable session, newest ``updated_at`` first (design §10).

        Reads the listing index and checks each entry with two ``lstat`` calls; entries
        that are missing or stale are rebuilt from the session's snapshot and the end of
        its journal (never the transcript). Unreadable sessions are skipped.

        Parameters
        ----------
        include_archived : bool
            Include archived sessions (left out by default).
        limit : int, optional
            At most this many entries (default: all); only they are probed for a holder.
        after : SessionListing, optional
            The last entry of the previous page: list what comes after it (by
            ``(updated_at, id)``; see :mod:`jupyter_agent.store.paging`).

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
        InvalidSessionIdError
        SessionNotFoundError
            If no session has this ID.
        CorruptSessionError
            Naming the file, if it cannot be read or validated.
        UnsafePathError
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

    # ------------------------------------------------------------------ leases (design §7)
    def acquire_lease(self, session_id: str) -> None:
        """Take (or re-enter) the session's lease, without waiting; hold it until
        :meth:`release_lease`. Also for a session not saved yet (creates its lock file).

        Raises
        ------
        InvalidSessionIdError
            Before any file is touched.
        SessionLockedError
            At once, naming the holder, if another process or store holds it.
        UnsafePathError, StorageError
        """
        validate_session_id(session_id)
        with self._files.mutex, self._files.dirs(create=True) as dirs:
            assert dirs is not None
            self._files.take_lease(dirs[1], session_id)

    def release_lease(self, session_id: str) -> None:
        """Undo one :meth:`acquire_lease` (releasing a lease not held does nothing).

        Raises
        ------
        InvalidSessionIdError
        """
        validate_session_id(session_id)
        with self._files.mutex:
            self._leases.release(session_id)
            if not self._leases.holds(session_id):
                self._files.cache.pop(session_id, None)

    @contextlib.contextmanager
    def lease(self, session_id: str) -> Iterator[None]:
        """Hold the session's lease for a ``with`` block (re-entrant within this store).

        Raises
        ------
        As :meth:`acquire_lease`.
        """
        self.acquire_lease(session_id)
        try:
            yield
        finally:
            self.release_lease(session_id)

    def holds_lease(self, session_id: str) -> bool:
        """Whether this store (in this process) holds the session's lease."""
        validate_session_id(session_id)
        return self._leases.holds(session_id)

    def lease_holder(self, session_id: str) -> LeaseHolder | None:
        """Who holds the session's lease, as the holder recorded it (pid, host, user,
        since, label); ``None`` when nobody does.

        Raises
        ------
        InvalidSessionIdError
        UnsafePathError
            If the lock file or its directory may not be used.
        """
        validate_session_id(session_id)
        with self._files.mutex, self._files.dirs(create=False) as dirs:
            return None if dirs is None else self._leases.holder(dirs[1], session_id)

    def release_all(self) -> None:
        """Release every lease this store holds, whatever the counts (extension unload)."""
        with self._files.mutex:
            self._leases.release_all()
            self._files.cache.clear()


def _is_regular(st: os.stat_result) -> bool:
    """Whether a stat result is a regular file."""
    return S_ISREG(st.st_mode)


def _raise_not_found(store: SessionStore, session_id: str) -> NoReturn:
    """Raise :class:`~jupyter_agent.errors.SessionNotFoundError` for ``session_id``."""
    raise SessionNotFoundError(session_id, store.session_path(session_id))
