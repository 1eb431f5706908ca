"""The store protocol, the one session engine implementing it over backend primitives
(design notes, "One session engine"), and the memory directory's notes every store holds.

Both backends (files; PostgreSQL) subclass :class:`SessionEngine` and pass
``tests/store_contract``. A bad session ID raises ``InvalidSessionIdError`` before anything
is touched. A change takes the session's lease (``SessionLockedError`` at once, naming the
holder, when it is held elsewhere); changing an unknown session raises
``SessionNotFoundError`` and leaves nothing behind. Reads take no lease and change nothing;
a record that cannot be read raises ``CorruptSessionError`` naming where it is (listing
skips it). ``at`` is what :meth:`SessionEngine._open` yields: the backend's open handle
(directories, a connection), ``None`` when nothing was ever saved.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import orjson

from jupyter_agent.errors import (
    ContextMismatchError,
    FigureNotFoundError,
    JupyterAgentError,
    SessionNotFoundError,
)
from jupyter_agent.store.files import (
    SafeDir,
    is_temp_name,
    lease_temp,
    lock_shared_or_exclusive,
    storage_errors,
    temp_target,
)
from jupyter_agent.store.messages import clean_text, encode_json, fallback_summary, normalized
from jupyter_agent.store.records import (
    FigureData,
    SessionListing,
    SessionRecord,
    SessionState,
    check_figure,
    check_importable,
    new_session_id,
    utc_now,
    validate_figure_id,
    validate_session_id,
)

_PLAN_TRIES = 3

# --------------------------------------------------------------------------- notes
NOTE_FILES = {"project": "project.md", "user": "user.md"}
NOTES_LOCK = "notes.lock"
#: Notes larger than this are refused rather than read into a prompt.
NOTES_LIMIT = 4 * 1024 * 1024
#: Files :func:`unseen_notes` remembers as seen at most (the oldest are shown again).
_SEEN_MAX = 500
_SEEN_FILE = "seen-notes.json"

NoteKind = Literal["project", "user"]


def remove_temps(root: SafeDir, lock: str = NOTES_LOCK,
                 targets: Collection[str] = tuple(NOTE_FILES.values()), *,
                 timeout: float = 0.05, locked: bool = False) -> list[Path]:
    """Remove the temporary files killed writers of ``targets`` (the notes) left in
    ``root``, under ``lock``, taken here for at most ``timeout`` seconds unless ``locked``."""
    temps = [n for n in root.names() if is_temp_name(n) and temp_target(n) in targets]
    if temps and not locked:
        with contextlib.suppress(JupyterAgentError, OSError), \
                lock_shared_or_exclusive(root, lock, exclusive=True, timeout=timeout):
            return remove_temps(root, lock, targets, locked=True)
        return []
    return [root.child(n) for n in temps if root.unlink(n)]


class Notes:
    """The notes of one memory directory (``project.md``, ``user.md``), for every backend; the
    first write creates the directory (0700).

    Reading raises ``UnsafeFileError`` for a file that is not a private regular file and
    ``TooLargeError`` above :data:`NOTES_LIMIT`. A write is read-modify-write under
    ``notes.lock``, then an atomic replace (file 0600), so concurrent appenders lose
    nothing; it raises ``StoreBusyError`` when the lock stays taken and ``StorageError``
    when the write fails (the old notes stay).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()

    def __repr__(self) -> str:
        return f"Notes({str(self.root)!r})"

    def path(self, kind: NoteKind) -> Path:
        """The file of ``kind``; ``ValueError`` for anything but "project" or "user"."""
        try:
            return self.root / NOTE_FILES[kind]
        except (KeyError, TypeError):
            raise ValueError(f"notes kind must be 'project' or 'user', not {kind!r}") from None

    @staticmethod
    def _text(root: SafeDir, name: str) -> str:
        got = root.read(name, limit=NOTES_LIMIT, private=True, what="notes file")
        return "" if got is None else got[0].decode("utf-8", errors="replace")

    def read(self, kind: NoteKind) -> str:
        """The notes of ``kind`` ("" when there are none); invalid UTF-8 becomes U+FFFD."""
        path = self.path(kind)
        with storage_errors(self.root, reading=True):
            root = SafeDir.open(self.root)
        if root is None:
            return ""
        with root, storage_errors(path, reading=True):
            return self._text(root, path.name)

    @contextlib.contextmanager
    def _locked(self, kind: NoteKind) -> Iterator[tuple[SafeDir, str]]:
        path = self.path(kind)
        with storage_errors(self.root):
            root = SafeDir.open(self.root, create=True)
        assert root is not None
        with root, storage_errors(path), \
                lock_shared_or_exclusive(root, NOTES_LOCK, exclusive=True):
            remove_temps(root, locked=True)
            yield root, path.name

    def write(self, kind: NoteKind, text: str) -> None:
        with self._locked(kind) as (root, name):
            root.write_atomic(name, clean_text(text).encode("utf-8"), private=True,
                              temp=lease_temp(name))

    def append(self, kind: NoteKind, line: str) -> None:
        """Append ``line`` (whitespace collapsed) as a ``- `` list item."""
        item = "- " + " ".join(clean_text(line).split()) + "\n"
        with self._locked(kind) as (root, name):
            old = self._text(root, name)
            text = (old.rstrip("\n") + "\n" if old.strip() else "") + item
            root.write_atomic(name, text.encode("utf-8"), private=True, temp=lease_temp(name))


def unseen_notes(notes: Mapping[Path, str], environ: Mapping[str, str] | None = None
                 ) -> list[Path]:
    """The notes files whose current text the user has not been shown, in ``notes`` order;
    they are recorded as shown (the caller shows them now). What was shown is a SHA-256
    per file in ``$XDG_STATE_HOME/jupyter-agent``, never in the memory directory (a
    repository could ship one); unreadable, every note counts as unseen."""
    env = os.environ if environ is None else environ
    state = Path(env.get("XDG_STATE_HOME") or Path("~/.local/state").expanduser())
    seen: Any = {}
    try:
        folder = SafeDir.open(state / "jupyter-agent", create=True, what="state directory")
    except (JupyterAgentError, OSError):
        folder = None
    with contextlib.suppress(JupyterAgentError, OSError, ValueError):
        got = folder and folder.read(_SEEN_FILE, limit=1024 * 1024)  # a regular file only
        seen = orjson.loads(got[0]) if got else {}
    seen = {str(k): str(v) for k, v in seen.items()} if isinstance(seen, dict) else {}
    new = []
    for file, text in notes.items():
        digest = hashlib.sha256(clean_text(text).encode("utf-8")).hexdigest()
        if seen.get(str(file)) != digest:
            new.append(file)
            seen.pop(str(file), None)
            seen[str(file)] = digest
    if folder is not None:
        with folder, contextlib.suppress(JupyterAgentError, OSError):
            if new:
                kept = dict(list(seen.items())[-_SEEN_MAX:])
                folder.write_atomic(_SEEN_FILE, encode_json(kept))
    return new


# --------------------------------------------------------------------------- the store
class LeaseKeeper(Protocol):
    """The backend's leases as the engine uses them (taking one is the ``_take`` primitive)."""

    def holds(self, session_id: str) -> bool:
        """Whether the backend still has the lease it took."""

    def let_go(self, session_id: str) -> None:
        """Release the lease (if the backend still has it)."""


@runtime_checkable
class Store(Protocol):
    """Saved sessions and their leases; ``notes`` holds the memory directory's notes."""

    notes: Notes

    def create_session(self, messages: Sequence[Any] = (), *, session_id: str | None = None,
                       title: str = "", project_root: str | os.PathLike[str] | None = None,
                       record: SessionRecord | None = None) -> str:
        """Create a session whose working context and transcript start as ``messages``; its ID.

        With ``record``, add that whole record under its own ID (forks, migrations), the
        other arguments left at their defaults (``ValueError``). ``FileExistsError`` if the ID
        is taken; ``InvalidMessageError`` or ``ValueError`` (what JSON cannot hold) before
        anything is written.
        """

    def exists(self, session_id: str) -> bool:
        """Whether the session is saved (no lease; ``InvalidSessionIdError`` for a bad ID)."""

    def load_session(self, session_id: str) -> SessionRecord:
        """A fresh record; ``SessionNotFoundError``, ``CorruptSessionError`` naming the file
        or row (left untouched)."""

    def describe_session(self, session_id: str) -> SessionListing:
        """The listing entry of one session (archived or not, its lease holder included);
        raises as :meth:`load_session`, also for a session the listing leaves out."""

    def list_sessions(self, include_archived: bool = False, *, limit: int | None = None,
                      after: SessionListing | None = None) -> list[SessionListing]:
        """Newest first by ``(updated_at, id)``; ``limit`` (>= 1, else ``ValueError``) entries
        after ``after``. A session dated over ``CLOCK_SKEW`` ahead of this clock is left out."""

    def save(self, session_id: str, messages: Sequence[Any] = (),
             state: SessionState | Mapping[str, Any] | None = None) -> None:
        """One save point, one durable write: ``messages`` (the whole working context,
        extending the saved one; ``()``, the default: keep it) and the checkpoint ``state``;
        nothing is written when neither changed, nor on ``ContextMismatchError`` (the saved
        context is not a prefix), ``InvalidMessageError`` or ``pydantic.ValidationError``."""

    def compact(self, session_id: str, messages: Sequence[Any], *, summary: str,
                replaced: int | None = None) -> None:
        """Replace the working context (an event is recorded; the transcript is untouched:
        save pending messages first); ``replaced`` defaults to the saved messages not kept
        as a common prefix or suffix."""

    def update(self, session_id: str, *, title: str | None = None, summary: str | None = None,
               archived: bool | None = None) -> None:
        """Change the given fields in one change (``None``: leave as is); a new summary
        moves ``updated_at`` to now, a title or the archived flag does not."""

    def delete_session(self, session_id: str) -> None:
        """Delete the session and its figures for good; raises as any change."""

    def save_figure(self, session_id: str, figure_id: str, data: bytes, media_type: str) -> None:
        """Keep an image (PNG, JPEG or SVG, at most 16 MiB) with a session, replacing one of
        that ID; ``InvalidFigureError`` before anything is written."""

    def read_figure(self, session_id: str, figure_id: str) -> FigureData:
        """Raises ``FigureNotFoundError``."""

    def figure_ids(self, session_id: str) -> list[str]:
        """The IDs of the session's figures, sorted; ``[]`` when none (no lease)."""

    def acquire_lease(self, session_id: str) -> None:
        """Take (or re-enter) the lease, also of a session not saved yet;
        ``SessionLockedError`` at once, naming the holder, when held elsewhere."""

    def release_lease(self, session_id: str) -> None:
        """Undo one :meth:`acquire_lease`; the lease goes at a count of 0 (not held: no-op)."""

    def release_all(self) -> None:
        """Release every lease this store object holds, whatever the counts."""


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
    """A store over a backend's primitives; the backend sets ``leases`` before use."""

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
        """Open the storage for one operation; ``None`` when absent and not ``create``."""

    @abstractmethod
    def _where(self, session_id: str) -> Path | str:
        """Where a session is, for error messages."""

    @abstractmethod
    def _exists(self, at: Any, session_id: str) -> bool:
        ...

    @abstractmethod
    def _take(self, at: Any, session_id: str) -> None:
        """Take the lease this store does not hold; ``SessionLockedError`` if held elsewhere."""

    @abstractmethod
    def _head(self, at: Any, session_id: str) -> Any:
        """What the plans need of a session, read under its lease (may be kept in ``_heads``)."""

    @abstractmethod
    def _apply(self, at: Any, head: Any, change: Any) -> bool:
        """Write a planned change durably and refresh the listing; ``False`` when ``head``
        turned out stale (nothing written: the engine plans again)."""

    @abstractmethod
    def _insert(self, at: Any, record: SessionRecord, *, created: bool) -> bool:
        """Write a new session; ``False`` when the ID is taken. A ``created`` one is the
        newest change, an imported one keeps its ``updated_at`` place."""

    @abstractmethod
    def _remove(self, at: Any, session_id: str) -> bool:
        """Delete a session and its figures; ``False`` when it was not there."""

    @abstractmethod
    def _read_record(self, at: Any, session_id: str) -> SessionRecord:
        """The whole record (``SessionNotFoundError``, ``CorruptSessionError``)."""

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

    # ------------------------------------------------------------------ the protocol
    def create_session(self, messages: Sequence[Any] = (), *, session_id: str | None = None,
                       title: str = "", project_root: str | os.PathLike[str] | None = None,
                       record: SessionRecord | None = None) -> str:
        if record is not None:
            if messages or session_id is not None or title or project_root is not None:
                raise ValueError("create_session(record=...) takes no other arguments")
            validate_session_id(record.id)
            check_importable(record)
        elif session_id is not None:
            validate_session_id(session_id)
        converted = normalized(messages)
        root = None if project_root is None else os.fspath(project_root)
        while True:
            if record is None:
                now = utc_now()
                new = SessionRecord(id=new_session_id() if session_id is None else session_id,
                                    created_at=now, updated_at=now, title=title,
                                    project_root=root)
                new.messages, new.transcript = converted, list(converted)
            else:
                new = record.model_copy(deep=True)
            with self._changing(new.id, new=True) as at:
                if self._insert(at, new, created=record is None):
                    return new.id
            if session_id is not None or record is not None:
                raise FileExistsError(errno.EEXIST, "session already exists",
                                      str(self._where(new.id)))

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
        if limit is not None and (type(limit) is not int or limit < 1):
            raise ValueError(f"limit must be a whole number of at least 1 (got {limit!r})")
        with self._mutex, self._open(create=False) as at:
            return [] if at is None else self._list_page(at, include_archived, limit, after)

    def save(self, session_id: str, messages: Sequence[Any] = (),
             state: SessionState | Mapping[str, Any] | None = None) -> None:
        snapshot = None if state is None else SessionState.model_validate(
            state.model_dump() if isinstance(state, SessionState) else state)
        given = None if messages == () else (  # the default, (), saves a checkpoint alone
            messages if isinstance(messages, list) else list(messages))
        self._change(session_id, lambda head: self._plan_save(head, given, snapshot))

    def compact(self, session_id: str, messages: Sequence[Any], *, summary: str,
                replaced: int | None = None) -> None:
        context = normalized(messages)
        text = clean_text(summary)
        self._change(session_id, lambda head: self._plan_compact(head, context, text, replaced))

    def update(self, session_id: str, *, title: str | None = None, summary: str | None = None,
               archived: bool | None = None) -> None:
        fields: dict[str, Any] = {key: clean_text(value) for key, value in
                                  (("title", title), ("summary", summary)) if value is not None}
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
