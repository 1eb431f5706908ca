"""Errors about sessions and their store: IDs, records, leases, messages, figures."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from jupyter_agent.errors.base import JupyterAgentError

__all__ = [
    "ContextMismatchError",
    "CorruptSessionError",
    "FigureNotFoundError",
    "InvalidFigureError",
    "InvalidMessageError",
    "InvalidSessionIdError",
    "LeaseLostError",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionReadOnlyError",
    "StoreSchemaError",
    "StoreUnavailableError",
    "TooLargeError",
    "describe_holder",
]



class LeaseHolder(Protocol):
    """What an error needs of a lease holder (:class:`jupyter_agent.store.LeaseHolder`)."""

    @property
    def pid(self) -> int | None: ...
    @property
    def host(self) -> str: ...
    @property
    def user(self) -> str: ...
    @property
    def since(self) -> datetime | None: ...
    @property
    def label(self) -> str: ...


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

    Raised by ``Store.save`` and ``Store.save_messages``; nothing is written.

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
