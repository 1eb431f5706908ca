"""What killed writers and deleted sessions leave behind, and its safe removal (design §7, §8).

* A writer killed during an atomic replace leaves its temporary file
  (``.<name>.<random>.tmp``). Such a file is removed only under the lock that its
  writer held: the session's lease for session files, the notes lock for notes, the
  index lock for the index -- so no live writer ever loses its temporary file.
* A writer killed during an append leaves a cut-short last journal line;
  :func:`repair_tail` cuts it off when the lease is next taken.
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

import os
from pathlib import Path

from jupyter_agent.store.figures import remove_figure_temps
from jupyter_agent.store.files import SafeDir, is_temp_name, temp_target
from jupyter_agent.store.ids import SESSION_ID_PATTERN

__all__ = ["remove_session_file_temps", "remove_session_temps", "repair_tail", "session_of"]

_SESSION_SUFFIXES = (".json", ".jsonl")


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
    """Remove the temporary files of a session's files and figures; call only under its
    lease."""
    return remove_session_file_temps(sessions, session_id) + remove_figure_temps(sessions,
                                                                                 session_id)


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
