"""The listing index ``index.jsonl``: a cache of what a listing shows of each session.

Each entry is checked against the session's files (two ``lstat`` calls and the journal's
last checksum) and rebuilt from them when stale; the index also records the last journal
line each write acknowledged, which tells a torn write from damage. Listing is ordered by
the store clock, newest first, one page at a time (:func:`listing_page`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from jupyter_agent.errors import (
    CorruptSessionError,
    JupyterAgentError,
    SessionNotFoundError,
    StoreBusyError,
)
from jupyter_agent.store.files import NO_FOLLOW, SafeDir, lock_shared_or_exclusive, signature_of
from jupyter_agent.store.messages import JOURNAL_CAP, encode_json
from jupyter_agent.store.records import SESSION_ID_PATTERN, SessionListing, check_not_future
from jupyter_agent.store.snapshot import listing_fields

INDEX_NAME = "index.jsonl"
#: The store clock's last value, in the memory directory (see :func:`tick`).
CLOCK_FILE = "clock.lock"
INDEX_LOCK = "index.lock"
#: The index is ignored (and rewritten) beyond this size: ~6,000 sessions with summaries
#: of the longest kind, twice over (the index is rewritten at twice its live entries).
INDEX_LIMIT = 16 * 1024 * 1024
#: A listing reads at most this much of a snapshot (a snapshot holds no transcript; a
#: larger record of the one-file form is listed once it was opened and converted).
SNAPSHOT_LIMIT = 8 * 1024 * 1024
SLACK_LINES = 256
#: A load looks for what the index acknowledged in its last CLAIM_TAIL bytes first, then in
#: the whole index (at most INDEX_LIMIT bytes).
CLAIM_TAIL = 1024 * 1024

#: The end of a checked journal line: the checksum's 8 hex digits, ``"}`` and the newline.
_END = 11

Sig = list[Any]


def session_sig(sessions: SafeDir, session_id: str) -> Sig | None:
    """``[snapshot signature, journal signature or None]``; ``None`` if the snapshot is not
    a regular file."""
    st = sessions.lstat(f"{session_id}.json")
    if st is None or not stat.S_ISREG(st.st_mode):
        return None
    jst = sessions.lstat(f"{session_id}.jsonl")
    return [list(signature_of(st)), list(signature_of(jst)) if jst is not None else None]


def _at_ok(at: Any) -> bool:
    """Whether ``at`` is ``None`` (a record of the one-file form) or ``[generation, last
    line number, its checksum digits or ""]``."""
    return at is None or (type(at) is list and len(at) == 3 and type(at[0]) is str
                          and type(at[1]) is int and at[1] >= 1 and type(at[2]) is str
                          and len(at[2]) in (0, 8))


def acknowledged_problem(at: Any, generation: str, lines: int, check: bytes) -> str | None:
    """What is wrong with a journal of ``lines`` complete lines, the last with checksum
    ``check`` (``b""``: not compared), given ``at``, the last line the index records as
    acknowledged (:meth:`ListingIndex.acknowledged`; ``None`` when nothing is: the index is
    a cache that may be missing; it can prove damage, never vouch for a journal)."""
    if not _at_ok(at) or at is None or at[0] != generation:
        return None
    if at[1] > lines:
        return (f"line {lines + 1}: a save acknowledged as line {at[1]} is missing "
                f"(the journal was cut short or lines were removed; it has {lines})")
    if at[1] == lines and at[2] and check and at[2].encode("ascii") != check:
        return f"line {lines}: not the line that was acknowledged there"
    return None


def _journal_ends_with(sessions: SafeDir, session_id: str, at: list[Any] | None,
                       size: int) -> bool:
    """Whether the journal (``size`` bytes, as its signature says) really ends with the
    line an index entry records: its checksum digits are read back (one ``pread``)."""
    if at is None or not at[2]:  # a one-file record, or a journal of 0.2: nothing to compare
        return True
    if size < _END:
        return False
    # the signature just said it is a regular file: no second lstat; never follows a link
    # nor blocks, and reads 8 bytes whatever the file has become
    fd = os.open(f"{session_id}.jsonl", os.O_RDONLY | NO_FOLLOW, dir_fd=sessions.fd)
    try:
        return os.pread(fd, 8, size - _END) == at[2].encode("ascii")
    finally:
        os.close(fd)


#: Listing fields the index never records (a lease holder; a team store's owner and roles).
_NOT_INDEXED = {"holder": None, "owner_user": "", "owner_host": "", "owner_role": "",
                "shared_with": ()}


def _listing(session_id: str, entry: dict[str, Any]) -> SessionListing:
    """An index entry as listing gives it (status "idle"); ``ValueError`` when it does not
    validate, has no store clock or no valid ``at``."""
    listed = SessionListing.model_validate({**entry, "id": session_id, "status": "idle",
                                            **_NOT_INDEXED})
    if listed.clock is None or "at" not in entry or not _at_ok(entry["at"]):
        raise ValueError("the index entry has no store clock or no valid 'at'")
    return listed


def _horizon(root: SafeDir) -> datetime:
    """The time a listed session is compared with (it may be at most
    :data:`~jupyter_agent.store.records.CLOCK_SKEW` later): this machine's clock, or the
    store clock's last value when that is ahead, by a day at most (a wall clock that
    stepped back hides nothing this memory directory's writers dated)."""
    last = 0
    with contextlib.suppress(JupyterAgentError, OSError):
        got = root.read(CLOCK_FILE, limit=64, what="store clock")
        raw = b"" if got is None else got[0].strip()
        last = int(raw) if raw.isdigit() and len(raw) < 20 else 0
    now = datetime.now(UTC)
    # the file is ours, but a repository could ship one: it vouches for a day at most
    return min(max(now, datetime.fromtimestamp(min(last, 2**52) / 1e6, UTC)),
               now + timedelta(days=1))


def _problem(entry: dict[str, Any], horizon: datetime) -> str | None:
    """Why a checked entry is not listed, or ``None``: damaged, or dated (or clocked) after
    ``horizon``, checked on every read and never kept in the index (the clock catches up)."""
    if entry.get("bad"):
        return str(entry.get("reason") or "its files cannot be read")
    listed = entry["listed"]
    try:
        check_not_future("updated_at", listed.updated_at, horizon)
        when = datetime.fromtimestamp(min(listed.clock, 2**52) / 1e6, UTC)  # 2112 at most
        check_not_future("store clock", when, horizon)
    except ValueError as err:
        return str(err)
    return None


def _index_line(session_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The index line that records a checked entry (a bad mark as it is)."""
    if entry.get("bad"):
        return {"id": session_id, **entry}
    fields = {k: v for k, v in entry.items() if k not in ("sig", "listed")}
    return {"id": session_id, "sig": entry["sig"], "set": fields}


class ListingIndex:
    """Reads and appends the index of one memory directory (see the module docstring)."""

    def __init__(self) -> None:
        self._parsed: tuple[Any, dict[str, dict[str, Any]], int] | None = None
        #: Sessions the last listing found damaged, with the one-line reason.
        self.damaged: dict[str, str] = {}

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
            self._append(root, [{"id": session_id, "sig": sig, "set": fields}], quiet=True)

    def forget(self, root: SafeDir, session_id: str) -> None:
        """Record that a session is gone (same error rules as :meth:`note`)."""
        self._append(root, [{"id": session_id, "gone": True}], quiet=True)

    # ------------------------------------------------------------------ reading
    def read(self, root: SafeDir) -> tuple[dict[str, dict[str, Any]], int]:
        """The merged entries by session ID, and how many lines the index has (the dicts
        are kept, with each entry's listing once validated, until the index changes)."""
        st = root.lstat(INDEX_NAME)
        if st is None or not stat.S_ISREG(st.st_mode):
            return {}, 0
        if st.st_size > INDEX_LIMIT:
            return {}, INDEX_LIMIT
        key = signature_of(st)
        if self._parsed is not None and self._parsed[0] == key:
            return self._parsed[1], self._parsed[2]
        got = root.read(INDEX_NAME, limit=INDEX_LIMIT, what="listing index")
        if got is None:
            return {}, 0
        raw_lines = got[0].split(b"\n")[:-1]  # a last line without its newline is left out
        count = len(raw_lines)
        entries: dict[str, dict[str, Any]] = {}
        for raw in raw_lines:
            try:
                line = orjson.loads(raw)
            except orjson.JSONDecodeError:
                line = None
            if type(line) is not dict:
                count = INDEX_LIMIT  # a line that is not an entry: rewrite the index
                continue
            if type(line.get("id")) is not str:
                continue
            sid = line["id"]
            if line.get("gone") is True:
                entries.pop(sid, None)
            elif line.get("bad") is True:
                entries[sid] = {"sig": line.get("sig"), "bad": True,
                                "reason": str(line.get("reason", ""))[:500],
                                "at": line.get("at")}
            elif type(line.get("set")) is dict:
                old = entries.get(sid, {})
                if old.get("bad"):
                    old = {}
                entries[sid] = {**old, **line["set"], "sig": line.get("sig")}
        self._parsed = (key, entries, count)
        return entries, count

    def acknowledged(self, root: SafeDir, session_id: str) -> Any:
        """The ``at`` of the session's last index line (``None`` if none), found without
        parsing the other lines: a line starts with ``{"id":"<id>",``, which cannot occur
        inside a JSON string (its quotes would be escaped)."""
        try:
            st = root.lstat(INDEX_NAME)
            if st is None or not stat.S_ISREG(st.st_mode) or st.st_size > INDEX_LIMIT:
                return None
            key = b'{"id":"%s",' % session_id.encode("ascii")
            start, raw = -1, b""
            for offset in (max(st.st_size - CLAIM_TAIL, 0), 0):  # the end first, then all
                got = root.read(INDEX_NAME, offset=offset, limit=INDEX_LIMIT)
                raw = b"" if got is None else got[0]
                start = raw.rfind(key)
                if start >= 0 or offset == 0:
                    break
        except (JupyterAgentError, OSError):
            return None
        if start < 0 or (start > 0 and raw[start - 1:start] != b"\n"):
            return None
        end = raw.find(b"\n", start)
        try:
            line = orjson.loads(raw[start:end if end >= 0 else len(raw)])
        except orjson.JSONDecodeError:
            return None
        if type(line) is not dict or line.get("gone"):
            return None
        fields = line if line.get("bad") else line.get("set")
        return fields.get("at") if type(fields) is dict else None

    def _rebuild(self, sessions: SafeDir, session_id: str, sig: Sig,
                 old: dict[str, Any] | None) -> dict[str, Any]:
        """An entry from the session's files: every journal line is checked (number and
        checksum, never parsed but after the snapshot), and against the last line
        ``old`` (the entry it replaces) records as acknowledged.
        """
        head_name = f"{session_id}.json"
        got = sessions.read(head_name, limit=SNAPSHOT_LIMIT, what="session snapshot to list")
        if got is None:
            raise CorruptSessionError(sessions.child(head_name), "missing")
        journal = sessions.read(f"{session_id}.jsonl", limit=JOURNAL_CAP)
        journal_path = sessions.child(f"{session_id}.jsonl")
        fields = listing_fields(got[0], sessions.child(head_name),
                                None if journal is None else journal[0], journal_path,
                                session_id)
        at, claimed = fields["at"], None if old is None else old.get("at")
        problem = at and acknowledged_problem(claimed, at[0], at[1], b"")
        if problem:
            raise CorruptSessionError(journal_path, problem)
        return {**fields, "sig": sig}

    def entries(self, root: SafeDir, sessions: SafeDir) -> list[SessionListing]:
        """The listing fields of every readable session, from the index where it is fresh."""
        cached, line_count = self.read(root)
        horizon = _horizon(root)
        fresh: list[SessionListing] = []
        updates: list[dict[str, Any]] = []
        live: dict[str, dict[str, Any]] = {}
        self.damaged = {}
        for name in sessions.names():
            sid = name[:-5]
            sig = (session_sig(sessions, sid) if name.endswith(".json")
                   and SESSION_ID_PATTERN.fullmatch(sid) else None)
            if sig is None:
                continue
            entry, update = self._checked(sessions, sid, sig, cached.get(sid))
            if update is not None:
                updates.append(update)
            live[sid] = entry
            problem = _problem(entry, horizon)
            if problem:
                self.damaged[sid] = problem
            else:
                fresh.append(entry["listed"])
        if line_count + len(updates) > 2 * len(live) + SLACK_LINES:
            self._rewrite(root, live)
        elif updates:
            self._append(root, updates, quiet=False)
        return fresh

    def _checked(self, sessions: SafeDir, sid: str, sig: Sig, old: dict[str, Any] | None
                 ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The entry of one session: ``old`` if it still describes the files (signature,
        and the journal's last checksum read back), else rebuilt; with the index line to
        append (``None`` when ``old`` was good). The entry carries ``"listed"``, the
        fields as :meth:`entries` gives them."""
        if old is not None and old.get("sig") == sig and not old.get("bad"):
            with contextlib.suppress(JupyterAgentError, OSError, ValueError):
                if type(old.get("listed")) is not SessionListing:  # once per index read
                    old["listed"] = _listing(sid, old)
                if _journal_ends_with(sessions, sid, old["at"], sig[1][2] if sig[1] else 0):
                    return old, None
        try:
            entry = self._rebuild(sessions, sid, sig, old)
            entry["listed"] = _listing(sid, entry)
        except (JupyterAgentError, OSError, ValueError) as err:
            reason = str(getattr(err, "reason", None) or err).splitlines()[0][:500]
            bad = {"sig": sig, "bad": True, "reason": reason,
                   "at": None if old is None else old.get("at")}  # what was acknowledged
            if old is not None and old.get("bad") and old.get("sig") == sig \
                    and old.get("reason") == reason:
                return bad, None  # a bad mark is checked again, never believed: still bad
            return bad, _index_line(sid, bad)
        return entry, _index_line(sid, entry)

    def entry(self, root: SafeDir, sessions: SafeDir, session_id: str) -> SessionListing:
        """The listing fields of one session, as :meth:`entries` gives them
        (``SessionNotFoundError``; ``CorruptSessionError`` naming the file)."""
        head = sessions.child(f"{session_id}.json")
        sig = session_sig(sessions, session_id)
        if sig is None:
            raise SessionNotFoundError(session_id, head)
        entry, _update = self._checked(sessions, session_id, sig,
                                       self.read(root)[0].get(session_id))
        problem = _problem(entry, _horizon(root))
        if problem:
            raise CorruptSessionError(head, problem)
        return entry["listed"]

    def _rewrite(self, root: SafeDir, live: dict[str, dict[str, Any]]) -> None:
        """Replace the index by one line per session (atomically, under the exclusive
        lock; skipped when the lock is busy: the next listing tries again)."""
        data = b"".join(encode_json(_index_line(sid, entry)) + b"\n"
                        for sid, entry in live.items())
        with contextlib.suppress(OSError, JupyterAgentError), \
                lock_shared_or_exclusive(root, INDEX_LOCK, exclusive=True, timeout=0.05):
            root.write_atomic(INDEX_NAME, data)


def listing_page(entries: list[SessionListing], limit: int | None,
                 after: SessionListing | None) -> list[SessionListing]:
    """One page of listing entries, newest first: by store clock, then ID (``after``, from
    a store without a clock, is placed by ``updated_at`` in microseconds)."""
    entries.sort(key=lambda e: (e.clock, e.id), reverse=True)
    if after is not None:
        clock = after.clock
        cursor = (int(after.updated_at.timestamp() * 1_000_000) if clock is None else clock,
                  after.id)
        entries = [e for e in entries if (e.clock, e.id) < cursor]
    return entries if limit is None else entries[:limit]


def tick(root: SafeDir, after: int, *, exact: int | None = None) -> int:
    """The store clock's next value (microseconds): more than every value it gave in this
    memory directory and than ``after``, the wall clock when larger (a clock stepping back
    never reorders sessions); ``exact`` (an import keeps its place) is taken as it is.
    Kept in :data:`CLOCK_FILE` under ``flock`` (polled for up to 10 s); unusable or busy,
    the value still exceeds ``after``.
    """
    now = time.time_ns() // 1000
    # a record dated ahead of the clock never sets it ahead
    value = max(now, after + 1) if exact is None else min(exact, now)
    with contextlib.suppress(OSError, JupyterAgentError), \
            lock_shared_or_exclusive(root, CLOCK_FILE, exclusive=True) as fd:
        data = os.pread(fd, 32, 0)
        raw = data.strip()
        last = int(raw) if raw.isdigit() and len(raw) < 20 else 0
        if exact is None:
            value = max(value, last + 1)
        if value > last:
            text = b"%d\n" % value
            os.pwrite(fd, text, 0)
            if len(text) < len(data):  # a larger value is never shorter: rarely needed
                os.ftruncate(fd, len(text))
    return value
