"""Errors of forks and exports."""

from __future__ import annotations

from pathlib import Path

from jupyter_agent.errors.base import JupyterAgentError

__all__ = [
    "ExportError",
    "ExportExistsError",
    "ForkPointError",
]


class ForkPointError(JupyterAgentError, ValueError):
    """``--at N`` names no user turn of the session being forked.

    Attributes
    ----------
    session_id : str
        The session that was to be forked.
    at : int
        The rejected turn number, as given.
    turns : int
        How many user turns the session has (valid values are 1 to ``turns``).
    """

    def __init__(self, session_id: str, at: int, turns: int) -> None:
        self.session_id = session_id
        self.at = at
        self.turns = turns
        if turns == 0:
            valid = "it has no user turns yet, so it can only be forked whole"
        else:
            valid = f"use 1 to {turns}" if turns > 1 else "use 1"
        super().__init__(f"cannot fork session {session_id!r} at turn {at}: {valid}")


class ExportError(JupyterAgentError):
    """An export could not be written where it was asked to go.

    Attributes
    ----------
    path : pathlib.Path
        The file that was to be written.
    reason : str
        What went wrong.
    """

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cannot export to {path}: {reason}")


class ExportExistsError(ExportError):
    """The export's target file exists and replacing it was not asked for (``--force``).

    Attributes
    ----------
    path : pathlib.Path
        The existing file, left untouched.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path, "the file exists (use --force to replace it)")
