"""Session leases of the team store: advisory locks held by the kernel's connection.

A lease is ``pg_try_advisory_lock(key)`` on the store's one database
connection, with ``key`` a 64-bit hash of the project and the session ID
(:func:`lock_key`). So:

* a second kernel -- on this machine or any other -- is refused at once with
  :class:`~jupyter_agent.errors.SessionLockedError`, whose ``holder`` names who has
  it (user, host, pid, since, label) as recorded in the ``leases`` table;
* two store objects in one process have two connections and exclude each other;
* the server releases the lock when the holder's connection ends: a clean exit, a
  SIGKILL of the kernel (the operating system closes its socket), or -- for a machine
  that vanished -- when TCP keepalives give up on it.

Invariants
----------
* Taking the lock and writing the ``leases`` row is one statement (one transaction),
  releasing it likewise, so the row describes the holder whenever the lock is held.
  A row is believed only while the connection it names (``backend_pid``) holds the
  advisory lock (``pg_locks``): a row left by a killed kernel is simply stale, and is
  overwritten by the next holder.
* Within one store the lease is re-entrant: a count per session, kept here, not in
  the server (one advisory lock per session and connection).
* When the connection is replaced (the server restarted, the network dropped), every
  lease this store had is taken again on the new connection before anything else
  runs. One that someone else took in the meantime is not held any more
  (:meth:`Leases.holds` is False) but keeps its count: the next operation on the
  session tries to take it again and, while the other holder has it, is refused.
* Leases are not inherited through ``fork``: entries record the owning pid.
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
from jupyter_agent.store.postgres.link import Link
from jupyter_agent.store.postgres.schema import SCHEMA
from jupyter_agent.store.records import LeaseHolder, utc_now

if TYPE_CHECKING:
    import psycopg

__all__ = ["LIVE_LOCKS", "Identity", "Leases", "lock_key", "whoami"]

#: The advisory locks granted in this database, as ``(pid, hi, lo)`` rows: the key's high
#: and low 32 bits, as PostgreSQL shows a bigint key in ``pg_locks``.
LIVE_LOCKS = """SELECT pid, classid::bigint AS hi, objid::bigint AS lo FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 1
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"""

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

_HOLDER = f"""SELECT k.pid, l.backend_pid, l.pid, l.user_name, l.host, l.since, l.label
FROM ({LIVE_LOCKS}) k
LEFT JOIN {SCHEMA}.leases l ON l.project = %(project)s AND l.session_id = %(sid)s
WHERE k.hi = %(hi)s AND k.lo = %(lo)s"""

# A holder takes the lock and writes its row in one statement; a loser that reads the
# row in between sees the previous holder's. Look again a few times (< 30 ms in all).
_HOLDER_RETRY_DELAYS = (0.002, 0.008, 0.015)


def lock_key(project: str, session_id: str) -> int:
    """The advisory-lock key of a session: a signed 64-bit BLAKE2b hash of project and ID."""
    digest = hashlib.blake2b(f"{project}\0{session_id}".encode(), digest_size=8,
                             person=b"jupyter-agent").digest()
    return int.from_bytes(digest, "big", signed=True)


def _halves(key: int) -> tuple[int, int]:
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    return unsigned >> 32, unsigned & 0xFFFFFFFF


@dataclass(frozen=True)
class Identity:
    """Who this store is, for lease rows and session owners (never a secret).

    Attributes
    ----------
    user : str
        ``$JUPYTERHUB_USER`` when set (every user's server may run as the same OS
        user, e.g. ``jovyan``), else the OS user.
    host : str
        ``socket.gethostname()``.
    label : str
        What the holder is for people (a notebook, a kernel, a command); may be "".
    """

    user: str
    host: str
    label: str = ""


def whoami(label: str = "", environ: Mapping[str, str] | None = None) -> Identity:
    """This process's :class:`Identity` (see its attributes for where each part comes from)."""
    return Identity(user=current_user(environ), host=socket.gethostname(), label=label)


@dataclass
class _Lease:
    count: int
    pid: int
    since: datetime
    held: bool


class Leases:
    """The leases one store holds on its connection (see the module docstring).

    Parameters
    ----------
    link : Link
        The store's connection.
    project : str
        The project key; leases are per project and session ID.
    identity : Identity
        Recorded in the ``leases`` row of every lease taken.

    Not thread-safe on its own: the store calls it under its mutex.
    """

    def __init__(self, link: Link, project: str, identity: Identity) -> None:
        self._link = link
        self._project = project
        self.identity = identity
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
        """Take (or re-enter) the lease; raise :class:`SessionLockedError` at once if taken."""
        entry = self._own(session_id)
        if entry is not None and entry.held and self._link.connected:
            entry.count += 1
            return
        since = utc_now() if entry is None else entry.since

        def take(conn: psycopg.Connection) -> bool:
            again = self._own(session_id)
            if again is not None and again.held:  # re-taken by a reconnect just now
                return True
            return self._try_lock(conn, session_id, since)

        if not self._link.run(take, idempotent=True):
            raise self.refusal(session_id)
        entry = self._own(session_id)  # a reconnect inside run() may have re-taken it
        if entry is None:
            self._leases[session_id] = _Lease(1, os.getpid(), since, True)
        elif entry.held:
            entry.count += 1
        else:
            entry.held, entry.count = True, entry.count + 1

    def refusal(self, session_id: str) -> SessionLockedError:
        """The error for a lease someone else holds, naming them as well as known."""
        holder = self.holder(session_id) or LeaseHolder()
        return SessionLockedError(session_id, holder.pid, holder=holder)

    def release(self, session_id: str) -> bool:
        """Undo one :meth:`acquire`; return True when the lease is now let go entirely.

        A connection that dropped already lost the lock on the server, so there is
        nothing to release there and no error.
        """
        entry = self._own(session_id)
        if entry is None:
            return False
        entry.count -= 1
        if entry.count > 0:
            return False
        del self._leases[session_id]
        if entry.held and self._link.connected:
            params = self._params(session_id, entry.since)
            with contextlib.suppress(StoreUnavailableError):  # gone with the connection
                self._link.run(lambda c: c.execute(_RELEASE, params), idempotent=True)
        return True

    def release_all(self) -> list[str]:
        """Let go of every lease, whatever the counts; return the session IDs."""
        released = []
        for session_id in list(self._leases):
            entry = self._own(session_id)
            if entry is not None:
                entry.count = 1
                self.release(session_id)
                released.append(session_id)
        return released

    def holds(self, session_id: str) -> bool:
        """Whether this store holds the lease now (on its current connection)."""
        entry = self._own(session_id)
        return entry is not None and entry.held

    def counted(self) -> list[str]:
        """The sessions this store has leases on (held now or lost to a reconnect)."""
        return [sid for sid in list(self._leases) if self._own(sid) is not None]

    def mine(self, session_id: str) -> LeaseHolder:
        """This store as the holder of a lease it holds."""
        entry = self._own(session_id)
        return LeaseHolder(pid=os.getpid(), host=self.identity.host, user=self.identity.user,
                           since=None if entry is None else entry.since,
                           label=self.identity.label)

    def holder(self, session_id: str) -> LeaseHolder | None:
        """Who holds the lease: this store, another one (as its row says), or ``None``."""
        if self.holds(session_id):
            return self.mine(session_id)
        hi, lo = _halves(lock_key(self._project, session_id))
        params = {"project": self._project, "sid": session_id, "hi": hi, "lo": lo}
        for delay in (*_HOLDER_RETRY_DELAYS, None):
            row = self._link.run(lambda c: c.execute(_HOLDER, params).fetchone(),
                                 idempotent=True)
            if row is None:
                return None
            lock_pid, backend_pid, pid, user, host, since, label = row
            if lock_pid == backend_pid:
                return LeaseHolder(pid=pid, user=user or "", host=host or "", since=since,
                                   label=label or "")
            if delay is not None:
                time.sleep(delay)
        return LeaseHolder()

    def retake(self, conn: psycopg.Connection) -> None:
        """On a new connection: take again every lease counted here (see the invariants)."""
        for session_id in self.counted():
            entry = self._leases[session_id]
            entry.held = self._try_lock(conn, session_id, entry.since)
