"""Live rendering of a turn: the agent's events (:mod:`jupyter_agent.agent.events`) as
they happen.

- :class:`MarkdownTurnRenderer` (Jupyter): Markdown, with ``text/plain`` alongside;
- :class:`PlainTurnRenderer` (terminal IPython and plain shells): text written as it
  arrives (defined in :mod:`jupyter_agent.ui.plain`, importable from here).

Both are callables taking one event, with a ``finish()`` the caller runs when the turn
ends, however it ends (normally, a limit, a model error, Ctrl-C). Both show a
``run_python`` call with its code and each part of its result under one label (what it
printed, the value of its last expression, stderr, the error), a refused call once, with
the whole reason, and every other tool call (todos, scratchpad, summary, notes,
variables) as one line: ``▸ update_todo(id=1, status="in_progress") → todo #1 is now
in_progress``. A notice a tool raises while it runs (a refusal) is shown once, with that
call's result, not a second time on its own. A call that will ask for approval
(``ToolCallStart.asks``) shows only its name: the question that follows shows the whole
code (or note), and no status line is shown until it is answered.

Long waits (the client waiting out a rate limit, a slow first token, a long tool run)
show a status line, ``waiting for the model — 12 s …``, that goes as soon as anything
else arrives; it is driven by a timer, since the ``openai`` client's retries are
internal. It is shown only where a person watches (the live Markdown area of an
interactive front end, a terminal), never in the outputs of a headless run.

What the agent's code displays -- a figure, an image, a DataFrame -- arrives as a
``Displayed`` event while its call runs and is shown as its own output, in its place: the
turn's Markdown so far ends there and goes on in a new output below it. So a
turn is one output per stretch of text between the things its code displayed, the same
live and headless. The plain renderer leaves them to the tool result, which names them.

Replies are Markdown written by the model and go through
:func:`~jupyter_agent.ui.markdown.reply_markdown` (``$`` shows as typed);
everything the front end writes itself goes through
:func:`~jupyter_agent.ui.markdown.literal`. No HTML is written.
"""

from __future__ import annotations

import io
import threading
import time
from typing import Any

from jupyter_agent.ui.calls import (
    RESULT_LABELS,
    format_call,
    format_tool_call,
    is_code_call,
    notice_shown_by,
    one_line_result,
    result_preview,
    tool_result_sections,
)
from jupyter_agent.ui.markdown import literal, reply_markdown
from jupyter_agent.ui.plain import PlainTurnRenderer
from jupyter_agent.ui.recap import MarkdownText, recap_markdown, resumed_markdown
from jupyter_agent.ui.status import WAIT_AFTER, WaitingStatus

__all__ = ["MarkdownText", "MarkdownTurnRenderer", "PlainTurnRenderer", "recap_markdown",
           "resumed_markdown"]

class MarkdownTurnRenderer:
    """Render a turn's events as Markdown (Jupyter).

    Parameters
    ----------
    live : bool
        True where a person watches (an interactive front end): one display area shows
        the turn as it streams and is updated in place, ends holding the whole turn, and
        shows the status line of long waits. False for a headless run (nbclient,
        nbconvert, papermill, nbval): nothing is shown until :meth:`finish`, which
        displays the turn once. Either way a saved notebook holds exactly one output per
        turn, with the same content.
    min_interval : float, optional
        Seconds between two updates while text streams in (each update re-sends the
        whole Markdown); tool calls, notices and :meth:`finish` always update.
    wait_after : float, optional
        Seconds without an event before the status line appears (live only).
    """

    def __init__(self, *, live: bool = True, min_interval: float = 0.1,
                 wait_after: float = WAIT_AFTER) -> None:
        self._live = live
        self._items: list[list[Any]] = []  # [kind, payload]: reply / lines / block
        self._calls: dict[str, tuple[list[str], int]] = {}  # one-line calls: ID -> lines, index
        self._open: tuple[str, str] | None = None  # (call ID, name) of the running call
        self._held: list[str] = []  # notices raised while a call runs
        self._plain_out = io.StringIO()
        self._plain = PlainTurnRenderer(self._plain_out)
        self._handle: Any = None
        self._parts: list[tuple[str, Any]] = []  # finished outputs: ("markdown"|"display", x)
        self._shown_figures: set[str] = set()  # "[figure 1: ...]" lines of figures shown
        self._plain_from = 0  # where the current output's plain text starts
        self._min_interval = min_interval
        self._shown_at = float("-inf")
        self._lock = threading.RLock()
        self._waiting = WaitingStatus(self._show_locked, self._lock, wait_after) if live else None

    # ---- the Markdown
    def markdown(self, *, status: bool = True) -> str:
        """The turn so far as Markdown (no HTML; replies without maths), with the status
        line of a long wait unless ``status`` is False."""
        blocks = []
        for kind, payload in self._items:
            if kind == "reply":
                text = reply_markdown(payload[0].strip("\n"))
                if text.strip():
                    blocks.append(text)
            elif kind == "lines":
                blocks.append("  \n".join(literal(line) for line in payload))
            else:
                blocks.append(payload)
        if status and self._waiting is not None and self._waiting.text:
            blocks.append(f"*{literal(self._waiting.text)}*")
        return "\n\n".join(blocks)

    def plain(self) -> str:
        """The current output's plain text (the ``text/plain`` of its display)."""
        text = self._plain_out.getvalue()[self._plain_from:].rstrip("\n")
        return text.lstrip("\n") if self._plain_from else text

    def _display_object(self, *, status: bool = True) -> MarkdownText:
        return MarkdownText(self.markdown(status=status), self.plain())

    def _show_locked(self) -> None:
        from IPython.display import display

        self._shown_at = time.monotonic()
        if self._handle is None:
            self._handle = display(self._display_object(), display_id=True)
        else:
            self._handle.update(self._display_object())

    def _show(self, *, force: bool = True) -> None:
        if not self._live:
            return
        if not force and time.monotonic() - self._shown_at < self._min_interval:
            return
        with self._lock:
            self._show_locked()

    # ---- events
    def _block(self, markdown: str) -> None:
        self._items.append(["block", markdown])

    def _result_blocks(self, name: str, result: str, ok: bool) -> None:
        for kind, body in tool_result_sections(result, ok):
            if kind == "output" and self._shown_figures:
                # a figure shown above in its place: its line is for the model, not for you
                body = "\n".join(line for line in body.split("\n")
                                 if line not in self._shown_figures).strip("\n")
                if not body:
                    continue
            label = RESULT_LABELS[kind]
            lines = result_preview(body) if kind in ("output", "result", "stderr") else \
                body.splitlines() or [""]
            if kind in ("refused", "message") or len(lines) == 1:
                text = f"{label} {lines[0]}" if lines[0] else f"{label} (no output)"
                if kind in ("output", "result", "stderr") and lines[0]:
                    self._block(f"{literal(label)} `{lines[0].replace('`', chr(39))}`")
                else:
                    shown = text if kind != "refused" else f"{label} {body}"
                    self._block(literal(shown, code_spans=True))
                continue
            longest = max((len(run) for run in _backtick_runs("\n".join(lines))), default=0)
            fence = "`" * max(3, longest + 1)
            self._block("\n".join([f"*{literal(label)}*", f"{fence}text", *lines, fence]))

    def _end_output(self) -> None:
        """End the current Markdown output (for good: no status line stays in it); what
        comes next goes into a new output below whatever is displayed in between."""
        if self._items:
            done = self._display_object(status=False)
            if self._handle is not None:
                self._handle.update(done)
            self._parts.append(("markdown", done))
        elif self._handle is not None:  # it showed a status line only
            self._handle.update(MarkdownText("", ""))
        self._items, self._handle = [], None
        self._plain_from = len(self._plain_out.getvalue())

    def _show_output(self, event: Any) -> None:
        """End the current Markdown output and show what the code displayed below it."""
        from IPython.display import display

        from jupyter_agent.agent.pyexec import describe_figure

        self._end_output()
        if event.figure is not None:
            self._shown_figures.add(f"[{describe_figure(event.figure)}]")
        bundle = (dict(event.data), dict(event.metadata or {}))
        self._parts.append(("display", bundle))
        if self._live:
            display(bundle[0], metadata=bundle[1], raw=True)

    def __call__(self, event: Any) -> None:
        """Render one event (updates the display in place where live)."""
        kind = getattr(event, "kind", "")
        if kind == "display":
            if getattr(event, "shown", True):
                with self._lock:
                    self._show_output(event)
            return
        if kind not in ("text_delta", "tool_call_start", "tool_call_end", "notice",
                        "approval_answered"):
            return
        with self._lock:
            status_gone = self._waiting.event() if self._waiting is not None else False
            self._plain(event)
            force = self._handle_event(kind, event) or status_gone
        self._show(force=force)
        if kind == "tool_call_start" and getattr(event, "asks", False) and self._live:
            with self._lock:  # the question is displayed next; the turn goes on below it
                self._end_output()

    def _handle_event(self, kind: str, event: Any) -> bool:
        """Update the items for one event; True when the display must update at once."""
        if kind == "text_delta":
            if self._items and self._items[-1][0] == "reply":
                self._items[-1][1][0] += event.text
            else:
                self._items.append(["reply", [event.text]])
            return False
        if kind == "approval_answered":
            if self._waiting is not None and self._open is not None and event.approved:
                self._waiting.running = self._open[1]
            return False
        if kind == "tool_call_start":
            self._open = (event.call_id, event.name)
            if self._waiting is not None:
                self._waiting.running = event.name
            if getattr(event, "asks", False):  # the question shows the whole code
                if self._waiting is not None:
                    self._waiting.running, self._waiting.paused = None, True
                self._block(f"**{literal('▶ ' + event.name)}**")
            elif is_code_call(event.arguments):
                text = format_tool_call(event.name, event.arguments)
                head, _, body = text.partition("\n")
                code = "\n".join(line[4:] for line in body.splitlines())
                longest = max((len(r) for r in _backtick_runs(code)), default=0)
                fence = "`" * max(3, longest + 1)
                self._block(f"**{literal(head)}**" +
                            (f"\n{fence}python\n{code}\n{fence}" if body else ""))
            else:
                if not (self._items and self._items[-1][0] == "lines"):
                    self._items.append(["lines", []])
                lines = self._items[-1][1]
                lines.append(f"▸ {format_call(event.name, event.arguments)}")
                self._calls[event.call_id] = (lines, len(lines) - 1)
            return True
        if kind == "tool_call_end":
            self._open = None
            if self._waiting is not None:
                self._waiting.running = None
            held, self._held = self._held, []
            if event.call_id in self._calls:
                lines, index = self._calls.pop(event.call_id)
                lines[index] += " " + one_line_result(event.result, event.ok)
            else:
                self._result_blocks(event.name, event.result, event.ok)
            for text in held:
                if not notice_shown_by(text, event.result):
                    self._block(f"*{literal(text)}*")
            return True
        # a notice
        if self._open is not None:
            self._held.append(str(event.text))
            return False
        self._block(f"*{literal(str(event.text))}*")
        return True

    def finish(self, *, interrupted: bool = False, drop_notice: str | None = None,
               footer: str | None = None) -> None:
        """End the turn: show its whole Markdown once (headless) or for the last time (live).

        Parameters
        ----------
        interrupted : bool
            The turn was stopped (Ctrl-C): a call that was running is marked so.
        drop_notice : str, optional
            A notice not to show (the caller shows its own message for it instead, e.g.
            the limit that ended the turn with how to raise it).
        footer : str, optional
            The turn's footer line (tokens, cost, tool calls, limits), shown last in the
            same output, in italics (Markdown) or as it is (``text/plain``).
        """
        from IPython.display import display

        with self._lock:
            if self._waiting is not None:
                self._waiting.stop()
            if interrupted and self._open is not None:
                call_id, _name = self._open
                if call_id in self._calls:
                    lines, index = self._calls.pop(call_id)
                    lines[index] += " ✗ interrupted"
                else:
                    self._block(literal("✗ interrupted while running"))
                self._open = None
            if drop_notice is not None:
                target = f"*{literal(drop_notice)}*"
                self._items = [item for item in self._items if item != ["block", target]]
                self._plain.drop_notice(drop_notice)
            self._plain.finish(interrupted=interrupted, footer=footer)
            if footer:
                self._block(f"*{literal(footer)}*")
            if not self._live:  # headless: every output of the turn, once, in order
                for kind, shown in self._parts:
                    if kind == "display":
                        display(shown[0], metadata=shown[1], raw=True)
                    elif shown.markdown.strip():
                        display(shown)
            if not self._items:
                if self._handle is not None:  # only a status line was shown
                    self._handle.update(MarkdownText("", ""))
                return
            if self._handle is not None:
                self._handle.update(self._display_object())
            else:
                display(self._display_object())


def _backtick_runs(text: str) -> list[str]:
    import re

    return re.findall(r"`+", text)
