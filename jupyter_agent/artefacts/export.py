"""Exporting a session to a file: a notebook (``ipynb``), a transcript (``md``) or ``json``.

Every format is rendered from a copy of the record with its secrets redacted (SVG figures
as they are read); text from the session is made inert. The Markdown transcript embeds
figures as ``data:`` URLs; ``json`` is the one-file record. The notebook replays the
analysis without running it: each ``run_python`` call that ran is a code cell with the
outputs it got then (figures as ``display_data`` among the printed lines; ``stderr`` and
tagged ``raises-exception`` when it failed); its metadata never holds an endpoint or a key.

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
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from jupyter_agent.artefacts.redact import Redactor, redact_record
from jupyter_agent.artefacts.steps import (
    SYNTHETIC_PREFIX,
    Call,
    Marker,
    Progress,
    ReadFigure,
    Reply,
    Request,
    figure_data,
    format_call,
    no_progress,
    steps,
    turn_starts,
)
from jupyter_agent.errors import ExportError, ExportExistsError
from jupyter_agent.store import SessionRecord
from jupyter_agent.store.messages import figure_label
from jupyter_agent.store.records import dump_record, utc_now
from jupyter_agent.text import fence, inert_markdown, plural

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
    """``fmt`` if given, else the suffix of ``output``, else ``ipynb``; ``ValueError`` for an
    unknown ``fmt``."""
    if fmt is not None and fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r}: use ipynb, md or json")
    suffix = Path(output).suffix.lower().lstrip(".") if output is not None else ""
    return fmt or (suffix if suffix in EXPORT_FORMATS else "ipynb")


def _call_md(call: Call, read: ReadFigure | None) -> str:
    result = call.result if call.result is not None else "(no result was saved)"
    if call.code is None:
        head = f"**Tool:** `{format_call(call.name, call.arguments)}`"
        if "\n" not in result.strip() and len(result) <= 200:
            return inert_markdown(f"{head} → {result.strip() or '(empty)'}")
        return f"{inert_markdown(head)}\n\n{fence(result, 'text')}"
    outcome = {"ok": "Result", "error": "Error"}.get(call.outcome, "Not run")
    parts = [f"**run_python**\n\n{fence(call.code, 'python')}\n\n{outcome}:\n\n"
             f"{fence(result, 'text')}"]
    for ref in call.figures:  # ours: embedded data, the only images
        label = figure_label(ref)
        data, why = figure_data(read, ref)
        if data is None:
            parts.append(f"*{label}: not exported ({why})*")
            continue
        ((media_type, value),) = data.items()
        if media_type == "image/svg+xml":
            value = base64.b64encode(value.encode("utf-8")).decode("ascii")
        parts.append(f"![{label}](data:{media_type};base64,{value})")
    return "\n\n".join(parts)


def _markdown(record: SessionRecord, progress: Progress, figures: ReadFigure | None) -> str:
    parts = [inert_markdown(f"# {record.title.strip() or f'Session {record.id}'}"),
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
            text = (f"**Context compacted** at {c.at:%Y-%m-%d %H:%M} UTC: {c.replaced} earlier "
                    f"messages were replaced, in what the model is sent, by this summary (this "
                    f"transcript keeps them all):\n\n{c.summary}")
            parts.append(inert_markdown("\n".join(f"> {line}".rstrip()
                                                   for line in text.strip().splitlines())))
    return "\n\n".join(parts) + "\n"


def facts_line(record: SessionRecord) -> str:
    """One Markdown line: ID, model, dates, requests, tool calls, tokens and cost, parent."""
    state = record.state
    parts = [f"jupyter-agent session `{record.id}`"]
    if state.model:
        parts.append(f"model `{state.model}`")
    parts += [f"created {record.created_at:%Y-%m-%d %H:%M} UTC",
              f"updated {record.updated_at:%Y-%m-%d %H:%M} UTC",
              plural(len(turn_starts(record.transcript)), "request"),
              plural(state.tool_calls, "tool call")]
    if state.usage.calls:
        cost = "price unknown" if state.usage.price_unknown else f"${state.usage.cost_usd:.4f}"
        parts.append(f"{state.usage.input_tokens + state.usage.output_tokens:,} tokens, {cost}")
    if record.parent is not None:
        after = f" after request {record.parent.turn}" if record.parent.turn else ""
        parts.append(f"forked from `{record.parent.session_id}`{after}")
    return " · ".join(parts)


READING_NOTE = (
    "*This notebook replays an agent session: your requests and the agent's replies are "
    "Markdown cells, and each piece of Python the agent ran is a code cell showing the "
    "output it got then. Run the notebook top to bottom to compute everything again. "
    "Variables you defined outside the agent are not part of it.*"
)

def _markdown_text(text: str) -> str:
    # inert, and kept from showing amounts of money ($5 and $10) as TeX
    text = inert_markdown(text)
    if re.search(r"\$\d", text):
        return f'<div class="mathjax_ignore tex2jax_ignore">\n\n{text}\n\n</div>'
    return text


def _outputs(call: Call, read: ReadFigure | None) -> list[dict[str, Any]]:
    # the printed text cut at the lines naming its figures (``[figure N: ...]``), each
    # figure where it is named; one whose line is missing last
    result = call.result or ""
    name = "stderr" if call.outcome == "error" else "stdout"
    pending = list(call.figures)
    pieces: list[list[str] | dict[str, Any]] = []
    for line in ("" if result.strip() == "(no output)" else result).splitlines(keepends=True):
        ref = next((r for r in pending if line.startswith(f"[figure {r.get('n')}:")), None)
        if ref is not None:
            pending.remove(ref)
            pieces.append(ref)
        elif pieces and isinstance(pieces[-1], list):
            pieces[-1].append(line)
        else:
            pieces.append([line])
    outputs: list[dict[str, Any]] = []
    for piece in [*pieces, *pending]:
        if isinstance(piece, list):
            text = "".join(piece)
            if text.strip():
                text = text if text.endswith("\n") else text + "\n"
                outputs.append({"output_type": "stream", "name": name, "text": text})
            continue
        label = f"[{figure_label(piece)}]"
        data, why = figure_data(read, piece)
        if data is None:
            outputs.append({"output_type": "stream", "name": name,
                            "text": f"{label} (not exported: {why})\n"})
        else:
            outputs.append({"output_type": "display_data", "data": {**data, "text/plain": label},
                            "metadata": {"jupyter_agent": {"figure": piece}}})
    return outputs


def _tools_text(calls: list[Call]) -> str:
    lines = []
    for call in calls:
        first = (call.result or "").strip().splitlines() or ["(no result)"]
        more = " …" if len(first) > 1 else ""
        lines.append(f"- `{format_call(call.name, call.arguments, limit=60)}` → "
                     f"{first[0][:120]}{more}")
    body = inert_markdown("\n".join(lines))
    return f"<small>\n\n*Agent tools:*\n\n{body}\n\n</small>"


def _cell(source: str, **fields: Any) -> dict[str, Any]:
    """A markdown cell, or with ``outputs`` a code cell (an ID as nbformat makes it)."""
    kind = {"cell_type": "code", "execution_count": None} if "outputs" in fields else {
        "cell_type": "markdown"}
    return {"id": uuid.uuid4().hex[:8], **kind, "metadata": {}, "source": source, **fields}


def render_notebook(record: SessionRecord, progress: Progress, figures: ReadFigure | None) -> str:
    """The text of a version 4 notebook, checked once with ``nbformat.validate`` (whose error
    would be a bug here, never a record the store wrote)."""
    from nbformat import from_dict, validate, writes  # over a second to import

    head = [f"# {record.title.strip() or f'Session {record.id}'}", f"*{facts_line(record)}*"]
    if record.summary.strip():
        head += ["**Summary**", record.summary.strip().replace("\n", "  \n")]
    head.append(READING_NOTE)
    cells = [_cell(_markdown_text("\n\n".join(head)))]
    tools: list[Call] = []
    for step in steps(record, progress):
        code = step.code if isinstance(step, Call) else None
        if isinstance(step, Call) and code is None:
            tools.append(step)
            continue
        if tools:
            cells.append(_cell(_tools_text(tools)))
            tools = []
        if isinstance(step, Request):
            cells.append(_cell(
                _markdown_text(f"## Request {step.turn}\n\n{step.text or '*(empty)*'}")))
        elif isinstance(step, Reply):
            cells.append(_cell(_markdown_text(step.text)))
        elif isinstance(step, Call) and code is not None:
            if step.outcome in ("ok", "error"):
                tags = {"tags": ["raises-exception"]} if step.outcome == "error" else {}
                cells.append(_cell(code, outputs=_outputs(step, figures), metadata={
                    "jupyter_agent": {"tool_call_id": step.id, "outcome": step.outcome}, **tags}))
            else:
                why = (step.result or "").strip() or "no result was saved"
                why = why.removeprefix("error: ").removeprefix(SYNTHETIC_PREFIX)
                cells.append(_cell(inert_markdown(
                    f"*The agent's code below did not run: {why.splitlines()[0][:200]}*\n\n"
                    f"{fence(code, 'python')}")))
    if tools:
        cells.append(_cell(_tools_text(tools)))
    parent = None if record.parent is None else record.parent.model_dump(mode="json")
    notebook = from_dict({"nbformat": 4, "nbformat_minor": 5, "cells": cells, "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                       "language": "python"},
        "language_info": {"name": "python"},
        "jupyter_agent": {
            "session_id": record.id, "title": record.title, "model": record.state.model,
            "parent": parent, "created_at": record.created_at.isoformat(),
            "updated_at": record.updated_at.isoformat(), "exported_at": utc_now().isoformat()}}})
    validate(notebook)  # once: nbformat's cell helpers check each cell again, a third of the time
    return writes(notebook) + "\n"


def render(record: SessionRecord, fmt: ExportFormat, *, secrets: Iterable[str] = (),
           progress: Progress = no_progress,
           figures: ReadFigure | None = None) -> tuple[bytes, int]:
    """The UTF-8 bytes of ``record`` as ``fmt`` and how many distinct secrets were redacted.

    ``secrets`` are exact values to redact besides key-shaped strings; ``progress`` wraps
    the walk over the transcript; ``figures`` reads the session's figures (without it each
    figure is named with a note).
    """
    redactor = Redactor(secrets)
    clean = redact_record(record, redactor)
    read = None if figures is None else lambda figure_id: redactor.figure(figures(figure_id))
    if fmt == "json":
        return dump_record(clean), len(redactor.found)
    text = (_markdown if fmt == "md" else render_notebook)(clean, progress, read)
    return text.encode("utf-8"), len(redactor.found)


def export_record(record: SessionRecord, fmt: str | None = None,
                  output: str | os.PathLike[str] | None = None, *, force: bool = False,
                  cwd: str | os.PathLike[str] | None = None, secrets: Iterable[str] = (),
                  progress: Progress = no_progress,
                  figures: ReadFigure | None = None) -> Exported:
    """Export a session record to a file, whole or not at all (see the module docstring).

    ``output`` is the file, or a folder for ``session-<ID>.<format>`` (default: that name
    in ``cwd``, the working directory by default); ``fmt`` defaults to its suffix, else
    ``ipynb``. The other parameters are :func:`render`'s.

    Raises
    ------
    ValueError
        For an unknown format.
    ExportExistsError
        Before anything is rendered, when the file exists and ``force`` is false; it is
        left untouched.
    ExportError
        Before rendering, when ``fmt`` and the file name's suffix name different formats,
        the folder does not exist or the file is a directory; or when the write failed
        (nothing is left).
    """
    chosen = choose_format(fmt, output)
    base, name = Path(os.getcwd() if cwd is None else cwd), f"session-{record.id}.{chosen}"
    path = base / Path(output).expanduser() if output is not None else base / name
    path = path / name if output is not None and path.is_dir() else path
    suffix, folder = path.suffix.lower().lstrip("."), path.parent
    if suffix in EXPORT_FORMATS and suffix != chosen:  # e.g. a notebook named out.md
        raise ExportError(path, f"the format is {chosen} but the file name ends in "
                                f".{suffix}: name it {path.stem}.{chosen} or use --format "
                                f"{suffix}")
    if not folder.is_dir():
        raise ExportError(path, f"the folder {folder} does not exist")
    if path.is_dir():
        raise ExportError(path, "it is a directory")
    if not force and os.path.lexists(path):
        raise ExportExistsError(path)
    data, redacted = render(record, chosen, secrets=secrets, progress=progress,
                           figures=figures)
    tmp = folder / f".{path.name}.{os.urandom(4).hex()}.tmp"
    try:
        with open(tmp, "xb") as handle:  # exclusive, the umask's permissions, not inherited
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
        with contextlib.suppress(OSError):  # the link or rename is durable
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    except OSError as err:
        raise ExportError(path, err.strerror or str(err)) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return Exported(record.id, chosen, path, len(data), redacted)
