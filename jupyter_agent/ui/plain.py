"""PlainTurnRenderer: a turn's events as plain text, for terminal IPython and plain shells.

What it shows, and in which order, is described in :mod:`jupyter_agent.ui.render` (the
Markdown renderer's module, which re-exports this class): text is written as it
arrives, with terminal escape sequences and control characters made inert
(:func:`~jupyter_agent.ui.display.terminal_text`); the status line of long waits is shown
only on a terminal, written to the terminal itself (never through the ``sys.stdout`` that
code run by the agent has redirected, so it is never part of a tool result), and not while
the turn waits for an approval answer; what the agent's code displays is left to the tool
result, which names it. A call that will ask for approval shows only its name: the
question shows the whole code.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, TextIO

from jupyter_agent.ui import calls
from jupyter_agent.ui.display import terminal_text
from jupyter_agent.ui.status import WAIT_AFTER, WaitingStatus

__all__ = ["PlainTurnRenderer"]


class PlainTurnRenderer:
    """Render a turn's events as plain text written to ``stream`` (default: ``sys.stdout``
    at call time). The status line of long waits is shown only on a terminal."""

    def __init__(self, stream: TextIO | None = None, *, wait_after: float = WAIT_AFTER) -> None:
        self._stream = stream
        self._at_line_start = True
        self._open_call = ""  # the ID of a one-line call waiting for its result
        self._open: tuple[str, str] | None = None
        self._held: list[str] = []
        self._lock = threading.RLock()
        self._status_width = 0
        out = stream or sys.stdout
        self._terminal = out  # the status line's stream, fixed before any code runs
        tty = stream is None and bool(getattr(out, "isatty", lambda: False)())
        self._waiting = WaitingStatus(self._show_status, self._lock, wait_after) if tty else None
        self._pending: list[str] = []  # notices shown at the next event (or dropped)

    def _out(self) -> TextIO:
        return self._stream or sys.stdout

    def _show_status(self) -> None:
        if self._waiting is None or not self._waiting.text or not self._at_line_start:
            return
        text = self._waiting.text
        self._terminal.write("\r" + text + " " * max(self._status_width - len(text), 0))
        self._terminal.flush()
        self._status_width = len(text)

    def _clear_status(self) -> None:
        if self._status_width:
            self._terminal.write("\r" + " " * self._status_width + "\r")
            self._terminal.flush()
            self._status_width = 0

    def _write(self, text: str) -> None:
        text = terminal_text(text)  # a reply or tool result may carry escape sequences
        if not text:
            return
        out = self._out()
        out.write(text)
        out.flush()
        self._at_line_start = text.endswith("\n")

    def _block(self, text: str) -> None:
        self._write(("" if self._at_line_start else "\n") + text + "\n")

    def __call__(self, event: Any) -> None:
        """Render one event."""
        with self._lock:
            if self._waiting is not None:
                self._waiting.event()
                self._clear_status()
            self._render(event)

    def _render(self, event: Any) -> None:
        kind = getattr(event, "kind", "")
        if kind in ("text_delta", "tool_call_start", "tool_call_end", "notice"):
            self._flush_pending()
        if kind == "text_delta":
            self._write(event.text)
        elif kind == "tool_call_start":
            self._open = (event.call_id, event.name)
            if self._waiting is not None:
                self._waiting.running = event.name
            if getattr(event, "asks", False):  # the question shows it all
                if self._waiting is not None:
                    self._waiting.running, self._waiting.paused = None, True
                self._block(f"▶ {event.name}")
                return
            if not calls.is_code_call(event.arguments):
                start = "" if self._at_line_start else "\n"
                self._write(f"{start}▸ {calls.format_call(event.name, event.arguments)}")
                self._open_call = event.call_id
                return
            self._block(calls.format_tool_call(event.name, event.arguments))
        elif kind == "tool_call_end":
            self._open = None
            if self._waiting is not None:
                self._waiting.running = None
            if event.call_id == self._open_call:
                self._write(f" {calls.one_line_result(event.result, event.ok)}\n")
            else:
                self._result(event.result, event.ok)
            held, self._held = self._held, []
            for text in held:
                if not calls.notice_shown_by(text, event.result):
                    self._notice(text)
        elif kind == "notice":
            if self._open is not None:
                self._held.append(str(event.text))
                return
            self._pending.append(str(event.text))
        elif kind == "approval_answered":
            if self._waiting is not None and self._open is not None and event.approved:
                self._waiting.running = self._open[1]
            return
        self._open_call = ""

    def _flush_pending(self) -> None:
        pending, self._pending = self._pending, []
        for text in pending:
            self._notice(text)

    def _notice(self, text: str) -> None:
        self._block(text if text.startswith("[") else f"[{text}]")

    def _result(self, result: str, ok: bool) -> None:
        for kind, body in calls.tool_result_sections(result, ok):
            label = calls.RESULT_LABELS[kind]
            if kind in ("refused", "message"):
                self._block(f"  {label} {body}")
                continue
            lines = calls.result_preview(body) if kind != "error" else body.splitlines() or [""]
            first, *rest = lines
            self._block("\n".join([f"  {label} {first}", *(f"    {line}" for line in rest)]))

    def drop_notice(self, text: str) -> None:
        """Do not show the notice ``text`` (a notice is written at the next event, so only
        the turn's last one can still be dropped; the caller shows its own message)."""
        self._pending = [t for t in self._pending if t != text]

    def finish(self, *, interrupted: bool = False, drop_notice: str | None = None,
               footer: str | None = None) -> None:
        """End the turn's output on a fresh line (a running call marked interrupted), then
        the footer line if given.

        ``drop_notice``, ``footer``: see :meth:`MarkdownTurnRenderer.finish`.
        """
        with self._lock:
            if self._waiting is not None:
                self._waiting.stop()
                self._clear_status()
            if interrupted and self._open is not None:
                if self._open_call:
                    self._write(" ✗ interrupted\n")
                else:
                    self._block("  ✗ interrupted while running")
                self._open = None
            if drop_notice is not None:
                self.drop_notice(drop_notice)
            self._flush_pending()
            if not self._at_line_start:
                self._write("\n")
            if footer:
                self._write(footer + "\n")
