"""The notes of a memory directory: ``project.md`` and ``user.md`` (design §2).

Notes are plain UTF-8 text put into the system message of new sessions. They are read
through the no-follow primitives (a symbolic link, FIFO or device in their place is
refused, never read into a prompt) and must be the user's own: owned by the current user,
not writable by group or others, at most :data:`NOTES_LIMIT` bytes.

Writes are read-modify-write under an exclusive ``flock`` on ``notes.lock`` in the memory
directory, then an atomic replace: several processes appending notes at once (the
``remember`` tool in two kernels) lose none of them. Each write first removes the
temporary files that killed writers left.
"""

from __future__ import annotations

from jupyter_agent.store.base import NoteKind
from jupyter_agent.store.files import SafeDir, lease_temp
from jupyter_agent.store.flock import lock_shared_or_exclusive
from jupyter_agent.store.garbage import remove_notes_temps
from jupyter_agent.store.messages import clean_text

__all__ = ["NOTES_LIMIT", "NOTES_LOCK", "NOTE_FILES", "NoteKind", "append_note", "read_notes",
           "write_notes"]


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
        If the file is not a private regular file, or is too large.
    OSError
    """
    name = note_file(kind)
    if root is None:
        return ""
    got = root.read(name, limit=NOTES_LIMIT, private=True)
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
