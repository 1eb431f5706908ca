"""LeaseControl: taking and releasing the leases of the JSON-file backend.

The locks themselves are :class:`~jupyter_agent.store.leases.Leases`; this part adds what
the store needs around them: the directories opened and checked, the store's mutex held,
and the in-memory copy of a session dropped when its lease is released.
"""

from __future__ import annotations

from jupyter_agent.store.ids import validate_session_id
from jupyter_agent.store.leases import Leases
from jupyter_agent.store.records import LeaseHolder
from jupyter_agent.store.session_files import SessionFiles

__all__ = ["LeaseControl"]


class LeaseControl:
    """The leases one store takes on the sessions of one memory directory.

    Parameters
    ----------
    files : SessionFiles
        The session files of the memory directory (mutex, directories, cache).
    leases : Leases
        The store's lease counts and lock files.
    """

    def __init__(self, files: SessionFiles, leases: Leases) -> None:
        self._files = files
        self._leases = leases

    def acquire(self, session_id: str) -> None:
        """Take (or re-enter) the session's lease, without waiting; hold it until
        :meth:`release`. Also for a session not saved yet (creates its lock file).

        Raises
        ------
        InvalidSessionIdError
            Before any file is touched.
        SessionLockedError
            At once, naming the holder, if another process or store holds it.
        UnsafePathError, StorageError
        """
        validate_session_id(session_id)
        with self._files.mutex, self._files.dirs(create=True) as dirs:
            assert dirs is not None
            self._files.take_lease(dirs[1], session_id, dirs[0])

    def release(self, session_id: str) -> None:
        """Undo one :meth:`acquire` (releasing a lease not held does nothing).

        Raises
        ------
        InvalidSessionIdError
        """
        validate_session_id(session_id)
        with self._files.mutex:
            self._leases.release(session_id)
            if not self._leases.holds(session_id):
                self._files.cache.pop(session_id, None)

    def holds(self, session_id: str) -> bool:
        """Whether this store (in this process) holds the session's lease."""
        validate_session_id(session_id)
        return self._leases.holds(session_id)

    def holder(self, session_id: str) -> LeaseHolder | None:
        """Who holds the session's lease, as the holder recorded it (pid, host, user,
        since, label); ``None`` when nobody does.

        Raises
        ------
        InvalidSessionIdError
        UnsafePathError
            If the lock file or its directory may not be used.
        """
        validate_session_id(session_id)
        with self._files.mutex, self._files.dirs(create=False) as dirs:
            return None if dirs is None else self._leases.holder(dirs[1], session_id)

    def release_all(self) -> None:
        """Release every lease this store holds, whatever the counts (extension unload)."""
        with self._files.mutex:
            self._leases.release_all()
            self._files.cache.clear()
