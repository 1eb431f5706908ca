"""What killed writers and deleted sessions leave behind, and its safe removal (design §7, §8).

* A writer killed during an atomic replace leaves its temporary file
  (``.<name>.<random>.tmp``). Such a file is removed only under the lock that its
  writer held: the session's lease for session files, the notes lock for notes, the
  index lock for the index -- so no live writer ever loses its temporary file.
* A writer killed during an append leaves a cut-short last journal line;
  :func:`repair_tail` cuts it off when the lease is next taken.
* A session's figures directory (``<id>.figures``) goes with the session; one left by
  a deletion that was interrupted is removed by :func:`collect_garbage`, under the
  session's lease, like its journal.
* Deleting a session keeps its lock file (another process may have it open);
  :func:`collect_garbage` removes lock files of deleted sessions *while holding them*:
  a process that opened the old file before the removal finds, after locking it, that
  the path no longer names it and locks the new file instead (``leases.py``), so two
  holders can never believe they hold one session. A lock someone holds is never touched.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from jupyter_agent.errors import JupyterAgentError, SessionLockedError
from jupyter_agent.store.figures import (
    figure_dir_sessions,
    remove_figure_temps,
    remove_figures_dir,
)
from jupyter_agent.store.files import SafeDir, is_temp_name, lock_shared_or_exclusive, temp_target
from jupyter_agent.store.ids import SESSION_ID_PATTERN

if TYPE_CHECKING:
    from jupyter_agent.store.session_files import SessionFiles

__all__ = ["collect_garbage", "remove_session_temps", "repair_tail"]

_SESSION_SUFFIXES = (".json", ".jsonl")


def _session_of(name: str) -> str | None:
    """The session a file of ``sessions/`` belongs to (``None`` for other files)."""
    if is_temp_name(name):
        name = temp_target(name)
    for suffix in (*_SESSION_SUFFIXES, ".lock"):
        if name.endswith(suffix):
            sid = name[: -len(suffix)]
            return sid if SESSION_ID_PATTERN.fullmatch(sid) else None
    return None


def remove_session_temps(sessions: SafeDir, session_id: str) -> list[Path]:
    """Remove the temporary files of a session's files and figures; call only under its
    lease."""
    removed = []
    prefixes = tuple(f".{session_id}{suffix}." for suffix in _SESSION_SUFFIXES)
    for name in sessions.names():
        if is_temp_name(name) and name.startswith(prefixes) and sessions.unlink(name):
            removed.append(sessions.child(name))
    return removed + remove_figure_temps(sessions, session_id)


def repair_tail(sessions: SafeDir, session_id: str) -> bool:
    """Cut a journal's cut-short last line off (under the lease); return whether it had one.

    Only a last line without its newline is cut here (cheap: the end of the file is
    read); a last line that has one but does not parse is cut by the first write.
    """
    opened = sessions.open_file(f"{session_id}.jsonl", os.O_RDWR)
    if opened is None:
        return False
    fd, st = opened
    try:
        size = st.st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return False
        pos = size
        while pos > 0:
            start = max(pos - 65536, 0)
            chunk = os.pread(fd, pos - start, start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                pos = start + newline + 1
                break
            pos = start
        os.ftruncate(fd, pos)
        os.fsync(fd)
        return True
    finally:
        os.close(fd)


def collect_garbage(files: SessionFiles) -> list[Path]:
    """Remove what killed writers left and the lock files of deleted sessions.

    For each session with leftovers whose lease is free (and not held by this store):
    its temporary files; if the session no longer exists, its journal and its lock file
    (under the lease). Temporary files of the notes and of the index are removed under
    their locks. Sessions in use are left alone.

    Returns
    -------
    list of pathlib.Path
        What was removed.

    Raises
    ------
    UnsafeDirectoryError
        If the memory directory or ``sessions/`` may not be used.
    OSError
        If a directory cannot be read.
    """
    removed: list[Path] = []
    with files.mutex, files.dirs(create=False) as dirs:
        if dirs is None:
            return removed
        root, sessions = dirs
        names = set(sessions.names())
        candidates = set()
        for name in names:
            sid = _session_of(name)
            if sid is None:
                continue
            if is_temp_name(name) or f"{sid}.json" not in names:
                candidates.add(sid)
        candidates.update(sid for sid in figure_dir_sessions(sorted(names))
                          if f"{sid}.json" not in names)
        for sid in sorted(candidates):
            if files.leases.holds(sid):
                continue
            with contextlib.suppress(SessionLockedError, JupyterAgentError, OSError):
                removed += _collect_session(files, sessions, sid)
        for lock, kinds in (("notes.lock", ("project.md", "user.md")),
                            ("index.lock", ("index.jsonl",))):
            temps = [n for n in root.names() if is_temp_name(n) and temp_target(n) in kinds]
            if not temps:
                continue
            with contextlib.suppress(JupyterAgentError, OSError), \
                    lock_shared_or_exclusive(root, lock, exclusive=True, timeout=1.0):
                removed += [root.child(n) for n in temps if root.unlink(n)]
    return removed


def _collect_session(files: SessionFiles, sessions: SafeDir, sid: str) -> list[Path]:
    removed: list[Path] = []
    newly = files.leases.acquire(sessions, sid)
    try:
        prefixes = tuple(f".{sid}{suffix}." for suffix in _SESSION_SUFFIXES)
        for name in sessions.names():
            if is_temp_name(name) and name.startswith(prefixes) and sessions.unlink(name):
                removed.append(sessions.child(name))
        if newly and sessions.lstat(f"{sid}.json") is None:
            if sessions.unlink(f"{sid}.jsonl"):
                removed.append(sessions.child(f"{sid}.jsonl"))
            removed += remove_figures_dir(sessions, sid)
            if sessions.unlink(f"{sid}.lock"):  # while we hold it: see the module docstring
                removed.append(sessions.child(f"{sid}.lock"))
            sessions.fsync()
            files.leases.drop(sid)
    finally:
        files.leases.release(sid)
    return removed
