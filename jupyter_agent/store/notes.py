"""The notes of a memory directory: ``project.md`` and ``user.md``.

Notes are plain UTF-8 text put into the system message of new sessions. They are read
through the no-follow primitives (a symbolic link, FIFO or device in their place is
refused, never read into a prompt) and must be the user's own: owned by the current user,
not writable by group or others, at most :data:`NOTES_LIMIT` bytes.

Writes are read-modify-write under an exclusive ``flock`` on ``notes.lock`` in the memory
directory, then an atomic replace: several processes appending notes at once (the
``remember`` tool in two kernels) lose none of them. Each write first removes the
temporary files that killed writers left.

Notes can come from someone else (a cloned repository's ``project.md``), and they instruct
the model in every new session. :func:`unseen_notes` tells which notes the user has not
been shown yet *in their current content*, and records them as shown. The record is a
SHA-256 per notes file, kept in the user's own state directory
(``$XDG_STATE_HOME/jupyter-agent/seen-notes.json``, default ``~/.local/state``), not in the
memory directory: a repository could ship a record that claims its notes were seen.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from jupyter_agent.store.base import NoteKind
from jupyter_agent.store.files import SafeDir, lease_temp
from jupyter_agent.store.flock import lock_shared_or_exclusive
from jupyter_agent.store.garbage import remove_notes_temps
from jupyter_agent.store.messages import clean_text

__all__ = ["NOTES_LIMIT", "NOTES_LOCK", "NOTE_FILES", "NoteKind", "append_note", "read_notes",
           "seen_notes_file", "unseen_notes", "write_notes"]


NOTE_FILES = {"project": "project.md", "user": "user.md"}
NOTES_LOCK = "notes.lock"
#: Notes larger than this are refused rather than read into a prompt.
NOTES_LIMIT = 4 * 1024 * 1024


def note_file(kind: NoteKind) -> str:
    """The file name of ``kind``.

    Raises
    ------
    ValueError
        For anything but ``"project"`` or ``"user"``.
    """
    try:
        return NOTE_FILES[kind]
    except (KeyError, TypeError):
        raise ValueError(f"notes kind must be 'project' or 'user', not {kind!r}") from None


def read_notes(root: SafeDir | None, kind: NoteKind) -> str:
    """The notes of ``kind`` ("" when the directory or the file is missing).

    Bytes that are not UTF-8 become U+FFFD.

    Raises
    ------
    ValueError
        For an unknown ``kind``.
    UnsafeFileError
        If the file is not a private regular file.
    TooLargeError
        If it is larger than :data:`NOTES_LIMIT`.
    OSError
    """
    name = note_file(kind)
    if root is None:
        return ""
    got = root.read(name, limit=NOTES_LIMIT, private=True, what="notes file")
    return "" if got is None else got[0].decode("utf-8", errors="replace")


def write_notes(root: SafeDir, kind: NoteKind, text: str) -> None:
    """Replace the notes of ``kind`` with ``text`` (under the notes lock, atomically).

    Raises
    ------
    ValueError, UnsafeFileError, StoreBusyError, OSError
    """
    name = note_file(kind)
    with lock_shared_or_exclusive(root, NOTES_LOCK, exclusive=True):
        remove_notes_temps(root, locked=True)
        root.write_atomic(name, clean_text(text).encode("utf-8"), private=True,
                          temp=lease_temp(name))


def append_note(root: SafeDir, kind: NoteKind, line: str) -> None:
    """Append ``line`` (whitespace collapsed) as a ``- `` list item, under the notes lock.

    Raises
    ------
    ValueError, UnsafeFileError, StoreBusyError, OSError
    """
    name = note_file(kind)
    item = "- " + " ".join(clean_text(line).split())
    with lock_shared_or_exclusive(root, NOTES_LOCK, exclusive=True):
        existing = read_notes(root, kind)
        text = (existing.rstrip("\n") + "\n" if existing.strip() else "") + item + "\n"
        remove_notes_temps(root, locked=True)
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

    Parameters
    ----------
    notes : mapping
        Absolute path of each notes file -> the text going into the system prompt.
    environ : mapping, optional
        For ``XDG_STATE_HOME`` (default ``os.environ``).

    Returns
    -------
    list of pathlib.Path

    Notes
    -----
    A record that cannot be read counts as empty (every note is shown again); one that
    cannot be written is not an error (the notes are shown again next time).
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
