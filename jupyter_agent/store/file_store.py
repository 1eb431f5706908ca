"""FileStore: sessions as JSON files in the memory directory (the engine's file primitives).

Layout (directories 0700, files 0600, all owned by the user)::

    <root>/  .gitignore (written once)  project.md  user.md  notes.lock
             index.jsonl  index.lock (the listing cache)  clock.lock (the store clock)
        sessions/  <id>.json (snapshot)  <id>.jsonl (journal)  <id>.lock (lease)
                   <id>.figures/ (one image file per figure)

A change is one journal line (docs/design.md, "Session files: a journal beside a
snapshot"). While the lease is held the session is kept in memory (checked by two
``lstat`` calls before reuse, dropped on release or a failed write).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from stat import S_ISDIR, S_ISREG

from jupyter_agent.errors import (
    CorruptSessionError,
    FigureNotFoundError,
    JupyterAgentError,
    SessionNotFoundError,
    StorageError,
    TooLargeError,
    UnsafePathError,
)
from jupyter_agent.images import MEDIA_TYPES
from jupyter_agent.store.engine import Notes, SessionEngine, remove_temps
from jupyter_agent.store.files import (
    Leases,
    SafeDir,
    is_temp_name,
    lease_temp,
    signature_of,
    storage_errors,
    write_all,
)
from jupyter_agent.store.index import (
    ListingIndex,
    acknowledged_problem,
    listing_page,
    session_sig,
    tick,
)
from jupyter_agent.store.journal import (
    JOURNAL_VERSION,
    SNAPSHOT_MIN_BYTES,
    SNAPSHOT_RATIO,
    encode_line,
    first_prompt_of,
    fresh_journal,
    items_for,
    refuse_over,
    upgraded_journal,
)
from jupyter_agent.store.messages import JOURNAL_CAP, LINE_CAP, RECORD_CAP
from jupyter_agent.store.records import (
    MAX_FIGURE_BYTES,
    SESSION_ID_PATTERN,
    FigureData,
    SessionListing,
    SessionRecord,
    validate_figure_id,
    validate_session_id,
)
from jupyter_agent.store.snapshot import (
    Change,
    Loaded,
    clock_of,
    compaction,
    listing_of,
    load,
    plan_update,
    save_point,
    snapshot_bytes,
)

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


class FileStore(SessionEngine):
    """Sessions of one memory directory as JSON files; no I/O until the first call."""

    leases: Leases

    def __init__(self, root: str | os.PathLike[str], *, holder_label: str = "") -> None:
        self.root = Path(root).expanduser()
        super().__init__(Notes(self.root))
        self.sessions_dir = self.root / "sessions"
        self.leases = Leases(holder_label)
        self.index = ListingIndex()
        self._gitignore_checked = False

    def __repr__(self) -> str:
        return f"FileStore({str(self.root)!r})"

    def session_path(self, session_id: str) -> Path:
        return self.sessions_dir / f"{validate_session_id(session_id)}.json"

    _where = session_path

    def journal_path(self, session_id: str) -> Path:
        return self.sessions_dir / f"{validate_session_id(session_id)}.jsonl"

    def lock_path(self, session_id: str) -> Path:
        return self.sessions_dir / f"{validate_session_id(session_id)}.lock"

    def figures_path(self, session_id: str) -> Path:
        return self.sessions_dir / f"{validate_session_id(session_id)}.figures"

    # ------------------------------------------------------------------ primitives
    @contextlib.contextmanager
    def _open(self, *, create: bool) -> Iterator[tuple[SafeDir, SafeDir] | None]:
        """The checked memory directory and ``sessions/``; ``None`` if missing."""
        with storage_errors(self.root, reading=not create):
            root = SafeDir.open(self.root, create=create)
        if root is None:
            yield None
            return
        with root:
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

    def _exists(self, at: tuple[SafeDir, SafeDir], session_id: str) -> bool:
        sessions = at[1]
        st = sessions.lstat(f"{session_id}.json")
        if st is not None and not S_ISREG(st.st_mode):
            sessions.read(f"{session_id}.json", limit=RECORD_CAP)  # raises UnsafeFileError
        return st is not None

    def _take(self, at: tuple[SafeDir, SafeDir], session_id: str) -> None:
        """Take the lease, then remove what a killed writer left (by fixed names: the cost
        does not grow with the sessions); a torn journal line is left to :meth:`_head`."""
        root, sessions = at
        with storage_errors(sessions.child(f"{session_id}.lock")):
            self.leases.take(sessions, session_id)
        with contextlib.suppress(OSError):  # best effort: leftovers only
            sessions.unlink(lease_temp(f"{session_id}.json"))
            sessions.unlink(lease_temp(f"{session_id}.jsonl"))
            with self._figures(sessions, session_id) as folder:
                if folder is not None:
                    for name in filter(is_temp_name, folder.names()):
                        folder.unlink(name)
            remove_temps(root)

    def _read_record(self, at: tuple[SafeDir, SafeDir], session_id: str) -> SessionRecord:
        return self.read(*at, session_id).record

    _plan_save = staticmethod(save_point)
    _plan_compact = staticmethod(compaction)
    _plan_update = staticmethod(plan_update)

    def _insert(self, at: tuple[SafeDir, SafeDir], record: SessionRecord, *,
                created: bool) -> bool:
        root, sessions = at
        if sessions.lstat(f"{record.id}.json") is not None:
            return False
        clock = tick(root, 0, exact=None if created else clock_of([], {}, record.updated_at))
        loaded = self.write_fresh(sessions, record, clock=clock)
        self.index.note(root, sessions, record.id, listing_of(loaded))
        return True

    def _remove(self, at: tuple[SafeDir, SafeDir], session_id: str) -> bool:
        """The snapshot first (the session is gone at that moment), then the journal, then
        the figures; the lock file stays (``jupyter agent gc`` removes it)."""
        root, sessions = at
        self.leases.verify(sessions, session_id)
        with storage_errors(self.session_path(session_id)):
            if not sessions.unlink(f"{session_id}.json"):
                return False
            sessions.fsync()
            sessions.unlink(f"{session_id}.jsonl")
            sessions.fsync()
        with storage_errors(self.figures_path(session_id)):
            self.remove_figures(sessions, session_id)
        self.index.forget(root, session_id)
        return True

    # ------------------------------------------------------------------ figures
    @staticmethod
    def _figures(sessions: SafeDir, session_id: str, *,
                 create: bool = False) -> AbstractContextManager[SafeDir | None]:
        """The session's checked figures directory, or ``None`` if missing."""
        found = sessions.subdir(f"{session_id}.figures", create=create, what="figures directory")
        return found or contextlib.nullcontext()

    def _put_figure(self, at: tuple[SafeDir, SafeDir], session_id: str, figure_id: str,
                    data: bytes, media_type: str) -> None:
        """Write ``<id>.figures/<figure>.<ext>`` atomically under the lease; a file of the
        same figure in another format is removed."""
        self.leases.verify(at[1], session_id)
        name = f"{figure_id}.{MEDIA_TYPES[media_type]}"
        with storage_errors(self.figures_path(session_id) / name), \
                self._figures(at[1], session_id, create=True) as folder:
            assert folder is not None
            folder.write_atomic(name, data, private=True)
            for ext in MEDIA_TYPES.values():
                if f"{figure_id}.{ext}" != name:
                    folder.unlink(f"{figure_id}.{ext}")
            folder.fsync()

    def _get_figure(self, at: tuple[SafeDir, SafeDir], session_id: str,
                    figure_id: str) -> FigureData:
        """A figure's bytes, never through a link: ``FigureNotFoundError`` when it has no
        file, ``UnsafePathError`` for anything but a private regular file (directory),
        ``TooLargeError`` over :data:`~jupyter_agent.store.records.MAX_FIGURE_BYTES`."""
        with self._figures(at[1], session_id) as folder:
            for media_type, ext in MEDIA_TYPES.items():
                got = folder and folder.read(f"{figure_id}.{ext}", limit=MAX_FIGURE_BYTES,
                                             private=True, what="figure")
                if got:
                    return FigureData(got[0], media_type)
        raise FigureNotFoundError(session_id, figure_id, self.figures_path(session_id))

    def _figure_ids(self, at: tuple[SafeDir, SafeDir], session_id: str) -> list[str]:
        with self._figures(at[1], session_id) as folder:
            names = [n.rpartition(".") for n in folder.names()] if folder else []
        return sorted({stem for stem, _, ext in names
                       if ext in MEDIA_TYPES.values() and SESSION_ID_PATTERN.fullmatch(stem)})

    def delete_figure(self, session_id: str, figure_id: str) -> bool:
        """Delete one figure (under the session's lease); whether it existed."""
        validate_figure_id(figure_id)
        with self._changing(session_id) as (_root, sessions):
            self.leases.verify(sessions, session_id)
            with storage_errors(self.figures_path(session_id)), \
                    self._figures(sessions, session_id) as folder:
                if folder is None:
                    return False
                removed = [folder.unlink(f"{figure_id}.{ext}") for ext in MEDIA_TYPES.values()]
                folder.fsync()
                return any(removed)

    def remove_figures(self, sessions: SafeDir, session_id: str) -> list[Path]:
        """Remove a session's figures directory (under the lease); the paths removed. A
        link in its place is removed, never followed; a subdirectory inside is left (and
        the directory then). ``UnsafeDirectoryError`` (nothing removed) for another owner's
        directory or one others may write to."""
        name = f"{session_id}.figures"
        st = sessions.lstat(name)
        if st is None:
            return []
        removed: list[Path] = []
        if S_ISDIR(st.st_mode):
            with self._figures(sessions, session_id) as folder:
                if folder is not None:
                    for entry in folder.names():
                        entry_st = folder.lstat(entry)
                        if entry_st and not S_ISDIR(entry_st.st_mode) and folder.unlink(entry):
                            removed.append(folder.child(entry))
                    folder.fsync()
        try:
            if S_ISDIR(st.st_mode):
                os.rmdir(name, dir_fd=sessions.fd)
            else:
                sessions.unlink(name)
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                raise
        else:
            removed.append(sessions.child(name))
        sessions.fsync()
        return removed

    def damaged_sessions(self) -> dict[str, str]:
        """The sessions the last listing left out, each with its one-line reason."""
        return dict(self.index.damaged)

    def read(self, root: SafeDir | None, sessions: SafeDir, session_id: str) -> Loaded:
        """Load a session from its files and check it against what the listing index
        (``root``'s; ``None`` to skip) says was acknowledged."""
        path = self.session_path(session_id)
        try:
            got = sessions.read(f"{session_id}.json", limit=RECORD_CAP, what="session snapshot")
            if got is None:
                raise SessionNotFoundError(session_id, path)

            def journal() -> bytes | None:
                read = sessions.read(f"{session_id}.jsonl", limit=JOURNAL_CAP, what="journal")
                return None if read is None else read[0]

            loaded = load(got[0], path, journal, self.journal_path(session_id), session_id)
        except OSError as err:
            if isinstance(err, JupyterAgentError):
                raise
            raise CorruptSessionError(path, f"cannot be read ({err.strerror or err})") from None
        if root is not None and not loaded.legacy:
            problem = acknowledged_problem(self.index.acknowledged(root, session_id),
                                           loaded.generation, loaded.lines, loaded.check)
            if problem:
                raise CorruptSessionError(self.journal_path(session_id), problem)
        return loaded

    def _head(self, at: tuple[SafeDir, SafeDir], session_id: str) -> Loaded:
        """The session under the lease: the in-memory copy if the files are unchanged."""
        root, sessions = at
        sig = session_sig(sessions, session_id)
        cached = self._heads.get(session_id)
        if cached is not None and sig is not None and cached[1] == sig:
            return cached[0]
        loaded = self.read(root, sessions, session_id)
        if loaded.torn and not loaded.legacy:  # never acknowledged (read checked): cut off
            with storage_errors(self.journal_path(session_id)):
                opened = sessions.open_file(f"{session_id}.jsonl", os.O_RDWR)
                if opened is not None:
                    try:
                        os.ftruncate(opened[0], loaded.end)
                        os.fsync(opened[0])
                    finally:
                        os.close(opened[0])
            loaded = replace(loaded, torn=0)
        self._heads[session_id] = (loaded, session_sig(sessions, session_id))
        return loaded

    # ------------------------------------------------------------------ writing files
    def write_fresh(self, sessions: SafeDir, record: SessionRecord, *, clock: int) -> Loaded:
        """Write a whole session as a new journal and snapshot (create, import, convert);
        ``clock`` is its place in the store's order of changes."""
        sid = record.id
        generation = secrets.token_hex(8)  # pairs the snapshot with its journal
        journal = fresh_journal(sid, generation, record.transcript, self.journal_path(sid))
        loaded = Loaded(record, items_for(record.messages, record.transcript), generation,
                        len(journal), len(journal), 0, 0, record.state.model_dump(mode="json"),
                        first_prompt_of(record.transcript), lines=journal.count(b"\n"),
                        check=journal[-11:-3], clock=clock)
        self.leases.verify(sessions, sid)
        with storage_errors(self.journal_path(sid)):
            sessions.write_atomic(f"{sid}.jsonl", journal, temp=lease_temp(f"{sid}.jsonl"))
        return self._write_snapshot(sessions, loaded)

    def _write_snapshot(self, sessions: SafeDir, loaded: Loaded) -> Loaded:
        data = snapshot_bytes(loaded)
        sid = loaded.record.id
        refuse_over(self.session_path(sid), len(data), RECORD_CAP, "session snapshot")
        with storage_errors(self.session_path(sid)):
            sessions.write_atomic(f"{sid}.json", data, temp=lease_temp(f"{sid}.json"))
        return replace(loaded, offset=loaded.end, snapshot_size=len(data), legacy=False)

    def upgrade(self, sessions: SafeDir, loaded: Loaded) -> Loaded:
        """Give every line of a journal of jupyter-agent 0.2 its number and checksum: the
        snapshot first (it covers the lines by number, true of both journals), then the
        journal atomically, so a kill at any step leaves a pair that loads."""
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

    def _apply(self, at: tuple[SafeDir, SafeDir], loaded: Loaded, change: Change) -> bool:
        """Append one entry, then update the snapshot, the in-memory copy and the index; a
        failure drops the in-memory copy (the next change reads the files again)."""
        root, sessions = at
        entry, new, fields, finish = change
        sid = loaded.record.id
        self.leases.verify(sessions, sid)
        converting = loaded.legacy or loaded.version != JOURNAL_VERSION
        if converting:  # first write of a one-file record (convert) or a 0.2 journal (upgrade)
            loaded = (self.write_fresh(sessions, loaded.record, clock=loaded.clock)
                      if loaded.legacy else self.upgrade(sessions, loaded))
            new = replace(new, generation=loaded.generation, offset=loaded.offset,
                          snapshot_size=loaded.snapshot_size, legacy=False, lines=loaded.lines,
                          check=loaded.check, version=JOURNAL_VERSION)
            fields = listing_of(new)
        if "updated_at" in entry:  # the session moves up in the order of changes
            clock = tick(root, loaded.clock)
            entry = {**entry, "clock": clock}
            new = replace(new, clock=clock)
            fields = {**fields, "clock": clock}
        line = encode_line(loaded.lines + 1, entry)
        path = self.journal_path(sid)
        refuse_over(path, len(line) - 1, LINE_CAP, "new journal line")
        refuse_over(path, loaded.end + len(line), JOURNAL_CAP, "journal")
        with storage_errors(path):  # a read-only file system refuses the open itself
            opened = sessions.open_file(f"{sid}.jsonl", os.O_WRONLY | os.O_APPEND)
        if opened is None:
            raise CorruptSessionError(path, "the journal of this session is missing")
        fd, st = opened
        try:
            if st.st_size != loaded.end:
                self._heads.pop(sid, None)
                raise CorruptSessionError(
                    path, "it changed while this process held the lease; nothing was written")
            try:
                write_all(fd, line)
                os.fsync(fd)
                written = os.fstat(fd)
            except OSError as err:
                self._heads.pop(sid, None)
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
        cached = self._heads.get(sid)
        sig = None
        if cached is not None and cached[1] is not None and not converting:
            sig = [cached[1][0], list(signature_of(written))]  # the snapshot is unchanged
        if new.end - new.offset > max(SNAPSHOT_MIN_BYTES, SNAPSHOT_RATIO * new.snapshot_size):
            sig = None
            with contextlib.suppress(OSError, TooLargeError):  # the journal is complete
                new = self._write_snapshot(sessions, new)
        sig = sig or session_sig(sessions, sid)
        self._heads[sid] = (new, sig)
        self.index.note(root, sessions, sid, fields, sig)
        return True

    def _list_page(self, at: tuple[SafeDir, SafeDir], include_archived: bool,
                   limit: int | None, after: SessionListing | None) -> list[SessionListing]:
        """Only the sessions of the page are probed for a holder."""
        root, sessions = at
        entries = [e for e in self.index.entries(root, sessions)
                   if include_archived or not e.archived]
        entries = listing_page(entries, limit, after)
        locks = {name[:-5] for name in sessions.names() if name.endswith(".lock")}
        return [self._listed(sessions, e, e.id in locks) for e in entries]

    def _describe(self, at: tuple[SafeDir, SafeDir], session_id: str) -> SessionListing:
        root, sessions = at
        entry = self.index.entry(root, sessions, session_id)
        return self._listed(sessions, entry, sessions.lstat(f"{session_id}.lock") is not None,
                            strict=True)

    def _listed(self, sessions: SafeDir, entry: SessionListing, lock: bool, *,
                strict: bool = False) -> SessionListing:
        """``entry`` with who holds the session (probed only when it has a lock file:
        reading /proc/locks can be slower)."""
        sid, holder = entry.id, None
        if self.leases.holds(sid) or lock:
            try:
                holder = self.leases.holder(sessions, sid)
            except (UnsafePathError, OSError):
                if strict:  # one session described: say what is wrong with its lock file
                    raise
        status = "active" if self.leases.holds(sid) else "idle" if holder is None else "in use"
        if status == "idle":  # the index's entry itself (immutable, kept by the index)
            return entry
        return entry.model_copy(update={"status": status, "holder": holder})
