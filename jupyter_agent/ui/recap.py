"""The recap ``%agent_resume`` shows in Jupyter, and :class:`MarkdownText`, the display
object of Markdown with a plain-text twin.

The summary and the last reply are Markdown written by the model and render as such,
without maths; everything else is literal text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jupyter_agent.store.messages import message_text
from jupyter_agent.ui.display import (
    format_recap_usage,
    format_resumed,
    one_line,
    shorten,
    terminal_text,
)
from jupyter_agent.ui.figures import figure_label, last_figure
from jupyter_agent.ui.markdown import hard_breaks, literal, reply_markdown

if TYPE_CHECKING:
    from jupyter_agent.active import Resumed
    from jupyter_agent.store import SessionRecord

__all__ = ["MarkdownText", "recap_markdown", "resumed_markdown"]


class MarkdownText:
    """A display object: ``markdown`` in Jupyter, ``plain`` as ``text/plain`` (nbconvert to
    text, consoles, nbval)."""

    def __init__(self, markdown: str, plain: str) -> None:
        self.markdown, self.plain = markdown, plain

    def _repr_markdown_(self) -> str:
        return self.markdown

    def __repr__(self) -> str:
        return terminal_text(self.plain)


def recap_markdown(record: SessionRecord, *, unarchived: bool = False,
                   endpoint_note: str = "") -> str:
    """The ``%agent_resume`` recap as Markdown (Jupyter): the title as a heading, usage,
    summary, open todos as a list, the last exchange (cf. :func:`~jupyter_agent.ui.display.
    format_recap`, the same in plain text). The summary and the last reply are Markdown
    written by the model and render as such (without maths); the rest is literal."""
    name = record.title or f"session {record.id}"
    parts = [f"#### Resumed: {literal(name)}",
             literal(f"{record.id} · {format_recap_usage(record)}")]
    if endpoint_note:
        parts.append(f"**Endpoint:** {literal(endpoint_note)}")
    if unarchived:
        parts.append("*The session was archived; resuming took it out of the archive.*")
    if record.summary:
        summary = hard_breaks(shorten(record.summary.strip(), 600))
        parts.append("**Summary**\n\n" + reply_markdown(summary))
    todos = [t for t in record.state.todos if t.status in ("pending", "in_progress")]
    if todos:
        parts.append("**Open todos**\n\n" + "\n".join(
            f"- {t.id}\\. {literal(t.text)} — *{t.status.replace('_', ' ')}*" for t in todos))
    last_user = next((m for m in reversed(record.messages) if m.get("role") == "user"), None)
    last_reply = next((m for m in reversed(record.messages)
                       if m.get("role") == "assistant" and message_text(m)), None)
    exchange = [f"**{label}:** {literal(one_line(message_text(m), 300))}"
                for label, m in (("Last prompt", last_user), ("Last reply", last_reply))
                if m is not None]
    if exchange:
        parts.append("  \n".join(exchange))
    figure = last_figure(record.transcript)
    if figure is not None:
        parts.append(f"**Last figure:** {literal(figure_label(figure))} (below; "
                     "`%agent_history` shows every figure)")
    parts.append("Continue with `%%agent`.")
    return "\n\n".join(parts)


def resumed_markdown(resumed: Resumed) -> MarkdownText:
    """What ``%agent_resume`` displays in Jupyter: :func:`recap_markdown`, with the plain
    recap as its ``text/plain``."""
    return MarkdownText(recap_markdown(resumed.record, unarchived=resumed.unarchived,
                                       endpoint_note=resumed.endpoint_note),
                        format_resumed(resumed))
