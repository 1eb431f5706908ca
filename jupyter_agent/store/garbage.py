"""What killed writers and deleted sessions leave behind, and its safe removal.

* A writer killed during an atomic replace leaves its temporary file
  (``.<name>.<random>.tmp``). Such a file is removed only under the lock that its
  writer held: the session's lease for session files, the notes lock for notes, the
  index lock for the index -- so no live writer ever loses its temporary file.
* Writers under a lock (a session's lease, the notes lock) use one fixed temporary name
  per file, so the next holder removes a killed writer's leftover by name
  (:func:`remove_lease_temps`, at every new lease; :func:`remove_notes_temps`, at every
  notes write and new lease). Temporary files of other names (left by older versions)
  are collected by :func:`~jupyter_agent.store.sweep.collect_garbage`.
* A writer killed during an append leaves a last journal line without its newline; it
  is cut off by the next write only when the session's checks show that it was never
  acknowledged (:meth:`~jupyter_agent.store.session_files.SessionFiles.current`).
* A session's figures directory (``<id>.figures``) goes with the session; one left by
  a deletion that was interrupted is removed by
  :func:`~jupyter_agent.store.sweep.collect_garbage`, under the session's lease, like
  its journal.
* Deleting a session keeps its lock file (another process may have it open);
  :func:`~jupyter_agent.store.sweep.collect_garbage` removes lock files of deleted
  sessions *while holding them*: a process that opened the old file before the
  removal finds, after locking it, that the path no longer names it and locks the new
  file instead (``leases.py``), so two holders can never believe they hold one session.
  A lock someone holds is never touched.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.store.figures import remove_figure_temps
from jupyter_agent.store.files import SafeDir, is_temp_name, lease_temp, temp_target
from jupyter_agent.store.flock import lock_shared_or_exclusive
from jupyter_agent.store.ids import SESSION_ID_PATTERN

__all__ = ["remove_lease_temps", "remove_notes_temps", "remove_session_file_temps",
           "remove_session_temps", "session_of"]

_SESSION_SUFFIXES = (".json", ".jsonl")
_NOTES = ("project.md", "user.md")


def session_of(name: str) -> str | None:
    """The session a file of ``sessions/`` belongs to (``None`` for other files)."""
    if is_temp_name(name):
        name = temp_target(name)
    for suffix in (*_SESSION_SUFFIXES, ".lock"):
        if name.endswith(suffix):
            sid = name[: -len(suffix)]
            return sid if SESSION_ID_PATTERN.fullmatch(sid) else None
    return None


def remove_session_temps(sessions: SafeDir, session_id: str) -> list[Path]:
    """Remove the temporary files a killed holder of the lease left (its snapshot's and
    journal's by name, its figures' from the figures directory); call only under the
    lease. Costs nothing that grows with the number of sessions."""
    return remove_lease_temps(sessions, session_id) + remove_figure_temps(sessions, session_id)


def remove_session_file_temps(sessions: SafeDir, session_id: str) -> list[Path]:
    """Remove the temporary files of a session's snapshot and journal (not of its
    figures); call only under its lease.

    Returns
    -------
    list of pathlib.Path
        What was removed.
    """
    removed = []
    prefixes = tuple(f".{session_id}{suffix}." for suffix in _SESSION_SUFFIXES)
    for name in sessions.names():
        if is_temp_name(name) and name.startswith(prefixes) and sessions.unlink(name):
            removed.append(sessions.child(name))
    return removed


def remove_lease_temps(sessions: SafeDir, session_id: str) -> list[Path]:
    """Remove the temporary files a killed holder of the lease left beside the snapshot
    and the journal (their fixed names, :func:`~jupyter_agent.store.files.lease_temp`):
    a few ``unlink`` calls, whatever the number of sessions. Call under the lease."""
    return [sessions.child(temp) for temp in (lease_temp(f"{session_id}{suffix}")
                                              for suffix in _SESSION_SUFFIXES)
            if sessions.unlink(temp)]


def remove_notes_temps(root: SafeDir, *, locked: bool = False) -> list[Path]:
    """Remove the temporary files killed notes writers left (under the notes lock: taken
    here for at most a moment unless ``locked``). The memory directory holds a few
    entries, whatever the number of sessions, so listing it is cheap."""
    temps = [n for n in root.names() if is_temp_name(n) and temp_target(n) in _NOTES]
    if not temps:
        return []
    if locked:
        return [root.child(n) for n in temps if root.unlink(n)]
    with contextlib.suppress(JupyterAgentError, OSError), \
            lock_shared_or_exclusive(root, "notes.lock", exclusive=True, timeout=0.05):
        return [root.child(n) for n in temps if root.unlink(n)]
    return []
