"""The store protocol and the session engine that implements it, once, over backend primitives.

:class:`Store` is what the agent, controller, panel, built-in tools and CLI call. Both
backends (files: :class:`~jupyter_agent.store.file_store.FileStore`; PostgreSQL) subclass
:class:`SessionEngine` and pass ``tests/store_contract``. The rules:

* an invalid session ID raises ``InvalidSessionIdError`` before anything is touched;
* a change holds the session's lease; a lease held elsewhere raises ``SessionLockedError``
  at once, naming the holder; changing an unknown session raises ``SessionNotFoundError``
  and leaves nothing behind;
* :meth:`Store.save` is one save point: messages and checkpoint in one durable write;
* reads take no lease and change nothing; a record that cannot be read raises
  ``CorruptSessionError`` naming where it is (listing skips it); what is saved could be
  loaded back (``InvalidMessageError`` otherwise, before anything is written);
* listing is ordered by ``(updated_at, id)``, newest first, a page at a time.

A change validates the ID, refuses an unknown session, takes the lease, plans the change on
the session's head, applies it (planning again, up to three times, when the backend says
the head went stale) and releases the lease; the backend's apply refreshes the listing.
The engine keeps the re-entrant lease counts and the heads cached while a lease is held; a
backend supplies only the primitives (its abstract methods).
``at`` is what :meth:`_open` yields: the backend's open handle on its storage
(directories, a connection), ``None`` when nothing was ever saved.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from jupyter_agent.errors import ContextMismatchError, FigureNotFoundError, SessionNotFoundError
from jupyter_agent.store.figure_files import FigureData, check_figure, validate_figure_id
from jupyter_agent.store.messages import clean_text, fallback_summary, normalized
from jupyter_agent.store.notes import Notes
from jupyter_agent.store.records import (
    SessionListing,
    SessionRecord,
    SessionState,
    check_importable,
    new_session_id,
    utc_now,
    validate_session_id,
)

_PLAN_TRIES = 3


class LeaseKeeper(Protocol):
    """The backend's leases as the engine uses them (taking one is the ``_take`` primitive)."""

    def holds(self, session_id: str) -> bool:
        """Whether the backend still has the lease it took."""
        ...

    def let_go(self, session_id: str) -> None:
        """Release the lease (if the backend still has it)."""
        ...


def check_limit(limit: int | None) -> None:
    """Refuse a page size below 1 (``None``: no limit) with ``ValueError``."""
    if limit is not None and (type(limit) is not int or limit < 1):
        raise ValueError(f"limit must be a whole number of at least 1 (got {limit!r})")


@runtime_checkable
class Store(Protocol):
    """Saved sessions and their leases; ``notes`` holds the memory directory's notes."""

    notes: Notes

    def create_session(self, messages: Sequence[Any] = (), *, session_id: str | None = None,
                       title: str = "", project_root: str | os.PathLike[str] | None = None,
                       record: SessionRecord | None = None) -> str:
        """Create a session whose working context and transcript start as ``messages``.

        With ``record``, add that whole record under its own ID (forks, migrations); the
        other arguments must then keep their defaults (``ValueError``). Returns the ID.
        ``FileExistsError`` if the ID is taken; ``InvalidMessageError`` or ``ValueError``
        (what JSON cannot hold) before anything is written.
        """
        ...

    def exists(self, session_id: str) -> bool:
        """Whether the session is saved (no lease; ``InvalidSessionIdError`` for a bad ID)."""
        ...

    def load_session(self, session_id: str) -> SessionRecord:
        """A fresh record; ``SessionNotFoundError``, ``CorruptSessionError`` naming the file
        or row (left untouched)."""
        ...

    def describe_session(self, session_id: str) -> SessionListing:
        """The listing entry of one session (archived or not, its lease holder included);
        raises as :meth:`load_session`, also for a session the listing leaves out."""
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
        changed. Raises ``ContextMismatchError`` if the saved context is not a prefix,
        ``pydantic.ValidationError`` for an invalid ``state``."""
        ...

    def compact(self, session_id: str, messages: Sequence[Any], *, summary: str,
                replaced: int | None = None) -> None:
        """Replace the working context (an event is recorded; the transcript is untouched:
        save pending messages first); ``replaced`` defaults to the saved messages not kept
        as a common prefix or suffix."""
        ...

    def update(self, session_id: str, *, title: str | None = None, summary: str | None = None,
               archived: bool | None = None) -> None:
        """Change the given fields in one change (``None``: leave as is); a new summary
        moves ``updated_at`` to now, a title or the archived flag does not."""
        ...

    def delete_session(self, session_id: str) -> None:
        """Delete the session and its figures for good, under its lease;
        ``SessionNotFoundError``, ``SessionLockedError`` as for a change."""
        ...

    def save_figure(self, session_id: str, figure_id: str, data: bytes, media_type: str) -> None:
        """Keep an image (PNG, JPEG or SVG, at most 16 MiB) with a session, replacing one of
        that ID; ``InvalidFigureError`` before anything is written."""
        ...

    def read_figure(self, session_id: str, figure_id: str) -> FigureData:
        """Raises ``FigureNotFoundError``."""
        ...

    def figure_ids(self, session_id: str) -> list[str]:
        """The IDs of the session's figures, sorted; ``[]`` when none (no lease)."""
        ...

    def acquire_lease(self, session_id: str) -> None:
        """Take (or re-enter) the lease, also of a session not saved yet;
        ``SessionLockedError`` at once, naming the holder, when held elsewhere."""
        ...

    def release_lease(self, session_id: str) -> None:
        """Undo one :meth:`acquire_lease`; the lease goes when the count reaches 0 (releasing
        one not held does nothing)."""
        ...

    def release_all(self) -> None:
        """Release every lease this store object holds, whatever the counts."""
        ...


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


class SessionEngine(ABC):
    """A store: the engine's steps over a backend's primitives (module docstring); a backend
    sets ``leases`` before it is used."""

    leases: LeaseKeeper

    def __init__(self, notes: Notes) -> None:
        self.notes = notes
        self._mutex = threading.RLock()
        self._counts: dict[str, int] = {}  # re-entrant lease counts, of process _pid
        self._heads: dict[str, Any] = {}  # what _head read, kept while the lease is held
        self._pid = os.getpid()

    # ------------------------------------------------------------------ primitives
    @abstractmethod
    def _open(self, *, create: bool) -> AbstractContextManager[Any]:
        """Open the storage for one operation; yields ``None`` when it does not exist
        and ``create`` is false."""
        ...

    @abstractmethod
    def _where(self, session_id: str) -> Path | str:
        """Where a session is, for error messages."""
        ...

    @abstractmethod
    def _exists(self, at: Any, session_id: str) -> bool:
        ...

    @abstractmethod
    def _take(self, at: Any, session_id: str) -> None:
        """Take the lease (not held by this store now); ``SessionLockedError`` at once if
        held elsewhere."""
        ...

    @abstractmethod
    def _head(self, at: Any, session_id: str) -> Any:
        """What the plans need of a session, read under its lease (may be cached in
        ``_heads``, which the engine empties when the lease is let go)."""
        ...

    @abstractmethod
    def _apply(self, at: Any, head: Any, change: Any) -> bool:
        """Write a planned change durably and refresh the listing; ``False`` when ``head``
        turned out stale (nothing written: the engine plans again)."""
        ...

    @abstractmethod
    def _insert(self, at: Any, record: SessionRecord, *, created: bool) -> bool:
        """Write a new session; ``False`` when the ID is taken. A ``created`` one is the
        newest change, an imported one keeps its ``updated_at`` place."""
        ...

    @abstractmethod
    def _remove(self, at: Any, session_id: str) -> bool:
        """Delete a session and its figures; ``False`` when it was not there."""
        ...

    @abstractmethod
    def _read_record(self, at: Any, session_id: str) -> SessionRecord:
        """The whole record (``SessionNotFoundError``, ``CorruptSessionError``)."""
        ...

    @abstractmethod
    def _list_page(self, at: Any, include_archived: bool, limit: int | None,
                   after: SessionListing | None) -> list[SessionListing]:
        ...

    @abstractmethod
    def _describe(self, at: Any, session_id: str) -> SessionListing:
        ...

    @abstractmethod
    def _put_figure(self, at: Any, session_id: str, figure_id: str, data: bytes,
                    media_type: str) -> None:
        ...

    @abstractmethod
    def _get_figure(self, at: Any, session_id: str, figure_id: str) -> FigureData:
        """Raises ``FigureNotFoundError``."""
        ...

    @abstractmethod
    def _figure_ids(self, at: Any, session_id: str) -> list[str]:
        ...

    #: ``(head, incoming or None for no new messages, state or None) -> change``, ``None``
    #: when nothing changed; raises ``ContextMismatchError``, ``InvalidMessageError``.
    _plan_save: Callable[[Any, list[Any] | None, SessionState | None], Any]
    #: ``(head, new context, summary, replaced or None) -> change``.
    _plan_compact: Callable[[Any, list[dict[str, Any]], str, int | None], Any]
    #: ``(head, fields, touch: updated_at to now) -> change``, ``None`` when nothing changes.
    _plan_update: Callable[[Any, dict[str, Any], bool], Any]

    # ------------------------------------------------------------------ the steps
    def _own(self) -> dict[str, int]:
        if self._pid != os.getpid():  # a forked child holds none of its parent's leases
            self._pid = os.getpid()
            self._counts.clear()
            self._heads.clear()
        return self._counts

    def _lock(self, at: Any, session_id: str) -> None:
        counts = self._own()
        if not (counts.get(session_id) and self.leases.holds(session_id)):
            self._heads.pop(session_id, None)
            self._take(at, session_id)
        counts[session_id] = counts.get(session_id, 0) + 1

    def _unlock(self, session_id: str) -> None:
        counts = self._own()
        count = counts.pop(session_id, 0) - 1
        if count > 0:
            counts[session_id] = count
        elif count == 0:
            self._heads.pop(session_id, None)
            self.leases.let_go(session_id)

    def _holds(self, session_id: str) -> bool:
        return bool(self._own().get(session_id)) and self.leases.holds(session_id)

    @contextlib.contextmanager
    def _changing(self, session_id: str, *, new: bool = False) -> Iterator[Any]:
        validate_session_id(session_id)
        with self._mutex, self._open(create=new) as at:
            if at is None or (not new and not self._holds(session_id)
                              and not self._exists(at, session_id)):
                raise SessionNotFoundError(session_id, self._where(session_id))
            self._lock(at, session_id)
            try:
                yield at
            finally:
                self._unlock(session_id)

    def _change(self, session_id: str, plan: Callable[[Any], Any]) -> None:
        with self._changing(session_id) as at:
            for _ in range(_PLAN_TRIES):
                head = self._head(at, session_id)
                change = plan(head)
                if change is None or self._apply(at, head, change):
                    return
        raise ContextMismatchError(session_id, 0, "the session kept changing underneath "
                                                  "this store (a writer without a lease)")

    def _exists_error(self, session_id: str) -> FileExistsError:
        return FileExistsError(errno.EEXIST, "session already exists",
                               str(self._where(session_id)))

    # ------------------------------------------------------------------ the protocol
    def create_session(self, messages: Sequence[Any] = (), *, session_id: str | None = None,
                       title: str = "", project_root: str | os.PathLike[str] | None = None,
                       record: SessionRecord | None = None) -> str:
        if record is not None:
            if messages or session_id is not None or title or project_root is not None:
                raise ValueError("create_session(record=...) takes no other arguments")
            validate_session_id(record.id)
            check_importable(record)
            with self._changing(record.id, new=True) as at:
                if not self._insert(at, record.model_copy(deep=True), created=False):
                    raise self._exists_error(record.id)
            return record.id
        if session_id is not None:
            validate_session_id(session_id)
        converted = normalized(messages)
        root = None if project_root is None else os.fspath(project_root)
        while True:
            sid = new_session_id() if session_id is None else session_id
            now = utc_now()
            new = SessionRecord(id=sid, created_at=now, updated_at=now, title=title,
                                project_root=root)
            new.messages, new.transcript = converted, list(converted)
            with self._changing(sid, new=True) as at:
                if self._insert(at, new, created=True):
                    return sid
            if session_id is not None:
                raise self._exists_error(sid)

    def exists(self, session_id: str) -> bool:
        validate_session_id(session_id)
        with self._mutex, self._open(create=False) as at:
            return at is not None and self._exists(at, session_id)

    def load_session(self, session_id: str) -> SessionRecord:
        validate_session_id(session_id)
        with self._mutex, self._open(create=False) as at:
            if at is None:
                raise SessionNotFoundError(session_id, self._where(session_id))
            return self._read_record(at, session_id)

    def describe_session(self, session_id: str) -> SessionListing:
        validate_session_id(session_id)
        with self._mutex, self._open(create=False) as at:
            if at is None:
                raise SessionNotFoundError(session_id, self._where(session_id))
            return self._describe(at, session_id)

    def list_sessions(self, include_archived: bool = False, *, limit: int | None = None,
                      after: SessionListing | None = None) -> list[SessionListing]:
        check_limit(limit)
        with self._mutex, self._open(create=False) as at:
            return [] if at is None else self._list_page(at, include_archived, limit, after)

    def save(self, session_id: str, messages: Sequence[Any] = (),
             state: SessionState | Mapping[str, Any] | None = None) -> None:
        incoming = messages if isinstance(messages, list) else list(messages)
        snapshot = None
        if state is not None:
            data = state.model_dump() if isinstance(state, SessionState) else state
            snapshot = SessionState.model_validate(data)
        given = None if messages == () else incoming  # the default: a checkpoint alone
        self._change(session_id, lambda head: self._plan_save(head, given, snapshot))

    def compact(self, session_id: str, messages: Sequence[Any], *, summary: str,
                replaced: int | None = None) -> None:
        context = normalized(messages)
        text = clean_text(summary)
        self._change(session_id, lambda head: self._plan_compact(head, context, text, replaced))

    def update(self, session_id: str, *, title: str | None = None, summary: str | None = None,
               archived: bool | None = None) -> None:
        fields: dict[str, Any] = {}
        if title is not None:
            fields["title"] = clean_text(title)
        if summary is not None:
            fields["summary"] = clean_text(summary)
        if archived is not None:
            fields["archived"] = bool(archived)
        touch = summary is not None
        self._change(session_id, lambda head: self._plan_update(head, fields, touch)
                     if fields else None)

    def delete_session(self, session_id: str) -> None:
        with self._changing(session_id) as at:
            self._heads.pop(session_id, None)
            if not self._remove(at, session_id):
                raise SessionNotFoundError(session_id, self._where(session_id))

    def save_figure(self, session_id: str, figure_id: str, data: bytes, media_type: str) -> None:
        check_figure(figure_id, data, media_type)
        with self._changing(session_id) as at:
            self._put_figure(at, session_id, figure_id, data, media_type)

    def read_figure(self, session_id: str, figure_id: str) -> FigureData:
        validate_session_id(session_id)
        validate_figure_id(figure_id)
        with self._mutex, self._open(create=False) as at:
            if at is None:
                raise FigureNotFoundError(session_id, figure_id, self._where(session_id))
            return self._get_figure(at, session_id, figure_id)

    def figure_ids(self, session_id: str) -> list[str]:
        validate_session_id(session_id)
        with self._mutex, self._open(create=False) as at:
            return [] if at is None else self._figure_ids(at, session_id)

    def acquire_lease(self, session_id: str) -> None:
        validate_session_id(session_id)
        with self._mutex, self._open(create=True) as at:
            self._lock(at, session_id)

    def release_lease(self, session_id: str) -> None:
        validate_session_id(session_id)
        with self._mutex:
            self._unlock(session_id)

    def holds_lease(self, session_id: str) -> bool:
        """Whether this store object (in this process) holds the session's lease."""
        validate_session_id(session_id)
        return self._holds(session_id)

    def release_all(self) -> None:
        with self._mutex:
            held = list(self._own())
            self._counts.clear()
            self._heads.clear()
            for session_id in held:
                self.leases.let_go(session_id)
