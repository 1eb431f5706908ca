"""Session leases: ``flock`` on ``sessions/<id>.lock``.

Taking one opens the lock file (no-follow, regular, created 0600), tries
``LOCK_EX | LOCK_NB`` (``SessionLockedError`` at once, naming the holder), checks the path
still names the locked file, then writes the holder (pid, host, user, since, label) into
it. The engine counts re-entries; before every write :meth:`Leases.verify` refuses
(``LeaseLostError``) if the lock file was removed or replaced. A forked child closes its
copies of every lock descriptor at once, so a lease dies with the process that took it;
the system drops it when that process exits.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import os
import socket
import threading
import time
import weakref
from dataclasses import dataclass

import orjson

from jupyter_agent.errors import JupyterAgentError, LeaseLostError, SessionLockedError
from jupyter_agent.store.files import SafeDir
from jupyter_agent.store.messages import encode_json
from jupyter_agent.store.records import LeaseHolder, utc_now

# Retries when the lock looks busy: a lister's momentary probe (see Leases.is_held) must
# not make a real acquirer fail. Total < 30 ms, so failing is still "at once".
_LOCK_RETRY_DELAYS = (0.002, 0.008, 0.015)
_HOLDER_LIMIT = 4096
_ALL: weakref.WeakSet[Leases] = weakref.WeakSet()
_FORK_HOOK = threading.Lock()
_fork_hook_installed = False


def lock_name(session_id: str) -> str:
    """The lock file's name in ``sessions/`` (the ID must be valid already)."""
    return f"{session_id}.lock"


def _forget_in_child() -> None:
    """After ``fork``, in the child: close every inherited lock descriptor."""
    for leases in list(_ALL):
        leases._forget()


def _install_fork_hook() -> None:
    global _fork_hook_installed
    with _FORK_HOOK:
        if not _fork_hook_installed:
            os.register_at_fork(after_in_child=_forget_in_child)
            _fork_hook_installed = True


@dataclass
class _Lease:
    fd: int
    dev: int
    ino: int


def _read_holder(fd: int) -> LeaseHolder | None:
    try:
        raw = os.pread(fd, _HOLDER_LIMIT, 0).strip()
    except OSError:
        return None
    if raw.isdigit():  # written by jupyter-agent 0.1: the pid alone
        return LeaseHolder(pid=int(raw))
    try:
        return LeaseHolder.model_validate(orjson.loads(raw))
    except (orjson.JSONDecodeError, ValueError):
        return None


class Leases:
    """The leases one store object holds (see the module docstring)."""

    def __init__(self, label: str = "") -> None:
        self.label = label
        self._entries: dict[str, _Lease] = {}
        _install_fork_hook()
        _ALL.add(self)

    def _forget(self) -> None:
        entries, self._entries = self._entries, {}
        for entry in entries.values():
            with contextlib.suppress(OSError):
                os.close(entry.fd)

    def _holder_line(self) -> bytes:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = ""
        holder = LeaseHolder(pid=os.getpid(), host=socket.gethostname(), user=user,
                             since=utc_now(), label=self.label)
        return encode_json(holder.model_dump(mode="json")) + b"\n"

    def take(self, sessions: SafeDir, session_id: str) -> None:
        """Take the lease (not held by this object).

        Raises
        ------
        SessionLockedError
            At once, naming the holder, if another process or store holds it.
        UnsafeFileError
            If the lock file is not a regular file (nothing is written to it).
        OSError
        """
        name = lock_name(session_id)
        for _attempt in range(5):
            opened = sessions.open_file(name, os.O_RDWR, create=True)
            assert opened is not None
            fd, _ = opened
            try:
                for delay in (*_LOCK_RETRY_DELAYS, None):
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if delay is None:
                            holder = _read_holder(fd)
                            raise SessionLockedError(
                                session_id, holder.pid if holder else None,
                                sessions.child(name), holder=holder) from None
                        time.sleep(delay)
                locked = os.fstat(fd)
                current = sessions.lstat(name)
                if current is None or (current.st_dev, current.st_ino) != (
                        locked.st_dev, locked.st_ino):
                    os.close(fd)  # the path now names another file: lock that one
                    continue
                with contextlib.suppress(OSError):  # who holds it is information only
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, self._holder_line(), 0)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.close(fd)
                raise
            self._entries[session_id] = _Lease(fd, locked.st_dev, locked.st_ino)
            return
        raise SessionLockedError(session_id, None, sessions.child(name))

    def let_go(self, session_id: str) -> None:
        """Release the lease (closing the only descriptor drops the ``flock``); nothing
        when it is not held (lost, or the session is gone)."""
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            with contextlib.suppress(OSError):
                os.close(entry.fd)

    def holds(self, session_id: str) -> bool:
        """Whether this object (in this process) holds the lease."""
        return session_id in self._entries

    def verify(self, sessions: SafeDir, session_id: str) -> None:
        """Refuse to write if the lock file is no longer the one this lease locked.

        Raises
        ------
        LeaseLostError
            The lock file was removed or replaced; the lease is dropped.
        """
        entry = self._entries.get(session_id)
        if entry is None:
            return
        current = sessions.lstat(lock_name(session_id))
        if current is None or (current.st_dev, current.st_ino) != (entry.dev, entry.ino):
            self.let_go(session_id)
            raise LeaseLostError(session_id, sessions.child(lock_name(session_id)))

    def holder(self, sessions: SafeDir, session_id: str) -> LeaseHolder | None:
        """Who holds the lease, as recorded in the lock file; ``None`` if nobody does.

        Probes with a non-blocking shared ``flock`` released at once (never creates the
        lock file). A holder that recorded nothing gives ``LeaseHolder()``.

        Raises
        ------
        UnsafeFileError
            If the lock file is not a regular file.
        """
        if self.holds(session_id):
            fd = self._entries[session_id].fd
            return _read_holder(fd) or LeaseHolder(pid=os.getpid(), label=self.label)
        opened = sessions.open_file(lock_name(session_id))
        if opened is None:
            return None
        fd, _ = opened
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _read_holder(fd) or LeaseHolder()
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def is_held(self, sessions: SafeDir, session_id: str) -> bool:
        """Whether anyone (this object included) holds the lease; never raises for a
        lock file that cannot be used (it counts as not held)."""
        if self.holds(session_id):
            return True
        try:
            return self.holder(sessions, session_id) is not None
        except (JupyterAgentError, OSError):
            return False
