"""The SQL of the team store's figures.

A session's figures are rows of the ``figures`` table: ``(sid, figure_id)``, the media
type and the image bytes. :class:`FigureTable` runs each statement through the store's
:class:`~jupyter_agent.store.postgres.link.Link`; a write first calls the ``check`` it is
given (the session's lease is still held on the connection about to be used) and is one
transaction. Rows go with their session (``ON DELETE CASCADE``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jupyter_agent.errors import TooLargeError
from jupyter_agent.store.figures import MAX_FIGURE_BYTES, FigureData
from jupyter_agent.store.postgres.link import Link
from jupyter_agent.store.postgres.schema import SCHEMA
from jupyter_agent.store.postgres.tables import READABLE

if TYPE_CHECKING:
    import psycopg

__all__ = ["FigureTable"]

_F = f"{SCHEMA}.figures"
_S = f"{SCHEMA}.sessions"
_SAVE = (f"INSERT INTO {_F} (sid, figure_id, media_type, data) "
         f"SELECT sid, %s, %s, %s FROM {_S} WHERE project = %s AND id = %s "
         "ON CONFLICT (sid, figure_id) DO UPDATE SET media_type = EXCLUDED.media_type, "
         "data = EXCLUDED.data, saved_at = now() RETURNING 1")
# the bytes of a figure over the cap are not even sent by the server; a figure of a
# session shared with this role is read as one of its own
_OF = f"f.sid = (SELECT sid FROM {_S} WHERE {READABLE})"
_READ = (f"SELECT f.media_type, octet_length(f.data), CASE WHEN octet_length(f.data) <= "
         f"%(cap)s THEN f.data END FROM {_F} f WHERE {_OF} AND f.figure_id = %(figure)s")
_IDS = f"SELECT f.figure_id FROM {_F} f WHERE {_OF} ORDER BY f.figure_id"
_DELETE = (f"DELETE FROM {_F} f USING {_S} s WHERE s.sid = f.sid AND s.project = %s "
           "AND s.id = %s AND f.figure_id = %s RETURNING 1")


class FigureTable:
    """The statements on one project's figures.

    Parameters
    ----------
    link : Link
    project : str
        The project key every statement is limited to.
    """

    def __init__(self, link: Link, project: str) -> None:
        self._link = link
        self._project = project

    def _write(self, query: str, params: tuple[Any, ...], check: Callable[[], None]) -> bool:
        def op(conn: psycopg.Connection) -> bool:
            check()
            with self._link.transaction(conn):
                return conn.execute(query, params).fetchone() is not None

        return bool(self._link.run(op))

    def save(self, session_id: str, figure_id: str, data: bytes, media_type: str,
             check: Callable[[], None]) -> bool:
        """Insert or replace a figure; False (nothing written) when the session is gone."""
        return self._write(_SAVE, (figure_id, media_type, data, self._project, session_id),
                           check)

    def read(self, session_id: str, figure_id: str) -> FigureData | None:
        """The figure, or ``None``.

        Raises
        ------
        TooLargeError
            For a row over :data:`~jupyter_agent.store.figures.MAX_FIGURE_BYTES` (its
            bytes are not fetched).
        """
        row = self._link.run(lambda c: c.execute(
            _READ, {"cap": MAX_FIGURE_BYTES, "project": self._project, "id": session_id,
                    "figure": figure_id}).fetchone(),
            idempotent=True)
        if row is None:
            return None
        if row[2] is None:
            raise TooLargeError(f"{_F} (project {self._project!r}, session {session_id!r}, "
                                f"figure {figure_id!r})", int(row[1]), MAX_FIGURE_BYTES, "figure")
        return FigureData(bytes(row[2]), str(row[0]))

    def ids(self, session_id: str) -> list[str]:
        """The session's figure IDs, sorted."""
        rows = self._link.run(lambda c: c.execute(
            _IDS, {"project": self._project, "id": session_id}).fetchall(), idempotent=True)
        return [str(r[0]) for r in rows]

    def delete(self, session_id: str, figure_id: str, check: Callable[[], None]) -> bool:
        """Delete a figure; whether there was one."""
        return self._write(_DELETE, (self._project, session_id, figure_id), check)
