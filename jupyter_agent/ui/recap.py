"""What is shown of a saved session again: the ``%agent_resume`` recap (Markdown and plain
text) and, in Jupyter, the session's figures between the text of ``%agent_history``.

The summary and the last reply are Markdown written by the model and render as such,
without maths; everything else is literal text. A figure is read through the store
(never following a link) and shown as a display of its own, with a ``text/plain`` line
naming it; one that cannot be read is named, with why.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from IPython.display import display

from jupyter_agent.artefacts.steps import ReadFigure, figure_data
from jupyter_agent.store.figure_files import figure_label, figure_refs
from jupyter_agent.store.messages import message_text
from jupyter_agent.text import (
    hard_breaks,
    literal,
    one_line,
    reply_markdown,
    shorten,
    terminal_text,
)
from jupyter_agent.ui.display import (
    format_cost,
    format_todos,
    format_tokens,
    last_figure,
    plural,
    relative_time,
)

if TYPE_CHECKING:
    from jupyter_agent.store import SessionRecord

#: Display width (CSS pixels) of the last figure in the resume recap.
RECAP_WIDTH = 320


class MarkdownText:
    """A display object: ``markdown`` in Jupyter, ``plain`` as ``text/plain``."""

    def __init__(self, markdown: str, plain: str) -> None:
        self.markdown, self.plain = markdown, plain

    def _repr_markdown_(self) -> str:
        return self.markdown

    def __repr__(self) -> str:
        return terminal_text(self.plain)


def recap_text(record: SessionRecord, *, unarchived: bool = False,
               endpoint_note: str = "") -> MarkdownText:
    """What ``%agent_resume`` shows: title, usage, the ``endpoint_note``, whether it was
    unarchived, summary, open todos, the last exchange and figure; as Markdown, the title
    a heading, and as plain text."""
    state = record.state
    usage = (f"updated {relative_time(record.updated_at)} · "
             f"{plural(len(record.transcript), 'message')} · {format_tokens(state.usage)} · "
             f"{format_cost(state.usage)} · {plural(state.tool_calls, 'tool call')}")
    title = f" — {record.title}" if record.title else ""
    plain = [f"Resumed session {record.id}{title}", usage]
    markdown = [f"#### Resumed: {literal(record.title or f'session {record.id}')}",
                literal(f"{record.id} · {usage}")]
    if endpoint_note:
        plain.append(endpoint_note)
        markdown.append(f"**Endpoint:** {literal(endpoint_note)}")
    if unarchived:
        plain.append("unarchived: the session was archived; resuming took it out of the archive")
        markdown.append("*The session was archived; resuming took it out of the archive.*")
    if record.summary:
        summary = shorten(record.summary.strip(), 600)
        plain.append("summary: " + summary)
        markdown.append("**Summary**\n\n" + reply_markdown(hard_breaks(summary)))
    todos = [t for t in state.todos if t.status in ("pending", "in_progress")]
    if todos:
        plain.append("open todos:\n" + format_todos(todos))
        markdown.append("**Open todos**\n\n" + "\n".join(
            f"- {t.id}\\. {literal(t.text)} — *{t.status.replace('_', ' ')}*" for t in todos))
    exchange = []
    for label, role in (("prompt", "user"), ("reply", "assistant")):
        text = next((message_text(m) for m in reversed(record.messages) if m.get("role") == role
                     and (role == "user" or message_text(m))), None)
        if text is not None:
            plain.append(f"last {label}: ".ljust(13) + one_line(text, 300))
            exchange.append(f"**Last {label}:** {literal(one_line(text, 300))}")
    if exchange:
        markdown.append("  \n".join(exchange))
    figure = last_figure(record.transcript)
    if figure is not None:
        plain.append(f"last figure: {figure_label(figure)} (%agent_history shows it)")
        markdown.append(f"**Last figure:** {literal(figure_label(figure))} (below; "
                        "`%agent_history` shows every figure)")
    markdown.append("Continue with `%%agent`.")
    return MarkdownText("\n\n".join(markdown), "\n".join(plain))


def show_figure(ref: dict[str, Any], read: ReadFigure, *, width: int | None = None) -> None:
    """Display a figure (``width`` in CSS pixels; default: its own), or say why it cannot be."""
    data, why = figure_data(read, ref)
    if data is None:
        print(terminal_text(f"[{figure_label(ref)}: cannot be shown: {why}]"))
        return
    metadata = {next(iter(data)): {"width": width}} if width else {}
    data["text/plain"] = f"[{figure_label(ref)}]"
    display(data, metadata=metadata, raw=True)


def show_blocks(blocks: Sequence[tuple[str, dict[str, Any] | None]], read: ReadFigure) -> None:
    """Print the texts of ``(text, message)`` blocks made inert, the figures of a message
    displayed after its text."""
    run: list[str] = []
    for i, (text, message) in enumerate(blocks):
        run.append(text)
        refs = list(figure_refs([message])) if message is not None else []
        if refs or i == len(blocks) - 1:
            print(terminal_text("\n\n".join(run)))
            run = []
        for ref in refs:
            show_figure(ref, read)
