"""SessionStore: saved conversations with leases, working context vs transcript, checkpoints.

Invariants
----------
* Every method that changes a record (``create_session``, ``save_messages``,
  ``compact``, ``save_state``, ``write_summary``, ``ensure_summary``, ``set_title``,
  ``set_archived``, ``delete_session``) holds the session's lease while it reads,
  changes and atomically rewrites the file. Reads (``load_session``, ``exists``,
  ``list_sessions``) take no lease and never modify a file.
* The lease is ``flock(LOCK_EX | LOCK_NB)`` on ``sessions/<id>.lock`` (spec: "Session
  Locks"): a second holder -- another process, or another store object in this
  process -- gets :class:`~jupyter_agent.errors.SessionLockedError` at once, naming
  the pid written in the lock file. Within one store the lease is re-entrant (a
  count), so ``lease()`` nests inside a long hold taken with ``acquire_lease()``.
  The operating system frees it when the process exits, also after SIGKILL. Leases
  are not inherited across ``fork``: a child must take its own.
* ``messages`` is the working context sent to the model; ``transcript`` is every
  message ever saved. Normal saves append new messages to both; compaction replaces
  ``messages`` only and records a :class:`~jupyter_agent.store.records.Compaction`.
* A method that changes a record first checks that ``sessions/<id>.json`` exists:
  an unknown ID raises :class:`~jupyter_agent.errors.SessionNotFoundError` and leaves
  no ``.lock`` file behind (only ``create_session`` leases a new ID).
* While it holds a lease, the store keeps the record it last read or wrote in memory
  and reuses it for the next change (see ``leases.py``, which holds this update path).
* Temporary files that a killed writer left behind (``.<id>.json.*.tmp``) are removed
  when the lease is next taken.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jupyter_agent.errors import SessionLockedError, SessionNotFoundError
from jupyter_agent.store.changes import extend_context, replace_context
from jupyter_agent.store.files import fsync_dir, lock_is_held
from jupyter_agent.store.ids import SESSION_ID_PATTERN, new_session_id, validate_session_id
from jupyter_agent.store.leases import LeasedStore
from jupyter_agent.store.messages import clean_text, fallback_summary, to_message_dict
from jupyter_agent.store.records import (
    LeaseHolder,
    SessionListing,
    SessionRecord,
    SessionState,
    utc_now,
)

__all__ = ["SessionStore"]


class SessionStore(LeasedStore):
    """Saved sessions with leases (see the module docstring for the invariants).

    Parameters
    ----------
    root : str or os.PathLike
        The memory directory; sessions live in ``root/sessions``.
    """

    # ------------------------------------------------------------------ public API

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
            The initial working context (e.g. the system message); also the start
            of the transcript.
        session_id : str, optional
            Defaults to a fresh :func:`new_session_id`.
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
        FileExistsError
            If a session with that ID exists.
        SessionLockedError, OSError, TypeError
        """
        if session_id is not None:
            validate_session_id(session_id)
        converted = [to_message_dict(m) for m in messages]
        root = None if project_root is None else os.fspath(project_root)
        with self._mutex:
            if session_id is None:
                session_id = new_session_id()
                while self.session_path(session_id).exists():
                    session_id = new_session_id()
            with self.lease(session_id):
                path = self.session_path(session_id)
                if os.path.lexists(path):
                    raise FileExistsError(errno.EEXIST, "session already exists", str(path))
                now = utc_now()
                self._store(
                    SessionRecord(
                        id=session_id,
                        created_at=now,
                        updated_at=now,
                        title=title,
                        project_root=root,
                        messages=converted,
                        transcript=list(converted),
                    )
                )
        return session_id

    def import_session(self, record: SessionRecord) -> None:
        """Save a whole record as a new session under its own ID (forks, migrations).

        Everything is kept as given: working context, transcript, compactions, state,
        summary, title, archived flag, parent and timestamps.

        Parameters
        ----------
        record : SessionRecord
            The session to add; ``record.id`` must not exist in this store yet.

        Raises
        ------
        FileExistsError
            If a session with that ID exists (nothing is changed).
        InvalidSessionIdError, SessionLockedError, OSError
        """
        with self._mutex, self.lease(record.id):
            path = self.session_path(record.id)
            if os.path.lexists(path):
                raise FileExistsError(errno.EEXIST, "session already exists", str(path))
            self._store(record.model_copy(deep=True))

    def collect_garbage(self) -> list[Path]:
        """Remove what killed writers left behind; return the paths removed.

        Temporary files of interrupted atomic writes (``sessions/.<id>.json.*.tmp``) are
        removed for every session whose lease nobody holds (under that lease, so no
        cooperating writer can be using them). Sessions in use are left alone.

        Returns
        -------
        list of pathlib.Path
            The files removed, in no particular order.

        Raises
        ------
        OSError
            If the sessions directory cannot be read.
        """
        removed: list[Path] = []
        if not self.sessions_dir.is_dir():
            return removed
        temps: dict[str, list[Path]] = {}
        for entry in os.scandir(self.sessions_dir):
            name = entry.name
            if name.startswith(".") and name.endswith(".tmp") and ".json." in name:
                temps.setdefault(name[1:].split(".json.", 1)[0], []).append(Path(entry.path))
        for session_id, paths in temps.items():
            if SESSION_ID_PATTERN.fullmatch(session_id) is None:
                continue
            try:
                with self.lease(session_id):
                    for path in paths:
                        if not path.exists():  # taking the lease may have removed them
                            removed.append(path)
            except SessionLockedError:
                continue
        return removed

    def exists(self, session_id: str) -> bool:
        """Tell whether ``sessions/<id>.json`` exists (no lease, nothing created).

        Parameters
        ----------
        session_id : str

        Returns
        -------
        bool

        Raises
        ------
        InvalidSessionIdError
            The ID is validated first.
        """
        return self.session_path(session_id).is_file()

    def load_session(self, session_id: str) -> SessionRecord:
        """Read a session record from its file (no lease; the file is never modified).

        Returns
        -------
        SessionRecord
            A fresh object; changing it changes nothing on disk.

        Raises
        ------
        InvalidSessionIdError
        SessionNotFoundError
            If no file exists for the ID.
        CorruptSessionError
            Naming the file, if it cannot be read or validated (also for a record
            from a newer jupyter-agent); the file is left untouched.
        """
        return self._read_record(session_id)

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
            The whole current working context; it must extend the saved one (see
            :meth:`save_messages`).
        state : SessionState or mapping, optional
            The checkpoint to record with them (design §6).

        Raises
        ------
        ContextMismatchError
            If the messages do not extend the saved context; nothing is written.
        pydantic.ValidationError
            If a mapping does not describe a valid state.
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError,
        SessionLockedError, OSError, TypeError
        """
        incoming = list(messages)
        snapshot = None
        if state is not None:
            data = state.model_dump() if isinstance(state, SessionState) else state
            snapshot = SessionState.model_validate(data)

        def change(record: SessionRecord) -> SessionRecord:
            new = extend_context(record, incoming)
            if snapshot is None or new.state == snapshot:
                return new
            return new.model_copy(update={"state": snapshot, "updated_at": utc_now()})

        self._update(session_id, change)

    def save_messages(self, session_id: str, messages: Sequence[Any]) -> None:
        """Save the working context; new messages extend ``messages`` and ``transcript``.

        Parameters
        ----------
        session_id : str
        messages : sequence of dict or pydantic objects
            The whole current working context. Its first ``len(saved)`` entries must
            equal the saved working context (compared after :func:`to_message_dict`
            normalization); the rest are appended (spec: "Working Context and Full
            Transcripts"). After a compaction, "saved" means the compacted context,
            and only messages beyond it reach the transcript.

        Raises
        ------
        ContextMismatchError
            (a ``ValueError``) if the messages do not extend the saved context;
            nothing is written.
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError,
        SessionLockedError, OSError, TypeError
        """
        incoming = list(messages)
        self._update(session_id, lambda rec: extend_context(rec, incoming))

    def compact(
        self,
        session_id: str,
        messages: Sequence[Any],
        *,
        summary: str,
        replaced: int | None = None,
    ) -> None:
        """Replace the working context after compaction; the transcript is untouched.

        Save pending messages with :meth:`save_messages` first: only they reach the
        transcript.

        Parameters
        ----------
        session_id : str
        messages : sequence of dict or pydantic objects
            The new, shorter working context (e.g. system message, a summary message,
            the recent turns).
        summary : str
            The summary that replaced the older turns (recorded in the event).
        replaced : int, optional
            How many working messages were replaced; by default, the saved messages
            not kept as a common prefix or suffix of ``messages``.

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError,
        SessionLockedError, OSError, TypeError
        """
        new = [to_message_dict(m) for m in messages]
        self._update(
            session_id, lambda rec: replace_context(rec, new, summary=summary, replaced=replaced)
        )

    def save_state(self, session_id: str, state: SessionState | Mapping[str, Any]) -> None:
        """Save the checkpoint: scratchpad, todos, session tool-call count, usage.

        A copy is saved (later changes to ``state`` do not leak in); when it equals
        the saved state nothing is written (spec: "Saving Other Conversation State").

        Parameters
        ----------
        session_id : str
        state : SessionState or mapping
            The checkpoint; a mapping is validated as a :class:`SessionState`.

        Raises
        ------
        pydantic.ValidationError
            If a mapping does not describe a valid state.
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError,
        SessionLockedError, OSError
        """
        data = state.model_dump() if isinstance(state, SessionState) else state
        snapshot = SessionState.model_validate(data)

        def change(record: SessionRecord) -> SessionRecord:
            if record.state == snapshot:
                return record
            return record.model_copy(update={"state": snapshot, "updated_at": utc_now()})

        self._update(session_id, change)

    def ensure_summary(self, session_id: str) -> str:
        """Return the summary, writing the fallback excerpt first if it is empty.

        The fallback (spec: "Session Summaries") is the text of the last six user
        and assistant messages of the transcript that have text content, as
        ``"user: ...\\nassistant: ..."``, cut to 2000 characters. An existing
        summary is returned unchanged. Runs under the lease.

        Parameters
        ----------
        session_id : str

        Returns
        -------
        str
            The summary ("" if there is none and no message has text).

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError,
        SessionLockedError, OSError
        """
        with self._mutex:
            self._require_record_file(session_id)
            with self.lease(session_id):
                return self._ensure_summary(session_id)

    def _ensure_summary(self, session_id: str) -> str:
        record = self._load_for_update(session_id)
        if record.summary.strip():
            return record.summary
        text = fallback_summary(record.transcript)
        if text:
            self.write_summary(session_id, text)
        return text

    def set_title(self, session_id: str, title: str) -> None:
        """Set the session's title (under the lease; ``updated_at`` is not changed).

        Parameters
        ----------
        session_id : str
        title : str
            Free text (lone surrogates are replaced).

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError,
        SessionLockedError, OSError
        """
        text = clean_text(title)
        self._update(session_id, lambda rec: rec.model_copy(update={"title": text}))

    def set_archived(self, session_id: str, archived: bool = True) -> None:
        """Archive (or unarchive) a session; archived sessions are hidden from listing by default.

        ``updated_at`` is not changed, so unarchiving restores the session's place.

        Parameters
        ----------
        session_id : str
        archived : bool
            False unarchives.

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError,
        SessionLockedError, OSError
        """
        flag = bool(archived)
        self._update(session_id, lambda rec: rec.model_copy(update={"archived": flag}))

    def delete_session(self, session_id: str) -> None:
        """Delete ``sessions/<id>.json`` under the lease; ``sessions/<id>.lock`` stays.

        The lock file is kept on purpose (spec: "Session Locks"): if it were removed
        while another process has it open (waiting to lock it, or holding it), a
        third process would create a *new* file with the same name and lock that one,
        and two processes would both believe they hold the lease of one session.

        Parameters
        ----------
        session_id : str

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, SessionLockedError, OSError
        """
        path = self.session_path(session_id)
        with self._mutex:
            self._require_record_file(session_id)
            with self.lease(session_id):
                try:
                    path.unlink()
                except FileNotFoundError:
                    raise SessionNotFoundError(session_id, path) from None
                self._cache.pop(session_id, None)
                fsync_dir(self.sessions_dir)

    def lease_holder(self, session_id: str) -> LeaseHolder | None:
        """Who holds the session's lease: ``None`` when nobody does.

        Parameters
        ----------
        session_id : str

        Returns
        -------
        LeaseHolder or None
            As recorded in the lock file by the holder (only its pid so far).

        Raises
        ------
        InvalidSessionIdError
        """
        path = self.lock_path(session_id)
        if self.holds_lease(session_id):
            return LeaseHolder(pid=os.getpid())
        if not lock_is_held(path):
            return None
        try:
            text = path.read_text(encoding="ascii", errors="replace").strip()
            return LeaseHolder(pid=int(text) if text.isdigit() else None)
        except OSError:
            return LeaseHolder()

    def list_sessions(self, include_archived: bool = False) -> list[SessionListing]:  # type: ignore[override]
        """List saved sessions, newest ``updated_at`` first, with title and status.

        Parameters
        ----------
        include_archived : bool
            Include archived sessions (left out by default).

        Returns
        -------
        list of SessionListing
            ``status`` is ``"active"`` when this store holds the lease, ``"in use"``
            when anyone else does (another process or another store object),
            ``"idle"`` otherwise. Malformed or unreadable files are skipped.
        """
        listing: list[SessionListing] = []
        for entry in self._scan():
            if entry.archived and not include_archived:
                continue
            if self.holds_lease(entry.id):
                status = "active"
            elif lock_is_held(self.lock_path(entry.id)):
                status = "in use"
            else:
                status = "idle"
            listing.append(
                SessionListing(
                    id=entry.id,
                    updated_at=entry.updated_at,
                    summary=entry.summary,
                    title=entry.title,
                    archived=entry.archived,
                    status=status,
                    created_at=entry.created_at,
                    message_count=entry.message_count,
                    cost_usd=entry.cost_usd,
                    tool_calls=entry.tool_calls,
                    first_prompt=entry.first_prompt,
                )
            )
        return listing
