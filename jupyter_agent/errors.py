"""Exceptions raised by jupyter-agent.

Every error the library raises on purpose derives from :class:`JupyterAgentError`,
so a front end (the magics) can turn exactly these into one-line messages and let
anything unexpected keep its traceback. Each subclass carries the offending value
(session ID, path, pid, ...) as attributes, not only in its message.
"""

from __future__ import annotations

from pathlib import Path


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
    """Another process holds the session's lease (an ``fcntl`` lock).

    Raised at once, without waiting (spec: "Session Locks").

    Attributes
    ----------
    session_id : str
    pid : int or None
        The process that holds the lease, as it wrote into the lock file
        (``None`` if it could not be read).
    path : pathlib.Path
        The lock file.
    """

    def __init__(self, session_id: str, pid: int | None, path: Path) -> None:
        self.session_id = session_id
        self.pid = pid
        self.path = path
        holder = f"process {pid}" if pid is not None else "another process"
        super().__init__(f"session {session_id!r} is in use by {holder} (lock file {path})")


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
