"""Figures kept with a session: checks, and the files ``sessions/<id>.figures/<fig>.<ext>``.

A figure is a PNG, JPEG or SVG of at most :data:`MAX_FIGURE_BYTES`, written atomically under
the session's lease and read without following links.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_agent.errors import FigureNotFoundError, InvalidFigureError
from jupyter_agent.images import FORMAT_NAMES, MEDIA_TYPES, pixel_problem, sniff_media_type
from jupyter_agent.store.files import SafeDir, is_temp_name
from jupyter_agent.store.records import SESSION_ID_PATTERN

#: The largest figure a store keeps, in bytes.
MAX_FIGURE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class FigureData:
    """A saved figure's file."""

    data: bytes
    media_type: str


def validate_figure_id(figure_id: object) -> str:
    """Return ``figure_id`` if it can name a figure file (1-128 letters, digits, ``_``,
    ``-``), else raise :class:`~jupyter_agent.errors.InvalidFigureError`."""
    if not isinstance(figure_id, str) or not SESSION_ID_PATTERN.fullmatch(figure_id):
        raise InvalidFigureError(figure_id, "its ID must be 1-128 letters, digits, '_' or '-'")
    return figure_id


def check_figure(figure_id: object, data: object, media_type: object) -> None:
    """Check a figure before it is saved: ``InvalidFigureError`` for a bad
    ID, a type not PNG, JPEG or SVG, bytes not of that type, more than
    :data:`MAX_FIGURE_BYTES` or :data:`~jupyter_agent.images.MAX_IMAGE_PIXELS`."""
    validate_figure_id(figure_id)
    if media_type not in MEDIA_TYPES:
        raise InvalidFigureError(figure_id, f"media type {media_type!r} is not one of "
                                            f"{', '.join(MEDIA_TYPES)}")
    if not isinstance(data, bytes):
        raise InvalidFigureError(figure_id, "its data must be bytes")
    if len(data) > MAX_FIGURE_BYTES:
        raise InvalidFigureError(figure_id, f"it has {len(data):,} bytes, more than the "
                                            f"{MAX_FIGURE_BYTES:,} a session keeps")
    if sniff_media_type(data) != media_type:
        raise InvalidFigureError(figure_id, f"its bytes are not {media_type}")
    problem = pixel_problem(data, str(media_type))
    if problem:
        raise InvalidFigureError(figure_id, problem)


def figure_refs(messages: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The figure references of ``messages`` (the objects with a string ``id`` in their
    ``figures`` lists), in order; malformed entries are skipped."""
    for message in messages:
        refs = message.get("figures")
        for ref in refs if isinstance(refs, list) else ():
            if isinstance(ref, dict) and isinstance(ref.get("id"), str):
                yield ref


def figure_label(ref: dict[str, Any]) -> str:
    """``figure 2: PNG, 640×480 px`` for a reference (size left out when unknown)."""
    kind = FORMAT_NAMES.get(str(ref.get("media_type")), "image")
    width, height = ref.get("width"), ref.get("height")
    size = f", {width}×{height} px" if isinstance(width, int) and isinstance(height, int) else ""
    return f"figure {ref.get('n', '?')}: {kind}{size}"


# --------------------------------------------------------------------------- the files
def figures_dir(session_id: str) -> str:
    return f"{session_id}.figures"


def figure_file(figure_id: str, media_type: str) -> str:
    """The file name of a figure in its directory (``<id>.png``)."""
    return f"{figure_id}.{MEDIA_TYPES[media_type]}"


def _names(figure_id: str) -> list[tuple[str, str]]:
    return [(figure_file(figure_id, mt), mt) for mt in MEDIA_TYPES]


def _open_dir(sessions: SafeDir, session_id: str, *,
              create: bool) -> AbstractContextManager[SafeDir | None]:
    found = sessions.subdir(figures_dir(session_id), create=create, what="figures directory")
    return found or contextlib.nullcontext()


def write_figure_file(sessions: SafeDir, session_id: str, figure_id: str, data: bytes,
                      media_type: str) -> None:
    """Write a figure atomically (call under the session's lease); a file of the same
    figure in another format is removed."""
    with _open_dir(sessions, session_id, create=True) as folder:
        assert folder is not None
        name = figure_file(figure_id, media_type)
        folder.write_atomic(name, data, private=True)
        for other, _ in _names(figure_id):
            if other != name and folder.lstat(other) is not None:
                folder.unlink(other)
        folder.fsync()


def read_figure_file(at: tuple[SafeDir, SafeDir], session_id: str,
                     figure_id: str) -> FigureData:
    """A figure's bytes (never through a link; the file store's ``_get_figure``):
    ``FigureNotFoundError`` when it has no file, ``UnsafePathError`` for anything but a
    private regular file (directory), ``TooLargeError`` over :data:`MAX_FIGURE_BYTES`."""
    with _open_dir(at[1], session_id, create=False) as folder:
        if folder is not None:
            for name, media_type in _names(figure_id):
                got = folder.read(name, limit=MAX_FIGURE_BYTES, private=True, what="figure")
                if got is not None:
                    return FigureData(got[0], media_type)
    raise FigureNotFoundError(session_id, figure_id, at[1].child(figures_dir(session_id)))


def list_figure_ids(at: tuple[SafeDir, SafeDir], session_id: str) -> list[str]:
    """The IDs of the figure files a session has, sorted (temporary files left out); ``at``
    is the memory directory and ``sessions/`` (the file store's ``_figure_ids``)."""
    with _open_dir(at[1], session_id, create=False) as folder:
        if folder is None:
            return []
        ids = set()
        for name in folder.names():
            stem, dot, suffix = name.rpartition(".")
            if dot and not is_temp_name(name) and suffix in MEDIA_TYPES.values() \
                    and SESSION_ID_PATTERN.fullmatch(stem):
                ids.add(stem)
        return sorted(ids)


def remove_figure_file(sessions: SafeDir, session_id: str, figure_id: str) -> bool:
    """Delete a figure's file (call under the lease); whether there was one."""
    with _open_dir(sessions, session_id, create=False) as folder:
        if folder is None:
            return False
        removed = [folder.unlink(name) for name, _ in _names(figure_id)]
        folder.fsync()
        return any(removed)


def remove_figure_temps(sessions: SafeDir, session_id: str) -> list[Path]:
    """Remove temporary files killed writers left in a session's figures directory
    (call under its lease)."""
    with _open_dir(sessions, session_id, create=False) as folder:
        if folder is None:
            return []
        return [folder.child(n) for n in folder.names() if is_temp_name(n) and folder.unlink(n)]


def remove_figures_dir(sessions: SafeDir, session_id: str) -> list[Path]:
    """Remove a session's figures directory and its files (call under the lease).

    A link or other non-directory in its place is removed itself (never followed); a
    subdirectory inside is left, and so is the directory then. ``UnsafeDirectoryError``
    (nothing removed) for another owner's directory or one others may write to.
    """
    name = figures_dir(session_id)
    st = sessions.lstat(name)
    if st is None:
        return []
    if not stat.S_ISDIR(st.st_mode):
        sessions.unlink(name)
        sessions.fsync()
        return [sessions.child(name)]
    removed: list[Path] = []
    with _open_dir(sessions, session_id, create=False) as folder:
        if folder is None:
            return removed
        for entry in folder.names():
            entry_st = folder.lstat(entry)
            if entry_st is not None and not stat.S_ISDIR(entry_st.st_mode) \
                    and folder.unlink(entry):
                removed.append(folder.child(entry))
        folder.fsync()
    try:
        os.rmdir(name, dir_fd=sessions.fd)
    except OSError as err:
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
            raise
    else:
        removed.append(sessions.child(name))
    sessions.fsync()
    return removed
