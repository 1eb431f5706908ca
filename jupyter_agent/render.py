"""Live rendering of a turn: the agent's events (:mod:`jupyter_agent.agent.events`) as
they happen.

- :class:`MarkdownTurnRenderer` (Jupyter): one ``IPython.display`` handle per turn,
  updated in place as text streams in, tool calls shown compactly as a code block and a
  short result;
- :class:`PlainTurnRenderer` (terminal IPython and plain shells): text written as it
  arrives.

Both are callables taking one event, with a ``finish()`` the caller runs when the turn
ends (normally or not).
"""

from __future__ import annotations

import re
import sys
import time
from typing import Any, TextIO

from jupyter_agent.display import format_tool_call, result_preview

__all__ = ["MarkdownTurnRenderer", "PlainTurnRenderer"]


class PlainTurnRenderer:
    """Render a turn's events as plain text written to ``stream`` (default: ``sys.stdout``
    at call time)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._at_line_start = True

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
        elif kind == "tool_call_start":
            self._block(format_tool_call(event.name, event.arguments))
        elif kind == "tool_call_end":
            mark = "→" if event.ok else "✗"
            first, *rest = result_preview(event.result)
            self._block("\n".join([f"  {mark} {first}", *(f"    {line}" for line in rest)]))
        elif kind == "notice":
            text = str(event.text)
            self._block(text if text.startswith("[") else f"[{text}]")

    def finish(self) -> None:
        """End the turn's output on a fresh line."""
        if not self._at_line_start:
            self._write("\n")


def _markdown_result(result: str, *, ok: bool) -> str:
    """A tool result as Markdown: inline code for one line, else a short text block."""
    mark = "→" if ok else "✗"
    lines = result_preview(result)
    if len(lines) == 1:
        inline = lines[0].replace("`", "'")
        return f"{mark} `{inline}`"
    longest = max((len(run) for run in re.findall(r"`+", result)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([mark, f"{fence}text", *lines, fence])


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

    def __call__(self, event: Any) -> None:
        """Render one event (updates the display in place)."""
        kind = getattr(event, "kind", "")
        if kind == "text_delta":
            self._parts.append(event.text)
            self._dirty = True
            if time.monotonic() - self._shown_at < self._min_interval:
                return
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
