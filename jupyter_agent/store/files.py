"""File primitives of the store: private directories, atomic writes, ``fcntl`` leases.

Atomic write (spec: "Preventing Session Corruption on Writes"): the new content goes
to a temporary file *in the same directory* (created 0600 by :func:`tempfile.mkstemp`),
is written, flushed and ``fsync``-ed, then ``os.replace``-d over the target, and the
directory is ``fsync``-ed so the rename itself is durable. Until the replace the
previous file is intact; on any error the temporary file is removed and the error
propagates. Readers therefore see either the old or the new file, never a mix.

Lease (spec: "Session Locks"): ``flock(LOCK_EX | LOCK_NB)`` on a separate lock file,
so a second holder fails at once instead of waiting. The holder writes its pid into
the lock file (truncate, write) so the loser can name it. The operating system drops
the lock when the holding process exits, also after SIGKILL. ``flock`` locks belong to
an open file description: a second ``open`` + ``flock`` of the same file in the *same*
process conflicts too, which is what makes two stores in one process exclude each other.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
import time
from pathlib import Path

__all__ = [
    "FileSignature",
    "LockHeldError",
    "atomic_write",
    "ensure_private_dir",
    "file_signature",
    "fsync_dir",
    "lock_exclusive",
    "lock_is_held",
    "unlock",
]

#: Mode of every file the store writes (private conversations).
FILE_MODE = 0o600
#: Mode of the directories the store creates.
DIR_MODE = 0o700
# Retries when the lock looks busy: a lister's momentary probe (see lock_is_held)
# must not make a real acquirer fail. Total < 30 ms, so failing is still "at once".
_LOCK_RETRY_DELAYS = (0.002, 0.008, 0.015)


class LockHeldError(Exception):
    """The lock file is locked by another open file description (internal)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        self.path = path
        self.pid = pid
        super().__init__(f"{path} is locked by {pid}")


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) if needed; a directory this creates is 0700.

    An existing directory is left as it is: it may be a user's own directory and
    its mode is their choice. Parents are created with the default mode.

    Parameters
    ----------
    path : pathlib.Path

    Raises
    ------
    FileExistsError
        If something that is not a directory is in the way.
    OSError
        If the directory cannot be created.
    """
    if path.is_dir():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir(mode=DIR_MODE)
    except FileExistsError:
        if not path.is_dir():
            raise
        return
    os.chmod(path, DIR_MODE)  # mkdir's mode is reduced by the umask; be exact


def fsync_dir(path: Path) -> None:
    """``fsync`` a directory so a rename or unlink in it is durable.

    Filesystems that cannot ``fsync`` a directory (``EINVAL``, ``ENOTSUP``) are
    tolerated.

    Parameters
    ----------
    path : pathlib.Path
        The directory.

    Raises
    ------
    OSError
        If it cannot be opened, or ``fsync`` fails for another reason.
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably; the file ends up 0600.

    Parameters
    ----------
    path : pathlib.Path
        The target; its directory must exist.
    data : bytes
        The complete new content.

    Raises
    ------
    OSError
        From any step (disk full, permissions, a directory in the way, ...). The
        previous file is then intact (unless the final directory ``fsync`` failed,
        after the replace), and no temporary file is left behind.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


FileSignature = tuple[int, int, int, int]
"""``(st_dev, st_ino, st_size, st_mtime_ns)``: changes whenever a file is replaced."""


def file_signature(path: Path) -> FileSignature:
    """Return the :data:`FileSignature` of ``path``.

    Parameters
    ----------
    path : pathlib.Path

    Returns
    -------
    FileSignature
        ``(st_dev, st_ino, st_size, st_mtime_ns)``.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist (any other ``OSError`` from ``stat`` too).
    """
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def lock_exclusive(path: Path) -> int:
    """Take the exclusive lease on lock file ``path`` without waiting.

    Creates the lock file (0600) if needed, locks it with
    ``flock(LOCK_EX | LOCK_NB)``, then replaces its content with this process's pid.

    Returns
    -------
    int
        The open descriptor that holds the lock; pass it to :func:`unlock`.

    Raises
    ------
    LockHeldError
        If another open file description holds the lock; ``.pid`` is the pid the
        holder wrote (``None`` if unreadable).
    OSError
        If the lock file cannot be opened.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        for delay in (*_LOCK_RETRY_DELAYS, None):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if delay is None:
                    raise LockHeldError(path, _read_pid(fd)) from None
                time.sleep(delay)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def unlock(fd: int) -> None:
    """Release a lock taken by :func:`lock_exclusive` and close its descriptor.

    Parameters
    ----------
    fd : int
        The descriptor :func:`lock_exclusive` returned; closed even if unlocking fails.

    Raises
    ------
    OSError
        From ``flock`` or ``close``.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def lock_is_held(path: Path) -> bool:
    """Tell whether some open file description holds the lock on ``path``.

    Probes with a non-blocking *shared* ``flock`` on a fresh descriptor and releases
    it at once; a missing lock file means nobody holds it (nothing is created).
    The probe holds the lock for a few microseconds; :func:`lock_exclusive` retries
    briefly so a concurrent acquirer is not refused because of it.

    Parameters
    ----------
    path : pathlib.Path
        The lock file.

    Returns
    -------
    bool
        True if another open file description holds it; False if nobody does or
        the file cannot be opened.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
