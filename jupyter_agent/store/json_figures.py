"""FigureFiles: the figures of the JSON-file backend's sessions.

Each figure is one image file in ``sessions/<id>.figures/``, written atomically under the
session's lease and read without a lease and without following links
(:mod:`jupyter_agent.store.figures` holds the file-level functions).
"""

from __future__ import annotations

from pathlib import Path

from jupyter_agent.errors import FigureNotFoundError
from jupyter_agent.store import figures
from jupyter_agent.store.figures import FigureData
from jupyter_agent.store.ids import validate_session_id
from jupyter_agent.store.leases import Leases
from jupyter_agent.store.session_files import SessionFiles, storage_errors

__all__ = ["FigureFiles"]


class FigureFiles:
    """The figures of the sessions of one memory directory.

    Parameters
    ----------
    files : SessionFiles
        The session files of the memory directory.
    leases : Leases
        The store's leases (checked before each write).
    """

    def __init__(self, files: SessionFiles, leases: Leases) -> None:
        self._files = files
        self._leases = leases

    def path(self, session_id: str) -> Path:
        """``sessions/<id>.figures`` after validating the ID; nothing is created.

        Raises
        ------
        InvalidSessionIdError
        """
        return self._files.sessions_dir / figures.figures_dir(validate_session_id(session_id))

    def save(self, session_id: str, figure_id: str, data: bytes, media_type: str) -> None:
        """Keep a figure as ``sessions/<id>.figures/<figure id>.<suffix>``, written
        atomically under the session's lease (see :meth:`Store.save_figure
        <jupyter_agent.store.base.Store.save_figure>` for parameters and errors)."""
        figures.check_figure(figure_id, data, media_type)
        with self._files.leased(session_id) as (_root, sessions):
            self._leases.verify(sessions, session_id)
            path = self.path(session_id) / figures.figure_file(figure_id, media_type)
            with storage_errors(path):
                figures.write_figure_file(sessions, session_id, figure_id, data, media_type)

    def read(self, session_id: str, figure_id: str) -> FigureData:
        """A figure's file, read without following links and without a lease (see
        :meth:`Store.read_figure <jupyter_agent.store.base.Store.read_figure>`)."""
        validate_session_id(session_id)
        figures.validate_figure_id(figure_id)
        with self._files.dirs(create=False) as dirs:
            found = (None if dirs is None
                     else figures.read_figure_file(dirs[1], session_id, figure_id))
        if found is None:
            raise FigureNotFoundError(session_id, figure_id, self.path(session_id))
        return found[0]

    def ids(self, session_id: str) -> list[str]:
        """The IDs of a session's figures, sorted (no lease; ``[]`` when it has none)."""
        validate_session_id(session_id)
        with self._files.dirs(create=False) as dirs:
            return [] if dirs is None else figures.list_figure_ids(dirs[1], session_id)

    def delete(self, session_id: str, figure_id: str) -> bool:
        """Delete one figure (under the session's lease); whether it existed."""
        figures.validate_figure_id(figure_id)
        with self._files.leased(session_id) as (_root, sessions):
            self._leases.verify(sessions, session_id)
            with storage_errors(self.path(session_id)):
                return figures.remove_figure_file(sessions, session_id, figure_id)
