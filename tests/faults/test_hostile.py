"""Hostile directory entries: nothing in the memory directory is trusted (design notes "The
memory directory and notes").

Every file the store uses is replaced, in turn, by each kind of entry a cloned repository
or a careless user could leave there: a symbolic link to a file outside (one of the user's
dotfiles), a dangling symbolic link, a FIFO, a socket, a character device, a directory and
a hard link to a file outside. Each is refused with :class:`UnsafeFileError` naming the
path and the kind; nothing outside is read, created or written; nothing hangs. The
directories themselves must be the user's own and private.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from jupyter_agent.errors import TooLargeError, UnsafeDirectoryError, UnsafeFileError
from jupyter_agent.store import FileStore

pytestmark = [pytest.mark.faults, pytest.mark.timeout(60)]

KINDS = ["symlink", "dangling symlink", "FIFO", "socket", "character device", "directory",
         "hard link"]
EXPECTED = {"symlink": "symbolic link", "dangling symlink": "symbolic link", "FIFO": "FIFO",
            "socket": "socket", "character device": "character device",
            "directory": "directory", "hard link": "file with other hard links"}
SECRET = b"-----BEGIN PRIVATE KEY----- do not send\n"


def plant(path: Path, kind: str, outside: Path) -> None:
    """Put an entry of ``kind`` at ``path`` (whatever was there is removed)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    if kind == "symlink":
        path.symlink_to(outside)
    elif kind == "dangling symlink":
        path.symlink_to(outside.parent / "created-through-the-link")
    elif kind == "FIFO":
        os.mkfifo(path)
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    elif kind == "character device":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # like /dev/null
    elif kind == "directory":
        path.mkdir()
        (path / "inside").write_text("kept")
    elif kind == "hard link":
        os.link(outside, path)


@pytest.fixture
def world(tmp_path: Path) -> tuple[FileStore, Path, str]:
    """A store with one session and notes, and a private file outside it."""
    home = tmp_path / "home"
    home.mkdir()
    outside = home / ".ssh_id"
    outside.write_bytes(SECRET)
    store = FileStore(tmp_path / "repo" / ".jupyter_agent")
    sid = store.create_session([{"role": "system", "content": "s"}], session_id="victim")
    store.notes.write("project", "notes")
    store.notes.write("user", "mine")
    return store, outside, sid


Op = Callable[[FileStore, str], object]
CASES: dict[str, tuple[Callable[[FileStore, str], Path], list[Op]]] = {
    "snapshot": (lambda s, sid: s.session_path(sid),
                 [lambda s, sid: s.load_session(sid), lambda s, sid: s.update(sid, title="x")]),
    "journal": (lambda s, sid: s.journal_path(sid),
                [lambda s, sid: s.load_session(sid), lambda s, sid: s.update(sid, summary="x")]),
    "lock file": (lambda s, sid: s.lock_path(sid),
                  [lambda s, sid: s.acquire_lease(sid), lambda s, sid: s.update(sid, title="x"),
                   lambda s, sid: s.describe_session(sid).holder]),
    "project notes": (lambda s, sid: s.notes.path("project"),
                      [lambda s, sid: s.notes.read("project"),
                       lambda s, sid: s.notes.append("project", "x")]),
    "user notes": (lambda s, sid: s.notes.path("user"),
                   [lambda s, sid: s.notes.read("user"),
                    lambda s, sid: s.notes.write("user", "x")]),
    "notes lock": (lambda s, sid: s.root / "notes.lock",
                   [lambda s, sid: s.notes.append("user", "x")]),
    "listing index": (lambda s, sid: s.root / "index.jsonl",
                      [lambda s, sid: s.list_sessions()]),
    "index lock": (lambda s, sid: s.root / "index.lock",
                   [lambda s, sid: s.list_sessions()]),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("target", sorted(CASES))
def test_every_file_refuses_every_hostile_entry(world: tuple[FileStore, Path, str],
                                                target: str, kind: str) -> None:
    store, outside, sid = world
    where, operations = CASES[target]
    path = where(store, sid)
    if target in ("listing index", "index lock"):  # the listing has entries to write
        (store.root / "index.jsonl").unlink(missing_ok=True)
    plant(path, kind, outside)
    outside_stat = outside.stat()
    for operation in operations:
        fresh = FileStore(store.root)  # no in-memory copy, no lease
        with pytest.raises(UnsafeFileError) as info:
            operation(fresh, sid)
        assert info.value.path == path
        assert info.value.kind == EXPECTED[kind]
        assert str(info.value) == (
            f"refusing to use {path}: it is a {EXPECTED[kind]}, not a private regular file; "
            f"jupyter-agent never follows links or opens special files in its memory "
            f"directory -- remove or rename it")
    assert outside.read_bytes() == SECRET
    assert (outside.stat().st_mtime_ns, outside.stat().st_nlink) == (
        outside_stat.st_mtime_ns, outside_stat.st_nlink)
    assert not (outside.parent / "created-through-the-link").exists()
    if kind == "directory":
        assert (path / "inside").read_text() == "kept"


@pytest.mark.parametrize("kind", KINDS)
def test_listing_skips_hostile_session_entries_without_hanging(
        world: tuple[FileStore, Path, str], kind: str) -> None:
    store, outside, _ = world
    plant(store.sessions_dir / "planted.json", kind, outside)
    assert [s.id for s in store.list_sessions()] == ["victim"]
    assert outside.read_bytes() == SECRET


@pytest.mark.parametrize("kind", KINDS)
def test_a_planted_gitignore_is_never_written_through(tmp_path: Path, kind: str) -> None:
    outside = tmp_path / "dotfile"
    outside.write_bytes(SECRET)
    root = tmp_path / "mem"
    root.mkdir(mode=0o700)
    plant(root / ".gitignore", kind, outside)
    FileStore(root).create_session([])
    assert outside.read_bytes() == SECRET
    assert not (tmp_path / "created-through-the-link").exists()


def test_a_new_memory_directory_gets_a_gitignore_once(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "mem")
    store.create_session([])
    text = (tmp_path / "mem" / ".gitignore").read_text()
    assert all(line in text.splitlines()
               for line in ("sessions/", "user.md", "*.lock", "*.tmp", "index.jsonl"))
    assert "project.md" not in text.splitlines()
    (tmp_path / "mem" / ".gitignore").write_text("# mine\n")
    FileStore(tmp_path / "mem").create_session([])
    assert (tmp_path / "mem" / ".gitignore").read_text() == "# mine\n"


FOREIGN = 54321


@pytest.mark.parametrize("which", ["memory directory", "sessions directory"])
@pytest.mark.parametrize("problem", ["group-writable", "world-writable", "foreign owner",
                                     "symlink", "file"])
def test_directories_must_be_private_and_the_users_own(tmp_path: Path, which: str,
                                                        problem: str) -> None:
    store = FileStore(tmp_path / "mem")
    sid = store.create_session([])
    path = store.root if which == "memory directory" else store.sessions_dir
    if problem == "group-writable":
        os.chmod(path, 0o770)
    elif problem == "world-writable":
        os.chmod(path, 0o707)
    elif problem == "foreign owner":
        if os.geteuid() != 0:
            pytest.skip("giving a directory to another user needs root")
        os.chown(path, FOREIGN, FOREIGN)
    else:
        real = tmp_path / "real"
        path.rename(real)
        if problem == "symlink":
            path.symlink_to(real)
        else:
            path.write_text("a file")
    for operation in (lambda s: s.list_sessions(), lambda s: s.load_session(sid),
                      lambda s: s.create_session([]), lambda s: s.notes.read("project")):
        if which == "sessions directory" and operation.__code__.co_names == ("notes", "read"):
            continue
        with pytest.raises(UnsafeDirectoryError) as info:
            operation(FileStore(store.root))
        message = str(info.value)
        assert info.value.path == path and message.startswith(f"refusing to use {path}")
        assert "AgentMagics.memory_dir" in message
        if problem in ("group-writable", "world-writable"):
            mode = 0o770 if problem == "group-writable" else 0o707
            assert f"(owner root, mode {mode:04o})" in message or os.geteuid() != 0
            assert "writable by group or others" in message
            assert f"run `chmod 700 {path}`" in message
        elif problem == "foreign owner":
            assert f"owned by uid {FOREIGN}, not by you" in message
        elif problem == "symlink":
            assert "it is a symbolic link, not a directory" in message
        else:
            assert "it is a regular file, not a directory" in message


def test_huge_sparse_files_are_never_read_whole(world: tuple[FileStore, Path, str]) -> None:
    """A 64 GiB sparse journal (a hole) is refused at once (over its cap; under it, for its
    hole), by loads and listings alike (a listing shows only sessions that load, and says
    why this one is left out)."""
    store, _, sid = world
    journal = store.journal_path(sid)
    with journal.open("r+b") as handle:
        handle.truncate(100 << 20)
    fresh = FileStore(store.root)
    with pytest.raises(UnsafeFileError, match="sparse file"):
        fresh.load_session(sid)
    with journal.open("r+b") as handle:
        handle.truncate(64 << 30)
    with pytest.raises(TooLargeError, match="journal of 68,719,476,736 bytes is over"):
        fresh.load_session(sid)
    (store.root / "index.jsonl").unlink()
    assert fresh.list_sessions() == []
    assert "is over the" in fresh.damaged_sessions()[sid]
    assert journal.stat().st_size == 64 << 30  # left as it was
