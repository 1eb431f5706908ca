"""A transcript read as the steps of an analysis, for the exports.

:func:`steps` walks a record's transcript (never the working context: compaction does
not shorten it) and yields, in order: each user :class:`Request`, each assistant
:class:`Reply` text, each :class:`Call` with the result it got, and a
:class:`Marker` where a compaction happened. System messages are left out: they carry
the project's and the user's notes, which an export is not meant to share.

A call's :attr:`Call.outcome` says whether its code ran, from its recorded result:
``"ok"``, ``"error"`` (it ran and failed), ``"refused"`` (the approval policy or the
user said no, so it never ran), ``"not run"`` (the agent answered it itself: not
executed, interrupted, result unknown) or ``"missing"`` (no result was saved).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from jupyter_agent.artefacts.turns import SYNTHETIC_PREFIX, call_results
from jupyter_agent.store import Compaction, SessionRecord
from jupyter_agent.store.messages import message_text

__all__ = [
    "Call",
    "Marker",
    "Outcome",
    "Progress",
    "Reply",
    "Request",
    "Step",
    "no_progress",
    "steps",
]

T = TypeVar("T")

Progress = Callable[[Iterable[Any], int], Iterable[Any]]
"""``progress(items, total)`` yields ``items`` while showing how far it got (a
terminal progress bar in the CLI); :func:`no_progress` shows nothing."""

Outcome = Literal["ok", "error", "refused", "not run", "missing"]


def no_progress(items: Iterable[T], total: int) -> Iterable[T]:
    """The :data:`Progress` that shows nothing."""
    return items


@dataclass(frozen=True)
class Request:
    """A user message: the ``turn``-th request (1-based) and its text."""

    turn: int
    text: str


@dataclass(frozen=True)
class Reply:
    """An assistant message's text (with or without tool calls after it)."""

    text: str


@dataclass(frozen=True)
class Call:
    """One tool call and the result recorded for it.

    Attributes
    ----------
    id, name : str
    arguments : dict or None
        The decoded JSON arguments (``None`` when they were not a JSON object).
    raw_arguments : str
    result : str or None
        The tool result's text, ``None`` when none was saved.
    outcome : {"ok", "error", "refused", "not run", "missing"}
    figures : tuple of dict
        References of the figures the call made, in order.
    """

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str
    result: str | None
    outcome: Outcome
    figures: tuple[dict[str, Any], ...] = ()

    @property
    def code(self) -> str | None:
        """The Python source of a ``run_python`` call, else ``None``."""
        code = (self.arguments or {}).get("code")
        return code if self.name == "run_python" and isinstance(code, str) else None


@dataclass(frozen=True)
class Marker:
    """A compaction happened here (between the messages around it)."""

    compaction: Compaction


Step = Request | Reply | Call | Marker


def _outcome(result: str | None) -> Outcome:
    if result is None:
        return "missing"
    if result.startswith(SYNTHETIC_PREFIX):
        return "not run"
    if result.startswith("error: refused"):
        return "refused"
    if result.startswith("error: "):
        return "error"
    return "ok"


def _result_text(message: dict[str, Any]) -> str:
    """A tool result as recorded: string content kept as is (a printed table's leading
    spaces matter), other content as its text."""
    content = message.get("content")
    return content if isinstance(content, str) else message_text(message)


def _arguments(raw: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw or "{}")
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def steps(record: SessionRecord, progress: Progress = no_progress) -> Iterator[Step]:
    """The steps of ``record``'s transcript, in order (see the module docstring).

    Parameters
    ----------
    record : SessionRecord
    progress : Progress, optional
        Wraps the walk over the transcript's messages.

    Yields
    ------
    Request, Reply, Call or Marker
    """
    transcript = record.transcript
    results = call_results(transcript)
    marks: dict[int, list[Compaction]] = {}
    for c in record.compactions:
        marks.setdefault(min(c.transcript_length, len(transcript)), []).append(c)
    turn = 0
    for index, message in enumerate(progress(transcript, len(transcript))):
        for c in marks.pop(index, []):
            yield Marker(c)
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
                answer = results.get(str(call.get("id")))
                result = None if answer is None else _result_text(answer)
                refs = answer.get("figures") if answer is not None else None
                figures = tuple(r for r in refs if isinstance(r, dict)) \
                    if isinstance(refs, list) else ()
                yield Call(str(call.get("id", "")), str(function.get("name", "?")),
                           _arguments(raw), raw, result, _outcome(result), figures)
    for pending in marks.values():
        for c in pending:
            yield Marker(c)
