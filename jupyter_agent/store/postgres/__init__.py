"""The team store: a project's sessions in a shared PostgreSQL database (design notes,
"The team store (PostgreSQL)").

:class:`PostgresStore` supplies the session engine's primitives: each change is one
transaction, and while the lease is held the session's head stays in memory, so a save
point costs one ``UPDATE`` of the row plus one ``INSERT`` of the new messages. A role sees
its own sessions and, to read and fork only, those shared with it (row-level security,
``schema.py``). Importing does no I/O and does not import ``psycopg`` (the ``postgres`` extra).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from jupyter_agent.errors import (
    CorruptSessionError,
    FigureNotFoundError,
    SessionLockedError,
    SessionNotFoundError,
    SessionReadOnlyError,
    StoreUnavailableError,
    TooLargeError,
)
from jupyter_agent.paths import current_user
from jupyter_agent.store.engine import Notes, SessionEngine
from jupyter_agent.store.postgres import rows
from jupyter_agent.store.postgres.schema import MIGRATIONS, Migration, ensure_schema
from jupyter_agent.store.postgres.url import Link, check_store_url, driver
from jupyter_agent.store.records import (
    CLOCK_SKEW,
    MAX_FIGURE_BYTES,
    FigureData,
    LeaseHolder,
    SessionListing,
    SessionRecord,
    utc_now,
    validate_figure_id,
    validate_session_id,
)

if TYPE_CHECKING:
    import psycopg


def lock_key(project: str, session_id: str) -> int:
    """The advisory-lock key of a session: a signed 64-bit BLAKE2b hash of project and ID."""
    digest = hashlib.blake2b(f"{project}\0{session_id}".encode(), digest_size=8,
                             person=b"jupyter-agent").digest()
    return int.from_bytes(digest, "big", signed=True)


def row_holder(row: Mapping[str, Any]) -> LeaseHolder | None:
    """Who holds a lock as a row of ``rows.LEASE_COLUMNS`` says; an empty holder while the
    lease row is written."""
    if row["lock_pid"] is None:
        return None
    if row["lock_pid"] != row["backend_pid"]:
        return LeaseHolder()
    return LeaseHolder(pid=row["pid"], user=row["user_name"] or "", host=row["host"] or "",
                       since=row["since"], label=row["label"] or "")


class Leases:
    """The leases one store holds on its connection, called under the store's mutex.
    ``identity`` (user, host, ``label``; never a secret) is recorded with each lease and as
    the owner of each session created."""

    def __init__(self, link: Link, project: str, label: str) -> None:
        self._link = link
        self._project = project
        self.identity = LeaseHolder(user=current_user(), host=socket.gethostname(), label=label)
        self._pid = os.getpid()
        self._since: dict[str, datetime] = {}  # the leases counted here, since when
        self._held: set[str] = set()  # those held on the current connection

    def _params(self, session_id: str, since: datetime) -> dict[str, Any]:
        return {"key": lock_key(self._project, session_id), "project": self._project,
                "sid": session_id, "pid": os.getpid(), "user": self.identity.user,
                "host": self.identity.host, "since": since, "label": self.identity.label}

    def _own(self) -> dict[str, datetime]:
        if self._pid != os.getpid():  # inherited through fork: none is this process's
            self._pid, self._since, self._held = os.getpid(), {}, set()
        return self._since

    def _try_lock(self, conn: psycopg.Connection, session_id: str, since: datetime) -> bool:
        return conn.execute(rows.ACQUIRE, self._params(session_id, since)).fetchone() is not None

    def acquire(self, session_id: str) -> None:
        since = self._own().get(session_id) or utc_now()
        # (a reconnect inside run() retakes the leases counted here: then it is held)
        if not self._link.run(lambda conn: session_id in self._held
                              or self._try_lock(conn, session_id, since), idempotent=True):
            raise self.refusal(session_id)
        self._since[session_id] = since
        self._held.add(session_id)

    def refusal(self, session_id: str) -> SessionLockedError:
        holder = self.holder(session_id) or LeaseHolder()
        return SessionLockedError(session_id, holder.pid, holder=holder)

    def let_go(self, session_id: str) -> None:
        """Let the lease go (a dropped connection lost the lock on the server already: no error)."""
        since = self._own().pop(session_id, None)
        if since is not None and session_id in self._held and self._link.connected:
            params = self._params(session_id, since)
            with contextlib.suppress(StoreUnavailableError):  # gone with the connection
                self._link.run(lambda c: c.execute(rows.RELEASE, params), idempotent=True)
        self._held.discard(session_id)

    def holds(self, session_id: str) -> bool:
        """Whether this store holds the lease on its current connection."""
        return session_id in self._own() and session_id in self._held

    def holder(self, session_id: str) -> LeaseHolder | None:
        """Who holds the lease: this store, another one (as its row says), or ``None``."""
        if self.holds(session_id):
            return self.identity.model_copy(update={"pid": os.getpid(),
                                                    "since": self._since[session_id]})
        params = self._params(session_id, utc_now())
        # a holder takes the lock and writes its row in one statement; a loser reading the
        # row in between sees the previous holder's: look again a few times (< 30 ms in all)
        for delay in (0.002, 0.008, 0.015, 0):
            found = self._link.fetch(rows.HOLDER, params)
            if not found or found[0]["lock_pid"] == found[0]["backend_pid"] or not delay:
                break
            time.sleep(delay)
        return row_holder(found[0]) if found else None

    def retake(self, conn: psycopg.Connection) -> None:
        """On a new connection: take again every lease counted here."""
        self._held = {sid for sid, since in self._own().items()
                      if self._try_lock(conn, sid, since)}


class PostgresStore(SessionEngine):
    """The sessions of one project in a PostgreSQL database.

    ``url`` is ``postgresql://[user[:password]@]host[:port]/dbname[?param=...]`` (libpq
    parameters, ``~/.pgpass`` and ``PG*`` variables apply; ``ValueError``, password hidden,
    for another URL); ``memory_dir`` holds the notes; ``project`` is the project key
    (:func:`~jupyter_agent.paths.project_key`): the store sees and creates its sessions only;
    ``holder_label`` tells who finds a session in use what holds it. No I/O until the first
    call, which connects and creates or upgrades the tables; :meth:`close` disconnects.
    """

    leases: Leases

    def __init__(self, url: str, memory_dir: str | os.PathLike[str], *, project: str,
                 holder_label: str = "", migrations: Sequence[Migration] = MIGRATIONS) -> None:
        if not check_store_url(url):
            raise ValueError("a PostgreSQL store needs a postgresql:// URL")
        super().__init__(Notes(Path(memory_dir).expanduser()))
        self.project = project
        self._migrations = tuple(migrations)
        self._link = Link(url, self._on_connect)
        self.location = f"{self._link.shown_url} (project {project})"
        self.leases = Leases(self._link, project, holder_label)
        self._owners: dict[str, Any] = {}  # the owner rows _exists read, for this step

    def __repr__(self) -> str:
        return f"PostgresStore({self._link.shown_url!r}, project={self.project!r})"

    def _on_connect(self, conn: psycopg.Connection, first: bool) -> None:
        # json columns arrive as their bytes, decoded and checked by rows.py
        driver(self._link.shown_url).types.json.set_json_loads(bytes, conn)
        conn.execute("SET TIME ZONE 'UTC'")
        if first:
            ensure_schema(conn, self._link.shown_url, self._migrations)
        self._heads.clear()
        self.leases.retake(conn)

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
    @contextlib.contextmanager
    def _open(self, *, create: bool) -> Iterator[Link]:
        try:
            yield self._link
        finally:
            self._owners.clear()  # what _exists saw holds for this one step only

    def _where(self, session_id: str) -> str:
        return f"{self._link.shown_url} project {self.project!r} session {session_id!r}"

    def _one(self, query: str, session_id: str, *, needed: bool = False, **params: Any) -> Any:
        """The first row, or None; ``SessionNotFoundError`` for none when ``needed``."""
        psycopg = driver(self._link.shown_url)
        try:
            found = self._link.fetch(query, {"project": self.project, "id": session_id, **params})
        except psycopg.DataError as err:  # a value the driver cannot read (``infinity``)
            raise CorruptSessionError(self._where(session_id),
                                      f"a value cannot be read ({' '.join(str(err).split())})"
                                      ) from None
        if not found and needed:
            raise SessionNotFoundError(session_id, self.location)
        return found[0] if found else None

    def _write(self, op: Callable[[psycopg.Connection], Any], session_id: str) -> Any:
        def check() -> None:  # a write needs the lease on the connection it is about to use
            if not self.leases.holds(session_id):
                raise self.leases.refusal(session_id)

        return self._link.write(op, check)

    def _write_one(self, query: str, session_id: str, **params: Any) -> bool:
        values = {"project": self.project, "id": session_id, **params}
        return bool(self._write(lambda c: c.execute(query, values).fetchone() is not None,
                                session_id))

    def _exists(self, at: Link, session_id: str) -> bool:
        # also a session another role shares with this one: it can be loaded (not changed)
        self._owners[session_id] = self._one(rows.OWNER, session_id)
        return self._owners[session_id] is not None

    def _take(self, at: Link, session_id: str) -> None:
        if not self.leases.holds(session_id):  # else its ownership was checked when taken
            found = (self._owners.pop(session_id) if session_id in self._owners
                     else self._one(rows.OWNER, session_id))
            if found is not None and not found["mine"]:
                raise SessionReadOnlyError(session_id, found["owner_role"])
        self.leases.acquire(session_id)

    def _head(self, at: Link, session_id: str) -> rows.Head:
        head = self._heads.get(session_id)
        if head is None:
            row = self._one(rows.HEAD, session_id, needed=True)
            head = self._heads[session_id] = rows.head_from_row(row, self._where(session_id))
        return head

    def _apply(self, at: Link, head: rows.Head, change: rows.Plan) -> bool:
        values = rows.column_values(change.head, change.columns)
        sets = ", ".join(f"{name} = %({name})s" for name in values)
        update = (f"UPDATE {rows.SESSIONS} SET {sets}, revision = revision + 1 "
                  "WHERE sid = %(sid)s AND revision = %(revision)s RETURNING revision")
        params = {**values, "sid": head.sid, "revision": head.revision}
        appended = [(head.sid, head.transcript_len + i, rows.dumps(m))
                    for i, m in enumerate(change.appended)]

        def op(conn: psycopg.Connection) -> int | None:
            found = conn.execute(update, params).fetchone()
            if found is not None and appended:
                with conn.cursor() as cursor:
                    cursor.executemany(rows.APPEND_ROW, appended)
            return None if found is None else int(found[0])

        revision = self._write(op, head.record.id)
        if revision is None:
            self._heads.pop(head.record.id, None)
            return False
        self._heads[head.record.id] = replace(change.head, revision=revision)
        return True

    def _insert(self, at: Link, record: SessionRecord, *, created: bool) -> bool:
        identity = self.leases.identity
        values = {**rows.row_values(record), "project": self.project,
                  "owner_user": identity.user, "owner_host": identity.host}
        insert = (f"INSERT INTO {rows.SESSIONS} ({', '.join(values)}) VALUES "
                  f"({', '.join(f'%({c})s' for c in values)}) "
                  "ON CONFLICT (project, id) DO NOTHING RETURNING sid")

        def op(conn: psycopg.Connection) -> bool:
            found = conn.execute(insert, values).fetchone()
            if found is not None and record.transcript:
                appended = [rows.dumps(m) for m in record.transcript]
                conn.execute(rows.APPEND, (found[0], 0, appended))
            return found is not None

        return bool(self._write(op, record.id))

    def _remove(self, at: Link, session_id: str) -> bool:
        return self._write_one(rows.DELETE, session_id)

    def _read_record(self, at: Link, session_id: str) -> SessionRecord:
        row = self._one(rows.RECORD, session_id, needed=True)
        return rows.head_from_row(row, self._where(session_id), whole=True).record

    def _list_page(self, at: Link, include_archived: bool, limit: int | None,
                   after: SessionListing | None, session_id: str | None = None
                   ) -> list[SessionListing]:
        """One page, or the entry of ``session_id`` alone (then a row that does not
        validate raises ``CorruptSessionError``; a page leaves it out)."""
        query = rows.listing_query(include_archived=include_archived, limit=limit,
                                   after=after is not None, session_id=session_id is not None)
        params: dict[str, Any] = {"project": self.project, "limit": limit, "id": session_id,
                                  "horizon": utc_now() + CLOCK_SKEW}
        if after is not None:
            params.update(after_at=after.updated_at, after_id=after.id)
        listing: list[SessionListing] = []
        for row in self._link.fetch(query, params):
            sid, mine = row["id"], self.leases.holds(row["id"])
            holder = self.leases.holder(sid) if mine else row_holder(row)
            status: Literal["active", "in use", "idle"] = (
                "active" if mine else "idle" if holder is None else "in use")
            try:
                listing.append(rows.listing_entry(row, status, holder, self._where(sid)))
            except CorruptSessionError:
                if session_id is not None:
                    raise
        return listing

    def _describe(self, at: Link, session_id: str) -> SessionListing:
        found = self._list_page(at, True, None, None, session_id)
        if found:
            return found[0]
        self._read_record(at, session_id)  # raises what is wrong, or that it does not exist
        raise CorruptSessionError(self._where(session_id), "it cannot be listed")

    def _put_figure(self, at: Link, session_id: str, figure_id: str, data: bytes,
                    media_type: str) -> None:
        if not self._write_one(rows.SAVE_FIGURE, session_id, figure=figure_id, type=media_type,
                               data=data):
            raise SessionNotFoundError(session_id, self.location)

    def _get_figure(self, at: Link, session_id: str, figure_id: str) -> FigureData:
        """``TooLargeError`` over ``MAX_FIGURE_BYTES`` (the bytes are not fetched)."""
        row = self._one(rows.READ_FIGURE, session_id, cap=MAX_FIGURE_BYTES, figure=figure_id)
        if row is None:
            raise FigureNotFoundError(session_id, figure_id, self._where(session_id))
        if row["data"] is None:
            raise TooLargeError(f"{rows.FIGURES} (project {self.project!r}, session "
                                f"{session_id!r}, figure {figure_id!r})", row["size"],
                                MAX_FIGURE_BYTES, "figure")
        return FigureData(bytes(row["data"]), row["media_type"])

    def _figure_ids(self, at: Link, session_id: str) -> list[str]:
        params = {"project": self.project, "id": session_id}
        return [r["figure_id"] for r in self._link.fetch(rows.FIGURE_IDS, params)]

    _plan_save = staticmethod(rows.plan_save)
    _plan_compact = staticmethod(rows.plan_compact)
    _plan_update = staticmethod(rows.plan_update)

    # ------------------------------------------------------------------ the team store's own
    def collect_garbage(self) -> list[str]:
        """Delete the project's lease rows no live connection backs (a killed kernel's);
        the session IDs whose rows were removed."""
        with self._mutex:
            return [r["session_id"] for r in self._link.fetch(rows.STALE, (self.project,))]

    def share_session(self, session_id: str, roles: Sequence[str], *,
                      undo: bool = False) -> list[str]:
        """Share one of this role's sessions read-only with database ``roles`` (their
        members may read and fork it), or stop (``undo``); the roles it is shared with now.
        ``ValueError`` (nothing changed) for a role name that is empty, over 63 bytes or
        not the database's."""
        validate_session_id(session_id)
        for role in roles:
            if not role or len(role.encode()) > 63 or "\0" in role:
                raise ValueError(f"not a database role name: {role!r}")
        with self._mutex:
            found = self._one(rows.OWNER, session_id, needed=True)
            if not found["mine"]:
                raise SessionReadOnlyError(session_id, found["owner_role"])
            sid = found["sid"]

            def op(conn: psycopg.Connection) -> list[str]:
                for role in roles:
                    if not undo and conn.execute(rows.ROLE, (role,)).fetchone() is None:
                        raise ValueError(f"the database has no role {role!r}")
                    conn.execute(rows.UNSHARE if undo else rows.SHARE, (sid, role))
                return [str(r[0]) for r in conn.execute(rows.SHARES, (sid,)).fetchall()]

            return list(self._link.write(op, lambda: None))

    def delete_figure(self, session_id: str, figure_id: str) -> bool:
        """Delete a figure under the session's lease; whether it existed."""
        validate_figure_id(figure_id)
        with self._changing(session_id):
            return self._write_one(rows.DELETE_FIGURE, session_id, figure=figure_id)


def prepare_database(url: str, role: str | None = None) -> int:
    """Create or upgrade the store's tables at ``url`` as a user who may (after ``SET ROLE
    role``, so that it owns them); the schema version. Kernels do this on their first
    connection; where users may not create schemas, an administrator runs it once after
    ``team.sql``."""
    check_store_url(url)
    link = Link(url, lambda conn, first: None)
    try:
        conn = link.connection()
        if role:
            sql = driver(link.shown_url).sql
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        return ensure_schema(conn, link.shown_url)
    finally:
        link.close()
