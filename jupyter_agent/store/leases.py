"""Per-store session leases over ``sessions/<id>.lock`` (spec: "Session Locks").

:class:`LeasedStore` adds to :class:`~jupyter_agent.store.memory.MemoryStore` the
lease bookkeeping that :class:`~jupyter_agent.store.sessions.SessionStore` uses:

* ``acquire_lease`` takes ``flock(LOCK_EX | LOCK_NB)`` on the lock file (see
  ``files.lock_exclusive``) or raises :class:`~jupyter_agent.errors.SessionLockedError`
  at once, naming the holder's pid. A second store object in the same process is a
  different holder and is refused too.
* Within one store the lease is re-entrant: a count per session, shared by ``lease()``
  blocks and ``acquire_lease``/``release_lease`` pairs; the lock is released when the
  count returns to 0, and :meth:`release_all` drops everything (extension unload).
* A lease is not inherited through ``fork``: entries record the owning pid, and a
  child process must take its own lease (and is refused while the parent holds it).
* When a lease is first taken, temporary files that a killed writer left behind for
  that session (``.<id>.json.*.tmp``) are removed: with the lease held, no
  cooperating writer can be using them.
* The in-memory record copy kept by ``SessionStore`` lives in ``_cache`` and is
  dropped whenever the lease is released.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from jupyter_agent.errors import SessionLockedError
from jupyter_agent.store.files import (
    FileSignature,
    LockHeldError,
    ensure_private_dir,
    lock_exclusive,
    unlock,
)
from jupyter_agent.store.ids import validate_session_id
from jupyter_agent.store.memory import MemoryStore
from jupyter_agent.store.records import SessionRecord

__all__ = ["LeasedStore"]


@dataclass
class _Lease:
    fd: int
    count: int
    pid: int


class LeasedStore(MemoryStore):
    """A :class:`MemoryStore` that can hold session leases (base of ``SessionStore``).

    Parameters
    ----------
    root : str or os.PathLike
        The memory directory.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        super().__init__(root)
        self._leases: dict[str, _Lease] = {}
        self._cache: dict[str, tuple[SessionRecord, FileSignature]] = {}
        self._mutex = threading.RLock()

    def acquire_lease(self, session_id: str) -> None:
        """Take (or re-enter) the session's lease; hold it until :meth:`release_lease`.

        Raises
        ------
        InvalidSessionIdError
        SessionLockedError
            At once, if another process or another store holds the lease.
        OSError
            If the lock file cannot be created.
        """
        path = self.lock_path(session_id)
        with self._mutex:
            entry = self._leases.get(session_id)
            if entry is not None and entry.pid == os.getpid():
                entry.count += 1
                return
            if entry is not None:  # inherited through fork: the parent's, not ours
                del self._leases[session_id]
                self._cache.pop(session_id, None)
                with contextlib.suppress(OSError):
                    os.close(entry.fd)
            ensure_private_dir(self.root)
            ensure_private_dir(self.sessions_dir)
            try:
                fd = lock_exclusive(path)
            except LockHeldError as err:
                raise SessionLockedError(session_id, err.pid, path) from None
            self._leases[session_id] = _Lease(fd=fd, count=1, pid=os.getpid())
            self._remove_stale_temps(session_id)

    def release_lease(self, session_id: str) -> None:
        """Undo one :meth:`acquire_lease`; the lock is released when the count reaches 0.

        Releasing a lease this store does not hold does nothing.
        """
        validate_session_id(session_id)
        with self._mutex:
            entry = self._leases.get(session_id)
            if entry is None or entry.pid != os.getpid():
                return
            entry.count -= 1
            if entry.count == 0:
                del self._leases[session_id]
                self._cache.pop(session_id, None)
                unlock(entry.fd)

    def holds_lease(self, session_id: str) -> bool:
        """Tell whether this store (in this process) holds the session's lease."""
        validate_session_id(session_id)
        entry = self._leases.get(session_id)
        return entry is not None and entry.pid == os.getpid()

    def release_all(self) -> None:
        """Release every lease this store holds, whatever the counts (extension unload)."""
        with self._mutex:
            entries, self._leases = self._leases, {}
            self._cache.clear()
            for entry in entries.values():
                if entry.pid == os.getpid():
                    with contextlib.suppress(OSError):
                        unlock(entry.fd)

    @contextlib.contextmanager
    def lease(self, session_id: str) -> Iterator[None]:
        """Hold the session's lease for a ``with`` block (re-entrant within this store).

        Raises
        ------
        InvalidSessionIdError, SessionLockedError
        """
        self.acquire_lease(session_id)
        try:
            yield
        finally:
            self.release_lease(session_id)

    def _remove_stale_temps(self, session_id: str) -> None:
        for tmp in self.sessions_dir.glob(f".{session_id}.json.*.tmp"):
            with contextlib.suppress(OSError):
                tmp.unlink()

