"""SessionFigures: the figure operations of the team store.

The SQL is :class:`~jupyter_agent.store.postgres.figures.FigureTable`'s; this part adds
what the store protocol asks of them: IDs and images checked before anything is sent, a
write under the session's lease (:meth:`Guard.changing
<jupyter_agent.store.postgres.guard.Guard.changing>`), a read without one.
"""

from __future__ import annotations

from collections.abc import Callable

from jupyter_agent.errors import FigureNotFoundError, SessionNotFoundError
from jupyter_agent.store.figures import FigureData, check_figure, validate_figure_id
from jupyter_agent.store.ids import validate_session_id
from jupyter_agent.store.postgres.figures import FigureTable
from jupyter_agent.store.postgres.guard import Guard
from jupyter_agent.store.postgres.heads import Heads

__all__ = ["SessionFigures"]


class SessionFigures:
    """The figures of one project's sessions.

    Parameters
    ----------
    table, guard, heads : FigureTable, Guard, Heads
        The statements on the project's figures, the store's leases and mutex, and the
        kept heads (which give the check that a lease is still held before a write).
    where, location : callable, str
        For error messages: names a session (database, project, ID); names the
        database and project.
    """

    def __init__(self, table: FigureTable, guard: Guard, heads: Heads,
                 where: Callable[[str], str], location: str) -> None:
        self._table = table
        self._guard = guard
        self._heads = heads
        self._where = where
        self._location = location

    def save(self, session_id: str, figure_id: str, data: bytes, media_type: str) -> None:
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
        with self._guard.changing(session_id):
            if not self._table.save(session_id, figure_id, data, media_type,
                                    self._heads.check(session_id)):
                raise SessionNotFoundError(session_id, self._location)

    def read(self, session_id: str, figure_id: str) -> FigureData:
        """A figure of a session, read in one statement (no lease).

        Raises
        ------
        FigureNotFoundError
            The session has no such figure (or does not exist).
        InvalidSessionIdError, InvalidFigureError, StoreUnavailableError
        """
        validate_session_id(session_id)
        validate_figure_id(figure_id)
        with self._guard.mutex:
            found = self._table.read(session_id, figure_id)
        if found is None:
            raise FigureNotFoundError(session_id, figure_id, self._where(session_id))
        return found

    def ids(self, session_id: str) -> list[str]:
        """The IDs of a session's figures, sorted (no lease)."""
        validate_session_id(session_id)
        with self._guard.mutex:
            return self._table.ids(session_id)

    def delete(self, session_id: str, figure_id: str) -> bool:
        """Delete one figure of a session, under its lease; whether it existed."""
        validate_session_id(session_id)
        validate_figure_id(figure_id)
        with self._guard.changing(session_id):
            return self._table.delete(session_id, figure_id, self._heads.check(session_id))
