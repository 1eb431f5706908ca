"""Sweeping a memory directory: what killed writers and deleted sessions left (design §7, §8).

:func:`collect_garbage` walks ``sessions/`` and the memory directory and removes, each
under the lock its writer would hold, the leftovers described in
:mod:`jupyter_agent.store.garbage`; a lease someone holds (this store's included) is
never touched.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from jupyter_agent.errors import JupyterAgentError, SessionLockedError
from jupyter_agent.store.figures import figure_dir_sessions, remove_figures_dir
from jupyter_agent.store.files import SafeDir, is_temp_name, temp_target
from jupyter_agent.store.flock import lock_shared_or_exclusive
from jupyter_agent.store.garbage import remove_session_file_temps, session_of
from jupyter_agent.store.session_files import SessionFiles

__all__ = ["collect_garbage"]


def collect_garbage(files: SessionFiles) -> list[Path]:
    """Remove what killed writers left and the lock files of deleted sessions.

    For each session with leftovers whose lease is free (and not held by this store):
    its temporary files; if the session no longer exists, its journal and its lock file
    (under the lease). Temporary files of the notes and of the index are removed under
    their locks. Sessions in use are left alone.

    Parameters
    ----------
    files : SessionFiles
        The session files of the memory directory, with the store's leases.

    Returns
    -------
    list of pathlib.Path
        The files and directories removed.

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
            sid = session_of(name)
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
        removed += remove_session_file_temps(sessions, sid)
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
