"""What the front end says when something goes wrong: the fact, then what to do next (a
magic to run, a button to press); no message names a Python exception class."""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING

from jupyter_agent.errors import (
    ContextMismatchError,
    CorruptSessionError,
    JupyterAgentError,
    SessionLockedError,
    SessionNotFoundError,
)

if TYPE_CHECKING:
    from jupyter_agent.store import LeaseHolder

_log = logging.getLogger("jupyter_agent")


def describe_holder(holder: LeaseHolder | None, *, pid: int | None = None) -> str:
    """``"the kernel of analysis.ipynb (pid 4242, since 14:05)"``, ``"process 4242 on host
    gpu-1"``, ``"another process"``; ``pid`` when the store records no holder."""
    label, host, since = (holder.label, holder.host, holder.since) if holder else ("", "", None)
    pid = holder.pid if holder and holder.pid else pid
    where = "" if host in ("", socket.gethostname()) else f" on host {host}"
    details = [f"pid {pid}"] if pid is not None else []
    if since is not None:
        details.append(f"since {since.astimezone():%Y-%m-%d %H:%M}")
    extra = f" ({', '.join(details)})" if details else ""
    if label.endswith(".ipynb"):
        return f"the kernel of {label}{where}{extra}"
    if label:  # a kernel without a notebook, a terminal, a command
        return f"{label}{where}{extra}"
    if pid is not None:
        return f"process {pid}{where}" + (f" (since {since.astimezone():%H:%M})" if since else "")
    return f"another process{where}"


def error_message(err: BaseException) -> str:
    """One line about ``err`` (a library error, or anything a panel button raised); an
    unexpected error is also logged with its traceback on the ``jupyter_agent`` logger."""
    if isinstance(err, SessionLockedError):
        sid = err.session_id
        return (f"session {sid} is in use by {describe_holder(err.holder, pid=err.pid)}; to "
                f"use it here, stop that kernel (or run %agent_new or %agent_resume of another "
                f"session there), then %agent_resume {sid}; the lease is freed as soon as "
                f"that kernel exits, crashed or not")
    if isinstance(err, SessionNotFoundError):
        return f"{err}; %agent_sessions --all lists the saved sessions"
    if isinstance(err, CorruptSessionError):
        return (f"{err}; move that file out of the sessions folder (or restore it from a "
                "backup): the other sessions are not affected")
    if isinstance(err, ContextMismatchError):
        return (f"{err}; another process changed this session: %agent_resume "
                f"{err.session_id} reloads it as saved")
    if isinstance(err, JupyterAgentError):
        return str(err)
    if isinstance(err, OSError):
        return f"could not read or write the session files: {err}"
    _log.error("jupyter-agent: unexpected error", exc_info=err)
    detail = str(err) or "no details"
    return f"something unexpected went wrong ({detail}); the kernel's log has the details"
