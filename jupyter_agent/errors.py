"""Every error jupyter-agent raises on purpose, each a :class:`JupyterAgentError` (the magics
turn exactly these into one-line messages) carrying the offending value (session ID, path,
pid, ...) as attributes named like its parameters.
"""

from __future__ import annotations

import errno
import inspect
from pathlib import Path
from typing import Any, ClassVar


class JupyterAgentError(Exception):
    """A class with a ``template`` (and its subclasses) takes its annotated fields as
    arguments, in order, keeps each as an attribute and formats its message from them."""

    template: ClassVar[str] = ""

    def __init__(self, *args: Any) -> None:
        owner = next(c for c in type(self).__mro__ if "template" in vars(c))
        if not vars(owner)["template"]:
            super().__init__(*args)
            return
        values = dict(zip(inspect.get_annotations(owner), args, strict=True))
        vars(self).update(values)
        super().__init__(self.template.format(**values))


# ---- sessions and their store
class InvalidSessionIdError(JupyterAgentError, ValueError):
    """A bad session ID (checked before it is ever used as a file name)."""

    session_id: object
    template = "invalid session ID {session_id!r}: use 1-128 letters, digits, '_' or '-'"


class SessionNotFoundError(JupyterAgentError, LookupError):
    """No saved session has this ID; ``path`` is where it was looked for (a file, or the
    database without its password and the project)."""

    session_id: str
    path: Path | str
    template = "no saved session {session_id!r} (looked for {path})"


class SessionReadOnlyError(JupyterAgentError, PermissionError):
    """A change to a session another database role (``owner``) shared to read only."""

    session_id: str
    owner: str
    template = ("session {session_id!r} is {owner!r}'s, shared with you to read only: fork "
                "it to continue (%agent_fork {session_id})")


class CorruptSessionError(JupyterAgentError):
    """A saved session, left untouched, that is not a session record. ``path``: the file, or
    the database (without its password), project and session."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path, self.reason = path, reason
        what = f"session file {path}" if isinstance(path, Path) else f"session record {path}"
        super().__init__(f"{what} is unreadable and was left untouched: {reason}")


def _size_text(size: int) -> str:
    for shift, unit in ((20, "MiB"), (10, "KiB")):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift:,} {unit}"
    return f"{size:,} bytes"


class TooLargeError(CorruptSessionError):
    """A file or team-store value over the store's cap, refused whole before decoding.

    ``size`` and ``cap`` are in bytes; ``what`` names it (``"journal line 7"``). The caps
    are constants: a session that outgrows one is refused when saved (``written=True``),
    before anything is written.
    """

    def __init__(self, path: Path | str, size: int, cap: int, what: str, *,
                 written: bool = False) -> None:
        self.path, self.size, self.cap, self.what = path, size, cap, what
        self.reason = f"{what} of {size:,} bytes is over the {_size_text(cap)} cap"
        outcome = "nothing was written" if written else "it was not loaded and was left untouched"
        JupyterAgentError.__init__(self, f"{path}: {self.reason}; {outcome}")


class ContextMismatchError(JupyterAgentError, ValueError):
    """Messages to save do not extend the saved working context; nothing is written.
    ``index``: the first position where they differ (or the incoming list's length)."""

    def __init__(self, session_id: str, index: int, detail: str = "") -> None:
        self.session_id, self.index = session_id, index
        super().__init__(f"messages for session {session_id!r} do not extend the saved working "
                         f"context (first difference at message {index})"
                         + (f": {detail}" if detail else ""))


class SessionLockedError(JupyterAgentError):
    """Another process or store object holds the session's lease (raised at once).
    ``pid``, ``holder``: as it recorded itself (``None`` if unreadable); ``path``: the lock
    file, ``None`` for a database."""

    def __init__(self, session_id: str, pid: int | None, path: Path | None = None, *,
                 holder: Any = None) -> None:  # a store.records.LeaseHolder (store imports us)
        self.session_id = session_id
        self.pid = pid if pid is not None or holder is None else holder.pid
        self.path, self.holder = path, holder
        who = (holder.describe() if holder is not None else "") or (
            f"process {self.pid}" if self.pid is not None else "another process")
        where = f" (lock file {path})" if path is not None else ""
        super().__init__(f"session {session_id!r} is in use by {who}{where}; close it there "
                         f"or end that process, then try again")


class StoreUnavailableError(JupyterAgentError):
    """The session database cannot be reached, refused the login, or dropped the
    connection (``lost``). The failed operation wrote nothing, or -- when the connection
    dropped during its commit -- at most what repeating it writes again. ``url`` and the
    message never contain the password."""

    def __init__(self, url: str, reason: str, *, lost: bool = False) -> None:
        self.url, self.reason = url, reason
        super().__init__(f"lost the connection to the session database {url}: {reason}; "
                         "everything saved before is safe and the next command reconnects"
                         if lost else f"cannot use the session database {url}: {reason}")


class StoreSchemaError(JupyterAgentError):

    url: str
    found: int
    known: int
    template = ("the session database {url} has schema version {found}, but this "
                "jupyter-agent knows only up to {known}; upgrade jupyter-agent to use it "
                "(nothing was changed)")


class LeaseLostError(JupyterAgentError):
    """The lock file of a session this process holds was removed or replaced (raised
    before a write; the lease is dropped)."""

    session_id: str
    path: Path
    template = ("the lock file {path} of session {session_id!r} was removed or replaced "
                "while this process held its lease; nothing was written. Resume the session "
                "again (%agent_resume {session_id}) to take a fresh lease")


class InvalidMessageError(JupyterAgentError, ValueError):
    """A message of a list to save is not a Chat Completions message."""

    index: int
    reason: str
    template = "message {index} cannot be saved: {reason}"


class FigureNotFoundError(JupyterAgentError, LookupError):
    """``where``: the session's file, or the database."""

    session_id: str
    figure_id: str
    where: Path | str
    template = "session {session_id!r} has no figure {figure_id!r} (looked in {where})"


class InvalidFigureError(JupyterAgentError, ValueError):
    """A figure a session may not keep (bad ID, not PNG, JPEG or SVG, bytes not of its
    type, too large)."""

    figure_id: object
    reason: str
    template = "figure {figure_id!r} cannot be saved: {reason}"


# ---- files of the memory directory
class UnsafePathError(JupyterAgentError):
    """Something in the memory directory the store may not safely use (at ``path``)."""


class UnsafeFileError(UnsafePathError):
    """A link, FIFO, socket, device, directory, multiply linked, foreign, writable-by-
    others or sparse file where the store expects its own regular file (``kind``)."""

    path: Path
    kind: str
    template = ("refusing to use {path}: it is a {kind}, not a private regular file; "
                "jupyter-agent never follows links or opens special files in its memory "
                "directory -- remove or rename it")


class UnsafeDirectoryError(UnsafePathError):
    """The memory directory (or ``sessions/``) is not a private directory of this user.
    ``fix`` says how to repair it ("" if nothing can); ``owner`` and ``mode`` (permission
    bits) are ""/``None`` when it is not a directory. :meth:`advice` words the message
    for another front end than the magics."""

    MAGICS_ELSEWHERE = "point AgentMagics.memory_dir (or $JUPYTER_AGENT_MEMORY_DIR) elsewhere"

    def __init__(self, path: Path, problem: str, *, owner: str = "",
                 mode: int | None = None, fix: str = "") -> None:
        self.path, self.owner, self.mode = path, owner, mode
        self.problem, self.fix = problem, fix
        super().__init__(self.advice())

    def advice(self, elsewhere: str = MAGICS_ELSEWHERE) -> str:
        """The one-line message, ``elsewhere`` saying how to use another directory."""
        facts = f" (owner {self.owner}, mode {self.mode:04o})" if self.mode is not None else ""
        return (f"refusing to use {self.path}{facts}: it is {self.problem}; "
                f"{self.fix + ', or ' if self.fix else ''}{elsewhere}")


class StoreBusyError(JupyterAgentError):
    """A short store lock (notes, listing index) stayed taken ``seconds``."""

    path: Path
    seconds: float
    template = ("{path} stayed locked by another process for {seconds:g} s; try again, or "
                "look for a stopped process using this memory directory")


class StorageError(JupyterAgentError, OSError):
    """The operating system refused a write (or, with ``reading``, a read) under the
    memory directory; the previous content is intact. An ``OSError`` with the cause's
    ``errno``; ``action`` says what to do next."""

    def __init__(self, path: Path, cause: OSError, action: str = "", *,
                 reading: bool = False) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause), str(path))
        self.path, self.cause, self.reading = path, cause, reading
        self.action = action or _next_step(cause.errno, path, reading)

    def __str__(self) -> str:
        return (f"could not {'read' if self.reading else 'write'} {self.path}: {self.strerror}; "
                f"{self.action}")


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
    """The model endpoint failed after the client's retries; the user's message is saved.

    ``status_code`` is ``None`` when no response arrived; ``code`` the endpoint's error
    code or ""; ``mid_reply``: the reply was cut off while arriving (what arrived is
    kept); ``detail`` the endpoint's own reason; ``context_window`` is not None when the
    request was refused as too long: the window it named in tokens, or 0.
    """

    def __init__(self, message: str, status_code: int | None = None, code: str = "", *,
                 mid_reply: bool = False, detail: str = "",
                 context_window: int | None = None) -> None:
        self.status_code, self.code, self.mid_reply = status_code, code, mid_reply
        self.detail, self.context_window = detail, context_window
        super().__init__(message)


class ModelNotConfiguredError(JupyterAgentError):
    """No API key and no ``base_url``."""


class LimitExceededError(JupyterAgentError):
    """The setting ``limit`` (one of :data:`jupyter_agent.settings.LIMITS`) is reached:
    ``value`` (USD or a count) reached ``maximum``. ``reached`` is the one wording of it,
    e.g. ``max_cost_usd = $0.5000 per session ($0.5100 spent)``."""

    def __init__(self, limit: str, value: float, maximum: float) -> None:
        self.limit, self.value, self.maximum = limit, value, maximum
        if limit == "max_cost_usd":
            self.reached = f"{limit} = ${maximum:.4f} per session (${value:.4f} spent)"
        elif limit == "max_tool_calls":
            self.reached = (f"{limit} = {maximum:,g} tool call{'s' * (maximum != 1)} per "
                            f"session ({value:,g} made)")
        else:
            self.reached = f"{limit} = {maximum:,g} model call{'s' * (maximum != 1)} per prompt"
        super().__init__(f"limit reached: {self.reached}")


class PromptTooLongError(JupyterAgentError, ValueError):
    """A prompt that cannot fit the context window even alone (``tokens`` and
    ``window`` in tokens)."""

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

    def __init__(self, session_id: str, at: int, turns: int) -> None:
        self.session_id, self.at, self.turns = session_id, at, turns
        valid = ("it has no user turns yet, so it can only be forked whole" if turns == 0
                 else f"use 1 to {turns}" if turns > 1 else "use 1")
        super().__init__(f"cannot fork session {session_id!r} at turn {at}: {valid}")


class ExportError(JupyterAgentError):

    path: Path
    reason: str
    template = "cannot export to {path}: {reason}"


class ExportExistsError(ExportError):
    """The target exists (left untouched) and ``--force`` was not given."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, "the file exists (use --force to replace it)")
