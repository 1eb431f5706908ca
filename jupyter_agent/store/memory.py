"""MemoryStore: the memory directory -- notes, session files, listing, summaries.

Layout (spec: "Saving Sessions")::

    <root>/                 0700 when created by us
        project.md          project notes
        user.md             user notes
        sessions/           0700 when created by us
            <id>.json       one record per session, 0600 (see ``records.py``)
            <id>.lock       the session's lease file, 0600 (see ``sessions.py``)

Constructing a store does no I/O; directories are created on the first write.
Every write is atomic (``files.atomic_write``). This base class takes no locks: its
``write_summary`` is a plain read-modify-write. :class:`~jupyter_agent.store.sessions.SessionStore`
runs the same operation under the session lease (spec: "Session Summaries").

Listing never raises on a bad entry: empty, truncated, non-JSON, non-object or
mistyped files, directories named ``x.json``, names that are not valid IDs,
temporary files and unreadable files are all skipped (spec: "Listing Saved Sessions").
Loading one session, on the contrary, reports exactly which file is bad.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from jupyter_agent.errors import CorruptSessionError, SessionNotFoundError
from jupyter_agent.store.base import NoteKind
from jupyter_agent.store.files import FileSignature, atomic_write, ensure_private_dir
from jupyter_agent.store.ids import SESSION_ID_PATTERN, validate_session_id
from jupyter_agent.store.messages import clean_text, message_text
from jupyter_agent.store.records import (
    SessionInfo,
    SessionRecord,
    dump_record,
    parse_record,
    utc_now,
)

__all__ = ["MemoryStore", "NoteKind"]

_NOTE_FILES = {"project": "project.md", "user": "user.md"}
_FIRST_PROMPT_CHARS = 200


@dataclass(frozen=True)
class _Entry:
    """What listing needs from one session file (kept instead of the whole record)."""

    id: str
    created_at: datetime
    updated_at: datetime
    summary: str
    title: str
    archived: bool
    message_count: int
    cost_usd: float
    tool_calls: int
    first_prompt: str

    @classmethod
    def from_record(cls, record: SessionRecord) -> _Entry:
        first_prompt = next(
            (message_text(m) for m in record.transcript if m.get("role") == "user"), ""
        )
        return cls(
            id=record.id,
            created_at=record.created_at,
            updated_at=record.updated_at,
            summary=record.summary,
            title=record.title,
            archived=record.archived,
            message_count=len(record.transcript),
            cost_usd=record.state.usage.cost_usd,
            tool_calls=record.state.tool_calls,
            first_prompt=first_prompt[:_FIRST_PROMPT_CHARS],
        )


def _read_regular(
    path: Path, unless: FileSignature | None = None
) -> tuple[bytes | None, FileSignature]:
    """Read a file if it is a regular one, without ever blocking (FIFOs, devices).

    Returns ``(content, signature)``; content is ``None`` for a non-regular file or
    when the file's signature equals ``unless`` (its content is already known).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        signature = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if not stat.S_ISREG(st.st_mode) or signature == unless:
            return None, signature
        return handle.read(), signature


class MemoryStore:
    """The memory directory: notes, session files, the session list and summaries.

    Parameters
    ----------
    root : str or os.PathLike
        The memory directory (``~`` is expanded). Nothing is created until a write.

    Attributes
    ----------
    root : pathlib.Path
    sessions_dir : pathlib.Path
        ``root / "sessions"``.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()
        self.sessions_dir = self.root / "sessions"
        self._listing_cache: dict[str, tuple[FileSignature, _Entry]] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    # ------------------------------------------------------------------ notes

    def notes_path(self, kind: NoteKind) -> Path:
        """Return the file of the ``"project"`` or ``"user"`` notes.

        Raises
        ------
        ValueError
            For any other ``kind``.
        """
        try:
            return self.root / _NOTE_FILES[kind]
        except (KeyError, TypeError):
            raise ValueError(f"notes kind must be 'project' or 'user', not {kind!r}") from None

    def read_notes(self, kind: NoteKind) -> str:
        """Return the notes of ``kind``; a missing file reads as "".

        Bytes that are not UTF-8 are replaced by U+FFFD rather than failing.

        Parameters
        ----------
        kind : {"project", "user"}
            ``project.md`` or ``user.md`` in the memory directory.

        Returns
        -------
        str

        Raises
        ------
        ValueError
            For any other ``kind``.
        OSError
            If the file exists but cannot be read.
        """
        try:
            return self.notes_path(kind).read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def write_notes(self, kind: NoteKind, text: str) -> None:
        """Replace the notes of ``kind`` atomically (file 0600, directory 0700 when created).

        Parameters
        ----------
        kind : {"project", "user"}
        text : str
            The whole new content (lone surrogates are replaced by U+FFFD).

        Raises
        ------
        ValueError
            For an unknown ``kind``.
        OSError
            If the write fails; the previous notes are then intact.
        """
        path = self.notes_path(kind)
        ensure_private_dir(self.root)
        atomic_write(path, clean_text(text).encode("utf-8"))

    def append_note(self, kind: NoteKind, line: str) -> None:
        """Append one line (whitespace collapsed, as a ``- `` list item) to the notes of ``kind``.

        Parameters
        ----------
        kind : {"project", "user"}
        line : str
            The note; runs of whitespace (line breaks included) become one space.

        Raises
        ------
        ValueError
            For an unknown ``kind``.
        OSError
            If the write fails; the previous notes are then intact.
        """
        existing = self.read_notes(kind)
        item = "- " + " ".join(line.split())
        text = (existing.rstrip("\n") + "\n" if existing.strip() else "") + item + "\n"
        self.write_notes(kind, text)

    # ------------------------------------------------------------------ session files

    def session_path(self, session_id: str) -> Path:
        """Return ``sessions/<id>.json`` after validating the ID (nothing is created).

        Parameters
        ----------
        session_id : str

        Returns
        -------
        pathlib.Path

        Raises
        ------
        InvalidSessionIdError
            If the ID is not 1-128 letters, digits, ``_`` or ``-``.
        """
        return self.sessions_dir / f"{validate_session_id(session_id)}.json"

    def lock_path(self, session_id: str) -> Path:
        """Return ``sessions/<id>.lock`` after validating the ID."""
        return self.sessions_dir / f"{validate_session_id(session_id)}.lock"

    def _read_record(self, session_id: str) -> SessionRecord:
        """Read and validate one session file (no lease; the file is never modified).

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError
        """
        path = self.session_path(session_id)
        try:
            raw, _ = _read_regular(path)
        except FileNotFoundError:
            raise SessionNotFoundError(session_id, path) from None
        except OSError as err:
            raise CorruptSessionError(path, f"cannot be read ({err.strerror or err})") from None
        if raw is None:
            raise CorruptSessionError(path, "not a regular file")
        return parse_record(raw, path, expected_id=session_id)

    def _write_record(self, record: SessionRecord) -> Path:
        """Write a record atomically to its file; return the path."""
        path = self.session_path(record.id)
        data = dump_record(record)
        ensure_private_dir(self.root)
        ensure_private_dir(self.sessions_dir)
        atomic_write(path, data)
        return path

    def _update(
        self, session_id: str, change: Callable[[SessionRecord], SessionRecord]
    ) -> SessionRecord:
        """Read a record, apply ``change`` and write the result if it is a new object.

        ``change`` must not mutate its argument; it returns either the same record
        (nothing to write) or a new one. ``SessionStore`` overrides this to hold the
        lease and reuse its in-memory copy.
        """
        record = self._read_record(session_id)
        new = change(record)
        if new is not record:
            self._write_record(new)
        return new

    def write_summary(self, session_id: str, summary: str) -> None:
        """Replace a session's summary and set its ``updated_at`` to now.

        Parameters
        ----------
        session_id : str
        summary : str
            Free text: goal, completed work, decisions, remaining work (spec:
            "Session Summaries").

        Raises
        ------
        InvalidSessionIdError, SessionNotFoundError, CorruptSessionError, OSError
        """
        text = clean_text(summary)
        self._update(
            session_id,
            lambda rec: rec.model_copy(update={"summary": text, "updated_at": utc_now()}),
        )

    # ------------------------------------------------------------------ listing

    def _scan(self) -> list[_Entry]:
        """Return an entry per readable session file, newest ``updated_at`` first.

        Never raises for a bad entry (see the module docstring); a missing
        ``sessions/`` directory gives ``[]``. Parsed entries are remembered by the
        file's dev/inode/size/mtime, so an unchanged file is not parsed again.
        """
        entries: list[_Entry] = []
        try:
            names = [e.name for e in os.scandir(self.sessions_dir)]
        except OSError:
            return entries
        seen: dict[str, tuple[FileSignature, _Entry]] = {}
        for name in names:
            if not name.endswith(".json"):
                continue
            session_id = name[: -len(".json")]
            if SESSION_ID_PATTERN.fullmatch(session_id) is None:
                continue
            path = self.sessions_dir / name
            cached = self._listing_cache.get(session_id)
            try:
                raw, signature = _read_regular(path, unless=cached[0] if cached else None)
                if raw is not None:
                    entry = _Entry.from_record(parse_record(raw, path, expected_id=session_id))
                elif cached is not None and signature == cached[0]:
                    entry = cached[1]
                else:
                    continue  # not a regular file
            except (OSError, CorruptSessionError):
                continue
            seen[session_id] = (signature, entry)
            entries.append(entry)
        self._listing_cache = seen
        entries.sort(key=lambda e: (e.updated_at, e.id), reverse=True)
        return entries

    def list_sessions(self) -> list[SessionInfo]:
        """List the readable sessions, most recently updated first.

        Returns
        -------
        list of SessionInfo
            ``id``, ``updated_at`` (aware UTC) and ``summary`` of each session.
            Malformed or unreadable files are skipped, never raised.
        """
        return [
            SessionInfo(id=e.id, updated_at=e.updated_at, summary=e.summary) for e in self._scan()
        ]
