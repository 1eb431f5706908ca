"""Exporting a session to a file: ``ipynb``, ``md`` or ``json``.

* ``ipynb``: a notebook that replays the analysis (:mod:`~jupyter_agent.artefacts.notebook`);
* ``md``: a readable transcript with compaction markers (:mod:`~jupyter_agent.artefacts.markdown`);
* ``json``: the whole record in the one-file shape of the first storage format
  (:func:`~jupyter_agent.store.records.dump_record`), for other tools.

The figures a session's code made are read from its store through the
``figures`` reader: the notebook shows them as its code cells' image outputs, the
Markdown embeds them; the JSON keeps their references (see
:mod:`~jupyter_agent.artefacts.figures`).

Every format is rendered from a copy of the record in which secrets are redacted
(:mod:`~jupyter_agent.artefacts.redact`), and SVG figures are redacted as they are read.
Exporting reads the session without its lease, so a session another kernel is running can
be exported.

Writing (:func:`write_export`): the file appears whole or not at all -- the content
goes to a temporary file in the target's folder, is flushed and ``fsync``-ed, then
linked to the target name, which fails if the name exists (``os.link`` never replaces
anything), or renamed over it with ``force``. An existing file is therefore never
replaced without ``force``, also when two exports race for one name. The file gets
the usual permissions of new files (the umask's), since an export is made to be shared.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from jupyter_agent.artefacts.figures import ReadFigure
from jupyter_agent.artefacts.redact import Redactor, redact_record
from jupyter_agent.artefacts.steps import Progress, no_progress
from jupyter_agent.errors import ExportError, ExportExistsError
from jupyter_agent.store import FigureData, SessionRecord
from jupyter_agent.store.records import dump_record

__all__ = [
    "EXPORT_FORMATS",
    "ExportFormat",
    "Exported",
    "choose_format",
    "default_filename",
    "export_record",
    "render",
    "resolve_output",
    "write_export",
]

ExportFormat = Literal["ipynb", "md", "json"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("ipynb", "md", "json")


@dataclass(frozen=True)
class Exported:
    """What :func:`export_record` wrote.

    Attributes
    ----------
    session_id : str
    format : {"ipynb", "md", "json"}
    path : pathlib.Path
        The file written (absolute).
    size : int
        Its size in bytes.
    redacted : int
        How many distinct key-like strings were replaced by ``[redacted]``.
    """

    session_id: str
    format: ExportFormat
    path: Path
    size: int
    redacted: int


def choose_format(fmt: str | None, output: str | os.PathLike[str] | None = None) -> ExportFormat:
    """The export format: ``fmt`` if given, else the suffix of ``output``, else ``ipynb``.

    Raises
    ------
    ValueError
        For a ``fmt`` that is not one of :data:`EXPORT_FORMATS`.
    """
    if fmt is not None:
        for known in EXPORT_FORMATS:
            if fmt == known:
                return known
        raise ValueError(f"unknown export format {fmt!r}: use ipynb, md or json")
    suffix = Path(output).suffix.lower().lstrip(".") if output is not None else ""
    return next((known for known in EXPORT_FORMATS if suffix == known), "ipynb")


def default_filename(session_id: str, fmt: ExportFormat) -> str:
    """``session-<ID>.<format>``."""
    return f"session-{session_id}.{fmt}"


def resolve_output(output: str | os.PathLike[str] | None, session_id: str, fmt: ExportFormat,
                   cwd: str | os.PathLike[str]) -> Path:
    """Where an export goes.

    Parameters
    ----------
    output : path-like or None
        ``None``: :func:`default_filename` in ``cwd``; an existing directory: that name
        inside it; otherwise the file itself. ``~`` is expanded; relative paths are
        taken from ``cwd``.
    session_id : str
    fmt : {"ipynb", "md", "json"}
    cwd : path-like

    Returns
    -------
    pathlib.Path
        An absolute path.
    """
    base = Path(cwd)
    if output is None:
        return base / default_filename(session_id, fmt)
    path = Path(output).expanduser()
    path = path if path.is_absolute() else base / path
    return path / default_filename(session_id, fmt) if path.is_dir() else path


def render(record: SessionRecord, fmt: ExportFormat, *, secrets: Iterable[str] = (),
           progress: Progress = no_progress,
           figures: ReadFigure | None = None) -> tuple[bytes, int]:
    """The bytes of ``record`` exported as ``fmt``, with secrets redacted (see
    :mod:`~jupyter_agent.artefacts.redact`: every decoded string the cells are made of,
    tool-call arguments included, and the text of SVG figures).

    Parameters
    ----------
    record : SessionRecord
    fmt : {"ipynb", "md", "json"}
    secrets : iterable of str
        Exact values to redact besides key-shaped strings.
    progress : Progress, optional
        Wraps the walk over the transcript (``ipynb`` and ``md``).
    figures : callable, optional
        ``figures(figure_id) -> FigureData``: reads the session's figures (``ipynb``
        and ``md``); without it each figure is named with a note.

    Returns
    -------
    (bytes, int)
        UTF-8 content, and how many distinct secrets were redacted.
    """
    redactor = Redactor(secrets)
    clean, _ = redact_record(record, redactor=redactor)
    if figures is not None:
        read = figures

        def figures(figure_id: str) -> FigureData:
            return redactor.figure(read(figure_id))
    if fmt == "json":
        data = dump_record(clean)
    elif fmt == "md":
        from jupyter_agent.artefacts.markdown import render_markdown

        data = render_markdown(clean, progress, figures=figures).encode("utf-8")
    else:
        import nbformat

        from jupyter_agent.artefacts.notebook import render_notebook

        text = nbformat.writes(render_notebook(clean, progress, figures=figures)) + "\n"
        data = text.encode("utf-8")
    return data, len(redactor.found)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_export(path: Path, data: bytes, *, force: bool = False) -> None:
    """Write ``data`` to ``path`` whole or not at all (see the module docstring).

    Parameters
    ----------
    path : pathlib.Path
    data : bytes
    force : bool
        Replace an existing file.

    Raises
    ------
    ExportExistsError
        ``path`` exists and ``force`` is false; it is left untouched.
    ExportError
        The folder does not exist, ``path`` is a directory, or the write failed
        (naming the reason); nothing is left behind.
    """
    folder = path.parent
    if not folder.is_dir():
        raise ExportError(path, f"the folder {folder} does not exist")
    if path.is_dir():
        raise ExportError(path, "it is a directory")
    if not force and os.path.lexists(path):
        raise ExportExistsError(path)
    tmp = folder / f".{path.name}.{os.urandom(4).hex()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if force:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise ExportExistsError(path) from None
        _fsync_dir(folder)
    except OSError as err:
        raise ExportError(path, err.strerror or str(err)) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def export_record(record: SessionRecord, fmt: str | None = None,
                  output: str | os.PathLike[str] | None = None, *, force: bool = False,
                  cwd: str | os.PathLike[str] | None = None, secrets: Iterable[str] = (),
                  progress: Progress = no_progress,
                  figures: ReadFigure | None = None) -> Exported:
    """Export a session record to a file.

    Parameters
    ----------
    record : SessionRecord
    fmt : {"ipynb", "md", "json"}, optional
        Default: from the suffix of ``output``, else ``ipynb``.
    output : path-like, optional
        The file, or a folder for ``session-<ID>.<format>``; default that name in
        ``cwd``.
    force : bool
        Replace an existing file.
    cwd : path-like, optional
        Where relative paths start; default the current working directory.
    secrets : iterable of str
        Exact values to redact besides key-shaped strings (see
        :func:`~jupyter_agent.artefacts.redact.secrets_from_environ`).
    progress : Progress, optional
    figures : callable, optional
        Reads the session's figures (see :func:`render`).

    Returns
    -------
    Exported

    Raises
    ------
    ValueError
        For an unknown format.
    ExportExistsError
        Before anything is rendered, when the file exists and ``force`` is false.
    ExportError
        When the file cannot be written, or, before anything is rendered, when ``fmt``
        and the suffix of the file name name different formats.
    """
    chosen = choose_format(fmt, output)
    path = resolve_output(output, record.id, chosen, os.getcwd() if cwd is None else cwd)
    suffix = path.suffix.lower().lstrip(".")
    if suffix in EXPORT_FORMATS and suffix != chosen:  # e.g. a notebook named out.md
        raise ExportError(path, f"the format is {chosen} but the file name ends in "
                                f".{suffix}: name it {path.stem}.{chosen} or use --format "
                                f"{suffix}")
    if not force and os.path.lexists(path):
        raise ExportExistsError(path)
    data, redacted = render(record, chosen, secrets=secrets, progress=progress,
                           figures=figures)
    write_export(path, data, force=force)
    return Exported(record.id, chosen, path, len(data), redacted)
