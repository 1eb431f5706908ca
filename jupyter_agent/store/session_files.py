"""The files of saved sessions, for the JSON-file backend.

:class:`SessionFiles` is the part of :class:`~jupyter_agent.store.SessionStore` that
opens the memory directory, takes leases around changes, reads a session's snapshot and
journal, appends journal entries, rewrites snapshots and keeps the listing index up to
date. Invariants are listed in :mod:`jupyter_agent.store.json_store`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from jupyter_agent.errors import (
    CorruptSessionError,
    JupyterAgentError,
    SessionNotFoundError,
    StorageError,
    TooLargeError,
    UnsafePathError,
)
from jupyter_agent.store.files import SafeDir, lease_temp, signature_of, write_all
from jupyter_agent.store.garbage import remove_notes_temps, remove_session_temps
from jupyter_agent.store.ids import validate_session_id
from jupyter_agent.store.index import CLOCK_FILE, ListingIndex, Sig, session_sig
from jupyter_agent.store.journal import (
    JOURNAL_VERSION,
    SNAPSHOT_MIN_BYTES,
    SNAPSHOT_RATIO,
    encode_line,
    first_prompt_of,
    header_line,
    items_for,
    new_generation,
    upgraded_journal,
)
from jupyter_agent.store.jsonio import JOURNAL_CAP, LINE_CAP, RECORD_CAP, encode_json
from jupyter_agent.store.leases import Leases
from jupyter_agent.store.paging import check_limit, entry_order, page_of
from jupyter_agent.store.records import SessionListing, SessionRecord
from jupyter_agent.store.snapshot import Loaded, load, snapshot_bytes

__all__ = ["CLOCK_FILE", "GITIGNORE", "SessionFiles", "storage_errors"]

#: In the memory directory: the store clock's last value, taken under a ``flock``.

GITIGNORE = b"""\
# Written by jupyter-agent. Transcripts hold your data and your prompts: keep them, your
# private notes and the store's lock, index and temporary files out of version control.
# project.md (notes about the project) may be shared. jupyter-agent never overwrites
# this file: edit it freely.
sessions/
user.md
*.lock
*.tmp
index.jsonl
"""


def _add_chunks(messages: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """``messages`` in runs whose ``add`` line stays under :data:`LINE_CAP` (one message
    over it is a run of its own, refused on writing)."""
    chunk: list[dict[str, Any]] = []
    size = 0
    for message in messages:
        data = len(encode_json(message))
        if chunk and size + data + 64 > LINE_CAP:
            yield chunk
            chunk, size = [], 0
        chunk.append(message)
        size += data + 1
    if chunk:
        yield chunk


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


class SessionFiles:
    """Session files of one memory directory (see the module docstring).

    Parameters
    ----------
    root : pathlib.Path
        The memory directory.
    leases : Leases
        The store's leases.
    """

    def __init__(self, root: Path, leases: Leases) -> None:
        self.root = root
        self.sessions_dir = root / "sessions"
        self.leases = leases
        self.index = ListingIndex()
        self.cache: dict[str, tuple[Loaded, Sig | None]] = {}
        self.mutex = threading.RLock()
        self._gitignore_checked = False

    def session_path(self, session_id: str) -> Path:
        return self.sessions_dir / f"{validate_session_id(session_id)}.json"

    def journal_path(self, session_id: str) -> Path:
        return self.sessions_dir / f"{validate_session_id(session_id)}.jsonl"

    # ------------------------------------------------------------------ directories
    @contextlib.contextmanager
    def dirs(self, *, create: bool) -> Iterator[tuple[SafeDir, SafeDir] | None]:
        """The checked memory directory and ``sessions/``; ``None`` if missing (no create)."""
        try:
            root = SafeDir.open(self.root, create=create)
        except OSError as err:
            if isinstance(err, JupyterAgentError):
                raise
            raise StorageError(self.root, err, reading=not create) from err
        if root is None:
            yield None
            return
        try:
            if create and not self._gitignore_checked:
                with contextlib.suppress(OSError):
                    root.create_new(".gitignore", GITIGNORE, 0o644)
                self._gitignore_checked = True
            sessions = root.subdir("sessions", create=create)
            if sessions is None:
                yield None
                return
            with sessions:
                yield root, sessions
        finally:
            root.close()

    @contextlib.contextmanager
    def leased(self, session_id: str, *, create: bool = False) -> Iterator[tuple[SafeDir, SafeDir]]:
        """Hold the lease (taken or re-entered) with the directories open.

        Without ``create``, an unknown session raises :class:`SessionNotFoundError`
        before any lock file is made.
        """
        validate_session_id(session_id)
        with self.mutex, self.dirs(create=create) as dirs:
            if dirs is None:
                raise SessionNotFoundError(session_id, self.session_path(session_id))
            root, sessions = dirs
            if not create and not self.leases.holds(session_id) \
                    and session_sig(sessions, session_id) is None:
                if sessions.lstat(f"{session_id}.json") is not None:
                    sessions.read(f"{session_id}.json", limit=RECORD_CAP)  # not regular: refused
                raise SessionNotFoundError(session_id, self.session_path(session_id))
            self.take_lease(sessions, session_id, root)
            try:
                yield root, sessions
            finally:
                self.leases.release(session_id)
                if not self.leases.holds(session_id):
                    self.cache.pop(session_id, None)

    def take_lease(self, sessions: SafeDir, session_id: str, root: SafeDir | None = None) -> None:
        """Take or re-enter the lease; a new lease first removes the temporary files a
        killed writer left (by name: the cost does not grow with the number of sessions).
        The journal is not touched here: a last line without its newline is cut off only
        by :meth:`current`, once the session's checks show it was never acknowledged."""
        with storage_errors(sessions.child(f"{session_id}.lock")):
            newly = self.leases.acquire(sessions, session_id)
        if newly:
            self.cache.pop(session_id, None)
            with contextlib.suppress(OSError):  # best effort: leftovers only
                remove_session_temps(sessions, session_id)
                if root is not None:
                    remove_notes_temps(root)

    # ------------------------------------------------------------------ reading files
    def read(self, root: SafeDir | None, sessions: SafeDir, session_id: str) -> Loaded:
        """Load a session from its files and check it against what the listing index
        (``root``'s; ``None`` to skip) says was acknowledged.

        Raises
        ------
        SessionNotFoundError, CorruptSessionError, UnsafePathError
        """
        path = self.session_path(session_id)
        try:
            got = sessions.read(f"{session_id}.json", limit=RECORD_CAP, what="session snapshot")
            if got is None:
                raise SessionNotFoundError(session_id, path)

            def journal() -> bytes | None:
                read = sessions.read(f"{session_id}.jsonl", limit=JOURNAL_CAP,
                                     line_limit=LINE_CAP, what="journal")
                return None if read is None else read[0]

            loaded = load(got[0], path, journal, self.journal_path(session_id), session_id)
        except OSError as err:
            if isinstance(err, JupyterAgentError):
                raise
            raise CorruptSessionError(path, f"cannot be read ({err.strerror or err})") from None
        if root is not None and not loaded.legacy:
            problem = self.index.acknowledged_problem(root, session_id, loaded.generation,
                                                      loaded.lines, loaded.check)
            if problem:
                raise CorruptSessionError(self.journal_path(session_id), problem)
        return loaded

    def current(self, root: SafeDir, sessions: SafeDir, session_id: str) -> Loaded:
        """The session under the lease: the in-memory copy if the files are unchanged.

        A last journal line without its newline that the index does not record as
        acknowledged is a write cut short by a crash: it is cut off here, the only
        change ever made to a journal that is not an append (anything else wrong is a
        :class:`CorruptSessionError` and the files stay as they are).
        """
        sig = session_sig(sessions, session_id)
        cached = self.cache.get(session_id)
        if cached is not None and sig is not None and cached[1] == sig:
            return cached[0]
        loaded = self.read(root, sessions, session_id)
        if loaded.torn and not loaded.legacy:
            self._truncate(sessions, session_id, loaded.end)
            loaded = replace(loaded, torn=0)
        self.cache[session_id] = (loaded, session_sig(sessions, session_id))
        return loaded

    # ------------------------------------------------------------------ writing files
    def _truncate(self, sessions: SafeDir, session_id: str, end: int) -> None:
        with storage_errors(self.journal_path(session_id)):
            opened = sessions.open_file(f"{session_id}.jsonl", os.O_RDWR)
        if opened is not None:
            with storage_errors(self.journal_path(session_id)):
                try:
                    os.ftruncate(opened[0], end)
                    os.fsync(opened[0])
                finally:
                    os.close(opened[0])

    def write_fresh(self, sessions: SafeDir, record: SessionRecord,
                    items: list[Any] | None = None, *, clock: int) -> Loaded:
        """Write a whole session as a new journal and snapshot (create, import, convert);
        ``clock`` is its place in the store's order of changes."""
        sid = record.id
        generation = new_generation()
        journal = header_line(sid, generation)
        last = journal
        for number, chunk in enumerate(_add_chunks(record.transcript), start=2):
            last = encode_line(number, {"add": chunk})
            if len(last) - 1 > LINE_CAP:
                raise TooLargeError(self.journal_path(sid), len(last) - 1, LINE_CAP,
                                    "journal line", written=True)
            journal += last
        if len(journal) > JOURNAL_CAP:
            raise TooLargeError(self.journal_path(sid), len(journal), JOURNAL_CAP, "journal",
                                written=True)
        loaded = Loaded(record, items_for(record.messages, record.transcript)
                        if items is None else items, generation, len(journal), len(journal), 0,
                        0, record.state.model_dump(mode="json"),
                        first_prompt_of(record.transcript), lines=journal.count(b"\n"),
                        check=last[-11:-3], clock=clock)
        self.leases.verify(sessions, sid)
        with storage_errors(self.journal_path(sid)):
            sessions.write_atomic(f"{sid}.jsonl", journal, temp=lease_temp(f"{sid}.jsonl"))
        return self._write_snapshot(sessions, loaded)

    def _write_snapshot(self, sessions: SafeDir, loaded: Loaded) -> Loaded:
        data = snapshot_bytes(loaded)
        sid = loaded.record.id
        if len(data) > RECORD_CAP:
            raise TooLargeError(self.session_path(sid), len(data), RECORD_CAP,
                                "session snapshot", written=True)
        with storage_errors(self.session_path(sid)):
            sessions.write_atomic(f"{sid}.json", data, temp=lease_temp(f"{sid}.json"))
        return replace(loaded, offset=loaded.end, snapshot_size=len(data), legacy=False)

    def upgrade(self, sessions: SafeDir, loaded: Loaded) -> Loaded:
        """Give every line of a journal of jupyter-agent 0.2 its number and checksum.

        The snapshot is rewritten first to cover every line by number (true of the old
        journal and of the new one alike), then the journal is replaced atomically: a
        kill at any step leaves a pair that loads.
        """
        sid = loaded.record.id
        loaded = self._write_snapshot(sessions, loaded)
        path = self.journal_path(sid)
        with storage_errors(path):
            got = sessions.read(f"{sid}.jsonl")
        if got is None or len(got[0]) != loaded.end:
            raise CorruptSessionError(path, "it changed while this process held the lease; "
                                            "nothing was written")
        data = upgraded_journal(got[0])
        self.leases.verify(sessions, sid)
        with storage_errors(path):
            sessions.write_atomic(f"{sid}.jsonl", data, temp=lease_temp(f"{sid}.jsonl"))
        upgraded = replace(loaded, end=len(data), offset=len(data), check=data[-11:-3],
                           version=JOURNAL_VERSION)
        return self._write_snapshot(sessions, upgraded)

    def tick(self, root: SafeDir, after: int, *, exact: int | None = None) -> int:
        """The store clock's next value: more than every value it gave before in this
        memory directory and more than ``after``, the wall clock in microseconds when
        that is larger (so a clock stepping back never reorders sessions). With
        ``exact`` (an imported session keeps its place), that value, and the clock
        never gives a smaller one after it.

        Kept in :data:`CLOCK_FILE` under an exclusive ``flock``; if that file cannot be
        used the value is still more than ``after``.
        """
        now = time.time_ns() // 1000
        if exact is not None:
            exact = min(exact, now)  # a record dated ahead of the clock never sets it ahead
        value = exact if exact is not None else max(now, after + 1)
        with contextlib.suppress(OSError, JupyterAgentError):
            opened = root.open_file(CLOCK_FILE, os.O_RDWR, create=True)
            if opened is None:
                return value
            fd = opened[0]
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                raw = os.pread(fd, 32, 0).strip()
                last = int(raw) if raw.isdigit() and len(raw) < 20 else 0
                if exact is None:
                    value = max(value, last + 1)
                if value > last:
                    text = b"%d\n" % value
                    os.pwrite(fd, text, 0)
                    os.ftruncate(fd, len(text))
            finally:
                os.close(fd)
        return value

    def append(self, root: SafeDir, sessions: SafeDir, loaded: Loaded, entry: dict[str, Any],
               new: Loaded, fields: dict[str, Any],
               finish: Callable[[], None] | None = None) -> None:
        """Append one entry to the journal, then complete ``new`` (``finish``) and update
        the snapshot, the in-memory copy and the index. On any failure the in-memory copy
        is dropped (the next change reads the files again)."""
        sid = loaded.record.id
        self.leases.verify(sessions, sid)
        converting = loaded.legacy or loaded.version != JOURNAL_VERSION
        if loaded.legacy:  # first write of a one-file record: convert it
            converted = self.write_fresh(sessions, replace(loaded, legacy=False).record,
                                         loaded.items, clock=loaded.clock)
        elif converting:  # first write of a journal of jupyter-agent 0.2: upgrade it
            converted = self.upgrade(sessions, loaded)
        if converting:
            new = replace(new, generation=converted.generation, offset=converted.offset,
                          snapshot_size=converted.snapshot_size, legacy=False,
                          lines=converted.lines, check=converted.check,
                          version=JOURNAL_VERSION)
            loaded = converted
            fields = self.all_fields(new)
        if "updated_at" in entry:  # the session moves up in the order of changes
            clock = self.tick(root, loaded.clock)
            entry = {**entry, "clock": clock}
            new = replace(new, clock=clock)
            fields = {**fields, "clock": clock}
        line = encode_line(loaded.lines + 1, entry)
        path = self.journal_path(sid)
        if len(line) - 1 > LINE_CAP:
            raise TooLargeError(path, len(line) - 1, LINE_CAP, "new journal line", written=True)
        if loaded.end + len(line) > JOURNAL_CAP:
            raise TooLargeError(path, loaded.end + len(line), JOURNAL_CAP, "journal",
                                written=True)
        with storage_errors(path):  # a read-only file system refuses the open itself
            opened = sessions.open_file(f"{sid}.jsonl", os.O_WRONLY | os.O_APPEND)
        if opened is None:
            raise CorruptSessionError(path, "the journal of this session is missing")
        fd, st = opened
        try:
            if st.st_size != loaded.end:
                self.cache.pop(sid, None)
                raise CorruptSessionError(
                    path, "it changed while this process held the lease; nothing was written")
            try:
                write_all(fd, line)
                os.fsync(fd)
                written = os.fstat(fd)
            except OSError as err:
                self.cache.pop(sid, None)
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, loaded.end)
                raise StorageError(path, err) from err
        finally:
            os.close(fd)
        if finish is not None:
            finish()
        new = replace(new, end=loaded.end + len(line), torn=0, lines=loaded.lines + 1,
                      check=line[-11:-3])
        fields = {**fields, "at": [new.generation, new.lines, new.check.decode("ascii")]}
        cached = self.cache.get(sid)
        sig = None
        if cached is not None and cached[1] is not None and not converting:
            sig = [cached[1][0], list(signature_of(written))]  # the snapshot is unchanged
        if new.end - new.offset > max(SNAPSHOT_MIN_BYTES, SNAPSHOT_RATIO * new.snapshot_size):
            sig = None
            with contextlib.suppress(OSError, TooLargeError):  # the journal is complete
                new = self._write_snapshot(sessions, new)
        sig = sig or session_sig(sessions, sid)
        self.cache[sid] = (new, sig)
        self.index.note(root, sessions, sid, fields, sig)

    @staticmethod
    def all_fields(loaded: Loaded) -> dict[str, Any]:
        r = loaded.record
        return {"created_at": r.created_at, "updated_at": r.updated_at, "summary": r.summary,
                "title": r.title, "archived": r.archived, "message_count": len(r.transcript),
                "cost_usd": r.state.usage.cost_usd, "tool_calls": r.state.tool_calls,
                "first_prompt": loaded.first_prompt,
                "parent": None if r.parent is None else r.parent.model_dump(),
                "clock": loaded.clock,
                "at": [loaded.generation, loaded.lines, loaded.check.decode("ascii")]}

    def change(self, session_id: str, entry: dict[str, Any], **update: Any) -> None:
        """Append ``entry`` and apply ``update`` to the record (a metadata change)."""
        with self.leased(session_id) as (root, sessions):
            loaded = self.current(root, sessions, session_id)
            if all(getattr(loaded.record, k) == v for k, v in update.items()):
                return
            new = replace(loaded, record=loaded.record.model_copy(update=update))
            self.append(root, sessions, loaded, entry, new, self.all_fields(new))

    def listing(self, include_archived: bool, limit: int | None = None,
                after: SessionListing | None = None) -> list[SessionListing]:
        """The listing (see :meth:`jupyter_agent.store.SessionStore.list_sessions`); only
        the sessions of the page are probed for a holder."""
        check_limit(limit)
        with self.mutex, self.dirs(create=False) as dirs:
            if dirs is None:
                return []
            root, sessions = dirs
            entries = [e for e in self.index.entries(root, sessions)
                       if include_archived or not e["archived"]]
            entries.sort(key=entry_order, reverse=True)
            entries = page_of(entries, entry_order, limit, after)
            with os.scandir(sessions.fd) as it:
                locks = {e.name[:-5] for e in it if e.name.endswith(".lock")}
            return [self._listed(sessions, e, e["id"] in locks) for e in entries]

    def describe(self, session_id: str) -> SessionListing:
        """One session's listing entry (see :meth:`jupyter_agent.store.SessionStore.
        describe_session`)."""
        with self.mutex, self.dirs(create=False) as dirs:
            if dirs is None:
                raise SessionNotFoundError(session_id, self.session_path(session_id))
            root, sessions = dirs
            entry = self.index.entry(root, sessions, session_id)
            return self._listed(sessions, entry,
                                sessions.lstat(f"{session_id}.lock") is not None)

    def _listed(self, sessions: SafeDir, entry: dict[str, Any], lock: bool) -> SessionListing:
        """A listing entry from index fields, with who holds the session (probed only
        when it has a lock file: reading /proc/locks can be slower)."""
        sid = entry["id"]
        holder = None
        status: Literal["active", "in use", "idle"] = "idle"
        if self.leases.holds(sid):
            status = "active"
        elif lock:
            try:
                holder = self.leases.holder(sessions, sid)
            except (UnsafePathError, OSError):
                holder = None
            if holder is not None:
                status = "in use"
        return SessionListing(
            id=sid, updated_at=entry["updated_at"], summary=entry["summary"],
            title=entry["title"], archived=entry["archived"], status=status,
            created_at=entry["created_at"], message_count=entry["message_count"],
            cost_usd=float(entry["cost_usd"]), tool_calls=entry["tool_calls"],
            first_prompt=entry["first_prompt"], holder=holder, parent=entry["parent"],
            clock=entry.get("clock"))
