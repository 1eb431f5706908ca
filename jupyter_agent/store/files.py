"""No-follow file primitives for everything under the memory directory.

Nothing in the memory directory is trusted (it may come from a cloned repository). A
:class:`SafeDir` opens directories ``O_DIRECTORY | O_NOFOLLOW`` and checks they are the
user's own and not writable by others; files are opened relative to that descriptor with
``O_NOFOLLOW | O_NONBLOCK`` and must be regular with one link (``UnsafeFileError``
otherwise, before a byte is read or written). Whole files are replaced atomically
(temporary file, ``fsync``, rename, directory ``fsync``). Short ``flock`` locks of the
notes and the index are polled, never a blocking call a stopped process could hang.
Session leases are :class:`Leases`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import getpass
import math
import os
import pwd
import secrets
import socket
import stat
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path

import orjson

from jupyter_agent.errors import (
    JupyterAgentError,
    LeaseLostError,
    SessionLockedError,
    StorageError,
    StoreBusyError,
    TooLargeError,
    UnsafeDirectoryError,
    UnsafeFileError,
)
from jupyter_agent.store.messages import encode_json
from jupyter_agent.store.records import LeaseHolder, utc_now

#: Mode of every file the store creates (private conversations).
FILE_MODE = 0o600
#: Mode of the directories the store creates.
DIR_MODE = 0o700
_SPARSE_CHECK = 1 << 20  # files larger than this are checked for holes before reading
#: How every file of the memory directory is opened: never through a link, never blocking.
NO_FOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is one of the store's temporary files (``.<target>.<random>.tmp``)."""
    return name.startswith(".") and name.endswith(".tmp") and name.count(".") >= 3


def lease_temp(name: str) -> str:
    """The fixed temporary file of a writer holding a lock (``a.json``: ``.a.json.next.tmp``)."""
    return f".{name}.next.tmp"


def temp_target(name: str) -> str:
    """The file a temporary file was meant to replace (``.a.json.x1.tmp`` -> ``a.json``)."""
    return name[1:-4].rsplit(".", 1)[0]


def _owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


#: Where no advice ever says to change anything, whoever owns it (root owns them all).
_SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/opt", "/proc",
                "/run", "/sbin", "/srv", "/sys", "/usr", "/var")


def _own_fix(path: Path, st: os.stat_result | None, fix: str) -> str:
    """``fix`` when ``path`` is the user's own to change, else ``""``: the advice never
    says to change ``/``, a top-level directory (``/tmp``), anything under a system
    directory (``/etc``, ``/var``, ...), a sticky or setgid shared directory
    (``/var/tmp``), a home directory or one above it, or anything of another owner."""
    if st is None or st.st_uid != os.geteuid() or st.st_mode & (stat.S_ISVTX | stat.S_ISGID):
        return ""
    where = os.path.abspath(path)
    if len(Path(where).parts) <= 2 or where.startswith(tuple(d + "/" for d in _SYSTEM_DIRS)):
        return ""
    try:
        homes = {os.path.abspath(p.pw_dir) for p in pwd.getpwall()}
    except OSError:
        homes = set()
    homes.add(os.path.abspath(os.path.expanduser("~")))
    if any(home == where or home.startswith(where.rstrip("/") + "/") for home in homes):
        return ""
    return fix


class SafeDir:
    """A checked directory of the memory directory (module docstring); a context manager."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd

    @classmethod
    def open(cls, path: Path, *, create: bool = False, what: str = "memory directory",
             parent: SafeDir | None = None) -> SafeDir | None:
        """Open and check a directory; ``None`` if it is missing and ``create`` is false.
        ``UnsafeDirectoryError`` for a link, not a directory, another owner's or one
        writable by group or others."""
        where: str | Path = path.name if parent is not None else path
        dir_fd = parent.fd if parent is not None else None
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(where, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                return None
            if parent is None:
                path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.mkdir(where, DIR_MODE, dir_fd=dir_fd)
                os.chmod(where, DIR_MODE, dir_fd=dir_fd)  # exact, whatever the umask
            fd = os.open(where, flags, dir_fd=dir_fd)
        except OSError as err:
            if err.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            kind, st = "not a directory", None
            with contextlib.suppress(OSError):
                st = os.stat(where, dir_fd=dir_fd, follow_symlinks=False)
                kind = f"a {entry_kind(st.st_mode)}, not a directory"
            raise UnsafeDirectoryError(
                path, kind, fix=_own_fix(path, st, "remove or rename it")) from None
        try:
            st = os.fstat(fd)
            mode, owner = stat.S_IMODE(st.st_mode), _owner_name(st.st_uid)
            if st.st_uid != os.geteuid():
                raise UnsafeDirectoryError(
                    path, f"a {what} owned by {owner}, not by you ({_owner_name(os.geteuid())})",
                    owner=owner, mode=mode, fix="use a directory of your own")
            if mode & 0o022:
                raise UnsafeDirectoryError(
                    path, f"a {what} writable by group or others", owner=owner, mode=mode,
                    fix=_own_fix(path, st, f"run `chmod 700 {path}`"))
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd)

    def subdir(self, name: str, *, create: bool = False,
               what: str = "sessions directory") -> SafeDir | None:
        """Open and check the subdirectory ``name`` (see :meth:`open`)."""
        return SafeDir.open(self.path / name, create=create, what=what, parent=self)

    def close(self) -> None:
        """Close the directory descriptor (idempotent)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> SafeDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def child(self, name: str) -> Path:
        return self.path / name

    def lstat(self, name: str) -> os.stat_result | None:
        """``lstat`` of entry ``name`` (never follows a link); ``None`` if missing."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def names(self) -> list[str]:
        with os.scandir(self.fd) as it:
            return [entry.name for entry in it]

    def fsync(self) -> None:
        """``fsync`` the directory, so a rename or unlink in it is durable (a file system
        that cannot, ``EINVAL`` or ``ENOTSUP``, is tolerated)."""
        try:
            os.fsync(self.fd)
        except OSError as err:
            if err.errno not in (errno.EINVAL, errno.ENOTSUP):
                raise

    def unlink(self, name: str) -> bool:
        """Remove entry ``name`` (never a directory); return whether it existed."""
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            return False
        return True

    def check_regular(self, name: str, st: os.stat_result, *, private: bool = False) -> None:
        """Raise :class:`UnsafeFileError` unless ``st`` is a regular file with one link."""
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFileError(self.child(name), entry_kind(st.st_mode))
        if st.st_nlink > 1:
            raise UnsafeFileError(self.child(name), "file with other hard links")
        if private and st.st_uid != os.geteuid():
            raise UnsafeFileError(self.child(name), f"file owned by {_owner_name(st.st_uid)}")
        if private and stat.S_IMODE(st.st_mode) & 0o022:
            raise UnsafeFileError(self.child(name), "file writable by group or others")

    def open_file(self, name: str, flags: int = os.O_RDONLY, *, create: bool = False,
                  private: bool = False) -> tuple[int, os.stat_result] | None:
        """Open regular file ``name`` without following links or blocking;
        ``UnsafeFileError`` for anything but a regular file with one link."""
        before = self.lstat(name)  # a device is refused without being opened at all
        if before is not None and not stat.S_ISREG(before.st_mode):
            raise UnsafeFileError(self.child(name), entry_kind(before.st_mode))
        try:
            fd = os.open(name, flags | (os.O_CREAT if create else 0) | NO_FOLLOW, FILE_MODE,
                         dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENODEV,
                             errno.EOPNOTSUPP):
                st = self.lstat(name)
                kind = "special file" if st is None else entry_kind(st.st_mode)
                raise UnsafeFileError(self.child(name), kind) from None
            raise
        try:
            st = os.fstat(fd)
            self.check_regular(name, st, private=private)
            if flags & (os.O_WRONLY | os.O_RDWR):  # writes never block either
                os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    def read(self, name: str, *, limit: int | None = None, offset: int = 0,
             private: bool = False, what: str = "file") -> tuple[bytes, os.stat_result] | None:
        """Read regular file ``name`` (from ``offset``); ``None`` if it is missing.

        Every read of the memory directory comes here, so no file costs more than its cap:
        ``TooLargeError`` over ``limit`` bytes (from ``fstat``, nothing read);
        ``UnsafeFileError`` also for a sparse file (it could be gigabytes of zeros).
        """
        opened = self.open_file(name, private=private)
        if opened is None:
            return None
        fd, st = opened
        try:
            size = max(st.st_size - offset, 0)
            if limit is not None and size > limit:
                raise TooLargeError(self.child(name), size, limit, what)
            if size > _SPARSE_CHECK:  # SEEK_HOLE (not a block count: compression is fine)
                try:
                    holes = os.lseek(fd, offset, os.SEEK_HOLE) < st.st_size
                except OSError:  # a file system that cannot tell
                    holes = False
                if holes:
                    raise UnsafeFileError(self.child(name), "sparse file (it has holes)")
            parts = []  # pread, not a buffered file: no second copy of a large file
            while size > 0:
                chunk = os.pread(fd, size, offset)
                if not chunk:  # the file is shorter now
                    break
                parts.append(chunk)
                offset += len(chunk)
                size -= len(chunk)
        finally:
            os.close(fd)
        return b"".join(parts), st  # one part: joined without a copy

    def write_atomic(self, name: str, data: bytes, *, private: bool = False,
                     temp: str | None = None) -> None:
        """Replace file ``name`` with ``data`` atomically and durably (module docstring);
        ``temp`` (:func:`lease_temp`) is the fixed temporary file of a writer holding a lock
        on ``name``. ``UnsafeFileError`` if ``name`` is not a regular file; on any
        ``OSError`` the previous file is intact and no temporary file is left."""
        st = self.lstat(name)
        if st is not None:
            self.check_regular(name, st, private=private)
        tmp = self._write_temp(name, data, temp=temp)
        try:
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            raise
        self.fsync()

    def create_new(self, name: str, data: bytes, mode: int = FILE_MODE) -> bool:
        """Create file ``name`` with ``data`` only if no entry of that name exists (never
        overwriting: ``link(2)`` of a finished temporary file, complete or not at all)."""
        if self.lstat(name) is not None:
            return False
        tmp = self._write_temp(name, data, mode)
        try:
            os.link(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd, follow_symlinks=False)
        except FileExistsError:
            return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
        self.fsync()
        return True

    def _write_temp(self, name: str, data: bytes, mode: int = FILE_MODE,
                    temp: str | None = None) -> str:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        if temp is not None:
            self.unlink(temp)
        tmp = temp or f".{name}.{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, flags, mode, dir_fd=self.fd)
        try:
            os.fchmod(fd, mode)  # exact, whatever the umask
            write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            raise
        os.close(fd)
        return tmp


def signature_of(st: os.stat_result) -> tuple[int, int, int, int]:
    """``(st_dev, st_ino, st_size, st_mtime_ns)``: changes whenever a file is replaced or grows."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


_KINDS = {stat.S_IFLNK: "symbolic link", stat.S_IFIFO: "FIFO", stat.S_IFSOCK: "socket",
          stat.S_IFCHR: "character device", stat.S_IFBLK: "block device",
          stat.S_IFDIR: "directory", stat.S_IFREG: "regular file"}


def entry_kind(mode: int) -> str:
    """A directory entry's kind in words (``"symbolic link"``, ``"FIFO"``, ...)."""
    return _KINDS.get(stat.S_IFMT(mode), "special file")


def write_all(fd: int, data: bytes) -> None:
    """``write`` until all of ``data`` is written (a short write is continued)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _flock(fd: int, op: int, delays: Sequence[float]) -> bool:
    """Try a non-blocking ``flock``, again after each of ``delays`` (seconds) while it is
    busy; whether it was taken."""
    for delay in (*delays, None):
        with contextlib.suppress(BlockingIOError):
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return True
        if delay is not None:
            time.sleep(delay)
    return False


@contextlib.contextmanager
def lock_shared_or_exclusive(directory: SafeDir, name: str, *, exclusive: bool,
                             timeout: float = 10.0) -> Iterator[int]:
    """Hold a short ``flock`` on ``name`` (created if needed), polled for up to ``timeout``
    seconds (``StoreBusyError`` then), never a blocking call a stopped process could hang."""
    opened = directory.open_file(name, os.O_RDWR, create=True)
    assert opened is not None
    fd = opened[0]
    try:
        steps = [0.0005 * 2**k for k in range(6)]  # 0.5 ms, doubling, then 20 ms each
        delays = steps + [0.02] * max(0, math.ceil((timeout - sum(steps)) / 0.02))
        if not _flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, delays):
            raise StoreBusyError(directory.child(name), timeout)
        yield fd
    finally:
        os.close(fd)  # closing drops the lock


@contextlib.contextmanager
def storage_errors(path: Path, *, reading: bool = False) -> Iterator[None]:
    """Turn an ``OSError`` into a :class:`~jupyter_agent.errors.StorageError` naming
    ``path`` and the operation, a write unless ``reading`` (library errors pass through)."""
    try:
        yield
    except OSError as err:
        if isinstance(err, JupyterAgentError):
            raise
        raise StorageError(path, err, reading=reading) from err


# --------------------------------------------------------------------------- leases
# Retries when the lock looks busy: a lister's momentary probe (Leases.holder) must
# not make a real acquirer fail. Total < 30 ms, so failing is still "at once".
_LOCK_RETRY_DELAYS = (0.002, 0.008, 0.015)
_HOLDER_LIMIT = 4096
_ALL: weakref.WeakSet[Leases] = weakref.WeakSet()


def _forget_in_child() -> None:
    """After ``fork``, in the child: close every inherited lock descriptor."""
    for leases in list(_ALL):
        for session_id in list(leases._entries):
            leases.let_go(session_id)


@functools.cache  # once per process
def _install_fork_hook() -> None:
    os.register_at_fork(after_in_child=_forget_in_child)


def _read_holder(fd: int) -> LeaseHolder | None:
    try:
        raw = os.pread(fd, _HOLDER_LIMIT, 0).strip()
        if raw.isdigit():  # written by jupyter-agent 0.1: the pid alone
            return LeaseHolder(pid=int(raw))
        return LeaseHolder.model_validate(orjson.loads(raw))
    except (OSError, ValueError):  # JSON and validation errors are ValueErrors
        return None


class Leases:
    """The session leases one store object holds: ``flock`` on ``sessions/<id>.lock``.

    The engine counts re-entries. How a lease stays one under interference (a replaced
    lock file, a forked child): docs/design.md, "Leases".
    """

    def __init__(self, label: str = "") -> None:
        self.label = label
        self._entries: dict[str, tuple[int, int, int]] = {}  # fd, st_dev, st_ino
        _install_fork_hook()
        _ALL.add(self)

    def take(self, sessions: SafeDir, session_id: str) -> None:
        """``SessionLockedError`` at once, naming the holder, if another process or store has it."""
        name = f"{session_id}.lock"
        for _attempt in range(5):
            opened = sessions.open_file(name, os.O_RDWR, create=True)
            assert opened is not None
            fd, locked = opened
            try:
                if not _flock(fd, fcntl.LOCK_EX, _LOCK_RETRY_DELAYS):
                    holder = _read_holder(fd)
                    raise SessionLockedError(session_id, holder.pid if holder else None,
                                             sessions.child(name), holder=holder)
                current = sessions.lstat(name)
                if current is None or (current.st_dev, current.st_ino) != (
                        locked.st_dev, locked.st_ino):
                    os.close(fd)  # the path now names another file: lock that one
                    continue
                try:
                    user = getpass.getuser()
                except (KeyError, OSError):
                    user = ""
                holder = LeaseHolder(pid=os.getpid(), host=socket.gethostname(), user=user,
                                     since=utc_now(), label=self.label)
                with contextlib.suppress(OSError):  # who holds it is information only
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, encode_json(holder.model_dump(mode="json")) + b"\n", 0)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.close(fd)
                raise
            self._entries[session_id] = (fd, locked.st_dev, locked.st_ino)
            return
        raise SessionLockedError(session_id, None, sessions.child(name))

    def let_go(self, session_id: str) -> None:
        """Release the lease (closing its descriptor drops the ``flock``), if held."""
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            with contextlib.suppress(OSError):
                os.close(entry[0])

    def holds(self, session_id: str) -> bool:
        """Whether this object (in this process) holds the lease."""
        return session_id in self._entries

    def verify(self, sessions: SafeDir, session_id: str) -> None:
        """Refuse to write (``LeaseLostError``, dropping the lease) if the lock file was
        removed or replaced since this lease locked it."""
        entry = self._entries.get(session_id)
        if entry is None:
            return
        current = sessions.lstat(f"{session_id}.lock")
        if current is None or (current.st_dev, current.st_ino) != entry[1:]:
            self.let_go(session_id)
            raise LeaseLostError(session_id, sessions.child(f"{session_id}.lock"))

    def holder(self, sessions: SafeDir, session_id: str) -> LeaseHolder | None:
        """Who holds the lease, as the lock file records it (``LeaseHolder()`` if it says
        nothing); ``None`` if nobody does. Probes with a shared ``flock``, never creates."""
        if self.holds(session_id):
            fd = self._entries[session_id][0]
            return _read_holder(fd) or LeaseHolder(pid=os.getpid(), label=self.label)
        opened = sessions.open_file(f"{session_id}.lock")
        if opened is None:
            return None
        fd, _ = opened
        try:
            return None if _flock(fd, fcntl.LOCK_SH, ()) else _read_holder(fd) or LeaseHolder()
        finally:
            os.close(fd)  # closing drops the shared lock
