"""Live rendering of a turn: the agent's events (:mod:`jupyter_agent.agent.events`) as
they happen.

- :class:`MarkdownTurnRenderer` (Jupyter): one ``IPython.display`` handle per turn,
  updated in place as text streams in;
- :class:`PlainTurnRenderer` (terminal IPython and plain shells): text written as it
  arrives.

Both are callables taking one event, with a ``finish()`` the caller runs when the turn
ends (normally or not). Both show a ``run_python`` call with its code and the first lines
of its result, and every other tool call (todos, scratchpad, summary, notes, variables)
as one line: ``▸ update_todo(id=1, status="in_progress") → todo #1 is now in_progress``.

:class:`MarkdownText` is text shown as Markdown in Jupyter and as plain text elsewhere
(the footer after a turn, the ``%agent_resume`` recap).
"""

from __future__ import annotations

import re
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from jupyter_agent.store.messages import message_text
from jupyter_agent.ui.display import (
    format_call,
    format_recap_usage,
    format_resumed,
    format_tool_call,
    is_code_call,
    one_line,
    result_preview,
    shorten,
)

if TYPE_CHECKING:
    from jupyter_agent.store import SessionRecord
    from jupyter_agent.ui.results import Resumed

__all__ = ["MarkdownText", "MarkdownTurnRenderer", "PlainTurnRenderer", "footer_markdown",
           "markdown_escape", "recap_markdown", "resumed_markdown"]

#: Keeps MathJax (JupyterLab, Notebook) from reading ``$0.0012 · ... · $0.0034`` as math:
#: its escapes are undone by the Markdown step, so the wrapping element says "no math".
_NO_MATH = 'class="mathjax_ignore tex2jax_ignore"'
_MD_SPECIAL = re.compile(r"([\\*_\[\]<>#$|~])")


def markdown_escape(text: str) -> str:
    """``text`` for Markdown as literal text: the characters Markdown (and the ``$`` of
    math) would interpret are backslash-escaped; `code` spans are kept as they are."""
    parts = re.split(r"(`[^`\n]+`)", text)
    return "".join(part if i % 2 else _MD_SPECIAL.sub(r"\\\1", part)
                   for i, part in enumerate(parts))


class MarkdownText:
    """A display object: ``markdown`` in Jupyter, ``plain`` as ``text/plain`` (nbconvert to
    text, consoles, nbval)."""

    def __init__(self, markdown: str, plain: str) -> None:
        self.markdown, self.plain = markdown, plain

    def _repr_markdown_(self) -> str:
        return self.markdown

    def __repr__(self) -> str:
        return self.plain


def footer_markdown(footer: str) -> MarkdownText:
    """The footer line after a turn as small Markdown text (it wraps at spaces, not
    mid-word as a monospace line does); its plain form is ``footer`` unchanged."""
    return MarkdownText(f"<small {_NO_MATH}>{markdown_escape(footer)}</small>", footer)


def recap_markdown(record: SessionRecord, *, unarchived: bool = False) -> str:
    """The ``%agent_resume`` recap as Markdown (Jupyter): the title as a heading, usage,
    summary, open todos as a list, the last exchange (cf. :func:`~jupyter_agent.ui.display.
    format_recap`, the same in plain text)."""
    name = record.title or f"session {record.id}"
    parts = [f"#### Resumed: {markdown_escape(name)}",
             markdown_escape(f"{record.id} · {format_recap_usage(record)}")]
    if unarchived:
        parts.append("*The session was archived; resuming took it out of the archive.*")
    if record.summary:
        lines = shorten(record.summary.strip(), 600).splitlines()
        parts.append("**Summary**  \n" + "  \n".join(markdown_escape(line) for line in lines))
    todos = [t for t in record.state.todos if t.status in ("pending", "in_progress")]
    if todos:
        parts.append("**Open todos**\n\n" + "\n".join(
            f"- {t.id}. {markdown_escape(t.text)} — *{t.status.replace('_', ' ')}*"
            for t in todos))
    last_user = next((m for m in reversed(record.messages) if m.get("role") == "user"), None)
    last_reply = next((m for m in reversed(record.messages)
                       if m.get("role") == "assistant" and message_text(m)), None)
    exchange = [f"**{label}:** {markdown_escape(one_line(message_text(m), 300))}"
                for label, m in (("Last prompt", last_user), ("Last reply", last_reply))
                if m is not None]
    if exchange:
        parts.append("  \n".join(exchange))
    parts.append("Continue with `%%agent`.")
    return "\n\n".join([f"<div {_NO_MATH}>", *parts, "</div>"])


def resumed_markdown(resumed: Resumed) -> MarkdownText:
    """What ``%agent_resume`` displays in Jupyter: :func:`recap_markdown`, with the plain
    recap as its ``text/plain``."""
    return MarkdownText(recap_markdown(resumed.record, unarchived=resumed.unarchived),
                        format_resumed(resumed))


def _compact_result(result: str, ok: bool) -> str:
    """The result of a non-code tool call on one line."""
    text = one_line(result, 120) or "(no output)"
    return f"{'→' if ok else '✗'} {text}"


class PlainTurnRenderer:
    """Render a turn's events as plain text written to ``stream`` (default: ``sys.stdout``
    at call time)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._at_line_start = True
        self._open_call = ""  # the ID of a one-line call waiting for its result

    def _write(self, text: str) -> None:
        if not text:
            return
        out = self._stream or sys.stdout
        out.write(text)
        out.flush()
        self._at_line_start = text.endswith("\n")

    def _block(self, text: str) -> None:
        self._write(("" if self._at_line_start else "\n") + text + "\n")

    def __call__(self, event: Any) -> None:
        """Render one event."""
        kind = getattr(event, "kind", "")
        if kind == "text_delta":
            self._write(event.text)
        elif kind == "tool_call_start" and not is_code_call(event.arguments):
            start = "" if self._at_line_start else "\n"
            self._write(f"{start}▸ {format_call(event.name, event.arguments)}")
            self._open_call = event.call_id
            return
        elif kind == "tool_call_start":
            self._block(format_tool_call(event.name, event.arguments))
        elif kind == "tool_call_end" and event.call_id == self._open_call:
            self._write(f" {_compact_result(event.result, event.ok)}\n")
        elif kind == "tool_call_end":
            mark = "→" if event.ok else "✗"
            first, *rest = result_preview(event.result)
            self._block("\n".join([f"  {mark} {first}", *(f"    {line}" for line in rest)]))
        elif kind == "notice":
            text = str(event.text)
            self._block(text if text.startswith("[") else f"[{text}]")
        self._open_call = ""

    def finish(self) -> None:
        """End the turn's output on a fresh line."""
        if not self._at_line_start:
            self._write("\n")


def _markdown_result(result: str, *, ok: bool) -> str:
    """A code tool's result as Markdown: inline code for one line, else a label ("→ output"
    / "✗ error") and a short text block."""
    mark = "→" if ok else "✗"
    lines = result_preview(result)
    if len(lines) == 1:
        inline = lines[0].replace("`", "'")
        return f"{mark} `{inline}`"
    longest = max((len(run) for run in re.findall(r"`+", result)), default=0)
    fence = "`" * max(3, longest + 1)
    label = "*→ output*" if ok else "*✗ error*"
    return "\n".join([label, f"{fence}text", *lines, fence])


class MarkdownTurnRenderer:
    """Render a turn's events as Markdown (Jupyter).

    While the turn runs, one display handle shows the reply so far and is updated in
    place. When the turn finishes, that live area is emptied and the final Markdown is
    displayed once as an ordinary output. The live handle always starts and ends empty,
    so a saved notebook holds exactly one output per turn whether or not the front end
    that executed it applied the intermediate updates (nbval does not; JupyterLab and
    nbclient do).

    Parameters
    ----------
    min_interval : float, optional
        Seconds between two updates while text streams in (each update re-sends the
        whole Markdown); tool calls, notices and :meth:`finish` always update.
    """

    def __init__(self, min_interval: float = 0.1) -> None:
        self._parts: list[str] = []
        self._handle: Any = None
        self._min_interval = min_interval
        self._shown_at = float("-inf")
        self._dirty = False
        self._lines: dict[str, tuple[int, str]] = {}  # one-line calls: call ID -> part, text
        self._after_line = False  # the last part is a one-line call

    def _markdown(self) -> Any:
        from IPython.display import Markdown

        return Markdown("".join(self._parts))

    def _show(self) -> None:
        from IPython.display import Markdown, display

        self._shown_at, self._dirty = time.monotonic(), False
        if self._handle is None:
            self._handle = display(Markdown(""), display_id=True)
        self._handle.update(self._markdown())

    def _block(self, text: str) -> None:
        if self._parts and not self._parts[-1].endswith("\n\n"):
            self._parts.append("\n\n")
        self._parts.append(text + "\n\n")
        self._after_line = False

    def _line(self, call_id: str, text: str) -> None:
        """A one-line tool call; consecutive ones form one paragraph (hard line breaks)."""
        if self._parts and not self._after_line and not self._parts[-1].endswith("\n\n"):
            self._parts.append("\n\n")
        self._lines[call_id] = (len(self._parts), text)
        self._parts.append(f"{text}</span>  \n")
        self._after_line = True

    def __call__(self, event: Any) -> None:
        """Render one event (updates the display in place)."""
        kind = getattr(event, "kind", "")
        if kind == "text_delta":
            if self._after_line:
                self._parts.append("\n")
                self._after_line = False
            self._parts.append(event.text)
            self._dirty = True
            if time.monotonic() - self._shown_at < self._min_interval:
                return
        elif kind == "tool_call_start" and not is_code_call(event.arguments):
            self._line(event.call_id, f"<span {_NO_MATH}>▸ "
                       f"{markdown_escape(format_call(event.name, event.arguments))}")
        elif kind == "tool_call_end" and event.call_id in self._lines:
            index, text = self._lines.pop(event.call_id)
            result = markdown_escape(_compact_result(event.result, event.ok))
            self._parts[index] = f"{text} {result}</span>  \n"
        elif kind == "tool_call_start":
            text = format_tool_call(event.name, event.arguments)
            head, _, body = text.partition("\n")
            code = "\n".join(line[4:] for line in body.splitlines())
            self._block(f"**{head}**" + (f"\n```python\n{code}\n```" if body else ""))
        elif kind == "tool_call_end":
            self._block(_markdown_result(event.result, ok=event.ok))
        elif kind == "notice":
            self._block(f"*{event.text}*")
        else:
            return
        self._show()

    def finish(self) -> None:
        """Empty the live area and display the turn's final Markdown once."""
        from IPython.display import Markdown, display

        if self._handle is not None:
            self._handle.update(Markdown(""))
            self._handle = None
        if self._parts:
            display(self._markdown())
        self._dirty = False
