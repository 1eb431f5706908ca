"""A transcript read as user turns and as the steps of an analysis (request, reply, tool
call with its result, compaction marker; no system messages), for history, forks and
exports; figures read for display, tool calls in one line.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.store import Compaction, FigureData
from jupyter_agent.store.messages import message_text
from jupyter_agent.text import shorten

SYNTHETIC_PREFIX = "[jupyter-agent] "  # a tool result the agent wrote for a call that did not run

Progress = Callable[[Iterable[Any], int], Iterable[Any]]  # progress(items, total) yields items
ReadFigure = Callable[[str], FigureData]  # read(figure_id) from the exported session's store


def no_progress(items: Iterable[Any], total: int) -> Iterable[Any]:
    return items


def turn_starts(messages: Sequence[dict[str, Any]]) -> list[int]:
    """The indexes of the user messages (each starts a turn), in order."""
    return [i for i, m in enumerate(messages) if m.get("role") == "user"]


def complete_length(messages: Sequence[dict[str, Any]]) -> int:
    """Length of ``messages`` without a trailing assistant message whose tool calls are not
    all answered (a session saved while its agent ran a tool batch)."""
    i = len(messages)
    while i > 0 and messages[i - 1].get("role") == "tool":
        i -= 1
    last = messages[i - 1] if i > 0 else {}
    calls = last.get("tool_calls") if last.get("role") == "assistant" else None
    answered = {m.get("tool_call_id") for m in messages[i:]}
    if calls and not all(c.get("id") in answered for c in calls):
        return i - 1
    return len(messages)


@dataclass(frozen=True)
class Request:
    turn: int  # 1-based
    text: str


@dataclass(frozen=True)
class Reply:
    text: str


@dataclass(frozen=True)
class Call:
    """A tool call (``arguments`` as sent) and its recorded result (None when none was
    saved); ``figures`` are the references it made."""

    id: str
    name: str
    arguments: str
    result: str | None
    figures: tuple[dict[str, Any], ...] = ()

    @property
    def outcome(self) -> Literal["ok", "error", "not run"]:
        """"not run" also for a refused call, or one without a saved result."""
        if self.result is None or self.result.startswith((SYNTHETIC_PREFIX, "error: refused")):
            return "not run"
        return "error" if self.result.startswith("error: ") else "ok"

    @property
    def code(self) -> str | None:
        """The source of a ``run_python`` call, else None."""
        return call_code(self.arguments) if self.name == "run_python" else None


@dataclass(frozen=True)
class Marker:
    compaction: Compaction


Step = Request | Reply | Call | Marker


def steps(transcript: Sequence[dict[str, Any]], compactions: Sequence[Compaction] = (),
          progress: Progress = no_progress) -> Iterator[Step]:
    """The steps of ``transcript`` (or of a working context), in order, a marker before
    message ``transcript_length`` of each compaction."""
    results: dict[str, dict[str, Any]] = {}  # call ID -> the first tool message answering it
    for m in transcript:
        if m.get("role") == "tool":
            results.setdefault(str(m.get("tool_call_id")), m)
    marks: dict[int, list[Compaction]] = {}
    for c in compactions:
        marks.setdefault(min(c.transcript_length, len(transcript)), []).append(c)
    turn = 0
    for index, message in enumerate(progress(transcript, len(transcript))):
        yield from map(Marker, marks.pop(index, []))
        role = message.get("role")
        text = message_text(message)
        if role == "user":
            turn += 1
            yield Request(turn, text)
        elif role == "assistant":
            if text:
                yield Reply(text)
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                raw = str(function.get("arguments") or "")
                answer = results.get(str(call.get("id"))) or {}
                content = answer.get("content")  # a string as is: a table's leading spaces matter
                result = (content if isinstance(content, str) else message_text(answer)
                          if answer else None)
                refs = answer.get("figures")
                figures = tuple(r for r in refs if isinstance(r, dict)) \
                    if isinstance(refs, list) else ()
                yield Call(str(call.get("id", "")), str(function.get("name", "?")),
                           raw, result, figures)
    for pending in marks.values():
        yield from map(Marker, pending)


def figure_data(read: ReadFigure | None, ref: dict[str, Any]
                ) -> tuple[dict[str, Any] | None, str]:
    """``({media type: base64, or SVG text}, "")``, or ``(None, why it cannot be read)``."""
    if read is None:
        return None, "the figure files were not available to the export"
    try:
        figure = read(str(ref.get("id")))
    except (JupyterAgentError, OSError) as err:
        return None, str(err)
    if figure.media_type == "image/svg+xml":
        return {figure.media_type: figure.data.decode("utf-8", "replace")}, ""
    return {figure.media_type: base64.b64encode(figure.data).decode("ascii")}, ""


def call_arguments(arguments: str) -> Any:
    """A tool call's decoded JSON arguments, else the text as it is."""
    try:
        return json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to decode
        return arguments


def call_code(arguments: str) -> str | None:
    """The Python ``code`` a call's arguments hold, else ``None``."""
    args = call_arguments(arguments)
    code = args.get("code") if isinstance(args, dict) else None
    return code if isinstance(code, str) else None


def _argument_value(value: Any, limit: int) -> str:
    if isinstance(value, str):  # a cut string keeps its closing quote: "first words…"
        return json.dumps(shorten(value, max(limit - 2, 1)), ensure_ascii=False)
    return shorten(json.dumps(value, ensure_ascii=False), limit)


def format_call(name: str, arguments: str, *, limit: int = 80) -> str:
    """``update_todo(id=1, status="in_progress")``, each value cut to ``limit``."""
    args = call_arguments(arguments)
    if isinstance(args, dict):
        shown = ", ".join(f"{key}={_argument_value(value, limit)}" for key, value in args.items())
    else:
        shown = shorten(" ".join(str(args).split()), min(limit, 80))
    return f"{name}({shown})"


def tool_result_sections(result: str, ok: bool) -> list[tuple[str, str]]:
    """A tool result (what the model reads) split into ``(kind, text)`` parts, each shown
    under one label, so no section marker shows twice.

    ``kind`` is ``"output"``, ``"stderr"``, ``"result"`` (the last expression's value),
    ``"error"``, ``"refused"`` or ``"message"`` (why a call did not finish; what an
    interrupted call printed follows as ``"output"``). Empty parts are dropped; an empty
    result is ``[("output", "")]``. ``ok`` is False for a failed, refused or unrun call.
    """
    text = result.strip("\n")
    if not ok and text.startswith(("interrupted", "not executed", "result unknown")):
        reason, _, printed = text.partition("\n")
        return [("message", reason)] + ([("output", printed.strip("\n"))]
                                        if printed.strip() else [])
    if not ok and text.startswith("error: "):
        text = text[len("error: "):]
        if text.startswith("refused: "):
            return [("refused", text[len("refused: "):])]
    # the section marker lines of a ``run_python`` result: what follows is that kind
    pieces = re.split(r"^\[(stderr|result|error)\]$", text, flags=re.M)
    sections = [(kind, body.strip("\n"))
                for kind, body in zip(["output", *pieces[1::2]], pieces[::2], strict=True)]
    sections = [(kind, body) for kind, body in sections if body]
    if not ok and len(sections) == 1 and sections[0][0] == "output":
        first = sections[0][1]
        kind = "message" if "\n" not in first and not first.startswith("Traceback") else "error"
        return [(kind, first)]
    return sections or [("output", "")]
