"""The notes of a memory directory (``project.md``, ``user.md``), for every backend.

Notes go into the system message of new sessions. They are read through the no-follow
primitives and must be the user's own, at most :data:`NOTES_LIMIT` bytes. Writes are
read-modify-write under ``notes.lock`` then an atomic replace, so concurrent appenders lose
nothing. :func:`unseen_notes` tells which notes the user was not shown in their current
content (a SHA-256 per file, kept in ``$XDG_STATE_HOME/jupyter-agent``, never in the memory
directory, which a repository could ship).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Literal

from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.store.files import (
    SafeDir,
    is_temp_name,
    lease_temp,
    lock_shared_or_exclusive,
    storage_errors,
    temp_target,
)
from jupyter_agent.store.messages import clean_text

NOTE_FILES = {"project": "project.md", "user": "user.md"}
NOTES_LOCK = "notes.lock"
#: Notes larger than this are refused rather than read into a prompt.
NOTES_LIMIT = 4 * 1024 * 1024
_NOTE_NAMES = tuple(NOTE_FILES.values())


NoteKind = Literal["project", "user"]


def note_file(kind: NoteKind) -> str:
    """The file name of ``kind``; ``ValueError`` for anything but "project" or "user"."""
    try:
        return NOTE_FILES[kind]
    except (KeyError, TypeError):
        raise ValueError(f"notes kind must be 'project' or 'user', not {kind!r}") from None


def remove_notes_temps(root: SafeDir, *, locked: bool = False) -> list[Path]:
    """Remove the temporary files killed notes writers left (under the notes lock, taken
    here for at most a moment unless ``locked``)."""
    temps = [n for n in root.names() if is_temp_name(n) and temp_target(n) in _NOTE_NAMES]
    if not temps:
        return []
    if locked:
        return [root.child(n) for n in temps if root.unlink(n)]
    with contextlib.suppress(JupyterAgentError, OSError), \
            lock_shared_or_exclusive(root, NOTES_LOCK, exclusive=True, timeout=0.05):
        return [root.child(n) for n in temps if root.unlink(n)]
    return []


class Notes:
    """The notes of one memory directory (created 0700 by the first write; no I/O before).

    Reading raises ``UnsafeFileError`` for a file that is not a private regular file and
    ``TooLargeError`` above :data:`NOTES_LIMIT`; writing raises ``StoreBusyError`` when the
    notes lock stays taken and ``StorageError`` when the write fails (the old notes stay).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()

    def __repr__(self) -> str:
        return f"Notes({str(self.root)!r})"

    def path(self, kind: NoteKind) -> Path:
        return self.root / note_file(kind)

    def read(self, kind: NoteKind) -> str:
        """The notes of ``kind`` ("" when there are none); invalid UTF-8 becomes U+FFFD."""
        name = note_file(kind)
        with storage_errors(self.root, reading=True):
            root = SafeDir.open(self.root)
        if root is None:
            return ""
        with root, storage_errors(self.path(kind), reading=True):
            got = root.read(name, limit=NOTES_LIMIT, private=True, what="notes file")
        return "" if got is None else got[0].decode("utf-8", errors="replace")

    @contextlib.contextmanager
    def _locked(self, kind: NoteKind) -> Iterator[SafeDir]:
        note_file(kind)
        with storage_errors(self.root):
            root = SafeDir.open(self.root, create=True)
        assert root is not None
        with root, storage_errors(self.path(kind)), \
                lock_shared_or_exclusive(root, NOTES_LOCK, exclusive=True):
            remove_notes_temps(root, locked=True)
            yield root

    def write(self, kind: NoteKind, text: str) -> None:
        """Replace the notes of ``kind`` (atomically, file 0600)."""
        with self._locked(kind) as root:
            name = note_file(kind)
            root.write_atomic(name, clean_text(text).encode("utf-8"), private=True,
                              temp=lease_temp(name))

    def append(self, kind: NoteKind, line: str) -> None:
        """Append ``line`` (whitespace collapsed) as a ``- `` list item."""
        item = "- " + " ".join(clean_text(line).split())
        with self._locked(kind) as root:
            name = note_file(kind)
            got = root.read(name, limit=NOTES_LIMIT, private=True, what="notes file")
            existing = "" if got is None else got[0].decode("utf-8", errors="replace")
            text = (existing.rstrip("\n") + "\n" if existing.strip() else "") + item + "\n"
            root.write_atomic(name, text.encode("utf-8"), private=True, temp=lease_temp(name))


#: Files remembered as seen at most (the oldest are forgotten: they are shown again).
_SEEN_MAX = 500


def seen_notes_file(environ: Mapping[str, str] | None = None) -> Path:
    """Where :func:`unseen_notes` keeps what the user was shown (see the module docstring)."""
    env = os.environ if environ is None else environ
    state = env.get("XDG_STATE_HOME") or str(Path("~/.local/state").expanduser())
    return Path(state) / "jupyter-agent" / "seen-notes.json"


def _load_seen(path: Path) -> dict[str, str]:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {}  # a link, FIFO or device: never read (every note counts as unseen)
        data = file.read(1024 * 1024 + 1)
    try:
        seen = json.loads(data) if len(data) <= 1024 * 1024 else {}
    except ValueError:
        seen = {}  # unreadable: every note counts as unseen, the safe side
    if not isinstance(seen, dict):
        return {}
    return {str(k): str(v) for k, v in seen.items()}


def unseen_notes(notes: Mapping[Path, str], environ: Mapping[str, str] | None = None
                 ) -> list[Path]:
    """The notes files whose current text the user has not been shown, in ``notes`` order;
    they are recorded as shown (the caller shows them now).
    """
    path = seen_notes_file(environ)
    seen = _load_seen(path)
    new = []
    for file, text in notes.items():
        digest = hashlib.sha256(clean_text(text).encode("utf-8")).hexdigest()
        if seen.get(str(file)) != digest:
            new.append(file)
            seen.pop(str(file), None)
            seen[str(file)] = digest
    if new:
        kept = dict(list(seen.items())[-_SEEN_MAX:])
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".seen-notes.", suffix=".tmp")
        except OSError:
            return new
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(kept, out)
            os.replace(temp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp)
    return new
