"""The files of saved sessions, for the JSON-file backend (design §20).

:class:`SessionFiles` is the part of :class:`~jupyter_agent.store.SessionStore` that
opens the memory directory, takes leases around changes, reads a session's snapshot and
journal, appends journal entries, rewrites snapshots and keeps the listing index up to
date. Invariants are listed in :mod:`jupyter_agent.store.json_store`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime
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
from jupyter_agent.store.files import SafeDir, signature_of, write_all
from jupyter_agent.store.garbage import remove_session_temps, repair_tail
from jupyter_agent.store.ids import validate_session_id
from jupyter_agent.store.index import ListingIndex, Sig, session_sig
from jupyter_agent.store.journal import (
    SNAPSHOT_MIN_BYTES,
    SNAPSHOT_RATIO,
    first_prompt_of,
    header_line,
    items_for,
    new_generation,
)
from jupyter_agent.store.jsonio import JOURNAL_CAP, LINE_CAP, RECORD_CAP, encode_json
from jupyter_agent.store.leases import Leases
from jupyter_agent.store.paging import check_limit, page_of
from jupyter_agent.store.records import SessionListing, SessionRecord
from jupyter_agent.store.snapshot import Loaded, load, snapshot_bytes

__all__ = ["GITIGNORE", "SessionFiles", "storage_errors"]

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


def _add_lines(messages: list[dict[str, Any]]) -> Iterator[bytes]:
    """``add`` entries for ``messages``, each line at most :data:`LINE_CAP` long (one
    message over it is a line of its own, refused on writing)."""
    chunk: list[bytes] = []
    size = 0
    for message in messages:
        data = encode_json(message)
        if chunk and size + len(data) + 16 > LINE_CAP:
            yield b'{"add":[' + b",".join(chunk) + b"]}\n"
            chunk, size = [], 0
        chunk.append(data)
        size += len(data) + 1
    if chunk:
        yield b'{"add":[' + b",".join(chunk) + b"]}\n"


@contextlib.contextmanager
def storage_errors(path: Path) -> Iterator[None]:
    """Turn an ``OSError`` of a write into a :class:`~jupyter_agent.errors.StorageError`
    naming ``path`` (library errors pass through)."""
    try:
        yield
    except OSError as err:
        if isinstance(err, JupyterAgentError):
            raise
        raise StorageError(path, err) from err


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
            raise StorageError(self.root, err) from err
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
            self.take_lease(sessions, session_id)
            try:
                yield root, sessions
            finally:
                self.leases.release(session_id)
                if not self.leases.holds(session_id):
                    self.cache.pop(session_id, None)

    def take_lease(self, sessions: SafeDir, session_id: str) -> None:
        """Take or re-enter the lease; a new lease first clears what a killed writer left
        (temporary files, a cut-short journal line)."""
        with storage_errors(sessions.child(f"{session_id}.lock")):
            newly = self.leases.acquire(sessions, session_id)
        if newly:
            self.cache.pop(session_id, None)
            # best effort: if this fails, `current` truncates a torn tail before any write
            with contextlib.suppress(OSError):
                remove_session_temps(sessions, session_id)
                repair_tail(sessions, session_id)

    # ------------------------------------------------------------------ reading files
    def read(self, sessions: SafeDir, session_id: str) -> Loaded:
        path = self.session_path(session_id)
        try:
            got = sessions.read(f"{session_id}.json", limit=RECORD_CAP, what="session snapshot")
            if got is None:
                raise SessionNotFoundError(session_id, path)

            def journal() -> bytes | None:
                read = sessions.read(f"{session_id}.jsonl", limit=JOURNAL_CAP,
                                     line_limit=LINE_CAP, what="journal")
                return None if read is None else read[0]

            return load(got[0], path, journal, self.journal_path(session_id), session_id)
        except OSError as err:
            if isinstance(err, JupyterAgentError):
                raise
            raise CorruptSessionError(path, f"cannot be read ({err.strerror or err})") from None

    def current(self, sessions: SafeDir, session_id: str) -> Loaded:
        """The session under the lease: the in-memory copy if the files are unchanged."""
        sig = session_sig(sessions, session_id)
        cached = self.cache.get(session_id)
        if cached is not None and sig is not None and cached[1] == sig:
            return cached[0]
        loaded = self.read(sessions, session_id)
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
                     items: list[Any] | None = None) -> Loaded:
        """Write a whole session as a new journal and snapshot (create, import, convert)."""
        sid = record.id
        generation = new_generation()
        lines = list(_add_lines(record.transcript))
        longest = max(map(len, lines), default=1) - 1
        journal = header_line(sid, generation) + b"".join(lines)
        if longest > LINE_CAP:
            raise TooLargeError(self.journal_path(sid), longest, LINE_CAP, "journal line",
                                written=True)
        if len(journal) > JOURNAL_CAP:
            raise TooLargeError(self.journal_path(sid), len(journal), JOURNAL_CAP, "journal",
                                written=True)
        loaded = Loaded(record, items_for(record.messages, record.transcript)
                        if items is None else items, generation, len(journal), len(journal), 0,
                        0, record.state.model_dump(mode="json"),
                        first_prompt_of(record.transcript))
        self.leases.verify(sessions, sid)
        with storage_errors(self.journal_path(sid)):
            sessions.write_atomic(f"{sid}.jsonl", journal)
        return self._write_snapshot(sessions, loaded)

    def _write_snapshot(self, sessions: SafeDir, loaded: Loaded) -> Loaded:
        data = snapshot_bytes(loaded)
        sid = loaded.record.id
        if len(data) > RECORD_CAP:
            raise TooLargeError(self.session_path(sid), len(data), RECORD_CAP,
                                "session snapshot", written=True)
        with storage_errors(self.session_path(sid)):
            sessions.write_atomic(f"{sid}.json", data)
        return replace(loaded, offset=loaded.end, snapshot_size=len(data), legacy=False)

    def append(self, root: SafeDir, sessions: SafeDir, loaded: Loaded, entry: dict[str, Any],
               new: Loaded, fields: dict[str, Any],
               finish: Callable[[], None] | None = None) -> None:
        """Append one entry to the journal, then complete ``new`` (``finish``) and update
        the snapshot, the in-memory copy and the index. On any failure the in-memory copy
        is dropped (the next change reads the files again)."""
        sid = loaded.record.id
        self.leases.verify(sessions, sid)
        converting = loaded.legacy
        if converting:  # first write of a one-file record: convert it
            converted = self.write_fresh(sessions, replace(loaded, legacy=False).record,
                                          loaded.items)
            new = replace(new, generation=converted.generation, offset=converted.offset,
                          snapshot_size=converted.snapshot_size, legacy=False)
            loaded = converted
            fields = self.all_fields(new)
        line = encode_json(entry) + b"\n"
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
        new = replace(new, end=loaded.end + len(line), torn=0)
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
                "parent": None if r.parent is None else r.parent.model_dump()}

    def change(self, session_id: str, entry: dict[str, Any], **update: Any) -> None:
        """Append ``entry`` and apply ``update`` to the record (a metadata change)."""
        with self.leased(session_id) as (root, sessions):
            loaded = self.current(sessions, session_id)
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
            entries.sort(key=_order, reverse=True)
            entries = page_of(entries, _order, limit, after)
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
            first_prompt=entry["first_prompt"], holder=holder, parent=entry["parent"])


def _order(entry: dict[str, Any]) -> tuple[datetime, str]:
    """Listing order: ``(updated_at, id)``, newest first when reversed."""
    return entry["updated_at"], entry["id"]
