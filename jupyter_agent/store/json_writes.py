"""SessionWriter: every change to a saved session of the JSON-file backend.

:class:`~jupyter_agent.store.SessionStore` delegates its writes here: creating and
importing sessions, save points, compactions, summary, title, archive flag and deletion.
Each runs under the session's lease through :class:`~jupyter_agent.store.session_files.
SessionFiles` and is one ``fsync``-ed journal line (the invariants are listed in
:mod:`jupyter_agent.store.json_store`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping, Sequence
from stat import S_ISREG
from typing import Any

from jupyter_agent.errors import SessionNotFoundError
from jupyter_agent.store.changes import check_importable, normalized
from jupyter_agent.store.entries import compaction, save_point
from jupyter_agent.store.figures import figures_dir, remove_figures_dir
from jupyter_agent.store.ids import new_session_id, validate_session_id
from jupyter_agent.store.leases import Leases
from jupyter_agent.store.messages import clean_text, fallback_summary
from jupyter_agent.store.records import SessionRecord, SessionState, utc_now
from jupyter_agent.store.session_files import SessionFiles, storage_errors
from jupyter_agent.store.snapshot import clock_of

__all__ = ["SessionWriter", "is_saved"]


def _iso(value: Any) -> str:
    return str(value.isoformat(timespec="microseconds"))


def is_saved(files: SessionFiles, session_id: str) -> bool:
    """Whether ``sessions/<id>.json`` is a regular file (no lease, nothing created).

    Parameters
    ----------
    files : SessionFiles
    session_id : str
        Already validated.

    Returns
    -------
    bool

    Raises
    ------
    UnsafeDirectoryError
        If the memory directory may not be used.
    """
    with files.dirs(create=False) as dirs:
        if dirs is None:
            return False
        st = dirs[1].lstat(f"{session_id}.json")
        return st is not None and S_ISREG(st.st_mode)


class SessionWriter:
    """The changes to the sessions of one memory directory.

    Parameters
    ----------
    files, leases : SessionFiles, Leases
        The session files of the memory directory (with its cache and listing index)
        and the store's leases, checked once more before a deletion.
    """

    def __init__(self, files: SessionFiles, leases: Leases) -> None:
        self._files = files
        self._leases = leases

    def create_session(self, messages: Sequence[Any], *, session_id: str | None = None,
                       title: str = "", project_root: str | os.PathLike[str] | None = None) -> str:
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
                while is_saved(self._files, session_id):
                    session_id = new_session_id()
            record = SessionRecord(id=session_id, created_at=now, updated_at=now,
                                   title=title, project_root=root)
            record.messages, record.transcript = converted, list(converted)
            self._add(record, created=True)
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

    def _add(self, record: SessionRecord, *, created: bool = False) -> None:
        """Write a new session: a created one is the newest change of the store, an
        imported one keeps its place (its ``updated_at``)."""
        with self._files.leased(record.id, create=True) as (root, sessions):
            if sessions.lstat(f"{record.id}.json") is not None:
                raise FileExistsError(errno.EEXIST, "session already exists",
                                      str(self._files.session_path(record.id)))
            clock = self._files.tick(root, 0, exact=None if created else clock_of(
                [], {}, record.updated_at))
            loaded = self._files.write_fresh(sessions, record, clock=clock)
            self._files.index.note(root, sessions, record.id, self._files.all_fields(loaded))

    def save(self, session_id: str, messages: Sequence[Any],
             state: SessionState | Mapping[str, Any] | None = None) -> None:
        """One save point: new messages and (when given) the checkpoint in one write.

        Parameters
        ----------
        session_id : str
        messages : sequence of dict or pydantic objects
            The whole current working context; it must extend the saved one:
            its first ``len(saved)`` messages equal the saved ones, the rest are appended
            to the working context and the transcript.
        state : SessionState or mapping, optional
            The checkpoint to record with them.

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
            loaded = self._files.current(root, sessions, session_id)
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
        with self._files.leased(session_id) as (root, sessions):
            saved = self._files.current(root, sessions, session_id).record.messages
            self.save(session_id, saved, state)

    def compact(self, session_id: str, messages: Sequence[Any], *, summary: str,
                replaced: int | None = None) -> None:
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
            loaded = self._files.current(root, sessions, session_id)
            change = compaction(loaded, new_context, clean_text(summary), replaced)
            self._files.append(root, sessions, loaded, *change)

    def write_summary(self, session_id: str, summary: str) -> None:
        """Replace the summary and set ``updated_at`` to now.

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError,
        SessionLockedError, LeaseLostError, UnsafePathError, StorageError
        """
        text, now = clean_text(summary), utc_now()
        self._files.change(session_id, {"set": {"summary": text}, "updated_at": _iso(now)},
                           summary=text, updated_at=now)

    def ensure_summary(self, session_id: str) -> str:
        """The summary, after writing the fallback excerpt if there was none.

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
        with self._files.leased(session_id) as (root, sessions):
            record = self._files.current(root, sessions, session_id).record
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
            with storage_errors(self._files.session_path(session_id)):
                if not sessions.unlink(f"{session_id}.json"):
                    raise SessionNotFoundError(session_id, self._files.session_path(session_id))
                sessions.fsync()
                sessions.unlink(f"{session_id}.jsonl")
                sessions.fsync()
            with storage_errors(self._files.sessions_dir / figures_dir(session_id)):
                remove_figures_dir(sessions, session_id)
            self._files.cache.pop(session_id, None)
            self._files.index.forget(root, session_id)
