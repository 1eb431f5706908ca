"""Descriptor and stat helpers under the no-follow primitives of ``files.py``.

Pure functions of a file descriptor or a stat result: whole reads and writes that
continue after a short one, hole detection for sparse files, a file's signature (what
changes when it is replaced or grows) and an entry's kind in words for error messages.
Nothing here opens a path; :class:`~jupyter_agent.store.files.SafeDir` does that.
"""

from __future__ import annotations

import os
import stat

__all__ = ["FileSignature", "entry_kind", "has_holes", "long_line", "read_all", "signature_of",
           "write_all"]

_READ_CHUNK = 1 << 20

FileSignature = tuple[int, int, int, int]
"""``(st_dev, st_ino, st_size, st_mtime_ns)``: changes whenever a file is replaced or grows."""


def signature_of(st: os.stat_result) -> FileSignature:
    """The :data:`FileSignature` of a stat result."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def entry_kind(mode: int) -> str:
    """A directory entry's kind in words: ``"symbolic link"``, ``"FIFO"``, ``"socket"``,
    ``"character device"``, ``"block device"``, ``"directory"`` or ``"regular file"``."""
    for test, name in (
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISREG, "regular file"),
    ):
        if test(mode):
            return name
    return "special file"


def has_holes(fd: int, start: int, end: int) -> bool:
    """Whether the file has a hole between ``start`` and ``end`` (``SEEK_HOLE``; a file
    system that cannot tell reports none). Compressed file systems are not mistaken for
    sparse ones, as a block count would be."""
    try:
        return os.lseek(fd, start, os.SEEK_HOLE) < end
    except OSError:
        return False


def read_all(fd: int, size: int, offset: int = 0) -> bytes:
    """Read ``size`` bytes at ``offset`` (fewer if the file is shorter now)."""
    first = os.pread(fd, size, offset)  # one call, no copy, for a regular file
    if len(first) == size or not first:
        return first
    parts = [first]
    offset += len(first)
    size -= len(first)
    while size > 0:
        chunk = os.pread(fd, min(size, _READ_CHUNK), offset)
        if not chunk:
            break
        parts.append(chunk)
        offset += len(chunk)
        size -= len(chunk)
    return b"".join(parts)


def long_line(data: bytes, cap: int) -> tuple[int, int] | None:
    """The first line of ``data`` longer than ``cap`` bytes (newline left out), as
    ``(line number from 1, its length)``, or ``None``.

    Looks at each ``cap + 1`` window once from its end (``rfind``), so the whole check
    costs a pass over the bytes at C speed, however many lines there are.
    """
    pos, size = 0, len(data)
    while size - pos > cap:
        newline = data.rfind(b"\n", pos, pos + cap + 1)
        if newline < 0:
            end = data.find(b"\n", pos)
            return data.count(b"\n", 0, pos) + 1, (size if end < 0 else end) - pos
        pos = newline + 1
    return None


def write_all(fd: int, data: bytes) -> None:
    """``write`` until all of ``data`` is written (a short write is continued)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
