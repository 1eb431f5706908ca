"""Guard: the leases a team store takes, and the frame every change runs in.

The advisory locks themselves are :class:`~jupyter_agent.store.postgres.leases.Leases`;
the guard adds the store's mutex (one connection serves every thread), forgets a
session's head (``heads.py``) when its lease is released, and gives the writes one frame:
:meth:`Guard.changing` validates the ID, refuses an unknown session before any lease is
taken, and holds the lease for the change.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from jupyter_agent.errors import SessionNotFoundError, SessionReadOnlyError
from jupyter_agent.store.ids import validate_session_id
from jupyter_agent.store.postgres.heads import Heads
from jupyter_agent.store.postgres.leases import Leases
from jupyter_agent.store.postgres.tables import SessionTable
from jupyter_agent.store.records import LeaseHolder

__all__ = ["Guard"]


class Guard:
    """The leases of one team store and its mutex.

    Parameters
    ----------
    leases : Leases
        The store's advisory locks.
    heads : Heads
        The kept heads; a session's is forgotten when its lease is released.
    table : SessionTable
        Asked whether a session exists before an unleased change.
    location : str
        Names the database and project, for :class:`SessionNotFoundError`.

    Attributes
    ----------
    mutex : threading.RLock
        Held around every use of the connection.
    """

    def __init__(self, leases: Leases, heads: Heads, table: SessionTable, location: str) -> None:
        self._leases = leases
        self._heads = heads
        self._table = table
        self._location = location
        self.mutex = threading.RLock()

    def acquire(self, session_id: str) -> None:
        """Take (or re-enter) the session's lease without waiting.

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
        with self.mutex:
            self._leases.acquire(session_id)

    def release(self, session_id: str) -> None:
        """Undo one :meth:`acquire` (releasing a lease not held does nothing)."""
        validate_session_id(session_id)
        with self.mutex:
            if self._leases.release(session_id):
                self._heads.forget(session_id)

    @contextlib.contextmanager
    def held(self, session_id: str) -> Iterator[None]:
        """Hold the session's lease for a ``with`` block (errors as :meth:`acquire`)."""
        self.acquire(session_id)
        try:
            yield
        finally:
            self.release(session_id)

    def require(self, session_id: str) -> None:
        """Raise :class:`SessionNotFoundError` for an unknown ID whose lease is not held
        (before any lease is taken for it), :class:`SessionReadOnlyError` for a session
        another role shares with this one; another role's session not shared with this
        one is unknown (the database does not show it)."""
        if not self._leases.holds(session_id) and not self._table.exists(session_id):
            owner = self._table.shared_owner(session_id)
            if owner is not None:
                raise SessionReadOnlyError(session_id, owner)
            raise SessionNotFoundError(session_id, self._location)

    @contextlib.contextmanager
    def changing(self, session_id: str) -> Iterator[None]:
        """The frame of a change: the ID validated, the mutex held, an unknown session
        refused, the lease held for the block.

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, SessionReadOnlyError,
        SessionLockedError, StoreUnavailableError
        """
        validate_session_id(session_id)
        with self.mutex:
            self.require(session_id)
            with self.held(session_id):
                yield

    def holds(self, session_id: str) -> bool:
        """Whether this store holds the session's lease on its current connection."""
        validate_session_id(session_id)
        with self.mutex:
            return self._leases.holds(session_id)

    def holder(self, session_id: str) -> LeaseHolder | None:
        """Who holds the session's lease (``None`` when nobody does).

        Raises
        ------
        InvalidSessionIdError, StoreUnavailableError
        """
        validate_session_id(session_id)
        with self.mutex:
            return self._leases.holder(session_id)

    def release_all(self) -> None:
        """Release every lease this store holds, whatever the counts."""
        with self.mutex:
            self._leases.release_all()
            self._heads.clear()
