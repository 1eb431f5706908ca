"""SessionWriter: every change to a session of the team store.

:class:`~jupyter_agent.store.postgres.PostgresStore` delegates its writes here. Each is
planned on the session's head (``heads.py``, pure plans in ``rows.py``) and written in
one transaction under the session's lease (:meth:`Guard.changing
<jupyter_agent.store.postgres.guard.Guard.changing>`); a plan whose row changed
underneath (a writer that ignored the lease) is planned again on a fresh head.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jupyter_agent.errors import ContextMismatchError, SessionNotFoundError
from jupyter_agent.store.changes import check_importable, normalized
from jupyter_agent.store.ids import new_session_id, validate_session_id
from jupyter_agent.store.messages import SUMMARY_MESSAGES, clean_text, fallback_summary
from jupyter_agent.store.postgres.guard import Guard
from jupyter_agent.store.postgres.heads import Heads
from jupyter_agent.store.postgres.leases import Identity
from jupyter_agent.store.postgres.rows import (
    Head,
    Plan,
    plan_compact,
    plan_extend,
    plan_fields,
    plan_state,
    row_values,
)
from jupyter_agent.store.postgres.tables import SessionTable
from jupyter_agent.store.records import SessionRecord, SessionState, utc_now

__all__ = ["SessionWriter"]


class SessionWriter:
    """The changes to one project's sessions.

    Parameters
    ----------
    table : SessionTable
        The statements on the project's sessions.
    heads : Heads
        The heads kept while leases are held; each change is planned on one.
    guard : Guard
        The store's leases and mutex.
    identity : callable
        Returns who this store is (user, host, label), recorded as a new session's owner.
    project : str
        The project key.
    where : callable
        Names a session (database, project, ID) for error messages; ``location`` names
        the database and project.
    location : str
    """

    def __init__(self, table: SessionTable, heads: Heads, guard: Guard,
                 identity: Callable[[], Identity], project: str, where: Callable[[str], str],
                 location: str) -> None:
        self._table = table
        self._heads = heads
        self._guard = guard
        self._identity = identity
        self._project = project
        self._where = where
        self._location = location

    def _mutate(self, session_id: str, plan: Callable[[Head], Plan | None]) -> None:
        with self._guard.changing(session_id):
            for _ in range(3):
                change = plan(self._heads.get(session_id))
                if change is None or self._heads.apply(self._heads.get(session_id), change):
                    return
            raise ContextMismatchError(session_id, 0, "the session kept changing underneath "
                                                      "this store (a writer without a lease)")

    def _insert(self, record: SessionRecord) -> bool:
        identity = self._identity()
        values = {**row_values(record), "project": self._project, "id": record.id,
                  "owner_user": identity.user, "owner_host": identity.host}
        return self._table.insert(values, record.transcript, self._heads.check(record.id))

    def _exists_error(self, session_id: str) -> FileExistsError:
        return FileExistsError(errno.EEXIST, "session already exists", self._where(session_id))

    def create_session(self, messages: Sequence[Any], *, session_id: str | None = None,
                       title: str = "", project_root: str | os.PathLike[str] | None = None) -> str:
        """Create a session whose working context and transcript start as ``messages``.

        Same parameters, result and errors as ``SessionStore.create_session``; the
        session records this store's user and host as its owner.

        Raises
        ------
        InvalidSessionIdError
            Before anything is sent.
        InvalidMessageError
            For a message that could not be loaded back (nothing is sent).
        FileExistsError
            The project has a session with that ID (nothing is changed).
        SessionLockedError, StoreUnavailableError
        """
        if session_id is not None:
            validate_session_id(session_id)
        converted = normalized(messages)
        root = None if project_root is None else os.fspath(project_root)
        with self._guard.mutex:
            while True:
                sid = session_id if session_id is not None else new_session_id()
                now = utc_now()
                record = SessionRecord(id=sid, created_at=now, updated_at=now, title=title,
                                       project_root=root, messages=converted,
                                       transcript=list(converted))
                with self._guard.held(sid):
                    if self._insert(record):
                        return sid
                if session_id is not None:
                    raise self._exists_error(sid)

    def import_session(self, record: SessionRecord) -> None:
        """Add a whole record as a new session under its own ID, everything kept as given.

        Raises
        ------
        FileExistsError
            The project has a session with that ID (nothing is changed).
        InvalidMessageError
            A message of the record could not be loaded back (nothing is sent).
        ValueError
            Another part of it holds something JSON cannot.
        InvalidSessionIdError, SessionLockedError, StoreUnavailableError
        """
        validate_session_id(record.id)
        check_importable(record)
        with self._guard.mutex, self._guard.held(record.id):
            if not self._insert(record.model_copy(deep=True)):
                raise self._exists_error(record.id)

    def save(self, session_id: str, messages: Sequence[Any],
             state: SessionState | Mapping[str, Any] | None = None) -> None:
        """One save point, one transaction: new messages and (when given) the checkpoint.

        Raises
        ------
        ContextMismatchError
            The messages do not extend the saved working context; nothing is written.
        InvalidMessageError
            A new message could not be loaded back; nothing is written.
        pydantic.ValidationError
            A mapping that is not a valid state.
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError,
        SessionLockedError, StoreUnavailableError
        """
        incoming = list(messages)
        snapshot = None
        if state is not None:
            data = state.model_dump() if isinstance(state, SessionState) else state
            snapshot = SessionState.model_validate(data)
        self._mutate(session_id, lambda head: plan_extend(head, incoming, snapshot))

    def save_messages(self, session_id: str, messages: Sequence[Any]) -> None:
        """:meth:`save` without a checkpoint."""
        self.save(session_id, messages)

    def save_state(self, session_id: str, state: SessionState | Mapping[str, Any]) -> None:
        """Record the checkpoint alone (nothing is written when it is unchanged)."""
        data = state.model_dump() if isinstance(state, SessionState) else state
        snapshot = SessionState.model_validate(data)
        self._mutate(session_id, lambda head: plan_state(head, snapshot))

    def compact(self, session_id: str, messages: Sequence[Any], *, summary: str,
                replaced: int | None = None) -> None:
        """Replace the working context and record a compaction event; the transcript
        rows are untouched. A message that could not be loaded back raises
        ``InvalidMessageError`` before anything is sent."""
        new = normalized(messages)
        text = clean_text(summary)
        self._mutate(session_id, lambda head: plan_compact(head, new, text, replaced))

    def write_summary(self, session_id: str, summary: str) -> None:
        """Replace the summary and set ``updated_at`` to now."""
        text = clean_text(summary)
        self._mutate(session_id, lambda head: plan_fields(head, touch=True, summary=text))

    def ensure_summary(self, session_id: str) -> str:
        """The summary, after writing the fallback excerpt if there was none."""
        with self._guard.changing(session_id):
            head = self._heads.get(session_id)
            if head.summary.strip():
                return head.summary
            text = fallback_summary(self._table.recent(
                session_id, head.sid, head.transcript_len, SUMMARY_MESSAGES))
            if text:
                self.write_summary(session_id, text)
            return text

    def set_title(self, session_id: str, title: str) -> None:
        """Set the title (``updated_at`` is not changed)."""
        text = clean_text(title)
        self._mutate(session_id, lambda head: plan_fields(head, title=text))

    def set_archived(self, session_id: str, archived: bool = True) -> None:
        """Archive or unarchive (``updated_at`` is not changed)."""
        flag = bool(archived)
        self._mutate(session_id, lambda head: plan_fields(head, archived=flag))

    def delete_session(self, session_id: str) -> None:
        """Delete the session and its transcript for good (under its lease).

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, SessionLockedError,
        StoreUnavailableError
        """
        with self._guard.changing(session_id):
            self._heads.forget(session_id)
            if not self._table.delete(session_id, self._heads.check(session_id)):
                raise SessionNotFoundError(session_id, self._location)
