"""PostgresStore: a project's sessions in a PostgreSQL database shared by a team.

The same contract as the JSON files (:class:`~jupyter_agent.store.base.Store`),
composed of: ``link.py`` (the connection, reopened when it
drops), ``schema.py`` (tables and migrations), ``leases.py`` (advisory locks),
``tables.py`` (every SQL statement on sessions), ``figures.py`` and
``session_figures.py`` (a session's figures), ``guard.py`` (leases and the
frame of every change), ``writes.py`` (every change to a session), ``rows.py`` (pure
plans of each change), ``decode.py`` (rows read back, validated), ``listing.py`` (pages
of the listing) and ``heads.py`` (what is kept in memory while a lease is held).

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
* The database decides what a role sees (row-level security, ``schema.py``): its own
  sessions, and those shared with it (:meth:`PostgresStore.share_session`) to read and
  fork only. Another role's session is, to this store, not there.
* The notes (``project.md``, ``user.md``) stay files in the memory directory.
* The URL's credentials are never shown: ``repr``, errors and records use the redacted URL.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_agent.errors import (
    CorruptSessionError,
    SessionNotFoundError,
    SessionReadOnlyError,
)
from jupyter_agent.store.base import NoteKind, holding
from jupyter_agent.store.figures import FigureData
from jupyter_agent.store.ids import validate_session_id
from jupyter_agent.store.memory import MemoryStore
from jupyter_agent.store.postgres.decode import raw_json, record_from_row
from jupyter_agent.store.postgres.figures import FigureTable
from jupyter_agent.store.postgres.guard import Guard
from jupyter_agent.store.postgres.heads import Heads
from jupyter_agent.store.postgres.leases import Leases, whoami
from jupyter_agent.store.postgres.link import Link
from jupyter_agent.store.postgres.listing import read_listing
from jupyter_agent.store.postgres.schema import MIGRATIONS, Migration, ensure_schema
from jupyter_agent.store.postgres.session_figures import SessionFigures
from jupyter_agent.store.postgres.tables import SessionTable
from jupyter_agent.store.postgres.url import check_store_url
from jupyter_agent.store.postgres.writes import SessionWriter
from jupyter_agent.store.records import LeaseHolder, SessionListing, SessionRecord, SessionState

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
        The memory directory; the notes stay files there.
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
        self._heads = Heads(self._table, self._leases, self._where, self.location)
        self._guard = Guard(self._leases, self._heads, self._table, self.location)
        self._mutex = self._guard.mutex
        self._writer = SessionWriter(self._table, self._heads, self._guard,
                                     lambda: self._leases.identity, project, self._where,
                                     self.location)
        self._figures = SessionFigures(FigureTable(self._link, project), self._guard,
                                       self._heads, self._where, self.location)

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
        sid = validate_session_id(session_id)
        with self._mutex:
            return self._table.exists(sid)

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
        InvalidSessionIdError, SessionNotFoundError, StoreUnavailableError
            As :meth:`load_session`.
        CorruptSessionError
            The session's row does not validate or is dated in the future (naming the
            session and the column).
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
        """Take (or re-enter) the session's lease without waiting (see
        :meth:`Guard.acquire <jupyter_agent.store.postgres.guard.Guard.acquire>`).

        Raises
        ------
        SessionReadOnlyError
            For a session another role shares with this one: it is never resumed, only
            read or forked.
        """
        validate_session_id(session_id)
        with self._mutex:
            if not self._guard.holds(session_id) and not self._table.exists(session_id):
                owner = self._table.shared_owner(session_id)
                if owner is not None:
                    raise SessionReadOnlyError(session_id, owner)
            self._guard.acquire(session_id)

    def release_lease(self, session_id: str) -> None:
        """Undo one :meth:`acquire_lease` (releasing a lease not held does nothing)."""
        self._guard.release(session_id)

    def lease(self, session_id: str) -> AbstractContextManager[None]:
        """Hold the session's lease for a ``with`` block (re-entrant within this store)."""
        return holding(self, session_id)

    def holds_lease(self, session_id: str) -> bool:
        """Whether this store holds the session's lease on its current connection."""
        return self._guard.holds(session_id)

    def lease_holder(self, session_id: str) -> LeaseHolder | None:
        """Who holds the session's lease, ``None`` when nobody does (see
        :meth:`Guard.holder <jupyter_agent.store.postgres.guard.Guard.holder>`)."""
        return self._guard.holder(session_id)

    def release_all(self) -> None:
        """Release every lease this store holds, whatever the counts."""
        self._guard.release_all()

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
    def create_session(self, messages: Sequence[Any], *, session_id: str | None = None,
                       title: str = "", project_root: str | os.PathLike[str] | None = None) -> str:
        """Create a session owned by this store's user and host; its ID
        (see ``writes.SessionWriter.create_session``)."""
        return self._writer.create_session(messages, session_id=session_id, title=title,
                                           project_root=project_root)

    def import_session(self, record: SessionRecord) -> None:
        """Add a whole record as a new session under its own ID
        (see ``writes.SessionWriter.import_session``)."""
        self._writer.import_session(record)

    def save(self, session_id: str, messages: Sequence[Any],
             state: SessionState | Mapping[str, Any] | None = None) -> None:
        """One save point, one transaction (see ``writes.SessionWriter.save``)."""
        self._writer.save(session_id, messages, state)

    def save_messages(self, session_id: str, messages: Sequence[Any]) -> None:
        """:meth:`save` without a checkpoint."""
        self._writer.save(session_id, messages)

    def save_state(self, session_id: str, state: SessionState | Mapping[str, Any]) -> None:
        """Record the checkpoint alone (see ``writes.SessionWriter.save_state``)."""
        self._writer.save_state(session_id, state)

    def compact(self, session_id: str, messages: Sequence[Any], *, summary: str,
                replaced: int | None = None) -> None:
        """Replace the working context and record a compaction event
        (see ``writes.SessionWriter.compact``)."""
        self._writer.compact(session_id, messages, summary=summary, replaced=replaced)

    def write_summary(self, session_id: str, summary: str) -> None:
        """Replace the summary and set ``updated_at`` to now."""
        self._writer.write_summary(session_id, summary)

    def ensure_summary(self, session_id: str) -> str:
        """The summary, after writing the fallback excerpt if there was none."""
        return self._writer.ensure_summary(session_id)

    def set_title(self, session_id: str, title: str) -> None:
        """Set the title (``updated_at`` is not changed)."""
        self._writer.set_title(session_id, title)

    def set_archived(self, session_id: str, archived: bool = True) -> None:
        """Archive or unarchive (``updated_at`` is not changed)."""
        self._writer.set_archived(session_id, archived)

    def delete_session(self, session_id: str) -> None:
        """Delete the session and its transcript for good
        (see ``writes.SessionWriter.delete_session``)."""
        self._writer.delete_session(session_id)

    def share_session(self, session_id: str, roles: Sequence[str], *,
                      undo: bool = False) -> list[str]:
        """Share one of this role's sessions read-only with database ``roles`` (login or
        group roles: every member may then read and fork it, never change it), or stop
        sharing it with them (``undo``); one transaction, no lease.

        Returns
        -------
        list of str
            The roles the session is shared with now, sorted.

        Raises
        ------
        ValueError
            A role name that is empty or longer than 63 bytes, or one the database does
            not have (nothing is changed).
        InvalidSessionIdError, SessionNotFoundError, SessionReadOnlyError,
        StoreUnavailableError
        """
        validate_session_id(session_id)
        for role in roles:
            if not role or len(role.encode()) > 63 or "\0" in role:
                raise ValueError(f"not a database role name: {role!r}")
        with self._mutex:
            sid = self._table.sid_of(session_id)
            if sid is None:
                self._guard.require(session_id)  # says why
                raise SessionNotFoundError(session_id, self.location)
            try:
                return self._table.share(sid, list(roles), undo, lambda: None)
            except LookupError as err:
                raise ValueError(str(err.args[0])) from None

    # ------------------------------------------------------------------ figures
    def save_figure(self, session_id: str, figure_id: str, data: bytes, media_type: str) -> None:
        """Keep a figure of a session as a row of ``figures`` (:meth:`SessionFigures.save
        <jupyter_agent.store.postgres.session_figures.SessionFigures.save>`)."""
        self._figures.save(session_id, figure_id, data, media_type)

    def read_figure(self, session_id: str, figure_id: str) -> FigureData:
        """A figure of a session, read without a lease (:meth:`SessionFigures.read
        <jupyter_agent.store.postgres.session_figures.SessionFigures.read>`)."""
        return self._figures.read(session_id, figure_id)

    def figure_ids(self, session_id: str) -> list[str]:
        """The IDs of a session's figures, sorted (no lease)."""
        return self._figures.ids(session_id)

    def delete_figure(self, session_id: str, figure_id: str) -> bool:
        """Delete one figure of a session, under its lease; whether it existed."""
        return self._figures.delete(session_id, figure_id)
