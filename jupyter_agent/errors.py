"""Exceptions raised by jupyter-agent.

Every error the library raises on purpose derives from :class:`JupyterAgentError`,
so a front end (the magics) can turn exactly these into one-line messages and let
anything unexpected keep its traceback. Each subclass carries the offending value
(session ID, path, pid, ...) as attributes, not only in its message.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jupyter_agent.store.records import LeaseHolder


class JupyterAgentError(Exception):
    """Base class of every error jupyter-agent raises deliberately."""


class InvalidSessionIdError(JupyterAgentError, ValueError):
    """A session ID is not 1-128 letters, digits, ``_`` or ``-``.

    Raised before the ID is ever used as a file name (design §1).

    Attributes
    ----------
    session_id : object
        The rejected value, as given.
    """

    def __init__(self, session_id: object) -> None:
        self.session_id = session_id
        super().__init__(
            f"invalid session ID {session_id!r}: use 1-128 letters, digits, '_' or '-'"
        )


class SessionNotFoundError(JupyterAgentError, LookupError):
    """No session file exists for a (valid) session ID.

    Attributes
    ----------
    session_id : str
    path : pathlib.Path
        Where the session file was expected.
    """

    def __init__(self, session_id: str, path: Path) -> None:
        self.session_id = session_id
        self.path = path
        super().__init__(f"no saved session {session_id!r} (looked for {path})")

    def __str__(self) -> str:  # LookupError/KeyError would quote the message
        return str(self.args[0])


class CorruptSessionError(JupyterAgentError):
    """A session file exists but cannot be read as a session record.

    The file is left untouched so that nothing is lost; the message names it.

    Attributes
    ----------
    path : pathlib.Path
        The unreadable file.
    reason : str
        What was wrong (JSON error, validation error, ...).
    """

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"session file {path} is unreadable and was left untouched: {reason}")


class ContextMismatchError(JupyterAgentError, ValueError):
    """The messages to save do not extend the session's saved working context.

    Raised by ``Store.save`` and ``Store.save_messages``; nothing is written (design §3).

    Attributes
    ----------
    session_id : str
    index : int
        The first position where saved and incoming messages differ (or the
        length of the incoming list when it is shorter than the saved one).
    """

    def __init__(self, session_id: str, index: int, detail: str = "") -> None:
        self.session_id = session_id
        self.index = index
        msg = (
            f"messages for session {session_id!r} do not extend the saved working context "
            f"(first difference at message {index})"
        )
        super().__init__(msg + (f": {detail}" if detail else ""))


class SessionLockedError(JupyterAgentError):
    """Another process (or another store object) holds the session's lease.

    Raised at once, without waiting (design §7). The message names the holder as it
    recorded itself in the lock file (who, where, since when, what) and what to do next.

    Attributes
    ----------
    session_id : str
    pid : int or None
        The process that holds the lease (``None`` if it could not be read).
    path : pathlib.Path or None
        The lock file (``None`` for a backend without one).
    holder : LeaseHolder or None
        Everything the holder recorded: pid, host, OS user, since (UTC), label (a
        notebook path, a kernel name or a command); ``None`` if nothing could be read.
    """

    def __init__(self, session_id: str, pid: int | None, path: Path | None = None, *,
                 holder: LeaseHolder | None = None) -> None:
        self.session_id = session_id
        self.pid = pid if pid is not None or holder is None else holder.pid
        self.path = path
        self.holder = holder
        who = f"process {self.pid}" if self.pid is not None else "another process"
        where = f" (lock file {path})" if path is not None else ""
        super().__init__(
            f"session {session_id!r} is in use by {who}{where}{_describe(holder)}; "
            f"close it there or end that process, then try again"
        )


def _describe(holder: LeaseHolder | None) -> str:
    """``": analysis.ipynb, user ann on host h since 2026-01-31 10:02 UTC"`` (or "")."""
    if holder is None:
        return ""
    facts = [holder.label] if holder.label else []
    where = " ".join(x for x in (
        f"user {holder.user}" if holder.user else "",
        f"on host {holder.host}" if holder.host else "",
        f"since {holder.since:%Y-%m-%d %H:%M} UTC" if holder.since is not None else "",
    ) if x)
    if where:
        facts.append(where)
    return (": " + ", ".join(facts)) if facts else ""


class LeaseLostError(JupyterAgentError):
    """The lock file of a session this process holds was removed or replaced.

    Raised before a write (design §7): another process could now hold a lease on a new
    lock file with the same name, so nothing is written and this lease is dropped.

    Attributes
    ----------
    session_id : str
    path : pathlib.Path
        The lock file.
    """

    def __init__(self, session_id: str, path: Path) -> None:
        self.session_id = session_id
        self.path = path
        super().__init__(
            f"the lock file {path} of session {session_id!r} was removed or replaced while "
            f"this process held its lease; nothing was written. Resume the session again "
            f"(%agent_resume {session_id}) to take a fresh lease"
        )


class InvalidMessageError(JupyterAgentError, ValueError):
    """A message to save does not have the shape of a Chat Completions message.

    Raised before anything is written, so that nothing saved can fail to load.

    Attributes
    ----------
    index : int
        Position of the message in the list given.
    reason : str
        What is wrong with it (e.g. ``"content must be a string, a list of parts or null"``).
    """

    def __init__(self, index: int, reason: str) -> None:
        self.index = index
        self.reason = reason
        super().__init__(f"message {index} cannot be saved: {reason}")


class UnsafePathError(JupyterAgentError):
    """Something in the memory directory is not what the store may safely use.

    Base class of :class:`UnsafeFileError` and :class:`UnsafeDirectoryError` (design §2).

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
        ``"file writable by others"`` or ``"file larger than N bytes"``.
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
    """

    def __init__(self, path: Path, problem: str, *, owner: str = "",
                 mode: int | None = None, fix: str = "") -> None:
        self.owner = owner
        self.mode = mode
        self.problem = problem
        facts = f" (owner {owner}, mode {mode:04o})" if mode is not None else ""
        super().__init__(
            path,
            f"refusing to use {path}{facts}: it is {problem}; "
            f"{fix + ', or ' if fix else ''}point AgentMagics.memory_dir "
            f"(or $JUPYTER_AGENT_MEMORY_DIR) elsewhere",
        )


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
    """The operating system refused a write under the memory directory.

    Disk full, read-only file system, permission denied, I/O error, ... The previous
    content is intact (design §8). Also an ``OSError`` with the original ``errno``.

    Attributes
    ----------
    path : pathlib.Path
        The file that could not be written.
    cause : OSError
        The original error.
    action : str
        What to do next, in words.
    """

    def __init__(self, path: Path, cause: OSError, action: str = "") -> None:
        super().__init__(cause.errno, cause.strerror or str(cause), str(path))
        self.path = path
        self.cause = cause
        self.action = action or _next_step(cause.errno, path)

    def __str__(self) -> str:
        return f"could not write {self.path}: {self.strerror}; {self.action}"


def _next_step(code: int | None, path: Path) -> str:
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


class ModelError(JupyterAgentError):
    """The model endpoint failed: unreachable, rejected the key, rate limited, or errored.

    Raised by the agent loop after the ``openai`` client's own retries. The user's
    message is already saved, so the next run can go on.

    Attributes
    ----------
    status_code : int or None
        The HTTP status, or ``None`` when no response arrived (connection refused,
        timeout).
    """

    def __init__(self, message: str, status_code: int | None = None) -> None:
        self.status_code = status_code
        super().__init__(message)


class ModelNotConfiguredError(JupyterAgentError):
    """No model endpoint is configured (no API key and no ``base_url``)."""


class LimitExceededError(JupyterAgentError):
    """A resource limit of the session is reached (tool calls, cost, iterations).

    Attributes
    ----------
    limit : str
        ``"max_tool_calls"``, ``"max_cost_usd"`` or ``"max_iterations"``.
    value : float
        The value that reached the limit.
    maximum : float
        The configured limit.
    """

    def __init__(self, limit: str, value: float, maximum: float) -> None:
        self.limit = limit
        self.value = value
        self.maximum = maximum
        super().__init__(f"limit reached: {limit} = {maximum:g} (session is at {value:g})")
