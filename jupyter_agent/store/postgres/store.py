"""PostgresStore: a project's sessions in a PostgreSQL database shared by a team.

The same contract as the JSON files (:class:`~jupyter_agent.store.base.Store`,
design §1-§10, §16, §19), composed of: ``link.py`` (the connection, reopened when it
drops), ``schema.py`` (tables and migrations), ``leases.py`` (advisory locks),
``tables.py`` (every SQL statement on sessions), ``figures.py`` (a session's
figures, design §23), ``rows.py`` (pure plans of each change), ``decode.py``
(rows read back, validated), ``listing.py`` (pages of the listing) and
``heads.py`` (what is kept in memory while a lease is held).

Invariants
----------
* Every method that changes a session holds its lease while it does so; one that
  changes an unknown session raises
  :class:`~jupyter_agent.errors.SessionNotFoundError` and leaves nothing behind.
  Reads take no lease.
* What is saved could be loaded back: messages are checked before anything is sent
  (:mod:`jupyter_agent.store.changes`, as the JSON files do), and whatever is read is
  validated as completely as a file is (``decode.py``).
* Each change is one transaction; appending costs one ``UPDATE`` of the session row
  and one ``INSERT`` per new message, whatever the session's length; a compaction
  writes the new working context and an event, never a transcript row.
* The notes (``project.md``, ``user.md``) stay files in the memory directory.
* The URL's password is never shown: ``repr``, errors and records use the redacted URL.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_agent.errors import (
    ContextMismatchError,
    CorruptSessionError,
    FigureNotFoundError,
    SessionNotFoundError,
)
from jupyter_agent.store.base import NoteKind
from jupyter_agent.store.changes import check_importable, normalized
from jupyter_agent.store.figures import FigureData, check_figure, validate_figure_id
from jupyter_agent.store.ids import new_session_id, validate_session_id
from jupyter_agent.store.memory import MemoryStore
from jupyter_agent.store.messages import (
    SUMMARY_MESSAGES,
    clean_text,
    fallback_summary,
)
from jupyter_agent.store.postgres.decode import raw_json, record_from_row
from jupyter_agent.store.postgres.figures import FigureTable
from jupyter_agent.store.postgres.heads import Heads
from jupyter_agent.store.postgres.leases import Leases, whoami
from jupyter_agent.store.postgres.link import Link
from jupyter_agent.store.postgres.listing import read_listing
from jupyter_agent.store.postgres.rows import (
    Head,
    Plan,
    plan_compact,
    plan_extend,
    plan_fields,
    plan_state,
    row_values,
)
from jupyter_agent.store.postgres.schema import MIGRATIONS, Migration, ensure_schema
from jupyter_agent.store.postgres.tables import SessionTable
from jupyter_agent.store.postgres.url import check_store_url
from jupyter_agent.store.records import (
    LeaseHolder,
    SessionListing,
    SessionRecord,
    SessionState,
    utc_now,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresStore"]


class PostgresStore:
    """Saved sessions of one project in a PostgreSQL database, with leases.

    Parameters
    ----------
    url : str
        ``postgresql://[user[:password]@]host[:port]/dbname[?param=value...]``; libpq
        parameters (``sslmode``, ``connect_timeout``, ...), ``~/.pgpass`` and the
        ``PG*`` environment variables apply as for any libpq client.
    memory_dir : str or os.PathLike
        The memory directory; the notes stay files there (design §2).
    project : str
        The project key (:func:`~jupyter_agent.paths.project_key`): this store sees
        and creates the sessions of this project only.
    holder_label : str, optional
        What this store's holder is, for people who find a session in use.
    migrations : sequence of Migration, optional
        The schema's history (tests pass their own; default the shipped one).

    Raises
    ------
    ValueError
        If ``url`` is not a PostgreSQL URL (the message does not show the password).

    Notes
    -----
    Constructing the store does no I/O; the first call connects, creates or upgrades
    the tables if needed, and keeps the connection (see :meth:`close`).
    """

    def __init__(self, url: str, memory_dir: str | os.PathLike[str], *, project: str,
                 holder_label: str = "", migrations: Sequence[Migration] = MIGRATIONS) -> None:
        if not url:
            raise ValueError("a PostgreSQL store needs a postgresql:// URL")
        check_store_url(url)
        self.project = project
        self.root = Path(memory_dir).expanduser()
        self._notes = MemoryStore(self.root)
        self._migrations = tuple(migrations)
        self._link = Link(url, self._on_connect)
        self._leases = Leases(self._link, project, whoami(holder_label))
        self._table = SessionTable(self._link, project, self._where)
        self._figures = FigureTable(self._link, project)
        self._heads = Heads(self._table, self._leases, self._where, self.location)
        self._mutex = threading.RLock()

    def __repr__(self) -> str:
        return f"PostgresStore({self._link.shown_url!r}, project={self.project!r})"

    @property
    def url(self) -> str:
        """The database URL with the password left out."""
        return self._link.shown_url

    @property
    def location(self) -> str:
        """Where sessions are, for messages: the URL (no password) and the project."""
        return f"{self._link.shown_url} (project {self.project})"

    @property
    def holder_label(self) -> str:
        """What this store's holder is, recorded with each lease it takes."""
        return self._leases.identity.label

    @holder_label.setter
    def holder_label(self, label: str) -> None:
        self._leases.identity = replace(self._leases.identity, label=label)

    def _where(self, session_id: str) -> str:
        return f"{self._link.shown_url} project {self.project!r} session {session_id!r}"

    def _on_connect(self, conn: psycopg.Connection, first: bool) -> None:
        from psycopg.types.json import set_json_loads

        set_json_loads(raw_json, conn)  # json columns are decoded and checked by decode.py
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

    # ------------------------------------------------------------------ notes (files)
    def read_notes(self, kind: NoteKind) -> str:
        """The notes of ``kind`` from the memory directory (see ``MemoryStore.read_notes``)."""
        return self._notes.read_notes(kind)

    def write_notes(self, kind: NoteKind, text: str) -> None:
        """Replace the notes of ``kind`` (see ``MemoryStore.write_notes``)."""
        self._notes.write_notes(kind, text)

    def append_note(self, kind: NoteKind, line: str) -> None:
        """Append one line to the notes of ``kind`` (see ``MemoryStore.append_note``)."""
        self._notes.append_note(kind, line)

    # ------------------------------------------------------------------ reads
    def exists(self, session_id: str) -> bool:
        """Whether the project has a session with this ID (no lease).

        Raises
        ------
        InvalidSessionIdError, StoreUnavailableError
        """
        validate_session_id(session_id)
        with self._mutex:
            return self._table.exists(session_id)

    def load_session(self, session_id: str) -> SessionRecord:
        """The whole record of a session, read in one statement (no lease).

        Returns
        -------
        SessionRecord
            A fresh object.

        Raises
        ------
        InvalidSessionIdError, StoreUnavailableError
        SessionNotFoundError
            The project has no such session.
        CorruptSessionError
            Naming the database, project and session, for a record written by a newer
            jupyter-agent or one that does not validate; nothing is changed.
        """
        validate_session_id(session_id)
        with self._mutex:
            row = self._table.record_row(session_id)
        if row is None:
            raise SessionNotFoundError(session_id, self.location)
        return record_from_row(row, self._where(session_id))

    def list_sessions(self, include_archived: bool = False, *, limit: int | None = None,
                      after: SessionListing | None = None) -> list[SessionListing]:
        """The project's sessions, most recently updated first, one page at a time.

        Parameters
        ----------
        include_archived : bool
            Include archived sessions (left out by default).
        limit : int, optional
            At most this many entries (default: all). The newest page is read from an
            index, so it costs the same however many sessions the project has.
        after : SessionListing, optional
            The last entry of the previous page: list what comes after it.

        Returns
        -------
        list of SessionListing
            With ``status`` (``"active"``: this store holds the lease; ``"in use"``:
            another kernel or store, named by ``holder``; ``"idle"``), the owner and
            the fork origin. Rows that do not validate are left out.

        Raises
        ------
        ValueError
            ``limit`` below 1.
        StoreUnavailableError
        """
        with self._mutex:
            return read_listing(self._table, self.project, holds=self._leases.holds,
                                where=self._where, include_archived=include_archived,
                                limit=limit, after=after)

    def describe_session(self, session_id: str) -> SessionListing:
        """What :meth:`list_sessions` shows of one session (archived or not), its owner
        included; no message is read.

        Raises
        ------
        InvalidSessionIdError, StoreUnavailableError
        SessionNotFoundError
            The project has no such session.
        CorruptSessionError
            The session's row does not validate (naming the session and the column).
        """
        validate_session_id(session_id)
        with self._mutex:
            found = read_listing(self._table, self.project, holds=self._leases.holds,
                                 where=self._where, session_id=session_id)
        if found:
            return found[0]
        self.load_session(session_id)  # raises what is wrong, or that it does not exist
        raise CorruptSessionError(self._where(session_id), "it cannot be listed")

    # ------------------------------------------------------------------ leases
    def acquire_lease(self, session_id: str) -> None:
        """Take (or re-enter) the session's lease without waiting (design §7, §16).

        Works for an ID that has no session yet (a new session is leased first).

        Raises
        ------
        InvalidSessionIdError
        SessionLockedError
            At once, when another kernel (any machine) or store holds it; ``holder``
            names it (user, host, pid, since, label).
        StoreUnavailableError
        """
        validate_session_id(session_id)
        with self._mutex:
            self._leases.acquire(session_id)

    def release_lease(self, session_id: str) -> None:
        """Undo one :meth:`acquire_lease` (releasing a lease not held does nothing)."""
        validate_session_id(session_id)
        with self._mutex:
            if self._leases.release(session_id):
                self._heads.forget(session_id)

    @contextlib.contextmanager
    def lease(self, session_id: str) -> Iterator[None]:
        """Hold the session's lease for a ``with`` block (re-entrant within this store)."""
        self.acquire_lease(session_id)
        try:
            yield
        finally:
            self.release_lease(session_id)

    def holds_lease(self, session_id: str) -> bool:
        """Whether this store holds the session's lease on its current connection."""
        validate_session_id(session_id)
        with self._mutex:
            return self._leases.holds(session_id)

    def lease_holder(self, session_id: str) -> LeaseHolder | None:
        """Who holds the session's lease (``None`` when nobody does).

        Raises
        ------
        InvalidSessionIdError, StoreUnavailableError
        """
        validate_session_id(session_id)
        with self._mutex:
            return self._leases.holder(session_id)

    def release_all(self) -> None:
        """Release every lease this store holds, whatever the counts."""
        with self._mutex:
            self._leases.release_all()
            self._heads.clear()

    def collect_garbage(self) -> list[str]:
        """Delete the lease rows of the project that no live connection backs.

        A killed kernel's lock is released by the server, but its row stays (and is
        ignored) until the session is leased again; this removes such rows.

        Returns
        -------
        list of str
            The session IDs whose rows were removed.
        """
        with self._mutex:
            return self._table.delete_stale_leases()

    # ------------------------------------------------------------------ writes
    def _require(self, session_id: str) -> None:
        """Raise SessionNotFoundError before leasing an unknown ID."""
        if not self._leases.holds(session_id) and not self.exists(session_id):
            raise SessionNotFoundError(session_id, self.location)

    def _mutate(self, session_id: str, plan: Callable[[Head], Plan | None]) -> None:
        validate_session_id(session_id)
        with self._mutex:
            self._require(session_id)
            with self.lease(session_id):
                for _ in range(3):
                    change = plan(self._heads.get(session_id))
                    if change is None or self._heads.apply(self._heads.get(session_id), change):
                        return
                raise ContextMismatchError(session_id, 0, "the session kept changing underneath "
                                                          "this store (a writer without a lease)")

    def _insert(self, record: SessionRecord) -> bool:
        identity = self._leases.identity
        values = {**row_values(record), "project": self.project, "id": record.id,
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
        with self._mutex:
            while True:
                sid = session_id if session_id is not None else new_session_id()
                now = utc_now()
                record = SessionRecord(id=sid, created_at=now, updated_at=now, title=title,
                                       project_root=root, messages=converted,
                                       transcript=list(converted))
                with self.lease(sid):
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
        with self._mutex, self.lease(record.id):
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
        rows are untouched (design §4). A message that could not be loaded back raises
        ``InvalidMessageError`` before anything is sent."""
        new = normalized(messages)
        text = clean_text(summary)
        self._mutate(session_id, lambda head: plan_compact(head, new, text, replaced))

    def write_summary(self, session_id: str, summary: str) -> None:
        """Replace the summary and set ``updated_at`` to now (design §9)."""
        text = clean_text(summary)
        self._mutate(session_id, lambda head: plan_fields(head, touch=True, summary=text))

    def ensure_summary(self, session_id: str) -> str:
        """The summary, after writing the fallback excerpt if there was none (design §9)."""
        validate_session_id(session_id)
        with self._mutex:
            self._require(session_id)
            with self.lease(session_id):
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
        validate_session_id(session_id)
        with self._mutex:
            self._require(session_id)
            with self.lease(session_id):
                self._heads.forget(session_id)
                if not self._table.delete(session_id, self._heads.check(session_id)):
                    raise SessionNotFoundError(session_id, self.location)

    # ------------------------------------------------------------------ figures (design §23)
    def save_figure(self, session_id: str, figure_id: str, data: bytes, media_type: str) -> None:
        """Keep a figure of a session as a row of ``figures`` (replacing one of that ID),
        under the session's lease, in one transaction (see :meth:`Store.save_figure
        <jupyter_agent.store.base.Store.save_figure>`).

        Raises
        ------
        InvalidFigureError
            Before anything is sent.
        InvalidSessionIdError, SessionNotFoundError, SessionLockedError,
        StoreUnavailableError
        """
        validate_session_id(session_id)
        check_figure(figure_id, data, media_type)
        with self._mutex:
            self._require(session_id)
            with self.lease(session_id):
                if not self._figures.save(session_id, figure_id, data, media_type,
                                          self._heads.check(session_id)):
                    raise SessionNotFoundError(session_id, self.location)

    def read_figure(self, session_id: str, figure_id: str) -> FigureData:
        """A figure of a session, read in one statement (no lease).

        Raises
        ------
        FigureNotFoundError
            The session has no such figure (or does not exist).
        InvalidSessionIdError, InvalidFigureError, StoreUnavailableError
        """
        validate_session_id(session_id)
        validate_figure_id(figure_id)
        with self._mutex:
            found = self._figures.read(session_id, figure_id)
        if found is None:
            raise FigureNotFoundError(session_id, figure_id, self._where(session_id))
        return found

    def figure_ids(self, session_id: str) -> list[str]:
        """The IDs of a session's figures, sorted (no lease)."""
        validate_session_id(session_id)
        with self._mutex:
            return self._figures.ids(session_id)

    def delete_figure(self, session_id: str, figure_id: str) -> bool:
        """Delete one figure of a session, under its lease; whether it existed."""
        validate_session_id(session_id)
        validate_figure_id(figure_id)
        with self._mutex:
            self._require(session_id)
            with self.lease(session_id):
                return self._figures.delete(session_id, figure_id,
                                            self._heads.check(session_id))
