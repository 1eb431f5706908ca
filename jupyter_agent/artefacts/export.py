"""Exporting a session to a file: a notebook (``ipynb``), a transcript (``md``) or ``json``.

Every format is rendered from a copy of the record with its secrets redacted, and SVG
figures are redacted as they are read. The Markdown transcript embeds figures as
``data:`` URLs, so the file is self-contained; text from the session is made inert.
``json`` is the one-file record, whose tool messages keep the figure references.

The file appears whole or not at all: the content goes to a temporary file in the target's
folder, is flushed and ``fsync``-ed, then linked to the target name (``os.link`` never
replaces a file, also when two exports race) or, with ``force``, renamed over it. It gets
the permissions of new files (the umask's): an export is made to be shared. The session is
read without its lease.
"""

from __future__ import annotations

import base64
import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from jupyter_agent.artefacts.redact import Redactor, redact_record
from jupyter_agent.artefacts.steps import (
    Call,
    Marker,
    Progress,
    ReadFigure,
    Reply,
    Request,
    facts_line,
    figure_data,
    format_call,
    no_progress,
    session_name,
    steps,
    when,
)
from jupyter_agent.errors import ExportError, ExportExistsError
from jupyter_agent.store import FigureData, SessionRecord
from jupyter_agent.store.figure_files import figure_label
from jupyter_agent.store.records import dump_record
from jupyter_agent.text import fence, inert_markdown

ExportFormat = Literal["ipynb", "md", "json"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("ipynb", "md", "json")


@dataclass(frozen=True)
class Exported:
    """What :func:`export_record` wrote: an absolute ``path``, its ``size`` in bytes, and how
    many distinct key-like strings were ``redacted``."""

    session_id: str
    format: ExportFormat
    path: Path
    size: int
    redacted: int


def choose_format(fmt: str | None, output: str | os.PathLike[str] | None = None) -> ExportFormat:
    """``fmt`` if given, else the suffix of ``output``, else ``ipynb``.

    Raises
    ------
    ValueError
        For an unknown ``fmt``.
    """
    if fmt is not None and fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}: use ipynb, md or json")
    suffix = Path(output).suffix.lower().lstrip(".") if output is not None else ""
    return fmt or (suffix if suffix in EXPORT_FORMATS else "ipynb")


def _figures_md(call: Call, read: ReadFigure | None) -> str:
    shown = []
    for ref in call.figures:
        label = figure_label(ref)
        data, why = figure_data(read, ref)
        if data is None:
            shown.append(f"*{label}: not exported ({why})*")
            continue
        ((media_type, value),) = data.items()
        if media_type == "image/svg+xml":
            value = base64.b64encode(value.encode("utf-8")).decode("ascii")
        shown.append(f"![{label}](data:{media_type};base64,{value})")
    return "\n\n".join(shown)


def _call_md(call: Call, read: ReadFigure | None = None) -> str:
    result = call.result if call.result is not None else "(no result was saved)"
    if call.code is not None:
        label = {"ok": "Result", "error": "Error"}.get(call.outcome, "Not run")
        figures = _figures_md(call, read)  # ours: embedded data, the only images
        return (f"**run_python**\n\n{fence(call.code, 'python')}\n\n"
                f"{label}:\n\n{fence(result, 'text')}" + (f"\n\n{figures}" if figures else ""))
    head = f"**Tool:** `{format_call(call.name, call.arguments)}`"
    if "\n" not in result.strip() and len(result) <= 200:
        return inert_markdown(f"{head} → {result.strip() or '(empty)'}")
    return f"{inert_markdown(head)}\n\n{fence(result, 'text')}"


def _markdown(record: SessionRecord, progress: Progress, figures: ReadFigure | None) -> str:
    parts = [inert_markdown(f"# {session_name(record)}"),
             inert_markdown(f"*{facts_line(record)}*")]
    if record.summary.strip():
        parts += ["## Summary", inert_markdown(record.summary.strip())]
    parts.append("---")
    for step in steps(record, progress):
        if isinstance(step, Request):
            parts += [f"## Request {step.turn}", inert_markdown(step.text) or "*(empty)*"]
        elif isinstance(step, Reply):
            parts.append(f"**Assistant:**\n\n{inert_markdown(step.text)}")
        elif isinstance(step, Call):
            parts.append(_call_md(step, figures))
        elif isinstance(step, Marker):
            c = step.compaction
            text = (f"**Context compacted** at {when(c.at)}: {c.replaced} earlier messages were "
                    f"replaced, in what the model is sent, by this summary (this transcript "
                    f"keeps them all):\n\n{c.summary}")
            parts.append(inert_markdown("\n".join(f"> {line}".rstrip()
                                                   for line in text.strip().splitlines())))
    return "\n\n".join(parts) + "\n"


def render(record: SessionRecord, fmt: ExportFormat, *, secrets: Iterable[str] = (),
           progress: Progress = no_progress,
           figures: ReadFigure | None = None) -> tuple[bytes, int]:
    """The UTF-8 bytes of ``record`` as ``fmt`` and how many distinct secrets were redacted.

    ``secrets`` are exact values to redact besides key-shaped strings; ``progress`` wraps
    the walk over the transcript; ``figures`` reads the session's figures (without it each
    figure is named with a note).
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
        data = _markdown(clean, progress, figures).encode("utf-8")
    else:
        # nbformat takes seconds to import: only for a notebook
        from jupyter_agent.artefacts.ipynb import render_notebook

        data = render_notebook(clean, progress, figures=figures).encode("utf-8")
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

    Raises
    ------
    ExportExistsError
        ``path`` exists and ``force`` is false; it is left untouched.
    ExportError
        No such folder, ``path`` is a directory, or the write failed; nothing is left.
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

    ``output`` is the file, or a folder for ``session-<ID>.<format>`` (default: that name
    in ``cwd``, the working directory by default); ``fmt`` defaults to its suffix, else
    ``ipynb``. The other parameters are :func:`render`'s.

    Raises
    ------
    ValueError
        For an unknown format.
    ExportExistsError
        Before anything is rendered, when the file exists and ``force`` is false.
    ExportError
        When the file cannot be written or, before rendering, when ``fmt`` and the file
        name's suffix name different formats.
    """
    chosen = choose_format(fmt, output)
    base, name = Path(os.getcwd() if cwd is None else cwd), f"session-{record.id}.{chosen}"
    path = base / Path(output).expanduser() if output is not None else base / name
    path = path / name if output is not None and path.is_dir() else path
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
