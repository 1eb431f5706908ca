"""Errors about the files of the memory directory: unsafe entries, busy files, refused writes."""

from __future__ import annotations

import errno
from pathlib import Path

from jupyter_agent.errors.base import JupyterAgentError

__all__ = [
    "StorageError",
    "StoreBusyError",
    "UnsafeDirectoryError",
    "UnsafeFileError",
    "UnsafePathError",
]


class UnsafePathError(JupyterAgentError):
    """Something in the memory directory is not what the store may safely use.

    Base class of :class:`UnsafeFileError` and :class:`UnsafeDirectoryError`.

    Attributes
    ----------
    path : pathlib.Path
    """

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        super().__init__(message)


class UnsafeFileError(UnsafePathError):
    """A symbolic link, FIFO, socket, device, directory or multiply linked file stands
    where the store expects one of its regular files; nothing was read or written
    through it.

    Attributes
    ----------
    path : pathlib.Path
    kind : str
        What was found: ``"symbolic link"``, ``"FIFO"``, ``"socket"``,
        ``"character device"``, ``"block device"``, ``"directory"``,
        ``"file with other hard links"``, ``"file owned by uid N"``,
        ``"file writable by others"`` or ``"sparse file (it has holes)"``.
    """

    def __init__(self, path: Path, kind: str) -> None:
        self.kind = kind
        super().__init__(
            path,
            f"refusing to use {path}: it is a {kind}, not a private regular file; "
            f"jupyter-agent never follows links or opens special files in its memory "
            f"directory -- remove or rename it",
        )


class UnsafeDirectoryError(UnsafePathError):
    """The memory directory (or ``sessions/``) is not a private directory of this user.

    Attributes
    ----------
    path : pathlib.Path
    owner : str
        Who owns it (user name, else ``uid N``); "" when it is not a directory.
    mode : int or None
        Its permission bits (``None`` when it is not a directory).
    problem : str
        What is wrong: ``"owned by ..."``, ``"writable by group or others"``, ``"a
        symbolic link"``, ``"not a directory"``.
    fix : str
        How to repair the directory itself ("" when there is nothing to repair there).

    The message advises the setting the magics read (:data:`MAGICS_ELSEWHERE`);
    :meth:`advice` words it for another front end, such as the command line.
    """

    MAGICS_ELSEWHERE = "point AgentMagics.memory_dir (or $JUPYTER_AGENT_MEMORY_DIR) elsewhere"
    """How to choose another memory directory in IPython."""

    def __init__(self, path: Path, problem: str, *, owner: str = "",
                 mode: int | None = None, fix: str = "") -> None:
        self.owner = owner
        self.mode = mode
        self.problem = problem
        self.fix = fix
        super().__init__(path, self.advice(path, self.MAGICS_ELSEWHERE))

    def advice(self, path: Path | None = None, elsewhere: str = MAGICS_ELSEWHERE) -> str:
        """The one-line message, with ``elsewhere`` as the way to use another directory.

        Parameters
        ----------
        path : pathlib.Path, optional
            The refused directory (default: :attr:`path`).
        elsewhere : str
            E.g. ``"use --memory-dir DIR (or $JUPYTER_AGENT_MEMORY_DIR) for another one"``.

        Returns
        -------
        str
        """
        path = self.path if path is None else path
        facts = f" (owner {self.owner}, mode {self.mode:04o})" if self.mode is not None else ""
        return (f"refusing to use {path}{facts}: it is {self.problem}; "
                f"{self.fix + ', or ' if self.fix else ''}{elsewhere}")


class StoreBusyError(JupyterAgentError):
    """A short store lock (notes, listing index) stayed taken for too long.

    Attributes
    ----------
    path : pathlib.Path
        The lock file.
    seconds : float
        How long the store waited.
    """

    def __init__(self, path: Path, seconds: float) -> None:
        self.path = path
        self.seconds = seconds
        super().__init__(
            f"{path} stayed locked by another process for {seconds:g} s; "
            f"try again, or look for a stopped process using this memory directory"
        )


class StorageError(JupyterAgentError, OSError):
    """The operating system refused a write (or, with ``reading``, a read) under the
    memory directory.

    Disk full, read-only file system, permission denied, I/O error, ... The previous
    content is intact. Also an ``OSError`` with the original ``errno``.

    Attributes
    ----------
    path : pathlib.Path
        The file that could not be written.
    cause : OSError
        The original error.
    action : str
        What to do next, in words.
    reading : bool
        The refused operation was a read.
    """

    def __init__(self, path: Path, cause: OSError, action: str = "", *,
                 reading: bool = False) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause), str(path))
        self.path = path
        self.cause = cause
        self.reading = reading
        self.action = action or _next_step(cause.errno, path, reading)

    def __str__(self) -> str:
        return f"could not {'read' if self.reading else 'write'} {self.path}: {self.strerror}; " \
               f"{self.action}"


def _next_step(code: int | None, path: Path, reading: bool = False) -> str:
    if reading and code in (errno.EACCES, errno.EPERM):
        return f"check that you may read {path} and enter {path.parent}"
    steps = {
        errno.ENOSPC: "free some disk space, then try again (what was saved before is intact)",
        errno.EDQUOT: "your disk quota is used up: free some space, then try again",
        errno.EROFS: "the file system is read-only: point AgentMagics.memory_dir at a "
                     "writable directory",
        errno.EACCES: f"check that you may write to {path.parent}",
        errno.EPERM: f"check that you may write to {path.parent} (and that it is not immutable)",
        errno.EIO: "the disk reported an I/O error: check it, then try again",
        errno.EFBIG: "the file is larger than this file system or your limits allow (ulimit -f)",
    }
    return steps.get(code or 0, "try again once the cause is fixed (what was saved before is "
                                "intact)")
