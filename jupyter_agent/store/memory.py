"""MemoryStore: the notes of a memory directory, for any store backend.

Notes (``project.md``, ``user.md``) always live in the memory directory, whatever keeps
the sessions: the JSON-file backend and a database backend both hold a
:class:`MemoryStore` for them. Everything is read and written through the no-follow
primitives (``files.py``) and the notes lock (``notes.py``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from jupyter_agent.store import notes
from jupyter_agent.store.base import NoteKind
from jupyter_agent.store.files import SafeDir
from jupyter_agent.store.session_files import storage_errors

__all__ = ["MemoryStore"]


class MemoryStore:
    """The notes of one memory directory. Constructing one does no I/O.

    Parameters
    ----------
    root : str or os.PathLike
        The memory directory (``~`` is expanded); created (0700) by the first write.

    Attributes
    ----------
    root : pathlib.Path
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    @contextlib.contextmanager
    def _root(self, *, create: bool) -> Iterator[SafeDir | None]:
        with storage_errors(self.root, reading=not create):
            root = SafeDir.open(self.root, create=create)
        if root is None:
            yield None
            return
        with root:
            yield root

    @contextlib.contextmanager
    def _writing(self, kind: NoteKind) -> Iterator[SafeDir]:
        path = self.notes_path(kind)
        with self._root(create=True) as root, storage_errors(path):
            assert root is not None
            yield root

    def notes_path(self, kind: NoteKind) -> Path:
        """``project.md`` or ``user.md`` in the memory directory.

        Raises
        ------
        ValueError
            For any other ``kind``.
        """
        return self.root / notes.note_file(kind)

    def read_notes(self, kind: NoteKind) -> str:
        """The notes of ``kind`` ("" when there are none); bytes that are not UTF-8 become
        U+FFFD.

        Parameters
        ----------
        kind : {"project", "user"}

        Returns
        -------
        str

        Raises
        ------
        ValueError
            For any other ``kind``.
        UnsafeFileError
            If the file is a link, FIFO, device, ..., is not yours, is writable by group or
            others, or is larger than 4 MiB (it is not read).
        UnsafeDirectoryError
            If the memory directory may not be used.
        OSError
            If the file exists but cannot be read.
        """
        notes.note_file(kind)
        with self._root(create=False) as root, storage_errors(self.notes_path(kind),
                                                             reading=True):
            return notes.read_notes(root, kind)

    def write_notes(self, kind: NoteKind, text: str) -> None:
        """Replace the notes of ``kind`` (under the notes lock, atomically; file 0600).

        Parameters
        ----------
        kind : {"project", "user"}
        text : str
            The whole new content (lone surrogates become U+FFFD).

        Raises
        ------
        ValueError, UnsafeFileError, UnsafeDirectoryError, StoreBusyError
        StorageError
            If the write fails; the previous notes are then intact.
        """
        with self._writing(kind) as root:
            notes.write_notes(root, kind, text)

    def append_note(self, kind: NoteKind, line: str) -> None:
        """Append one line (whitespace collapsed, as a ``- `` list item) to the notes.

        A read-modify-write under the notes lock: notes appended by several processes at
        once are all kept.

        Parameters
        ----------
        kind : {"project", "user"}
        line : str

        Raises
        ------
        As :meth:`write_notes`.
        """
        with self._writing(kind) as root:
            notes.append_note(root, kind, line)
