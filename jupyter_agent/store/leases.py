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
* The leased update path (:meth:`LeasedStore._update`) used by every method of
  ``SessionStore`` that changes a record: check that ``sessions/<id>.json`` exists
  (an unknown ID raises :class:`~jupyter_agent.errors.SessionNotFoundError` and
  never leaves a ``.lock`` file behind), take the lease, read the record, apply the
  change, write it atomically.
* While the lease is held, the record last read or written is kept in ``_cache``
  and reused for the next change instead of re-parsing the file (valid because all
  writers cooperate through the lease; the file's dev/inode/size/mtime are compared
  as a guard against a non-cooperating editor). It is dropped whenever the lease is
  released.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from jupyter_agent.errors import SessionLockedError, SessionNotFoundError
from jupyter_agent.store.files import (
    FileSignature,
    LockHeldError,
    ensure_private_dir,
    file_signature,
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
    holder_label : str, optional
        What this store's holder is, for people who find a session in use (a notebook
        path, a kernel name, a command); recorded with each lease it takes. Never a secret.
    """

    def __init__(self, root: str | os.PathLike[str], *, holder_label: str = "") -> None:
        super().__init__(root)
        self.holder_label = holder_label
        self._leases: dict[str, _Lease] = {}
        self._cache: dict[str, tuple[SessionRecord, FileSignature]] = {}
        self._mutex = threading.RLock()

    def acquire_lease(self, session_id: str) -> None:
        """Take (or re-enter) the session's lease; hold it until :meth:`release_lease`.

        Creates ``sessions/<id>.lock`` (0600) if needed -- also for a session that
        does not exist yet (``create_session`` and a new ``Agent`` lease the ID
        before the record exists).

        Parameters
        ----------
        session_id : str

        Raises
        ------
        InvalidSessionIdError
            Before any file is touched.
        SessionLockedError
            At once, if another process or another store holds the lease; the
            message names the holder's pid.
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

        Parameters
        ----------
        session_id : str

        Raises
        ------
        InvalidSessionIdError
            For an invalid ID. Releasing a lease this store does not hold does
            nothing (no error).
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

        Parameters
        ----------
        session_id : str

        Yields
        ------
        None
            The lease is held inside the block and released (one count) after it.

        Raises
        ------
        InvalidSessionIdError
        SessionLockedError
            At once, naming the holder's pid, if another process or store holds it.
        OSError
            If the lock file cannot be created.
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

    # ------------------------------------------------------------------ leased updates

    def _require_record_file(self, session_id: str) -> None:
        """Raise :class:`SessionNotFoundError` before leasing an unknown ID.

        Without this check, taking the lease would create ``sessions/<id>.lock`` for
        a session that does not exist (e.g. ``%agent_archive nosuchid``).
        """
        path = self.session_path(session_id)
        if not self.holds_lease(session_id) and not path.is_file():
            raise SessionNotFoundError(session_id, path)

    def _load_for_update(self, session_id: str) -> SessionRecord:
        """The current record, from the in-memory copy when it is still the file's."""
        path = self.session_path(session_id)
        try:
            signature = file_signature(path)
        except FileNotFoundError:
            raise SessionNotFoundError(session_id, path) from None
        cached = self._cache.get(session_id)
        if cached is not None and cached[1] == signature:
            return cached[0]
        record = self._read_record(session_id)
        self._cache[session_id] = (record, signature)
        return record

    def _store(self, record: SessionRecord) -> None:
        path = self._write_record(record)
        self._cache[record.id] = (record, file_signature(path))

    def _update(
        self, session_id: str, change: Callable[[SessionRecord], SessionRecord]
    ) -> SessionRecord:
        """Apply ``change`` to the record under the lease (see the module docstring).

        Raises
        ------
        InvalidSessionIdError
        SessionNotFoundError
            For an unknown ID, before any file is created.
        SessionLockedError, CorruptSessionError, OSError
        """
        with self._mutex:
            self._require_record_file(session_id)
            with self.lease(session_id):
                record = self._load_for_update(session_id)
                new = change(record)
                if new is not record:
                    self._store(new)
                return new
