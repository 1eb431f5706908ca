"""Exceptions raised by jupyter-agent.

Every error the library raises on purpose derives from :class:`JupyterAgentError`,
so a front end (the magics) can turn exactly these into one-line messages and let
anything unexpected keep its traceback. Each subclass carries the offending value
(session ID, path, pid, ...) as attributes, not only in its message.
"""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jupyter_agent.store.records import LeaseHolder


class JupyterAgentError(Exception):
    """Base class of every error jupyter-agent raises deliberately."""


class InvalidSessionIdError(JupyterAgentError, ValueError):
    """A session ID is not 1-128 letters, digits, ``_`` or ``-``.

    Raised before the ID is ever used as a file name (spec: "Session ID Validation").

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


class ContextMismatchError(JupyterAgentError, ValueError):
    """The messages to save do not extend the session's saved working context.

    Raised by ``SessionStore.save_messages``; nothing is written (spec: "Working
    Context and Full Transcripts").

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

    Raised at once, without waiting (design §7).

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
        who = _describe_holder(holder) if holder is not None else ""
        if not who:
            who = f"process {self.pid}" if self.pid is not None else "another process"
        where = f" (lock file {path})" if path is not None else ""
        super().__init__(f"session {session_id!r} is in use by {who}{where}")


def _describe_holder(holder: LeaseHolder) -> str:
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


class ForkPointError(JupyterAgentError, ValueError):
    """``--at N`` names no user turn of the session being forked (design §11).

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
    """An export could not be written where it was asked to go (design §11).

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
