"""A session as a notebook that replays the analysis (``--format ipynb``); nothing is run.

A header cell (title, facts, summary, how to read it); per request a ``## Request N`` cell;
each assistant text a Markdown cell; each ``run_python`` call that ran a code cell whose
outputs are the result it got then, with its figures as ``display_data`` among the printed
lines (``stderr`` and tagged ``raises-exception`` when it failed); code that never ran a
fenced Markdown block; the other tool calls listed in a small cell. The metadata holds the
session's ID, title, model, parent and times, never an endpoint or a key. Importing
nbformat takes seconds, so :mod:`~jupyter_agent.artefacts.export` imports this module only
for a notebook.
"""

from __future__ import annotations

import re
from typing import Any

import nbformat
from nbformat import v4

from jupyter_agent.artefacts.steps import (
    SYNTHETIC_PREFIX,
    Call,
    Progress,
    ReadFigure,
    Reply,
    Request,
    facts_line,
    figure_data,
    format_call,
    no_progress,
    session_name,
    split_at_figures,
    steps,
)
from jupyter_agent.store import SessionRecord
from jupyter_agent.store.figure_files import figure_label
from jupyter_agent.store.records import utc_now
from jupyter_agent.text import fence, inert_markdown

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}

READING_NOTE = (
    "*This notebook replays an agent session: your requests and the agent's replies are "
    "Markdown cells, and each piece of Python the agent ran is a code cell showing the "
    "output it got then. Run the notebook top to bottom to compute everything again. "
    "Variables you defined outside the agent are not part of it.*"
)

_NO_MATH = '<div class="mathjax_ignore tex2jax_ignore">\n\n{}\n\n</div>'


def _markdown_text(text: str) -> str:
    # inert, and kept from showing amounts of money ($5 and $10) as TeX
    text = inert_markdown(text)
    return _NO_MATH.format(text) if re.search(r"\$\d", text) else text


def _outputs(call: Call, read: ReadFigure | None) -> list[Any]:
    result = call.result or ""
    if result.strip() == "(no output)":
        result = ""
    name = "stderr" if call.outcome == "error" else "stdout"
    outputs: list[Any] = []
    for piece in split_at_figures(result, call.figures):
        if isinstance(piece, str):
            if piece.strip():
                text = piece if piece.endswith("\n") else piece + "\n"
                outputs.append(v4.new_output("stream", name=name, text=text))
            continue
        label = f"[{figure_label(piece)}]"
        data, why = figure_data(read, piece)
        if data is None:
            outputs.append(v4.new_output("stream", name=name,
                                         text=f"{label} (not exported: {why})\n"))
        else:
            outputs.append(v4.new_output("display_data", data={**data, "text/plain": label},
                                         metadata={"jupyter_agent": {"figure": piece}}))
    return outputs


def _tools_cell(calls: list[Call]) -> Any:
    lines = []
    for call in calls:
        first = (call.result or "").strip().splitlines()
        shown = first[0] if first else "(no result)"
        more = " …" if len(first) > 1 else ""
        call_text = format_call(call.name, call.arguments, limit=60)
        lines.append(f"- `{call_text}` → {shown[:120]}{more}")
    body = inert_markdown("\n".join(lines))
    return v4.new_markdown_cell(f"<small>\n\n*Agent tools:*\n\n{body}\n\n</small>")


def render_notebook(record: SessionRecord, progress: Progress = no_progress, *,
                    figures: ReadFigure | None = None) -> str:
    """The text of a version 4 notebook, checked with ``nbformat.validate``.

    Raises
    ------
    nbformat.ValidationError
        Never for a record the store wrote (it would be a bug here).
    """
    head = [f"# {session_name(record)}", f"*{facts_line(record)}*"]
    if record.summary.strip():
        head += ["**Summary**", record.summary.strip().replace("\n", "  \n")]
    head.append(READING_NOTE)
    cells = [v4.new_markdown_cell(_markdown_text("\n\n".join(head)))]
    tools: list[Call] = []
    for step in steps(record, progress):
        code = step.code if isinstance(step, Call) else None
        if isinstance(step, Call) and code is None:
            tools.append(step)
            continue
        if tools:
            cells.append(_tools_cell(tools))
            tools = []
        if isinstance(step, Request):
            cells.append(v4.new_markdown_cell(
                _markdown_text(f"## Request {step.turn}\n\n{step.text or '*(empty)*'}")))
        elif isinstance(step, Reply):
            cells.append(v4.new_markdown_cell(_markdown_text(step.text)))
        elif isinstance(step, Call) and code is not None:
            if step.outcome in ("ok", "error"):
                cell = v4.new_code_cell(source=code, outputs=_outputs(step, figures), metadata={
                    "jupyter_agent": {"tool_call_id": step.id, "outcome": step.outcome}})
                if step.outcome == "error":
                    cell.metadata["tags"] = ["raises-exception"]
                cells.append(cell)
            else:
                why = (step.result or "").strip() or "no result was saved"
                why = why.removeprefix("error: ").removeprefix(SYNTHETIC_PREFIX)
                cells.append(v4.new_markdown_cell(inert_markdown(
                    f"*The agent's code below did not run: {why.splitlines()[0][:200]}*\n\n"
                    f"{fence(code, 'python')}")))
    if tools:
        cells.append(_tools_cell(tools))
    parent = None if record.parent is None else record.parent.model_dump(mode="json")
    notebook = v4.new_notebook(cells=cells, metadata={
        "kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"},
        "jupyter_agent": {
            "session_id": record.id, "title": record.title, "model": record.state.model,
            "parent": parent, "created_at": record.created_at.isoformat(),
            "updated_at": record.updated_at.isoformat(), "exported_at": utc_now().isoformat()}})
    nbformat.validate(notebook)
    return nbformat.writes(notebook) + "\n"
