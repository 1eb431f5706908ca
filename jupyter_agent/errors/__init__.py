"""Exceptions raised by jupyter-agent, importable from here.

Every error the library raises on purpose derives from :class:`JupyterAgentError`,
so a front end (the magics) can turn exactly these into one-line messages and let
anything unexpected keep its traceback. Each subclass carries the offending value
(session ID, path, pid, ...) as attributes, not only in its message.

They are defined by subject: :mod:`.sessions` (IDs, records, leases, messages,
figures), :mod:`.files` (the memory directory's files), :mod:`.model` (the endpoint and
the limits of a turn) and :mod:`.artefacts` (forks and exports).
"""

from __future__ import annotations

from jupyter_agent.errors.artefacts import ExportError, ExportExistsError, ForkPointError
from jupyter_agent.errors.base import JupyterAgentError
from jupyter_agent.errors.files import (
    StorageError,
    StoreBusyError,
    UnsafeDirectoryError,
    UnsafeFileError,
    UnsafePathError,
)
from jupyter_agent.errors.model import (
    LimitExceededError,
    ModelError,
    ModelNotConfiguredError,
    PromptTooLongError,
)
from jupyter_agent.errors.sessions import (
    ContextMismatchError,
    CorruptSessionError,
    FigureNotFoundError,
    InvalidFigureError,
    InvalidMessageError,
    InvalidSessionIdError,
    LeaseLostError,
    SessionLockedError,
    SessionNotFoundError,
    SessionReadOnlyError,
    StoreSchemaError,
    StoreUnavailableError,
    TooLargeError,
)

__all__ = [
    "ContextMismatchError",
    "CorruptSessionError",
    "ExportError",
    "ExportExistsError",
    "FigureNotFoundError",
    "ForkPointError",
    "InvalidFigureError",
    "InvalidMessageError",
    "InvalidSessionIdError",
    "JupyterAgentError",
    "LeaseLostError",
    "LimitExceededError",
    "ModelError",
    "ModelNotConfiguredError",
    "PromptTooLongError",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionReadOnlyError",
    "StorageError",
    "StoreBusyError",
    "StoreSchemaError",
    "StoreUnavailableError",
    "TooLargeError",
    "UnsafeDirectoryError",
    "UnsafeFileError",
    "UnsafePathError",
]
