"""The team store: a project's sessions in a PostgreSQL database shared by a team.

:class:`PostgresStore` keeps the same contract as the memory directory's files. Every
change holds the session's lease (an advisory lock, ``locks.py``) and is one
transaction; while the lease is held the session's head is kept in memory, so a save
point costs one ``UPDATE`` of the row plus one ``INSERT`` per new message. The database
decides what a role sees (row-level security, ``schema.py``): its own sessions, and those
shared with it to read and fork only. The notes stay files in the memory directory.
Importing this package does no I/O and does not import ``psycopg`` (the ``postgres``
extra); the first call that needs the database does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_agent.errors import (
    ContextMismatchError,
    CorruptSessionError,
    FigureNotFoundError,
    SessionNotFoundError,
    SessionReadOnlyError,
)
from jupyter_agent.store.base import NoteKind, holding
from jupyter_agent.store.changes import check_importable, normalized
from jupyter_agent.store.figures import FigureData, check_figure, validate_figure_id
from jupyter_agent.store.ids import new_session_id, validate_session_id
from jupyter_agent.store.memory import MemoryStore
from jupyter_agent.store.messages import SUMMARY_MESSAGES, clean_text, fallback_summary
from jupyter_agent.store.postgres.locks import Leases
from jupyter_agent.store.postgres.rows import (
    Head,
    Plan,
    head_from_row,
    plan_compact,
    plan_save,
    plan_update,
    raw_json,
    record_from_row,
    row_values,
)
from jupyter_agent.store.postgres.schema import (
    MIGRATIONS,
    Migration,
    current_version,
    ensure_schema,
)
from jupyter_agent.store.postgres.tables import SessionTable
from jupyter_agent.store.postgres.url import Link, check_store_url, import_psycopg
from jupyter_agent.store.records import (
    LeaseHolder,
    SessionListing,
    SessionRecord,
    SessionState,
    utc_now,
)

if TYPE_CHECKING:
    import psycopg

_PLAN_TRIES = 3


class PostgresStore:
    """Saved sessions of one project in a PostgreSQL database, with leases.

    ``url`` is ``postgresql://[user[:password]@]host[:port]/dbname[?param=...]`` (libpq
    parameters, ``~/.pgpass`` and ``PG*`` variables apply); ``memory_dir`` holds the notes;
    ``project`` is the project key (:func:`~jupyter_agent.paths.project_key`): the store
    sees and creates that project's sessions only. ``holder_label`` tells people who find
    a session in use what holds it. Constructing does no I/O; the first call connects and
    creates or upgrades the tables; the connection is kept until :meth:`close`.

    Raises
    ------
    ValueError
        ``url`` is not a PostgreSQL URL (the message does not show the password).
    """

    def __init__(self, url: str, memory_dir: str | os.PathLike[str], *, project: str,
                 holder_label: str = "", migrations: Sequence[Migration] = MIGRATIONS) -> None:
        if not url:
            raise ValueError("a PostgreSQL store needs a postgresql:// URL")
        check_store_url(url)
        self.project = project
        self.root = Path(memory_dir).expanduser()
        self.notes = MemoryStore(self.root)
        self._migrations = tuple(migrations)
        self._link = Link(url, self._on_connect)
        self.location = f"{self._link.shown_url} (project {project})"
        self._leases = Leases(self._link, project, holder_label)
        self._table = SessionTable(self._link, project, self._where)
        self._heads: dict[str, Head] = {}
        self._mutex = threading.RLock()

    def __repr__(self) -> str:
        return f"PostgresStore({self._link.shown_url!r}, project={self.project!r})"

    def _where(self, session_id: str) -> str:
        return f"{self._link.shown_url} project {self.project!r} session {session_id!r}"

    def _on_connect(self, conn: psycopg.Connection, first: bool) -> None:
        # json columns are decoded and checked by rows.py
        import_psycopg().types.json.set_json_loads(raw_json, conn)
        conn.execute("SET TIME ZONE 'UTC'")
        if first:
            ensure_schema(conn, self._link.shown_url, self._migrations)
        self._heads.clear()
        self._leases.retake(conn)

    def close(self) -> None:
        """Release every lease and close the connection (the next call reconnects)."""
        with self._mutex:
            self.release_all()
            self._link.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ primitives
    def _missing(self, session_id: str) -> Exception:
        owner = self._table.shared_owner(session_id)
        if owner is not None:
            return SessionReadOnlyError(session_id, owner)
        return SessionNotFoundError(session_id, self.location)

    def _lock(self, session_id: str) -> None:
        self._leases.acquire(session_id)

    def _unlock(self, session_id: str) -> None:
        if self._leases.release(session_id):
            self._heads.pop(session_id, None)

    def _check(self, session_id: str) -> Callable[[], None]:
        def check() -> None:  # a write needs the lease on the connection it is about to use
            if not self._leases.holds(session_id):
                raise self._leases.refusal(session_id)

        return check

    def _head(self, session_id: str) -> Head:
        head = self._heads.get(session_id)
        if head is None:
            row = self._table.head_row(session_id)
            if row is None:
                raise SessionNotFoundError(session_id, self.location)
            head = self._heads[session_id] = head_from_row(row[:-1], row[-1],
                                                          self._where(session_id))
        return head

    def _apply(self, head: Head, plan: Plan) -> bool:
        # a writer that ignored the lease changed the row: read the head again
        revision = self._table.apply(head, plan, self._check(head.id))
        if revision is None:
            self._heads.pop(head.id, None)
            return False
        self._heads[head.id] = replace(plan.head, revision=revision)
        return True

    def _insert(self, record: SessionRecord) -> bool:
        identity = self._leases.identity
        values = {**row_values(record), "project": self.project, "id": record.id,
                  "owner_user": identity.user, "owner_host": identity.host}
        return self._table.insert(values, record.transcript, self._check(record.id))

    def _exists_error(self, session_id: str) -> FileExistsError:
        return FileExistsError(errno.EEXIST, "session already exists", self._where(session_id))

    # ------------------------------------------------------------------ the steps
    @contextlib.contextmanager
    def _changing(self, session_id: str, *, new: bool = False) -> Iterator[None]:
        validate_session_id(session_id)
        with self._mutex:
            if not (new or self._leases.holds(session_id)
                    or self._table.sid_of(session_id) is not None):
                raise self._missing(session_id)
            self._lock(session_id)
            try:
                yield
            finally:
                self._unlock(session_id)

    def _change(self, session_id: str, plan: Callable[[Head], Plan | None]) -> None:
        with self._changing(session_id):
            for _ in range(_PLAN_TRIES):
                head = self._head(session_id)
                change = plan(head)
                if change is None or self._apply(head, change):
                    return
        raise ContextMismatchError(session_id, 0, "the session kept changing underneath "
                                                  "this store (a writer without a lease)")

    # ------------------------------------------------------------------ reads
    def exists(self, session_id: str) -> bool:
        validate_session_id(session_id)
        with self._mutex:
            return self._table.sid_of(session_id) is not None

    def load_session(self, session_id: str) -> SessionRecord:
        """The whole record, the project's or one shared with this role (no lease).

        Raises
        ------
        SessionNotFoundError
        CorruptSessionError
            Naming the database, project and session, for a row written by a newer
            jupyter-agent or one that does not validate; nothing is changed.
        """
        validate_session_id(session_id)
        with self._mutex:
            row = self._table.record_row(session_id)
        if row is None:
            raise SessionNotFoundError(session_id, self.location)
        return record_from_row(row, self._where(session_id))

    def _mine(self, session_id: str) -> LeaseHolder | None:
        return self._leases.holder(session_id) if self._leases.holds(session_id) else None

    def list_sessions(self, include_archived: bool = False, *, limit: int | None = None,
                      after: SessionListing | None = None) -> list[SessionListing]:
        """Newest first, a page at a time from an index, so a page costs the same however
        many sessions the project has; rows that do not validate are left out."""
        with self._mutex:
            return self._table.listing(self._mine, include_archived=include_archived,
                                       limit=limit, after=after)

    def describe_session(self, session_id: str) -> SessionListing:
        """Raises as :meth:`load_session`; ``CorruptSessionError`` also for a row dated in
        the future."""
        validate_session_id(session_id)
        with self._mutex:
            found = self._table.listing(self._mine, session_id=session_id)
        if found:
            return found[0]
        self.load_session(session_id)  # raises what is wrong, or that it does not exist
        raise CorruptSessionError(self._where(session_id), "it cannot be listed")

    # ------------------------------------------------------------------ leases
    def acquire_lease(self, session_id: str) -> None:
        """Take (or re-enter) the lease, also of a session not saved yet.

        Raises
        ------
        SessionLockedError
            At once, naming the holder, when another kernel or store holds it.
        SessionReadOnlyError
            For a session another role shares with this one: it is read or forked, never
            resumed.
        """
        validate_session_id(session_id)
        with self._mutex:
            if not self._leases.holds(session_id) and self._table.sid_of(session_id) is None:
                owner = self._table.shared_owner(session_id)
                if owner is not None:
                    raise SessionReadOnlyError(session_id, owner)
            self._lock(session_id)

    def release_lease(self, session_id: str) -> None:
        validate_session_id(session_id)
        with self._mutex:
            self._unlock(session_id)

    def holds_lease(self, session_id: str) -> bool:
        """Whether this store holds the lease on its current connection."""
        validate_session_id(session_id)
        with self._mutex:
            return self._leases.holds(session_id)

    def release_all(self) -> None:
        with self._mutex:
            self._leases.release_all()
            self._heads.clear()

    def collect_garbage(self) -> list[str]:
        """Delete the project's lease rows no live connection backs (a killed kernel's);
        the session IDs whose rows were removed."""
        with self._mutex:
            return self._leases.delete_stale()

    # ------------------------------------------------------------------ writes
    def create_session(self, messages: Sequence[Any] = (), *, session_id: str | None = None,
                       title: str = "", project_root: str | os.PathLike[str] | None = None,
                       record: SessionRecord | None = None) -> str:
        """Create a session owned by this store's user and host, or add ``record`` whole
        under its own ID; the ID.

        Raises
        ------
        InvalidSessionIdError, InvalidMessageError
            Before anything is sent.
        FileExistsError
            The project has a session with that ID (nothing is changed).
        ValueError
            ``record`` with another argument, or a record holding what JSON cannot.
        SessionLockedError, StoreUnavailableError
        """
        if record is not None:
            if messages or session_id is not None or title or project_root is not None:
                raise ValueError("create_session(record=...) takes no other arguments")
            validate_session_id(record.id)
            check_importable(record)
            with self._changing(record.id, new=True):
                if not self._insert(record.model_copy(deep=True)):
                    raise self._exists_error(record.id)
            return record.id
        if session_id is not None:
            validate_session_id(session_id)
        converted = normalized(messages)
        root = None if project_root is None else os.fspath(project_root)
        while True:
            sid = session_id if session_id is not None else new_session_id()
            now = utc_now()
            new = SessionRecord(id=sid, created_at=now, updated_at=now, title=title,
                                project_root=root, messages=converted, transcript=list(converted))
            with self._changing(sid, new=True):
                if self._insert(new):
                    return sid
            if session_id is not None:
                raise self._exists_error(sid)

    def save(self, session_id: str, messages: Sequence[Any] = (),
             state: SessionState | Mapping[str, Any] | None = None) -> None:
        """One save point, one transaction: new messages and (when given) the checkpoint.

        Raises
        ------
        ContextMismatchError, InvalidMessageError
            Nothing is written.
        pydantic.ValidationError
            ``state`` is not a valid checkpoint.
        """
        incoming = list(messages)
        snapshot = None
        if state is not None:
            data = state.model_dump() if isinstance(state, SessionState) else state
            snapshot = SessionState.model_validate(data)
        given = incoming or None
        self._change(session_id, lambda head: plan_save(head, given, snapshot))

    def compact(self, session_id: str, messages: Sequence[Any], *, summary: str,
                replaced: int | None = None) -> None:
        """Replace the working context and record a compaction event (no transcript row)."""
        new = normalized(messages)
        text = clean_text(summary)
        self._change(session_id, lambda head: plan_compact(head, new, text, replaced))

    def update(self, session_id: str, *, title: str | None = None, summary: str | None = None,
               archived: bool | None = None) -> None:
        """Set the given fields in one change; a summary also sets ``updated_at``."""
        values: dict[str, Any] = {}
        if title is not None:
            values["title"] = clean_text(title)
        if summary is not None:
            values["summary"] = clean_text(summary)
        if archived is not None:
            values["archived"] = bool(archived)
        touch = summary is not None
        self._change(session_id, lambda head: plan_update(head, values, touch)
                     if values else None)

    def delete_session(self, session_id: str) -> None:
        with self._changing(session_id):
            self._heads.pop(session_id, None)
            if not self._table.delete(session_id, self._check(session_id)):
                raise SessionNotFoundError(session_id, self.location)

    def share_session(self, session_id: str, roles: Sequence[str], *,
                      undo: bool = False) -> list[str]:
        """Share one of this role's sessions read-only with database ``roles`` (their
        members may read and fork it), or stop (``undo``); the roles it is shared with now.

        Raises
        ------
        ValueError
            A role name that is empty, over 63 bytes, or not the database's (nothing changed).
        SessionNotFoundError, SessionReadOnlyError
        """
        validate_session_id(session_id)
        for role in roles:
            if not role or len(role.encode()) > 63 or "\0" in role:
                raise ValueError(f"not a database role name: {role!r}")
        with self._mutex:
            sid = self._table.sid_of(session_id)
            if sid is None:
                raise self._missing(session_id)
            try:
                return self._table.share(sid, list(roles), undo)
            except LookupError as err:
                raise ValueError(str(err.args[0])) from None

    # ------------------------------------------------------------------ figures
    def save_figure(self, session_id: str, figure_id: str, data: bytes, media_type: str) -> None:
        """Keep a figure (replacing one of that ID) under the session's lease.

        Raises
        ------
        InvalidFigureError
            Before anything is sent.
        """
        validate_session_id(session_id)
        check_figure(figure_id, data, media_type)
        with self._changing(session_id):
            if not self._table.save_figure(session_id, figure_id, data, media_type,
                                           self._check(session_id)):
                raise SessionNotFoundError(session_id, self.location)

    def read_figure(self, session_id: str, figure_id: str) -> FigureData:
        """Raises ``FigureNotFoundError``, and ``TooLargeError`` over the figure cap."""
        validate_session_id(session_id)
        validate_figure_id(figure_id)
        with self._mutex:
            found = self._table.read_figure(session_id, figure_id)
        if found is None:
            raise FigureNotFoundError(session_id, figure_id, self._where(session_id))
        return found

    def figure_ids(self, session_id: str) -> list[str]:
        validate_session_id(session_id)
        with self._mutex:
            return self._table.figure_ids(session_id)

    def delete_figure(self, session_id: str, figure_id: str) -> bool:
        """Delete a figure under the session's lease; whether it existed."""
        validate_figure_id(figure_id)
        with self._changing(session_id):
            return self._table.delete_figure(session_id, figure_id, self._check(session_id))

    # -------------------------------------------- until the callers use the narrowed protocol
    def read_notes(self, kind: NoteKind) -> str:
        return self.notes.read_notes(kind)

    def write_notes(self, kind: NoteKind, text: str) -> None:
        self.notes.write_notes(kind, text)

    def append_note(self, kind: NoteKind, line: str) -> None:
        self.notes.append_note(kind, line)

    def import_session(self, record: SessionRecord) -> None:
        self.create_session(record=record)

    def save_messages(self, session_id: str, messages: Sequence[Any]) -> None:
        self.save(session_id, messages)

    def save_state(self, session_id: str, state: SessionState | Mapping[str, Any]) -> None:
        self.save(session_id, (), state)

    def write_summary(self, session_id: str, summary: str) -> None:
        self.update(session_id, summary=summary)

    def set_title(self, session_id: str, title: str) -> None:
        self.update(session_id, title=title)

    def set_archived(self, session_id: str, archived: bool = True) -> None:
        self.update(session_id, archived=archived)

    def lease(self, session_id: str) -> AbstractContextManager[None]:
        return holding(self, session_id)

    def lease_holder(self, session_id: str) -> LeaseHolder | None:
        validate_session_id(session_id)
        with self._mutex:
            return self._leases.holder(session_id)

    def ensure_summary(self, session_id: str) -> str:
        with self._changing(session_id):
            head = self._head(session_id)
            if head.summary.strip():
                return head.summary
            text = fallback_summary(self._table.recent(head, SUMMARY_MESSAGES))
            if text:
                self.update(session_id, summary=text)
            return text


def prepare_database(url: str, role: str | None = None) -> int:
    """Create or upgrade the store's tables in the database at ``url`` as a user who may
    (after ``SET ROLE role``, so that it owns them); return the schema version.

    Kernels do this on their first connection; where users may not create schemas, an
    administrator runs it once after ``team.sql``.

    Raises
    ------
    StoreUnavailableError, StoreSchemaError
    """
    check_store_url(url)
    link = Link(url, lambda conn, first: None)
    try:
        conn = link.connection()
        if role:
            sql = import_psycopg().sql
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        ensure_schema(conn, link.shown_url)
        return current_version(conn)
    finally:
        link.close()
