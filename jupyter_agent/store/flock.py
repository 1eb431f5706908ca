"""Short ``flock`` locks on lock files of the memory directory.

The notes (``notes.lock``) and the listing index (``index.lock``) are changed in
critical sections of milliseconds; their lock is polled, never taken by a blocking call
that a stopped process could hang forever. A session's lease is another kind of lock
(``leases.py``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator

from jupyter_agent.errors import StoreBusyError
from jupyter_agent.store.files import SafeDir

__all__ = ["lock_shared_or_exclusive"]


@contextlib.contextmanager
def lock_shared_or_exclusive(directory: SafeDir, name: str, *, exclusive: bool,
                             timeout: float = 10.0) -> Iterator[int]:
    """Hold a short ``flock`` on lock file ``name`` (created if needed) for a ``with`` block.

    Used for the notes and the listing index, whose critical sections last
    milliseconds: the lock is polled (never a blocking call that a stopped process
    could hang forever) for up to ``timeout`` seconds.

    Yields
    ------
    int
        The lock file's descriptor.

    Raises
    ------
    StoreBusyError
        If it stayed taken for ``timeout`` seconds.
    UnsafeFileError, OSError
    """
    opened = directory.open_file(name, os.O_RDWR, create=True)
    assert opened is not None
    fd = opened[0]
    try:
        op = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        deadline = time.monotonic() + timeout
        delay = 0.0005
        while True:
            try:
                fcntl.flock(fd, op)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreBusyError(directory.child(name), timeout) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.02)
        yield fd
    finally:
        os.close(fd)  # closing drops the lock
