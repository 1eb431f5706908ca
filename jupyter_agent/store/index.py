"""The listing index, ``<memory dir>/index.jsonl``: listing without reading transcripts
(design §10, §21).

The index is a cache of what a listing shows of each session, one JSON line per change:
``{"id": ..., "sig": ..., "set": {...}}`` merges fields into the session's entry, ``{"id":
..., "gone": true}`` forgets it, ``{"id": ..., "sig": ..., "bad": true}`` remembers a
session file that cannot be read. ``sig`` is the ``(device, inode, size, mtime)`` of the
session's snapshot and journal when the line was written.

* **Updated with every change**: each store method that changes a session appends one
  short line (only the fields that changed) under a *shared* ``flock`` on ``index.lock``;
  appends are small single ``write`` calls to an ``O_APPEND`` file, so concurrent writers
  do not interleave. The index is a cache, so these appends are not ``fsync``-ed and a
  failure to write one never fails the change itself.
* **Checked cheaply**: a listing ``lstat``-s each session's two files and uses the entry
  only if its ``sig`` still matches. A missing, stale or unreadable entry is rebuilt from
  the snapshot and the journal's tail after it (:func:`~jupyter_agent.store.snapshot.
  listing_fields`), never from the transcript, reading at most :data:`TAIL_LIMIT` bytes of
  a journal and :data:`SNAPSHOT_LIMIT` of a snapshot (sparse files are never read); a
  session that cannot be read is skipped.
* **Kept small**: when it holds more than twice as many lines as sessions (plus
  :data:`SLACK_LINES`), the listing rewrites it atomically under an *exclusive* lock.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

from jupyter_agent.errors import (
    CorruptSessionError,
    JupyterAgentError,
    SessionNotFoundError,
    StoreBusyError,
)
from jupyter_agent.store.files import SafeDir, signature_of
from jupyter_agent.store.flock import lock_shared_or_exclusive
from jupyter_agent.store.ids import SESSION_ID_PATTERN
from jupyter_agent.store.jsonio import encode_json
from jupyter_agent.store.records import ForkOrigin, check_not_future
from jupyter_agent.store.snapshot import listing_fields

__all__ = ["INDEX_LOCK", "INDEX_NAME", "ListingIndex", "session_sig"]

INDEX_NAME = "index.jsonl"
INDEX_LOCK = "index.lock"
#: The index is ignored (and rewritten) beyond this size: ~6,000 sessions with summaries
#: of the longest kind, twice over (the index is rewritten at twice its live entries).
INDEX_LIMIT = 16 * 1024 * 1024
#: A listing reads at most this much of a journal after its snapshot.
TAIL_LIMIT = 4 * 1024 * 1024
#: A listing reads at most this much of a snapshot (a snapshot holds no transcript; a
#: larger record of the one-file form is listed once it was opened and converted).
SNAPSHOT_LIMIT = 8 * 1024 * 1024
SLACK_LINES = 256

_STR_FIELDS = ("created_at", "updated_at", "summary", "title", "first_prompt")
_INT_FIELDS = ("message_count", "tool_calls")

Sig = list[Any]


def session_sig(sessions: SafeDir, session_id: str) -> Sig | None:
    """``[snapshot signature, journal signature or None]``; ``None`` if the snapshot is not
    a regular file."""
    st = sessions.lstat(f"{session_id}.json")
    if st is None or not stat.S_ISREG(st.st_mode):
        return None
    jst = sessions.lstat(f"{session_id}.jsonl")
    return [list(signature_of(st)), list(signature_of(jst)) if jst is not None else None]


def _complete(entry: dict[str, Any]) -> bool:
    """Whether an index entry has every listing field, with the right types."""
    if entry.get("bad") is True:
        return True
    try:
        return (all(type(entry[k]) is str for k in _STR_FIELDS)
                and all(type(entry[k]) is int and entry[k] >= 0 for k in _INT_FIELDS)
                and type(entry["archived"]) is bool
                and type(entry["cost_usd"]) in (int, float) and entry["cost_usd"] >= 0
                and (entry["parent"] is None or type(entry["parent"]) is dict))
    except KeyError:
        return False


def _utc(text: str) -> datetime:
    """An ISO 8601 time of the index as an aware UTC datetime (naive means UTC)."""
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    try:
        return when.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{text!r} cannot be converted to UTC") from None


def _fresh(session_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    """An index entry as listing uses it (timestamps as datetimes, the fork origin as a
    :class:`ForkOrigin`); ``ValueError`` when it does not convert or is dated in the
    future (:func:`~jupyter_agent.store.records.check_not_future`: checked on every
    read, never remembered in the index, since the clock catches up)."""
    return {
        **entry, "id": session_id, "created_at": _utc(entry["created_at"]),
        "updated_at": check_not_future("updated_at", _utc(entry["updated_at"])),
        "parent": None if entry["parent"] is None else ForkOrigin.model_validate(entry["parent"]),
    }


def _json_fields(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat(timespec="microseconds") if isinstance(v, datetime) else v
            for k, v in fields.items()}


class ListingIndex:
    """Reads and appends the index of one memory directory (see the module docstring)."""

    def __init__(self) -> None:
        self._parsed: tuple[Any, dict[str, dict[str, Any]], int] | None = None

    # ------------------------------------------------------------------ writing
    def _append(self, root: SafeDir, lines: list[dict[str, Any]], *, quiet: bool) -> None:
        """Append lines under the shared lock; errors are dropped when ``quiet``, else only
        ``OSError`` and a busy lock are (a hostile index file is reported)."""
        data = b"".join(encode_json(line) + b"\n" for line in lines)
        try:
            with lock_shared_or_exclusive(root, INDEX_LOCK, exclusive=False, timeout=2.0):
                opened = root.open_file(INDEX_NAME, os.O_WRONLY | os.O_APPEND, create=True)
                assert opened is not None
                try:
                    os.write(opened[0], data)
                finally:
                    os.close(opened[0])
        except (OSError, StoreBusyError):
            return
        except JupyterAgentError:
            if not quiet:
                raise

    def note(self, root: SafeDir, sessions: SafeDir, session_id: str,
             fields: dict[str, Any], sig: Sig | None = None) -> None:
        """Record changed listing fields of a session (after the change was written).

        Never raises: the index is a cache, and a listing reports an index file it cannot
        use (:class:`~jupyter_agent.errors.UnsafeFileError`).
        """
        sig = sig or session_sig(sessions, session_id)
        if sig is not None:
            self._append(root, [{"id": session_id, "sig": sig, "set": _json_fields(fields)}],
                         quiet=True)

    def forget(self, root: SafeDir, session_id: str) -> None:
        """Record that a session is gone (same error rules as :meth:`note`)."""
        self._append(root, [{"id": session_id, "gone": True}], quiet=True)

    # ------------------------------------------------------------------ reading
    def read(self, root: SafeDir) -> tuple[dict[str, dict[str, Any]], int]:
        """The merged entries by session ID, and how many lines the index has.

        Each entry carries ``"ok"``: whether it has every field with the right type. The
        dicts are shared with the next call: callers must not change them.

        A missing, oversized or unparseable index gives ``({}, 0)``; bad lines are
        skipped (the entries they would have changed then look stale and are rebuilt).
        """
        st = root.lstat(INDEX_NAME)
        if st is None or not stat.S_ISREG(st.st_mode):
            return {}, 0
        if st.st_size > INDEX_LIMIT:
            return {}, sys.maxsize  # so many lines that the next listing rewrites it
        key = signature_of(st)
        if self._parsed is not None and self._parsed[0] == key:
            return self._parsed[1], self._parsed[2]
        got = root.read(INDEX_NAME, limit=INDEX_LIMIT, what="listing index")
        if got is None:
            return {}, 0
        raw = got[0]
        whole = raw[: raw.rfind(b"\n") + 1]
        try:
            lines = orjson.loads(b"[" + whole[:-1].replace(b"\n", b",") + b"]") if whole else []
        except orjson.JSONDecodeError:
            lines = []
            for line in whole.split(b"\n")[:-1]:
                with contextlib.suppress(orjson.JSONDecodeError):
                    lines.append(orjson.loads(line))
        entries: dict[str, dict[str, Any]] = {}
        for line in lines:
            if type(line) is not dict or type(line.get("id")) is not str:
                continue
            sid = line["id"]
            if line.get("gone") is True:
                entries.pop(sid, None)
            elif line.get("bad") is True:
                entries[sid] = {"sig": line.get("sig"), "bad": True}
            elif type(line.get("set")) is dict:
                old = entries.get(sid, {})
                if old.get("bad"):
                    old = {}
                entries[sid] = {**old, **line["set"], "sig": line.get("sig")}
        for entry in entries.values():
            entry["ok"] = _complete(entry)
        self._parsed = (key, entries, len(lines))
        return entries, len(lines)

    def _rebuild(self, sessions: SafeDir, session_id: str, sig: Sig) -> dict[str, Any]:
        head_name = f"{session_id}.json"
        got = sessions.read(head_name, limit=SNAPSHOT_LIMIT, what="session snapshot to list")
        if got is None:
            raise CorruptSessionError(sessions.child(head_name), "missing")
        tail = None
        try:
            offset = orjson.loads(got[0]).get("journal", {}).get("offset")
        except (orjson.JSONDecodeError, AttributeError):
            offset = None
        if type(offset) is int and sig[1] is not None and 0 <= sig[1][2] - offset <= TAIL_LIMIT:
            read = sessions.read(f"{session_id}.jsonl", offset=offset, limit=TAIL_LIMIT)
            tail = read[0] if read is not None else None
        fields = listing_fields(got[0], sessions.child(head_name), tail,
                                sessions.child(f"{session_id}.jsonl"), session_id)
        return {**_json_fields(fields), "sig": sig}

    def entries(self, root: SafeDir, sessions: SafeDir) -> list[dict[str, Any]]:
        """The listing fields of every readable session, from the index where it is fresh.

        Returns
        -------
        list of dict
            Each with ``id``, ``created_at`` and ``updated_at`` (aware datetimes) and the
            other fields of :func:`~jupyter_agent.store.snapshot.listing_fields` (``parent``
            as a :class:`~jupyter_agent.store.records.ForkOrigin` or ``None``); in no
            particular order. Unreadable sessions are left out.
        """
        cached, line_count = self.read(root)
        fresh: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        live: dict[str, dict[str, Any]] = {}
        for name in sessions.names():
            if not name.endswith(".json"):
                continue
            sid = name[:-5]
            if SESSION_ID_PATTERN.fullmatch(sid) is None:
                continue
            sig = session_sig(sessions, sid)
            if sig is None:
                continue
            entry = cached.get(sid)
            if entry is None or entry.get("sig") != sig or not entry.get("ok"):
                try:
                    entry = self._rebuild(sessions, sid, sig)
                    updates.append({"id": sid, "sig": sig,
                                    "set": {k: v for k, v in entry.items() if k != "sig"}})
                    entry["ok"] = True
                except (JupyterAgentError, OSError, ValueError):
                    entry = {"sig": sig, "bad": True}
                    updates.append({"id": sid, "sig": sig, "bad": True})
            live[sid] = entry
            if entry.get("bad"):
                continue
            with contextlib.suppress(ValueError):
                fresh.append(_fresh(sid, entry))
        if updates:
            self._append(root, updates, quiet=False)
        if line_count + len(updates) > 2 * len(live) + SLACK_LINES:
            self._rewrite(root, live)
        return fresh

    def entry(self, root: SafeDir, sessions: SafeDir, session_id: str) -> dict[str, Any]:
        """The listing fields of one session, as :meth:`entries` gives them.

        Raises
        ------
        SessionNotFoundError
            There is no such session.
        CorruptSessionError
            Its files cannot be read or validated (naming the file).
        UnsafePathError, OSError
        """
        head = sessions.child(f"{session_id}.json")
        sig = session_sig(sessions, session_id)
        if sig is None:
            raise SessionNotFoundError(session_id, head)
        entry = self.read(root)[0].get(session_id)
        if entry is None or entry.get("sig") != sig or not entry.get("ok") or entry.get("bad"):
            # a session the listing marked bad is read again: its error names the file
            try:
                entry = self._rebuild(sessions, session_id, sig)
            except ValueError as err:
                raise CorruptSessionError(head, str(err)) from None
        try:
            return _fresh(session_id, entry)
        except ValueError as err:
            raise CorruptSessionError(head, str(err)) from None

    def _rewrite(self, root: SafeDir, live: dict[str, dict[str, Any]]) -> None:
        lines = []
        for sid, entry in live.items():
            if entry.get("bad"):
                lines.append({"id": sid, "sig": entry["sig"], "bad": True})
            else:
                lines.append({"id": sid, "sig": entry["sig"],
                              "set": {k: v for k, v in entry.items() if k not in ("sig", "ok")}})
        data = b"".join(encode_json(line) + b"\n" for line in lines)
        with contextlib.suppress(OSError, JupyterAgentError), \
                lock_shared_or_exclusive(root, INDEX_LOCK, exclusive=True, timeout=0.05):
            root.write_atomic(INDEX_NAME, data)
