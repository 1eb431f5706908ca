"""Atomic writes, permissions, write failures (design notes "Durable writes")."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_agent.errors import StorageError, UnsafeFileError
from jupyter_agent.store import FileStore, dump_record, holding
from jupyter_agent.store.files import SafeDir

CHILD = str(Path(__file__).with_name("child.py"))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def temp_files(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.name.endswith(".tmp")]


@pytest.fixture
def open_umask() -> Iterator[None]:
    """Umask 0: whatever the store creates keeps exactly the mode it asks for."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def atomic_write(target: Path, data: bytes) -> None:
    directory = SafeDir.open(target.parent)
    assert directory is not None
    with directory:
        directory.write_atomic(target.name, data)


def test_atomic_write_replaces_content_with_a_0600_file(tmp_path: Path, open_umask: None) -> None:
    os.chmod(tmp_path, 0o700)
    target = tmp_path / "f.json"
    target.write_text("old")
    os.chmod(target, 0o644)
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new"
    assert mode(target) == 0o600
    assert temp_files(tmp_path) == []


def test_store_creates_private_dirs_and_files(tmp_path: Path, open_umask: None) -> None:
    root = tmp_path / "a" / "mem"
    store = FileStore(root)
    sid = store.create_session([{"role": "user", "content": "secret"}])
    store.notes.write("project", "notes")
    assert mode(root) == 0o700
    assert mode(store.sessions_dir) == 0o700
    assert mode(store.session_path(sid)) == 0o600
    assert mode(store.lock_path(sid)) == 0o600
    assert mode(store.notes.path("project")) == 0o600
    store.save(
        sid, [{"role": "user", "content": "secret"}, {"role": "assistant", "content": "x"}]
    )
    assert mode(store.session_path(sid)) == 0o600


def test_existing_memory_dir_keeps_its_mode(tmp_path: Path) -> None:
    root = tmp_path / "mine"
    root.mkdir()
    os.chmod(root, 0o755)
    FileStore(root).create_session([])
    assert mode(root) == 0o755
    assert mode(root / "sessions") == 0o700


def test_constructing_a_store_does_no_io(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "never")
    assert store.list_sessions() == []
    assert store.notes.read("user") == ""
    assert not (tmp_path / "never").exists()


def test_directory_in_place_of_target_fails_cleanly(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o700)
    target = tmp_path / "f.json"
    target.mkdir()
    (target / "inside").write_text("kept")
    with pytest.raises(UnsafeFileError, match="it is a directory"):
        atomic_write(target, b"data")
    assert (target / "inside").read_text() == "kept"
    assert temp_files(tmp_path) == []


def test_fsync_failure_leaves_previous_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(tmp_path / "mem")
    first = [{"role": "user", "content": "one"}]
    sid = store.create_session(first)
    path = store.session_path(sid)
    before = path.read_bytes()

    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    journal = store.journal_path(sid)
    journal_before = journal.read_bytes()
    with holding(store, sid):
        monkeypatch.setattr(os, "fsync", failing_fsync)
        with pytest.raises(StorageError, match="No space left") as info:
            store.save(sid, [*first, {"role": "assistant", "content": "two"}])
        assert info.value.errno == 28 and info.value.path == journal
        assert "free some disk space" in str(info.value)
        monkeypatch.undo()
        assert path.read_bytes() == before
        assert journal.read_bytes() == journal_before  # the unacknowledged line is cut off
        assert temp_files(store.sessions_dir) == []
        # the store's in-memory copy did not move ahead of the file
        store.save(sid, [*first, {"role": "assistant", "content": "2"}])
    assert [m["content"] for m in store.load_session(sid).transcript] == ["one", "2"]


def test_write_beyond_file_size_limit_fails_in_the_write_itself(tmp_path: Path) -> None:
    """A real EFBIG from write(2) (RLIMIT_FSIZE in a child): the old file survives."""
    store = FileStore(tmp_path / "mem")
    sid = store.create_session([{"role": "user", "content": "small"}])
    path = store.journal_path(sid)
    before = path.read_bytes()
    limit = len(before) + 4096
    out = subprocess.run(
        [sys.executable, CHILD, "fsize", str(tmp_path / "mem"), sid, str(limit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(out.stdout)
    assert result["errno"] == 27, result  # EFBIG: File too large
    assert path.read_bytes() == before
    assert temp_files(store.sessions_dir) == []
    assert store.load_session(sid).messages == [{"role": "user", "content": "small"}]


@contextlib.contextmanager
def unwritable_directory(path: Path) -> Iterator[None]:
    """Make ``path`` refuse new files for this process, also when it runs as root.

    A normal user gets a 0500 directory; root ignores permissions, so it gets the
    ext4 immutable attribute (``chattr +i``), which refuses even root.
    """
    if os.geteuid() != 0:
        os.chmod(path, 0o500)
        try:
            yield
        finally:
            os.chmod(path, 0o700)
        return
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"cannot make {path} immutable as root: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_unwritable_sessions_dir_raises_and_keeps_file(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "mem")
    sid = store.create_session([])
    before = store.session_path(sid).read_bytes()
    with unwritable_directory(store.sessions_dir), pytest.raises(StorageError) as info:
        store.delete_session(sid)
    assert info.value.errno in (errno.EACCES, errno.EPERM)
    assert str(store.session_path(sid)) in str(info.value)
    assert store.session_path(sid).read_bytes() == before
    assert temp_files(store.sessions_dir) == []


def test_notes_read_write(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "mem")
    assert store.notes.read("project") == ""
    store.notes.write("project", "uses pandas\n")
    store.notes.write("user", "likes plots \ud83d")
    assert store.notes.read("project") == "uses pandas\n"
    assert store.notes.read("user") == "likes plots \ufffd"
    assert (tmp_path / "mem" / "project.md").read_text() == "uses pandas\n"
    with pytest.raises(ValueError):
        store.notes.read("team")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.notes.write("../x", "t")  # type: ignore[arg-type]


def test_the_directory_is_fsynced_after_the_replace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rename itself is made durable: fsync(file) -> replace -> fsync(directory)."""
    store = FileStore(tmp_path / "mem")
    sid = store.create_session([{"role": "user", "content": "one"}])
    path = store.session_path(sid)
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def recording_fsync(fd: int) -> None:
        st = os.fstat(fd)
        is_dir = stat.S_ISDIR(st.st_mode)
        target = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else "?"
        events.append(("fsync-dir" if is_dir else "fsync-file", target))
        real_fsync(fd)

    def recording_replace(src: str, dst: str, **dir_fds: int) -> None:
        real_replace(src, dst, **dir_fds)
        events.append(("replace", os.fspath(dst)))

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "replace", recording_replace)
    store.save(sid, [{"role": "user", "content": "one"}, {"role": "user", "content": "2"}])
    assert [kind for kind, _ in events] == ["fsync-file"]  # an append: the journal alone
    if events[0][1] != "?":
        assert events[0][1] == str(store.journal_path(sid).resolve())
    events.clear()
    # converting a record of the one-file form writes journal and snapshot atomically
    path.write_bytes(dump_record(store.load_session(sid)))
    store.journal_path(sid).unlink()
    store.update(sid, summary="converted")
    kinds = [kind for kind, _ in events]
    assert kinds == ["fsync-file", "replace", "fsync-dir", "fsync-file", "replace", "fsync-dir",
                     "fsync-file"]
    assert events[1][1] == store.journal_path(sid).name
    assert events[4][1] == path.name
    if events[5][1] != "?":
        assert events[5][1] == str(store.sessions_dir.resolve())
    events.clear()
    store.delete_session(sid)  # an unlink is made durable the same way
    assert [kind for kind, _ in events] == ["fsync-dir", "fsync-dir"]
