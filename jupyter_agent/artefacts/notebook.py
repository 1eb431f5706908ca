"""A session as a Jupyter notebook that replays the analysis (``--format ipynb``).

Cells, top to bottom:

1. Markdown: the title, one line of facts (session ID, model, dates, cost, parent), the
   summary, and how to read the notebook;
2. for each request, a Markdown cell ``## Request N`` with the user's text;
3. for each ``run_python`` call that ran, a code cell with its code and, as a ``stream``
   output, the result the agent got then (``stdout``; ``stderr`` for a call that
   failed, whose cell is tagged ``raises-exception`` so that running the whole notebook
   goes on past it, as the agent did); the figures it made are ``display_data``
   outputs in their places among the printed lines
   (:mod:`~jupyter_agent.artefacts.figures`). Nothing is executed by the export;
4. a call that never ran (refused, not executed, interrupted) becomes a Markdown cell
   with its code in a fenced block, so running the notebook does not run it either;
5. the other tool calls of a row (todos, scratchpad, summary, variables) are listed in
   one small Markdown cell; each assistant text is a Markdown cell.

Notebook metadata: a Python 3 kernelspec, and ``jupyter_agent`` with the session ID,
title, model, parent, creation, update and export times (ISO 8601 UTC). No endpoint
and no key. The notebook is checked with ``nbformat.validate`` before it is returned.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from jupyter_agent.artefacts.figures import ReadFigure, figure_data, split_at_figures
from jupyter_agent.artefacts.markdown import call_line, facts_line, fence, session_name
from jupyter_agent.artefacts.steps import Call, Progress, Reply, Request, no_progress, steps
from jupyter_agent.artefacts.turns import SYNTHETIC_PREFIX
from jupyter_agent.store import SessionRecord
from jupyter_agent.store.figure_files import figure_label
from jupyter_agent.store.records import utc_now
from jupyter_agent.ui.markdown import inert_markdown

if TYPE_CHECKING:
    from nbformat import NotebookNode

__all__ = ["KERNELSPEC", "READING_NOTE", "render_notebook"]

KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}

READING_NOTE = (
    "*This notebook replays an agent session: your requests and the agent's replies are "
    "Markdown cells, and each piece of Python the agent ran is a code cell showing the "
    "output it got then. Run the notebook top to bottom to compute everything again. "
    "Variables you defined outside the agent are not part of it.*"
)

_NO_MATH = '<div class="mathjax_ignore tex2jax_ignore">\n\n{}\n\n</div>'


def _markdown_text(text: str) -> str:
    """``text`` (Markdown from the session) made inert (raw HTML as typed, images as links,
    no unsafe links), and kept from showing amounts of money (``$5 and $10``) as TeX."""
    text = inert_markdown(text)
    return _NO_MATH.format(text) if re.search(r"\$\d", text) else text


def _why(call: Call) -> str:
    """Why a call did not run, in one line (its result without the tool prefixes)."""
    text = (call.result or "").strip() or "no result was saved"
    for prefix in ("error: ", SYNTHETIC_PREFIX):
        text = text.removeprefix(prefix)
    return text.splitlines()[0][:200]


def _outputs(call: Call, read: ReadFigure | None) -> list[Any]:
    """The printed result as ``stream`` outputs with the figures between them."""
    from nbformat import v4

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


def _code_cell(call: Call, code: str, read: ReadFigure | None) -> Any:
    from nbformat import v4

    cell = v4.new_code_cell(source=code, metadata={
        "jupyter_agent": {"tool_call_id": call.id, "outcome": call.outcome}})
    cell.outputs = _outputs(call, read)
    if call.outcome == "error":
        cell.metadata["tags"] = ["raises-exception"]
    return cell


def _tools_cell(calls: list[Call]) -> Any:
    from nbformat import v4

    lines = []
    for call in calls:
        first = (call.result or "").strip().splitlines()
        shown = first[0] if first else "(no result)"
        more = " …" if len(first) > 1 else ""
        lines.append(f"- `{call_line(call, 60)}` → {shown[:120]}{more}")
    body = inert_markdown("\n".join(lines))
    return v4.new_markdown_cell(f"<small>\n\n*Agent tools:*\n\n{body}\n\n</small>")


def _metadata(record: SessionRecord) -> dict[str, Any]:
    parent = None if record.parent is None else record.parent.model_dump(mode="json")
    return {
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"},
        "jupyter_agent": {
            "session_id": record.id,
            "title": record.title,
            "model": record.state.model,
            "parent": parent,
            "created_at": record.created_at.isoformat(),
            "updated_at": record.updated_at.isoformat(),
            "exported_at": utc_now().isoformat(),
        },
    }


def render_notebook(record: SessionRecord, progress: Progress = no_progress, *,
                    figures: ReadFigure | None = None) -> NotebookNode:
    """The notebook of ``record`` (see the module docstring).

    Parameters
    ----------
    record : SessionRecord
    progress : Progress, optional
        Wraps the walk over the transcript.
    figures : callable, optional
        Reads the session's figures; without it a figure is its text line and a note.

    Returns
    -------
    nbformat.NotebookNode
        A version 4 notebook, valid under ``nbformat.validate``.

    Raises
    ------
    nbformat.ValidationError
        Never for a record the store wrote (it would be a bug here).
    """
    import nbformat
    from nbformat import v4

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
                cells.append(_code_cell(step, code, figures))
            else:
                cells.append(v4.new_markdown_cell(inert_markdown(
                    f"*The agent's code below did not run: {_why(step)}*\n\n"
                    f"{fence(code, 'python')}")))
    if tools:
        cells.append(_tools_cell(tools))
    notebook = v4.new_notebook(cells=cells, metadata=_metadata(record))
    nbformat.validate(notebook)
    return notebook
