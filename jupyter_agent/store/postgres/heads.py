"""The in-memory heads of the sessions a team store holds leases on.

While a store holds a session's lease, no cooperating writer can change the session,
so the store keeps its :class:`~jupyter_agent.store.postgres.rows.Head` (row and
working context) here and plans the next change on it without reading the database:
a save point then costs one write. The ``revision`` guard of
:meth:`SessionTable.apply <jupyter_agent.store.postgres.tables.SessionTable.apply>`
catches a writer that ignored the lease; the head is then read again. A head is
forgotten when its lease is released and all of them when the connection is replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from jupyter_agent.errors import SessionNotFoundError
from jupyter_agent.store.postgres.decode import head_from_row
from jupyter_agent.store.postgres.leases import Leases
from jupyter_agent.store.postgres.rows import Head, Plan
from jupyter_agent.store.postgres.tables import SessionTable

__all__ = ["Heads"]


class Heads:
    """Heads by session ID, read on demand and replaced by every write.

    Parameters
    ----------
    table : SessionTable
    leases : Leases
        Consulted before each write: a write needs the session's lease on the
        connection it is about to use.
    where : callable
        Names a session (database, project, ID) for error messages.
    location : str
        Names the database and project, for :class:`SessionNotFoundError`.
    """

    def __init__(self, table: SessionTable, leases: Leases, where: Callable[[str], str],
                 location: str) -> None:
        self._table = table
        self._leases = leases
        self._where = where
        self._location = location
        self._heads: dict[str, Head] = {}

    def get(self, session_id: str) -> Head:
        """The session's head, read from the database unless it is kept already.

        Raises
        ------
        SessionNotFoundError, CorruptSessionError, StoreUnavailableError
        """
        head = self._heads.get(session_id)
        if head is not None:
            return head
        row = self._table.head_row(session_id)
        if row is None:
            raise SessionNotFoundError(session_id, self._location)
        head = head_from_row(row[:-1], row[-1], self._where(session_id))
        self._heads[session_id] = head
        return head

    def check(self, session_id: str) -> Callable[[], None]:
        """A check that raises ``SessionLockedError`` when the lease is not held (any more)."""
        def check() -> None:
            if not self._leases.holds(session_id):
                raise self._leases.refusal(session_id)

        return check

    def apply(self, head: Head, plan: Plan) -> bool:
        """Write ``plan``; True when written (the new head is kept), False when the row
        had changed since ``head`` (the head is forgotten, to be read again)."""
        revision = self._table.apply(head, plan, self.check(head.id))
        if revision is None:
            self._heads.pop(head.id, None)
            return False
        self._heads[head.id] = replace(plan.head, revision=revision)
        return True

    def forget(self, session_id: str) -> None:
        """Drop the session's head (its lease was released, or it was deleted)."""
        self._heads.pop(session_id, None)

    def clear(self) -> None:
        """Drop every head (leases released, or the connection replaced)."""
        self._heads.clear()
