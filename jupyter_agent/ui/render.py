"""How a turn and a saved session are shown: a turn's events as they happen, as text on a
terminal or Markdown in Jupyter; the ``%agent_resume`` recap; the figures of
``%agent_history`` between its text (docs/design.md "What the notebook shows").

The only HTML is the approval question, escaped. A stored figure is read through the store
(never following a link); one that cannot be read is named, with why.
"""

from __future__ import annotations

import contextvars
import html
import io
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from IPython.display import display

from jupyter_agent.artefacts.steps import (
    ReadFigure,
    call_code,
    figure_data,
    format_call,
    tool_result_sections,
)
from jupyter_agent.store.messages import figure_label, figure_refs, message_text
from jupyter_agent.text import (
    fence,
    format_cost,
    format_tokens,
    hard_breaks,
    inert_markdown,
    literal,
    one_line,
    plural,
    relative_time,
    shorten,
    terminal_text,
)
from jupyter_agent.ui.display import (
    RESULT_LABELS,
    call_head,
    format_messages,
    format_todos,
    one_line_result,
    result_preview,
    section_text,
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


#: Seconds without an event before the status line appears.
WAIT_AFTER = 3.0
#: The events that show something (an approval answer only ends a pause of the status line).
_SHOWN = ("text_delta", "tool_call_start", "tool_call_end", "notice")


class WaitingStatus:
    """The status line of a long wait: ``show()`` is called from a timer thread, under
    ``lock``, when :attr:`text` changed; none while an approval answer is awaited."""

    def __init__(self, show: Callable[[], object], lock: threading.RLock,
                 wait_after: float) -> None:
        self._show, self._lock, self._wait_after = show, lock, wait_after
        self.last_event = time.monotonic()
        self.running: str | None = None  # the tool that runs now, if any
        self._call: str | None = None  # the tool called, running or waiting for approval
        self.paused = False
        self.text: str | None = None
        self._done = threading.Event()
        context = contextvars.copy_context()  # the kernel's output routing of this cell
        threading.Thread(target=context.run, args=(self._loop,), daemon=True,
                         name="jupyter-agent-status").start()

    def _loop(self) -> None:
        while not self._done.wait(0.5):
            with self._lock:
                waited = time.monotonic() - self.last_event
                if self._done.is_set() or self.paused or waited < self._wait_after:
                    continue
                what = f"{self.running} running" if self.running else "waiting for the model"
                self.text = f"{what} — {int(waited)} s …"
                self._show()

    def event(self, event: Any) -> bool:
        """Note an event (which ends a pause); True if a status line was shown (now gone)."""
        self.last_event = time.monotonic()
        self.paused = False
        kind = getattr(event, "kind", "")
        if kind == "tool_call_start":
            self._call, self.paused = event.name, event.asks
            self.running = None if event.asks else event.name
        elif kind == "tool_call_end":
            self._call = self.running = None
        elif kind == "approval_answered" and event.approved:
            self.running = self._call
        shown, self.text = self.text is not None, None
        return shown

    def stop(self) -> None:
        self._done.set()
        self.text = None


class PlainTurnRenderer:
    """Render a turn's events as text written to ``stream`` (default ``sys.stdout`` at
    call time), escape sequences made inert; the Markdown of it is kept for the subclass.

    A notice raised while a call runs is shown after the result unless the result already
    says it (a refusal). The status line is shown only on a terminal, on the stream fixed
    at creation (never a ``sys.stdout`` the agent's code redirected).
    """

    def __init__(self, stream: TextIO | None = None, *, wait_after: float = WAIT_AFTER) -> None:
        self._stream = stream
        self._items: list[list[Any]] = []  # the Markdown: [kind, payload], reply / lines / block
        self._shown_figures: set[str] = set()  # "[figure 1: ...]" lines of figures shown
        self._at_line_start = True
        self._open: str | None = None  # the ID of the running call
        self._one_line = False  # the running call is shown as one line, open for its result
        self._held: list[str] = []  # notices raised while a call runs
        self._pending: list[str] = []  # notices shown at the next event (or dropped)
        self._lock = threading.RLock()
        self._status_width = 0
        self._terminal = stream or sys.stdout  # the status line's stream
        tty = stream is None and bool(getattr(self._terminal, "isatty", lambda: False)())
        self._waiting = WaitingStatus(self._show_status, self._lock, wait_after) if tty else None

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
        if text:
            out = self._stream or sys.stdout
            out.write(text)
            out.flush()
            self._at_line_start = text.endswith("\n")

    def _write_block(self, text: str) -> None:
        self._write(("" if self._at_line_start else "\n") + text + "\n")

    def __call__(self, event: Any) -> None:
        with self._lock:
            if self._waiting is not None:
                self._waiting.event(event)
                self._clear_status()
            self._event(event)

    def _event(self, event: Any) -> bool:
        """Show one event; True when a live display must update at once."""
        kind = getattr(event, "kind", "")
        if kind in _SHOWN:
            self._flush_pending()
        if kind == "text_delta":
            self._write(event.text)
            if self._items and self._items[-1][0] == "reply":
                self._items[-1][1] += event.text
            else:
                self._items.append(["reply", event.text])
            return False
        if kind == "tool_call_start":
            code = call_code(event.arguments)
            self._open, self._one_line = event.call_id, code is None and not event.asks
            if self._one_line:
                line = f"▸ {format_call(event.name, event.arguments)}"
                self._write(("" if self._at_line_start else "\n") + line)
                if not (self._items and self._items[-1][0] == "lines"):
                    self._items.append(["lines", []])
                self._items[-1][1].append(line)
            else:
                code = "" if event.asks else shorten((code or "").rstrip(), 2000)
                self._write_block(call_head(event.name, code))
                self._block(f"**{literal('▶ ' + event.name)}**"
                            + (f"\n{fence(code, 'python')}" if code else ""))
            return True
        if kind == "tool_call_end":
            if self._one_line:
                self._call_result(one_line_result(event.result, event.ok))
            else:
                for section, body in tool_result_sections(event.result, event.ok):
                    self._section(section, body)
            held, self._held, self._open, self._one_line = self._held, [], None, False
            for text in held:
                if text not in event.result and text.split(" ", 1)[-1] not in event.result:
                    self._notice(text, now=True)
            return True
        if kind != "notice":
            return False
        if self._open is not None:
            self._held.append(str(event.text))
            return False
        self._notice(str(event.text))
        return True

    def _block(self, markdown: str) -> None:
        self._items.append(["block", markdown])

    def _call_result(self, text: str) -> None:
        self._write(f" {text}\n")
        self._items[-1][1][-1] += " " + text  # nothing else is shown while a call runs

    def _section(self, kind: str, body: str) -> None:
        label, quoted = RESULT_LABELS[kind], kind in ("output", "result", "stderr")
        lines = result_preview(body) if quoted else body.splitlines() or [""]
        self._write_block(section_text(kind, body))
        if kind == "output" and self._shown_figures:
            # a figure shown above in its place: its line is for the model, not for you
            body = "\n".join(line for line in body.split("\n")
                             if line not in self._shown_figures).strip("\n")
            if not body:
                return
            lines = result_preview(body)
        if kind not in ("refused", "message") and len(lines) > 1:
            self._block(f"*{literal(label)}*\n" + fence("\n".join(lines), "text"))
        elif quoted and lines[0]:
            self._block(f"{literal(label)} `{lines[0].replace('`', chr(39))}`")
        else:
            shown = f"{label} {body if kind == 'refused' else lines[0] or '(no output)'}"
            self._block(literal(shown, code_spans=True))

    def _notice(self, text: str, *, now: bool = False) -> None:
        self._pending.append(text)
        self._block(f"*{literal(text)}*")
        if now:
            self._flush_pending()

    def _flush_pending(self) -> None:
        pending, self._pending = self._pending, []
        for text in pending:
            self._write_block(text if text.startswith("[") else f"[{text}]")

    def finish(self, *, interrupted: bool = False, drop_notice: str | None = None,
               footer: str | None = None) -> None:
        """End on a fresh line, then ``footer``; ``interrupted``: a running call is marked so;
        ``drop_notice``: a notice the caller says its own way (the limit that ended the turn)."""
        with self._lock:
            if self._waiting is not None:
                self._waiting.stop()
                self._clear_status()
            if self._one_line and interrupted:
                self._call_result("✗ interrupted")
            elif self._open is not None and interrupted:
                self._section("message", "interrupted while running")
            self._open, self._one_line = None, False
            self._pending = [t for t in self._pending if t != drop_notice]
            self._items = [item for item in self._items
                           if item != ["block", f"*{literal(drop_notice or '')}*"]]
            self._flush_pending()
            if not self._at_line_start:
                self._write("\n")
            if footer:
                self._write(footer + "\n")
                self._block(f"*{literal(footer)}*")


class MarkdownTurnRenderer(PlainTurnRenderer):
    """Render a turn's events as Markdown, with ``text/plain`` alongside: what
    :class:`PlainTurnRenderer` writes, into a buffer.

    Parameters
    ----------
    live : bool
        True where a person watches: the display is updated in place as the turn streams
        and shows the status line. False (nbclient, nbconvert, papermill): nothing shows
        until :meth:`finish`. Either way the notebook ends with the same outputs.
    min_interval : float, optional
        Seconds between two updates while text streams in; calls, notices and
        :meth:`finish` always update.
    wait_after : float, optional
        Seconds without an event before the status line appears (live only).

    What the agent's code displays is its own output: the turn's Markdown goes on below it.
    """

    def __init__(self, *, live: bool = True, min_interval: float = 0.1,
                 wait_after: float = WAIT_AFTER) -> None:
        self._plain_out = io.StringIO()
        super().__init__(self._plain_out)
        self._live = live
        self._handle: Any = None
        self._parts: list[tuple[Any, dict[str, Any]]] = []  # finished outputs, display kwargs
        self._plain_from = 0  # where the current output's plain text starts
        self._min_interval = min_interval
        self._shown_at = float("-inf")
        self._waiting = WaitingStatus(self._show_locked, self._lock, wait_after) if live else None

    def _display_object(self, *, status: bool = True) -> MarkdownText:
        blocks = []
        for kind, payload in self._items:
            if kind == "reply":
                payload = inert_markdown(payload.strip("\n"))
            elif kind == "lines":
                payload = "  \n".join(literal(line) for line in payload)
            if payload.strip():
                blocks.append(payload)
        if status and self._waiting is not None and self._waiting.text:
            blocks.append(f"*{literal(self._waiting.text)}*")
        plain = self._plain_out.getvalue()[self._plain_from:].rstrip("\n")
        return MarkdownText("\n\n".join(blocks), plain.lstrip("\n") if self._plain_from else plain)

    def _show_locked(self) -> None:
        self._shown_at = time.monotonic()
        if self._handle is None:
            self._handle = display(self._display_object(), display_id=True)
        else:
            self._handle.update(self._display_object())

    def _end_output(self) -> None:
        """End the current Markdown output for good; what follows goes in a new one."""
        done = self._display_object(status=False) if self._items else MarkdownText("", "")
        if self._handle is not None:  # (wiped if it showed only a status line)
            self._handle.update(done)
        if done.markdown.strip():
            self._parts.append((done, {}))
        self._items, self._handle = [], None
        self._plain_from = len(self._plain_out.getvalue())

    def __call__(self, event: Any) -> None:
        kind = getattr(event, "kind", "")
        if kind == "display":
            if event.shown:
                # lazy: importing the agent package at extension load costs ~0.5 s
                from jupyter_agent.agent.pyexec import describe_figure

                with self._lock:
                    self._end_output()
                    if event.figure is not None:
                        self._shown_figures.add(f"[{describe_figure(event.figure)}]")
                    how = {"metadata": dict(event.metadata or {}), "raw": True}
                    self._parts.append((dict(event.data), how))
                    if self._live:
                        display(dict(event.data), **how)
            return
        if kind not in _SHOWN and kind != "approval_answered":
            return
        with self._lock:
            status_gone = self._waiting.event(event) if self._waiting is not None else False
            force = self._event(event) or status_gone
            if self._live and (force or time.monotonic() - self._shown_at >= self._min_interval):
                self._show_locked()
            if kind == "tool_call_start" and event.asks and self._live:
                self._end_output()  # the question is displayed next; the turn goes on below it

    def finish(self, *, interrupted: bool = False, drop_notice: str | None = None,
               footer: str | None = None) -> None:
        """End the turn: its whole Markdown shown once (headless) or for the last time."""
        with self._lock:
            super().finish(interrupted=interrupted, drop_notice=drop_notice, footer=footer)
            if not self._live:  # headless: every output of the turn, once, in order
                for shown, how in self._parts:
                    display(shown, **how)
            if self._handle is not None:  # (wiped if it showed only a status line)
                self._handle.update(self._display_object() if self._items else MarkdownText("", ""))
            elif self._items:
                display(self._display_object())


#: The approval question's view in Jupyter: the whole text, scrolling past ~25 lines.
_QUESTION_STYLE = ("max-height: 25em; overflow: auto; white-space: pre; margin: 0.3em 0; "
                   "padding: 0.4em; border: 1px solid var(--jp-border-color1, #ccc)")


def show_question(intro: str, text: str) -> None:
    """Display an approval question: the whole ``text`` HTML-escaped in a scrollable
    ``<pre>`` under its first line; ``text/plain`` as on a terminal."""
    # lazy: importing the agent package at extension load costs ~0.5 s
    from jupyter_agent.agent.tools import question_text, visible_controls

    plain = question_text(intro, text)
    body = html.escape(visible_controls(text.rstrip("\n")))
    display({"text/plain": plain,
             "text/html": f"<div><b>{html.escape(plain.split(chr(10), 1)[0])}</b>"
                          f'<pre style="{_QUESTION_STYLE}">{body}</pre></div>'}, raw=True)


def last_figure(messages: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The reference (``id``, ``media_type``...) of the last figure the messages name."""
    return next(reversed(list(figure_refs(messages))), None)


def recap_text(record: SessionRecord, *, unarchived: bool = False,
               endpoint_note: str = "") -> MarkdownText:
    """What ``%agent_resume`` shows: title, usage, ``endpoint_note``, summary, open todos, the
    last exchange and figure."""
    state = record.state
    shown = sum(m.get("role") != "system" for m in record.transcript)
    usage = (f"updated {relative_time(record.updated_at)} · "
             f"{format_messages(shown)} · {format_tokens(state.usage)} · "
             f"{format_cost(state.usage)} · {plural(state.tool_calls, 'tool call')}")
    title = f" — {record.title}" if record.title else ""
    parts = [(f"Resumed session {record.id}{title}",
              f"#### Resumed: {literal(record.title or f'session {record.id}')}"),
             (usage, literal(f"{record.id} · {usage}"))]  # (plain, Markdown)
    if endpoint_note:
        parts.append((endpoint_note, f"**Endpoint:** {literal(endpoint_note)}"))
    if unarchived:
        parts.append(("unarchived: the session was archived; resuming took it out of the archive",
                      "*The session was archived; resuming took it out of the archive.*"))
    if record.summary:
        summary = shorten(record.summary.strip(), 600)
        parts.append(("summary: " + summary,
                      "**Summary**\n\n" + inert_markdown(hard_breaks(summary))))
    todos = [t for t in state.todos if t.status in ("pending", "in_progress")]
    if todos:
        parts.append(("open todos:\n" + format_todos(todos), "**Open todos**\n\n" + "\n".join(
            f"- {t.id}\\. {literal(t.text)} — *{t.status.replace('_', ' ')}*" for t in todos)))
    exchange = []
    for label, role in (("prompt", "user"), ("reply", "assistant")):
        text = next((message_text(m) for m in reversed(record.messages) if m.get("role") == role
                     and (role == "user" or message_text(m))), None)
        if text is not None:
            exchange.append((f"last {label}: ".ljust(13) + one_line(text, 300),
                             f"**Last {label}:** {literal(one_line(text, 300))}"))
    if exchange:
        parts.append(("\n".join(p for p, _ in exchange), "  \n".join(m for _, m in exchange)))
    figure = last_figure(record.transcript)
    if figure is not None:
        parts.append((f"last figure: {figure_label(figure)} (%agent_history shows it)",
                      f"**Last figure:** {literal(figure_label(figure))} (below; "
                      "`%agent_history` shows every figure)"))
    markdown = [m for _, m in parts] + ["Continue with `%%agent`."]
    return MarkdownText("\n\n".join(markdown), "\n".join(p for p, _ in parts))


def show_figure(ref: dict[str, Any], read: ReadFigure | None, *,
                width: int | None = None) -> None:
    """Display a figure (``width`` in CSS pixels; default: its own), or say why it cannot be."""
    data, why = figure_data(read, ref)
    if data is None:
        print(terminal_text(f"[{figure_label(ref)}: cannot be shown: {why}]"))
        return
    metadata = {next(iter(data)): {"width": width}} if width else {}
    data["text/plain"] = f"[{figure_label(ref)}]"
    display(data, metadata=metadata, raw=True)


def show_blocks(blocks: Sequence[tuple[str, Sequence[dict[str, Any]]]],
                read: ReadFigure | None) -> None:
    """Print ``(text, figure references)`` blocks made inert, each figure after its text
    (without ``read``, only the lines in the text name them)."""
    for i, (text, refs) in enumerate(blocks):
        refs = refs if read else ()
        print(terminal_text(text) + ("" if refs or i == len(blocks) - 1 else "\n"))
        for ref in refs:
            show_figure(ref, read)
