"""Session leases of the team store: advisory locks held by the store's connection.

Taking the lock and writing the ``leases`` row (who holds it) is one statement; a row is
believed only while its connection holds the lock. The server releases it when that
connection ends. The engine counts re-entries; retaken on a new connection (one taken by
someone else meanwhile is not held until taken again); not inherited through fork.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from jupyter_agent.errors import SessionLockedError, StoreUnavailableError
from jupyter_agent.paths import current_user
from jupyter_agent.store.postgres.schema import SCHEMA
from jupyter_agent.store.postgres.url import Link
from jupyter_agent.store.records import LeaseHolder, utc_now

if TYPE_CHECKING:
    import psycopg

# the advisory locks granted in this database, keys split as pg_locks shows a bigint
LIVE_LOCKS = """SELECT pid, classid::bigint AS hi, objid::bigint AS lo FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 1
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"""
# a lease row joined to the lock that backs it (when one does)
LOCK_OF_ROW = ("k.hi = ((l.lock_key >> 32) & 4294967295) "
               "AND k.lo = (l.lock_key & 4294967295)")

_ACQUIRE = f"""WITH got AS (SELECT pg_try_advisory_lock(%(key)s) AS ok)
INSERT INTO {SCHEMA}.leases AS l
    (project, session_id, lock_key, backend_pid, pid, user_name, host, since, label)
SELECT %(project)s, %(sid)s, %(key)s, pg_backend_pid(), %(pid)s, %(user)s, %(host)s,
       %(since)s, %(label)s
FROM got WHERE got.ok
ON CONFLICT (project, session_id, owner_role) DO UPDATE SET
    lock_key = EXCLUDED.lock_key, backend_pid = EXCLUDED.backend_pid, pid = EXCLUDED.pid,
    user_name = EXCLUDED.user_name, host = EXCLUDED.host, since = EXCLUDED.since,
    label = EXCLUDED.label
RETURNING true"""
_RELEASE = f"""WITH gone AS (DELETE FROM {SCHEMA}.leases
    WHERE project = %(project)s AND session_id = %(sid)s AND backend_pid = pg_backend_pid())
SELECT pg_advisory_unlock(%(key)s)"""
# who holds a lock (``lock_pid``) and what its lease row says (see row_holder)
LEASE_COLUMNS = "k.pid AS lock_pid, l.backend_pid, l.pid, l.user_name, l.host, l.since, l.label"
_HOLDER = f"""SELECT {LEASE_COLUMNS}
FROM ({LIVE_LOCKS}) k
LEFT JOIN {SCHEMA}.leases l ON l.project = %(project)s AND l.session_id = %(sid)s
WHERE k.hi = ((%(key)s::bigint >> 32) & 4294967295) AND k.lo = (%(key)s::bigint & 4294967295)"""
_STALE = (f"DELETE FROM {SCHEMA}.leases l WHERE project = %s AND NOT EXISTS ("
          f"SELECT 1 FROM ({LIVE_LOCKS}) k WHERE k.pid = l.backend_pid AND {LOCK_OF_ROW}) "
          "RETURNING session_id")
# a holder takes the lock and writes its row in one statement; a loser reading the row
# in between sees the previous holder's: look again a few times (< 30 ms in all)
_HOLDER_RETRY_DELAYS = (0.002, 0.008, 0.015)


def lock_key(project: str, session_id: str) -> int:
    """The advisory-lock key of a session: a signed 64-bit BLAKE2b hash of project and ID."""
    digest = hashlib.blake2b(f"{project}\0{session_id}".encode(), digest_size=8,
                             person=b"jupyter-agent").digest()
    return int.from_bytes(digest, "big", signed=True)


def row_holder(row: Mapping[str, Any]) -> LeaseHolder | None:
    """Who holds a lock as a row of :data:`LEASE_COLUMNS` says; an empty holder while the
    lease row is written."""
    if row["lock_pid"] is None:
        return None
    if row["lock_pid"] != row["backend_pid"]:
        return LeaseHolder()
    return LeaseHolder(pid=row["pid"], user=row["user_name"] or "", host=row["host"] or "",
                       since=row["since"], label=row["label"] or "")


@dataclass
class _Lease:
    pid: int
    since: datetime
    held: bool


class Leases:
    """The leases one store holds on its connection; the store calls it under its mutex.

    ``identity`` (``$JUPYTERHUB_USER`` or the OS user, the host, ``label``) is recorded
    with each lease and as the owner of each session created; never a secret.
    """

    def __init__(self, link: Link, project: str, label: str) -> None:
        self._link = link
        self._project = project
        self.identity = LeaseHolder(user=current_user(), host=socket.gethostname(), label=label)
        self._leases: dict[str, _Lease] = {}

    def _params(self, session_id: str, since: datetime) -> dict[str, Any]:
        return {"key": lock_key(self._project, session_id), "project": self._project,
                "sid": session_id, "pid": os.getpid(), "user": self.identity.user,
                "host": self.identity.host, "since": since, "label": self.identity.label}

    def _own(self, session_id: str) -> _Lease | None:
        entry = self._leases.get(session_id)
        if entry is not None and entry.pid != os.getpid():  # inherited through fork
            del self._leases[session_id]
            return None
        return entry

    def _try_lock(self, conn: psycopg.Connection, session_id: str, since: datetime) -> bool:
        return conn.execute(_ACQUIRE, self._params(session_id, since)).fetchone() is not None

    def acquire(self, session_id: str) -> None:
        """Take the lease (not held now); ``SessionLockedError`` at once if another holds it."""
        entry = self._own(session_id)
        since = utc_now() if entry is None else entry.since

        def take(conn: psycopg.Connection) -> bool:
            again = self._own(session_id)
            if again is not None and again.held:  # re-taken by a reconnect just now
                return True
            return self._try_lock(conn, session_id, since)

        if not self._link.run(take, idempotent=True):
            raise self.refusal(session_id)
        self._leases[session_id] = _Lease(os.getpid(), since, True)

    def refusal(self, session_id: str) -> SessionLockedError:
        holder = self.holder(session_id) or LeaseHolder()
        return SessionLockedError(session_id, holder.pid, holder=holder)

    def let_go(self, session_id: str) -> None:
        """Let the lease go (a dropped connection lost the lock on the server already: no
        error)."""
        entry = self._own(session_id)
        if entry is None:
            return
        del self._leases[session_id]
        if entry.held and self._link.connected:
            params = self._params(session_id, entry.since)
            with contextlib.suppress(StoreUnavailableError):  # gone with the connection
                self._link.run(lambda c: c.execute(_RELEASE, params), idempotent=True)

    def holds(self, session_id: str) -> bool:
        """Whether this store holds the lease now (on its current connection)."""
        entry = self._own(session_id)
        return entry is not None and entry.held

    def holder(self, session_id: str) -> LeaseHolder | None:
        """Who holds the lease: this store, another one (as its row says), or ``None``."""
        entry = self._own(session_id)
        if entry is not None and entry.held:
            return self.identity.model_copy(update={"pid": os.getpid(), "since": entry.since})
        params = {"project": self._project, "sid": session_id,
                  "key": lock_key(self._project, session_id)}
        for delay in (*_HOLDER_RETRY_DELAYS, 0):
            found = self._link.fetch(_HOLDER, params)
            if not found or found[0]["lock_pid"] == found[0]["backend_pid"] or not delay:
                break
            time.sleep(delay)
        return row_holder(found[0]) if found else None

    def retake(self, conn: psycopg.Connection) -> None:
        """On a new connection: take again every lease counted here."""
        for session_id in list(self._leases):
            entry = self._own(session_id)
            if entry is not None:
                entry.held = self._try_lock(conn, session_id, entry.since)

    def delete_stale(self) -> list[str]:
        """Delete the project's lease rows that no live connection backs; their IDs."""
        return [r["session_id"] for r in self._link.fetch(_STALE, (self._project,))]
