"""What the notebook front end says when something goes wrong: the fact, then what to do.

The library's errors (:mod:`jupyter_agent.errors`) state what happened and carry the
offending value; the magics (``error_boundary``) and the sessions panel show
:func:`error_message` of them, which adds the next step a notebook user can take (a
magic to run, a button to press). No message names a Python exception class.

:func:`describe_holder` words who holds a session's lease, from what the holder recorded
with it (a notebook path or kernel name, the host, the process, since when); never
anything secret.
"""

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

__all__ = ["describe_holder", "error_message", "locked_message", "take_over_hint"]

_log = logging.getLogger("jupyter_agent")


def describe_holder(holder: LeaseHolder | None, *, pid: int | None = None) -> str:
    """Who holds a lease, for people: ``"the kernel of analysis.ipynb (pid 4242, since
    14:05)"``, ``"jupyter agent rm (pid 17)"``, ``"process 4242 on host gpu-1"``;
    ``"another process"`` when unknown.

    Parameters
    ----------
    holder : LeaseHolder or None
        As the store reports it (``label``, ``host``, ``pid``, ``since``).
    pid : int, optional
        Used when there is no holder record (older stores record only the pid).
    """
    label = getattr(holder, "label", "") or ""
    host = getattr(holder, "host", "") or ""
    pid = getattr(holder, "pid", None) or pid
    since = getattr(holder, "since", None)
    here = host in ("", socket.gethostname())
    details = []
    if pid is not None:
        details.append(f"pid {pid}")
    if since is not None:
        details.append(f"since {since.astimezone():%Y-%m-%d %H:%M}")
    extra = f" ({', '.join(details)})" if details else ""
    where = "" if here else f" on host {host}"
    if label.endswith(".ipynb"):
        return f"the kernel of {label}{where}{extra}"
    if label:  # a kernel without a notebook, a terminal, a command
        return f"{label}{where}{extra}"
    if pid is not None:
        return f"process {pid}{where}" + (f" (since {since.astimezone():%H:%M})" if since else "")
    return f"another process{where}"


def take_over_hint(session_id: str) -> str:
    """How to take a session over from the kernel that holds it."""
    return (f"to use it here, stop that kernel (or run %agent_new or %agent_resume of another "
            f"session there), then %agent_resume {session_id}; the lease is freed as soon as "
            f"that kernel exits, crashed or not")


def locked_message(session_id: str, holder: LeaseHolder | None, pid: int | None = None) -> str:
    """One line for a session that another kernel or process holds."""
    return (f"session {session_id} is in use by {describe_holder(holder, pid=pid)}; "
            + take_over_hint(session_id))


def error_message(err: BaseException) -> str:
    """One line for a user about ``err``: what happened and what to do next.

    Parameters
    ----------
    err : BaseException
        A library error (:class:`~jupyter_agent.errors.JupyterAgentError`) or, in the
        panel, anything a button's action raised.

    Returns
    -------
    str
        No exception class names. An unexpected error (a bug) is also logged with its
        traceback on the ``jupyter_agent`` logger (the kernel's log).
    """
    if isinstance(err, SessionLockedError):
        return locked_message(err.session_id, getattr(err, "holder", None), err.pid)
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
