"""Every error jupyter-agent raises on purpose.

Each derives from :class:`JupyterAgentError`, so a front end (the magics) can turn exactly
these into one-line messages and let anything unexpected keep its traceback. Each subclass
carries the offending value (session ID, path, pid, ...) as attributes, not only in its
message. Sections: sessions and their store (IDs, records, leases, messages, figures), the
memory directory's files, the model endpoint and the limits of a turn, forks and exports.
"""

from __future__ import annotations

import errno
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jupyter_agent.store.records import LeaseHolder

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
    "describe_holder",
]


class JupyterAgentError(Exception):
    """Base class of every error jupyter-agent raises deliberately."""

# ---- sessions and their store

class InvalidSessionIdError(JupyterAgentError, ValueError):
    """A session ID is not 1-128 letters, digits, ``_`` or ``-``.

    Raised before the ID is ever used as a file name.

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
    path : pathlib.Path or str
        Where the session file was expected; a database backend names the database
        (password left out) and the project instead.
    """

    def __init__(self, session_id: str, path: Path | str) -> None:
        self.session_id = session_id
        self.path = path
        super().__init__(f"no saved session {session_id!r} (looked for {path})")

    def __str__(self) -> str:  # LookupError/KeyError would quote the message
        return str(self.args[0])


class SessionReadOnlyError(JupyterAgentError, PermissionError):
    """A change to a session another database role shared with this one to read.

    Attributes
    ----------
    session_id : str
    owner : str
        The role that owns the session.
    """

    def __init__(self, session_id: str, owner: str) -> None:
        self.session_id = session_id
        self.owner = owner
        super().__init__(f"session {session_id!r} is {owner!r}'s, shared with you to read "
                         f"only: fork it to continue (%agent_fork {session_id})")

    def __str__(self) -> str:
        return str(self.args[0])


class CorruptSessionError(JupyterAgentError):
    """A session file exists but cannot be read as a session record.

    The file is left untouched so that nothing is lost; the message names it.

    Attributes
    ----------
    path : pathlib.Path or str
        The unreadable file; a database backend names the database (password left
        out), the project and the session instead.
    reason : str
        What was wrong (JSON error, validation error, ...).
    """

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = path
        self.reason = reason
        what = f"session file {path}" if isinstance(path, Path) else f"session record {path}"
        super().__init__(f"{what} is unreadable and was left untouched: {reason}")


def _size_text(size: int) -> str:
    """A byte count in words: ``"16 MiB"`` for whole mebibytes, else ``"1,234 bytes"``."""
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20:,} MiB"
    if size >= 1 << 10 and size % (1 << 10) == 0:
        return f"{size >> 10:,} KiB"
    return f"{size:,} bytes"


class TooLargeError(CorruptSessionError):
    """A file of the memory directory or a team-store value is larger than jupyter-agent
    reads (or would write): it is refused whole, before it is decoded, and left untouched.

    Attributes
    ----------
    path : pathlib.Path or str
        The file, or the team store's session and column.
    size : int
        Its size in bytes (of the line, for a journal line).
    cap : int
        The largest size accepted, in bytes.
    what : str
        What it is, e.g. ``"session snapshot"``, ``"journal line 7"``, ``"figure"``.

    The caps are constants of the store (no setting raises them): a session that outgrows
    one is refused when saved, before anything is written (``written=True``).
    """

    def __init__(self, path: Path | str, size: int, cap: int, what: str, *,
                 written: bool = False) -> None:
        self.path = path
        self.size = size
        self.cap = cap
        self.what = what
        self.reason = f"{what} of {size:,} bytes is over the {_size_text(cap)} cap"
        outcome = "nothing was written" if written else "it was not loaded and was left untouched"
        JupyterAgentError.__init__(self, f"{path}: {self.reason}; {outcome}")


class ContextMismatchError(JupyterAgentError, ValueError):
    """The messages to save do not extend the session's saved working context.

    Raised by ``Store.save``; nothing is written.

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

    Raised at once, without waiting. The message names the holder as it
    recorded itself in the lock file (who, where, since when, what) and what to do next.

    Attributes
    ----------
    session_id : str
    pid : int or None
        The process that holds the lease, as the holder recorded it (``None`` if it
        could not be read).
    path : pathlib.Path or None
        The lock file (JSON files); ``None`` for a database backend.
    holder : LeaseHolder or None
        Who holds the lease (user, host, pid, since, label) as far as the store can
        tell; ``None`` when it only knows the pid.
    """

    def __init__(self, session_id: str, pid: int | None, path: Path | None = None, *,
                 holder: LeaseHolder | None = None) -> None:
        self.session_id = session_id
        self.pid = pid if pid is not None or holder is None else holder.pid
        self.path = path
        self.holder = holder
        who = describe_holder(holder) if holder is not None else ""
        if not who:
            who = f"process {self.pid}" if self.pid is not None else "another process"
        where = f" (lock file {path})" if path is not None else ""
        super().__init__(f"session {session_id!r} is in use by {who}{where}; close it there "
                         f"or end that process, then try again")


def describe_holder(holder: LeaseHolder) -> str:
    """``alice on node-3 (pid 42, analysis.ipynb, since 2026-03-01 14:02 UTC)``; "" if unknown."""
    name = holder.user or ""
    if holder.host:
        name = f"{name} on {holder.host}" if name else holder.host
    details = []
    if holder.pid is not None:
        details.append(f"pid {holder.pid}")
    if holder.label:
        details.append(holder.label)
    if holder.since is not None:
        details.append(f"since {holder.since.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC")
    if not name:
        return f"process {holder.pid}" if holder.pid is not None else ""
    return name + (f" ({', '.join(details)})" if details else "")


class StoreUnavailableError(JupyterAgentError):
    """The session database cannot be reached, refused the login, or the connection
    dropped in the middle of an operation.

    Whatever the store acknowledged before is kept by the database; an operation
    that fails with this error wrote nothing, or -- when the connection dropped
    while it was being committed -- at most what a repeat of the same save would
    write again. The store reconnects on the next call. The message never contains
    the password.

    Attributes
    ----------
    url : str
        The database URL with the password left out.
    reason : str
        What went wrong, one line, password left out.
    """

    def __init__(self, url: str, reason: str, *, lost: bool = False) -> None:
        self.url = url
        self.reason = reason
        if lost:
            msg = (f"lost the connection to the session database {url}: {reason}; everything "
                   "saved before is safe and the next command reconnects")
        else:
            msg = f"cannot use the session database {url}: {reason}"
        super().__init__(msg)


class StoreSchemaError(JupyterAgentError):
    """The session database was set up by a newer jupyter-agent than this one.

    Nothing is changed in the database. Upgrade jupyter-agent to use it.

    Attributes
    ----------
    url : str
        The database URL with the password left out.
    found, known : int
        The database's schema version and the newest this code knows.
    """

    def __init__(self, url: str, found: int, known: int) -> None:
        self.url = url
        self.found = found
        self.known = known
        super().__init__(
            f"the session database {url} has schema version {found}, but this jupyter-agent "
            f"knows only up to {known}; upgrade jupyter-agent to use it (nothing was changed)"
        )


class LeaseLostError(JupyterAgentError):
    """The lock file of a session this process holds was removed or replaced.

    Raised before a write: another process could now hold a lease on a new
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


class FigureNotFoundError(JupyterAgentError, LookupError):
    """A session has no figure with this ID (never saved, or deleted with the session).

    Attributes
    ----------
    session_id, figure_id : str
    where : pathlib.Path or str
        Where the figure was looked for (its file, or the database and project).
    """

    def __init__(self, session_id: str, figure_id: str, where: Path | str) -> None:
        self.session_id = session_id
        self.figure_id = figure_id
        self.where = where
        super().__init__(f"session {session_id!r} has no figure {figure_id!r} "
                         f"(looked in {where})")

    def __str__(self) -> str:  # LookupError/KeyError would quote the message
        return str(self.args[0])


class InvalidFigureError(JupyterAgentError, ValueError):
    """A figure to save is not one a session may keep: its ID is not 1-128
    letters, digits, ``_`` or ``-``; its media type is not PNG, JPEG or SVG; its bytes are
    not of that type; or it is larger than the store keeps.

    Raised before anything is written.

    Attributes
    ----------
    figure_id : object
        The figure's ID, as given.
    reason : str
        What is wrong with it.
    """

    def __init__(self, figure_id: object, reason: str) -> None:
        self.figure_id = figure_id
        self.reason = reason
        super().__init__(f"figure {figure_id!r} cannot be saved: {reason}")

# ---- files of the memory directory

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

# ---- the model endpoint and the limits of a turn

class ModelError(JupyterAgentError):
    """The model endpoint failed: unreachable, rejected the key, rate limited, or errored.

    Raised by the agent loop after the ``openai`` client's own retries. The user's
    message is already saved, so the next run can go on.

    Attributes
    ----------
    status_code : int or None
        The HTTP status, or ``None`` when no response arrived (connection refused,
        timeout).
    code : str
        The error code the endpoint sent (e.g. ``"context_length_exceeded"``), or "".
    mid_reply : bool
        The connection dropped while the reply was arriving (the text that arrived is
        kept in the session, marked as cut off).
    detail : str
        The endpoint's own reason, as its error body gave it ("" when there was no error
        answer): the message already contains it; this is for quoting it elsewhere.
    context_window : int or None
        Not None when the endpoint refused the request as too long for its context
        window: the window it named in tokens, or 0 when it named none.
    """

    def __init__(self, message: str, status_code: int | None = None, code: str = "", *,
                 mid_reply: bool = False, detail: str = "",
                 context_window: int | None = None) -> None:
        self.status_code = status_code
        self.code = code
        self.mid_reply = mid_reply
        self.detail = detail
        self.context_window = context_window
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


class PromptTooLongError(JupyterAgentError, ValueError):
    """A prompt that cannot fit the model's context window even alone.

    Raised before anything is sent or saved: compaction never summarizes the newest
    request, so such a turn could not succeed.

    Attributes
    ----------
    tokens : int
        The estimated size of the system message and the prompt (tokens).
    window : int
        The context window (tokens).
    model : str
        The model name.
    """

    def __init__(self, tokens: int, window: int, model: str, *, saved: bool = False) -> None:
        self.tokens, self.window, self.model = tokens, window, model
        what = ("your prompt is saved, but it cannot be answered" if saved
                else "nothing was sent or saved")
        super().__init__(
            f"this prompt is about {tokens:,} tokens with the system message, tools and "
            f"room for the reply, more than the {window:,}-token context window of model "
            f"{model}: {what}; shorten the prompt (put large data in a variable or file the "
            "agent can read), or raise the window: start the server with a larger one "
            "(llama.cpp -c N, Ollama num_ctx) and, if it is not reported, tell the agent "
            "with --context-window N or %config AgentMagics.context_window = N")

# ---- forks and exports

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
