"""Exporting a session to a notebook (``ipynb``), a Markdown transcript (``md``) or ``json``
(docs/design.md "Forks, exports and search").

Every format is rendered from a copy of the record with its secrets redacted; text from the
session is made inert; the notebook's metadata never holds an endpoint or a key. The
Markdown transcript is the notebook's cells in one file, figures as ``data:`` URLs.

The file is written to a temporary file, ``fsync``-ed, then linked to the target name
(``os.link`` never replaces a file, also when two exports race) or, with ``force``, renamed
over it. It gets the umask's permissions: an export is made to be shared.
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
    tool_result_sections,
    turn_starts,
)
from jupyter_agent.errors import ExportError, ExportExistsError
from jupyter_agent.store import SessionRecord
from jupyter_agent.store.messages import figure_label
from jupyter_agent.store.records import dump_record, utc_now
from jupyter_agent.text import code_span, fence, inert_markdown, plural

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


def _stream(name: str, text: str) -> list[dict[str, Any]]:
    if not text.strip():
        return []
    return [{"output_type": "stream", "name": name, "text": text.rstrip("\n") + "\n"}]


def _figure(ref: dict[str, Any], read: ReadFigure | None) -> list[dict[str, Any]]:
    label = f"[{figure_label(ref)}]"
    data, why = figure_data(read, ref)
    if data is None:
        return _stream("stdout", f"{label} (not exported: {why})")
    return [{"output_type": "display_data", "data": {**data, "text/plain": label},
             "metadata": {"jupyter_agent": {"figure": ref}}}]


def _outputs(call: Call, read: ReadFigure | None) -> list[dict[str, Any]]:
    # each section as Jupyter shows it; each figure where its "[figure N: ...]" line is,
    # one whose line is missing last
    pending = list(call.figures)
    outputs: list[dict[str, Any]] = []
    for kind, body in tool_result_sections(call.result or "", call.outcome == "ok"):
        if kind == "result":
            outputs.append({"output_type": "execute_result", "execution_count": None,
                            "data": {"text/plain": body}, "metadata": {}})
            continue
        name, text = "stdout" if kind == "output" else "stderr", ""
        for line in ("" if body.strip() == "(no output)" else body).splitlines(keepends=True):
            ref = next((r for r in pending if line.startswith(f"[figure {r.get('n')}:")), None)
            if ref is None:
                text += line
                continue
            pending.remove(ref)
            outputs += _stream(name, text) + _figure(ref, read)
            text = ""
        outputs += _stream(name, text)
    return outputs + [out for ref in pending for out in _figure(ref, read)]


def _tools_text(calls: list[Call]) -> str:
    lines = ["*Agent tools:*", ""]
    for call in calls:
        first = (call.result or "").strip().splitlines() or ["(no result)"]
        more = " …" if len(first) > 1 else ""
        lines.append(f"- {code_span(format_call(call.name, call.arguments, limit=60))} → "
                     f"{code_span(first[0][:120])}{more}")
    return "\n".join(lines)


def _cell(source: str, **fields: Any) -> dict[str, Any]:
    """A markdown cell, or with ``outputs`` a code cell (an ID as nbformat makes it)."""
    kind = {"cell_type": "code", "execution_count": None} if "outputs" in fields else {
        "cell_type": "markdown"}
    return {"id": uuid.uuid4().hex[:8], **kind, "metadata": {}, "source": source, **fields}


def _cells(record: SessionRecord, progress: Progress,
           read: ReadFigure | None) -> list[dict[str, Any]]:
    # the head (title, facts, summary), then each step; calls other than code are listed
    # in one cell after their run
    head = [f"# {record.title.strip() or f'Session {record.id}'}", f"*{facts_line(record)}*"]
    if record.summary.strip():
        head += ["**Summary**", record.summary.strip().replace("\n", "  \n")]
    cells = [_cell("\n\n".join(inert_markdown(part, maths=False) for part in head))]
    tools: list[Call] = []
    for step in steps(record.transcript, record.compactions, progress):
        code = step.code if isinstance(step, Call) else None
        if isinstance(step, Call) and code is None:
            tools.append(step)
            continue
        if tools:
            cells.append(_cell(_tools_text(tools)))
            tools = []
        if isinstance(step, Request):
            text = inert_markdown(step.text, maths=False) or "*(empty)*"
            cells.append(_cell(f"## Request {step.turn}\n\n{text}"))
        elif isinstance(step, Reply):
            cells.append(_cell(inert_markdown(step.text, maths=False)))
        elif isinstance(step, Marker):
            c = step.compaction
            text = (f"**Context compacted** at {c.at:%Y-%m-%d %H:%M} UTC: {c.replaced} earlier "
                    f"messages were replaced, in what the model is sent, by this summary (this "
                    f"export keeps them all):\n\n{c.summary}")
            cells.append(_cell(inert_markdown("\n".join(
                f"> {line}".rstrip() for line in text.strip().splitlines()), maths=False)))
        elif code is not None and step.outcome in ("ok", "error"):
            tags = {"tags": ["raises-exception"]} if step.outcome == "error" else {}
            cells.append(_cell(code, outputs=_outputs(step, read), metadata={
                "jupyter_agent": {"tool_call_id": step.id, "outcome": step.outcome}, **tags}))
        elif code is not None:
            why = (step.result or "").strip() or "no result was saved"
            why = why.removeprefix("error: ").removeprefix(SYNTHETIC_PREFIX)
            cells.append(_cell(inert_markdown(
                f"*The agent's code below did not run: {why.splitlines()[0][:200]}*\n\n"
                f"{fence(code, 'python')}", maths=False)))
    if tools:
        cells.append(_cell(_tools_text(tools)))
    return cells


def _markdown(cells: list[dict[str, Any]]) -> str:
    parts = []
    for cell in cells:
        if cell["cell_type"] == "markdown":
            parts.append(cell["source"])
            continue
        parts.append(fence(cell["source"], "python"))
        for output in cell["outputs"]:
            data = output.get("data", {})
            if output["output_type"] != "display_data":
                parts.append(fence(output.get("text") or data["text/plain"], "text"))
                continue
            media_type, value = next(iter(data.items()))  # the image, then its text/plain
            if media_type == "image/svg+xml":
                value = base64.b64encode(value.encode("utf-8")).decode("ascii")
            parts.append(f"![{data['text/plain'][1:-1]}](data:{media_type};base64,{value})")
    return "\n\n".join(parts) + "\n"


def render_notebook(record: SessionRecord, cells: list[dict[str, Any]]) -> str:
    """The text of a version 4 notebook, checked once with ``nbformat.validate`` (whose error
    would be a bug here, never a record the store wrote)."""
    from nbformat import from_dict, validate, writes  # over a second to import

    cells[0]["source"] += "\n\n" + READING_NOTE
    for cell in cells:  # kept from showing amounts of money ($5 and $10) as TeX
        if cell["cell_type"] == "markdown" and re.search(r"\$\d", cell["source"]):
            cell["source"] = (f'<div class="mathjax_ignore tex2jax_ignore">\n\n'
                              f'{cell["source"]}\n\n</div>')
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
    """The UTF-8 bytes of ``record`` as ``fmt`` and how many distinct secrets were redacted;
    ``secrets``: exact values to redact besides key-shaped strings; without ``figures`` (the
    session's figure reader) each figure is named with a note."""
    redactor = Redactor(secrets)
    clean = redact_record(record, redactor)
    read = None if figures is None else lambda figure_id: redactor.figure(figures(figure_id))
    if fmt == "json":
        return dump_record(clean), len(redactor.found)
    cells = _cells(clean, progress, read)
    text = _markdown(cells) if fmt == "md" else render_notebook(clean, cells)
    return text.encode("utf-8"), len(redactor.found)


def export_record(record: SessionRecord, fmt: str | None = None,
                  output: str | os.PathLike[str] | None = None, *, force: bool = False,
                  cwd: str | os.PathLike[str] | None = None, secrets: Iterable[str] = (),
                  progress: Progress = no_progress,
                  figures: ReadFigure | None = None) -> Exported:
    """Export a session record to a file, whole or not at all.

    ``output`` is the file, or a folder for ``session-<ID>.<format>`` (default: that name
    in ``cwd``); ``fmt`` defaults to its suffix, else ``ipynb``. The rest as :func:`render`.

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
