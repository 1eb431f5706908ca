"""Garbage collection and ``fsck`` of the file store.

Temporary files of killed writers are removed by name when a lease is taken; a sweep
removes the rest and lock files of deleted sessions, never a lease someone holds.
:func:`check_sessions` reports each session's state and, with ``repair``, cuts a journal
back to its last good line, keeping the removed bytes in ``<id>.jsonl.damaged``.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path

import orjson

from jupyter_agent.errors import CorruptSessionError, JupyterAgentError, SessionLockedError
from jupyter_agent.store.engine import remove_temps
from jupyter_agent.store.file_store import FileStore
from jupyter_agent.store.files import (
    SafeDir,
    is_temp_name,
    lease_temp,
    storage_errors,
    temp_target,
)
from jupyter_agent.store.index import INDEX_LOCK, INDEX_NAME
from jupyter_agent.store.journal import JOURNAL_VERSION, line_problem
from jupyter_agent.store.messages import JOURNAL_CAP, RECORD_CAP
from jupyter_agent.store.records import SESSION_ID_PATTERN
from jupyter_agent.store.snapshot import listing_of


def collect_garbage(files: FileStore) -> list[Path]:
    """Remove what killed writers left and the files of deleted sessions (journal, lock
    file last), each under its lease or lock; sessions in use are left alone.
    ``UnsafeDirectoryError`` if the memory directory or ``sessions/`` may not be used."""
    removed: list[Path] = []
    with files._mutex, files._open(create=False) as dirs:
        if dirs is None:
            return removed
        root, sessions = dirs
        names = set(sessions.names())
        candidates = {sid for name in names if (sid := session_of(name)) is not None
                      and (is_temp_name(name) or f"{sid}.json" not in names)}
        for sid in sorted(candidates):
            if files.leases.holds(sid):
                continue
            with contextlib.suppress(SessionLockedError, JupyterAgentError, OSError):
                removed += _collect_session(files, sessions, sid)
        removed += remove_temps(root, timeout=1.0)
        removed += remove_temps(root, INDEX_LOCK, (INDEX_NAME,), timeout=1.0)
    return removed


def _collect_session(files: FileStore, sessions: SafeDir, sid: str) -> list[Path]:
    removed: list[Path] = []
    files.leases.take(sessions, sid)  # not held by this store: checked by the caller
    try:
        prefixes = (f".{sid}.json.", f".{sid}.jsonl.")  # not the figures' temporary files
        removed += [sessions.child(n) for n in sessions.names()
                    if is_temp_name(n) and n.startswith(prefixes) and sessions.unlink(n)]
        if sessions.lstat(f"{sid}.json") is None:  # the lock file last, while we hold it
            removed += files.remove_figures(sessions, sid)
            removed += [sessions.child(name) for name in (f"{sid}.jsonl", f"{sid}.lock")
                        if sessions.unlink(name)]
            sessions.fsync()
    finally:
        files.leases.let_go(sid)
    return removed


# --------------------------------------------------------------------------- fsck
#: Suffix of the copy of damaged bytes that a repair moved aside (``<id>.jsonl.damaged``,
#: then ``.damaged-2``, ...): never read, listed or removed by jupyter-agent.
DAMAGED_SUFFIX = ".damaged"


@dataclass
class SessionCheck:
    """What :func:`check_sessions` found of one session, and did about it."""

    session_id: str
    state: str
    reason: str = ""
    repair: str = ""
    kept: Path | None = None
    repaired: bool = False


def check_sessions(files: FileStore, *, repair: bool = False) -> list[SessionCheck]:
    """Load and check every session (journal lines, snapshot, records, what the index says
    was acknowledged), and with ``repair`` make the safe repairs:

    * a last line cut short that was never acknowledged is moved to
      ``<id>.jsonl.damaged`` (the journal keeps every line before it);
    * a journal damaged at line *k* whose snapshot covers fewer than *k* lines is copied
      whole to ``<id>.jsonl.damaged``, then replaced by its lines before *k* (the
      session loads again with the saves before the damage);
    * a journal that lost acknowledged lines at its end is accepted as it is (the index
      forgets what it recorded: the lines are gone);
    * a journal of jupyter-agent 0.2 is upgraded.
    """
    checks: list[SessionCheck] = []
    with files._mutex, files._open(create=False) as dirs:
        if dirs is None:
            return checks
        sessions = dirs[1]
        ids = sorted(n[:-5] for n in sessions.names()
                     if n.endswith(".json") and SESSION_ID_PATTERN.fullmatch(n[:-5]))
    for sid in ids:
        check = _check_one(files, sid)
        if repair and check.repair and check.state != "in use":
            with contextlib.suppress(SessionLockedError):
                _repair_one(files, check)
        checks.append(check)
    return checks


def _check_one(files: FileStore, sid: str) -> SessionCheck:
    with files._open(create=False) as dirs:
        if dirs is None:
            return SessionCheck(sid, "damaged", "the memory directory is gone")
        root, sessions = dirs
        try:
            loaded = files.read(root, sessions, sid)
        except CorruptSessionError as err:  # what a repair can do about it ("" if nothing is safe)
            check = SessionCheck(sid, "damaged", str(err))
            on_journal = err.path == files.journal_path(sid)
            if on_journal and "acknowledged" in err.reason and err.reason.startswith("line "):
                check.repair = "accept the journal as it is (the acknowledged lines are gone)"
            elif on_journal and (good := _good_prefix(sessions, sid)) is not None:
                check.repair = (f"keep lines 1-{good[0]} and move the whole damaged journal to "
                                f"{sid}.jsonl{DAMAGED_SUFFIX}")
        except (JupyterAgentError, OSError) as err:
            return SessionCheck(sid, "damaged", str(err))
        else:
            if loaded.torn:
                check = SessionCheck(
                    sid, "torn", f"{files.journal_path(sid)}: line {loaded.lines + 1} was cut "
                    f"short ({loaded.torn} bytes without a newline) and never acknowledged",
                    f"move its {loaded.torn} bytes to {sid}.jsonl{DAMAGED_SUFFIX}")
            elif not loaded.legacy and loaded.version != JOURNAL_VERSION:
                check = SessionCheck(sid, "old format", f"{files.journal_path(sid)}: written "
                                     "by jupyter-agent 0.2 (no line checksums)",
                                     "upgrade it (its next write does too)")
            else:
                check = SessionCheck(sid, "ok")
        try:  # held by another store; a lock file that cannot be used counts as free
            elsewhere = (not files.leases.holds(sid)
                         and files.leases.holder(sessions, sid) is not None)
        except (JupyterAgentError, OSError):
            elsewhere = False
        if elsewhere:
            check.state = "in use" if check.state == "ok" else check.state
            check.repair = check.repair and "(in use elsewhere: not repaired) " + check.repair
        return check


def _good_prefix(sessions: SafeDir, sid: str) -> tuple[int, bytes, bytes] | None:
    """``(lines, their bytes, the whole journal)``: the checked lines before the first
    damaged one, if the snapshot covers no more than them; else ``None``."""
    try:  # a file over its cap, or one that may not be read, is not repaired
        got = sessions.read(f"{sid}.jsonl", limit=JOURNAL_CAP)
        head = sessions.read(f"{sid}.json", limit=RECORD_CAP)
    except (JupyterAgentError, OSError):
        return None
    if got is None or head is None:
        return None
    raw = got[0]
    try:
        ref = orjson.loads(head[0])["journal"]
        covered = ref.get("lines")
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None
    lines = raw.split(b"\n")[:-1]
    good = next((n - 1 for n, line in enumerate(lines, 1) if line_problem(line, n)), len(lines))
    if good == len(lines) or good < 2 or type(covered) is not int or covered > good:
        return None
    prefix = b"".join(line + b"\n" for line in lines[:good])
    return good, prefix, raw


def _keep_aside(sessions: SafeDir, sid: str, data: bytes) -> Path:
    """Write ``data`` to the first free ``<id>.jsonl.damaged[-k]`` (never overwriting)."""
    k = 1
    while True:
        name = f"{sid}.jsonl{DAMAGED_SUFFIX}" + (f"-{k}" if k > 1 else "")
        if sessions.create_new(name, data):
            return sessions.child(name)
        k += 1


def _repair_one(files: FileStore, check: SessionCheck) -> None:
    sid = check.session_id
    with files._changing(sid) as (root, sessions):
        if check.state == "torn":
            loaded = files.read(root, sessions, sid)
            got = sessions.read(f"{sid}.jsonl")
            if got is None or not loaded.torn:
                return
            check.kept = _keep_aside(sessions, sid, got[0][loaded.end:])
            files._head((root, sessions), sid)  # cuts the unacknowledged line off
        elif check.state == "old format":
            files.upgrade(sessions, files._head((root, sessions), sid))
        elif check.repair.startswith("accept"):
            files.index.forget(root, sid)
        else:
            good = _good_prefix(sessions, sid)
            if good is None:
                return
            check.kept = _keep_aside(sessions, sid, good[2])
            files.leases.verify(sessions, sid)
            with storage_errors(files.journal_path(sid)):
                sessions.write_atomic(f"{sid}.jsonl", good[1], temp=lease_temp(f"{sid}.jsonl"))
            files.index.forget(root, sid)
        files._heads.pop(sid, None)  # the files changed: read them again
        loaded = files._head((root, sessions), sid)
        files.index.note(root, sessions, sid, listing_of(loaded))
        check.repaired = True


_SESSION_FILE = re.compile(rf"({SESSION_ID_PATTERN.pattern})\.(?:json|jsonl|lock|figures)")


def session_of(name: str) -> str | None:
    """The session a file of ``sessions/`` belongs to (``None`` for other files)."""
    found = _SESSION_FILE.fullmatch(temp_target(name) if is_temp_name(name) else name)
    return found[1] if found else None

