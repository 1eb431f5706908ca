"""A session as a readable Markdown transcript (``--format md``).

Top to bottom: the title, one line of facts (session ID, model, dates, turns, tool
calls, cost; the parent of a fork), the summary, then the transcript: each request
under a ``## Request N`` heading, the assistant's text, each tool call (``run_python``
with its code and its recorded result in fenced blocks, then the figures it made as
images embedded as ``data:`` URLs, so the file stays self-contained; other tools on
one line) and,
where the working context was compacted, a quoted marker with the summary that
replaced the older turns. System messages (they carry the notes) are left out. Text
from the session (titles, prompts, replies, summaries, tool results) is made inert
(:func:`~jupyter_agent.ui.markdown.inert_markdown`: raw HTML as typed, images as links,
no unsafe links): the file may be opened in Jupyter or a browser.

The helpers :func:`fence`, :func:`call_line` and :func:`facts_line` are shared with
the notebook export.
"""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime

from jupyter_agent.artefacts.figures import ReadFigure, figure_data
from jupyter_agent.artefacts.steps import Call, Marker, Progress, Reply, Request, no_progress, steps
from jupyter_agent.store import SessionRecord
from jupyter_agent.store.figure_files import figure_label
from jupyter_agent.ui.markdown import inert_markdown

__all__ = ["call_line", "facts_line", "fence", "render_markdown", "session_name", "when"]


def when(moment: datetime) -> str:
    """``"2026-11-30 02:00 UTC"``."""
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def session_name(record: SessionRecord) -> str:
    """The title, else ``"Session <ID>"``."""
    return record.title.strip() or f"Session {record.id}"


def facts_line(record: SessionRecord) -> str:
    """One Markdown line about the session: ID, model, dates, size, cost, parent."""
    state = record.state
    turns = sum(1 for m in record.transcript if m.get("role") == "user")
    parts = [f"jupyter-agent session `{record.id}`"]
    if state.model:
        parts.append(f"model `{state.model}`")
    parts += [f"created {when(record.created_at)}", f"updated {when(record.updated_at)}",
              f"{turns} request{'s' if turns != 1 else ''}",
              f"{state.tool_calls} tool call{'s' if state.tool_calls != 1 else ''}"]
    if state.usage.calls:
        cost = "price unknown" if state.usage.price_unknown else f"${state.usage.cost_usd:.4f}"
        parts.append(f"{state.usage.input_tokens + state.usage.output_tokens:,} tokens, {cost}")
    if record.parent is not None:
        after = f" after request {record.parent.turn}" if record.parent.turn else ""
        parts.append(f"forked from `{record.parent.session_id}`{after}")
    return " · ".join(parts)


def fence(text: str, info: str = "") -> str:
    """``text`` in a fenced code block whose fence no line of ``text`` can close."""
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    marks = "`" * (longest + 1)
    return f"{marks}{info}\n{text.rstrip()}\n{marks}"


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_line(call: Call, limit: int = 80) -> str:
    """``name(key=value, ...)`` with each value cut to ``limit`` characters."""
    if call.arguments is None:
        shown = _short(call.raw_arguments, limit)
    else:
        shown = ", ".join(f"{k}={_short(json.dumps(v, ensure_ascii=False), limit)}"
                          for k, v in call.arguments.items())
    return f"{call.name}({shown})"


def quote(text: str) -> str:
    """``text`` as a Markdown block quote."""
    return "\n".join(f"> {line}".rstrip() for line in text.strip().splitlines()) or ">"


def _figures_md(call: Call, read: ReadFigure | None) -> str:
    """The call's figures as embedded images ("" when it made none)."""
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
    head = f"**Tool:** `{call_line(call)}`"
    if "\n" not in result.strip() and len(result) <= 200:
        return inert_markdown(f"{head} → {result.strip() or '(empty)'}")
    return f"{inert_markdown(head)}\n\n{fence(result, 'text')}"


def render_markdown(record: SessionRecord, progress: Progress = no_progress, *,
                    figures: ReadFigure | None = None) -> str:
    """The Markdown transcript of ``record`` (see the module docstring).

    Parameters
    ----------
    record : SessionRecord
        The session whose transcript is written out.
    progress : Progress, optional
        Wraps the walk over the transcript (e.g. a progress bar); none by default.
    figures : callable, optional
        Reads the session's figures to embed them; without it each is named with a note.

    Returns
    -------
    str
        Markdown text ending with a newline.
    """
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
            parts.append(inert_markdown(quote(
                f"**Context compacted** at {when(c.at)}: {c.replaced} earlier messages were "
                f"replaced, in what the model is sent, by this summary (this transcript "
                f"keeps them all):\n\n{c.summary}")))
    return "\n\n".join(parts) + "\n"
