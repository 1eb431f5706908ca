"""The working context: size estimate, tool-pair repair, where compaction may cut.

Pure functions over lists of Chat Completions message dicts; nothing here does I/O.

Invariants kept by the loop with these helpers:

* every assistant tool call is followed, before the next non-tool message, by
  exactly one ``tool`` message answering it (a missing one gets a synthetic
  result right after the batch, saying why it is missing);
* a ``tool`` message answering no preceding call is dropped from the working
  context (the store's transcript keeps it);
* compaction cuts only before a ``user`` or ``assistant`` message, never between an
  assistant tool call and its results.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SUMMARY_MARKER",
    "RepairReport",
    "choose_cut",
    "estimate_schema_tokens",
    "estimate_tokens",
    "message_chars",
    "render_for_summary",
    "repair_tool_pairs",
    "synthetic_result",
]

SUMMARY_MARKER = "[jupyter-agent] Summary of earlier conversation"
"""First words of the message that replaces compacted turns."""

CHARS_PER_TOKEN = 4
"""Rough characters per token for text the endpoint has not counted yet."""

_PER_MESSAGE_TOKENS = 4


def message_chars(message: dict[str, Any]) -> int:
    """Characters of a message that count toward the prompt (content, tool calls)."""
    n = 0
    content = message.get("content")
    if isinstance(content, str):
        n += len(content)
    elif isinstance(content, list):
        n += len(json.dumps(content, ensure_ascii=False))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        n += len(function.get("name") or "") + len(function.get("arguments") or "") + 24
    return n


def estimate_tokens(
    messages: Sequence[dict[str, Any]], *, base_tokens: int | None = None, base_len: int = 0
) -> int:
    """Estimated prompt size of ``messages`` in tokens.

    Parameters
    ----------
    messages : sequence of dict
    base_tokens : int, optional
        Prompt + completion tokens the endpoint reported for the last call, which
        covered ``messages[:base_len]``. When None, everything is estimated.
    base_len : int
        How many leading messages ``base_tokens`` covers.

    Returns
    -------
    int
        ``base_tokens`` plus ~1 token per 4 characters (and a small per-message
        overhead) for the messages after ``base_len``.
    """
    start = base_len if base_tokens is not None else 0
    rest = messages[start:]
    tail = sum(message_chars(m) for m in rest) // CHARS_PER_TOKEN + _PER_MESSAGE_TOKENS * len(rest)
    return (base_tokens or 0) + tail


def estimate_schema_tokens(schemas: Sequence[dict[str, Any]]) -> int:
    """Estimated tokens of a request's tool schemas (~1 per 4 characters of their JSON)."""
    return len(json.dumps(list(schemas), ensure_ascii=False)) // CHARS_PER_TOKEN if schemas else 0


def synthetic_result(call_id: str, reason: str) -> dict[str, Any]:
    """A tool message answering ``call_id`` that says the call did not run."""
    return {"role": "tool", "tool_call_id": call_id, "content": f"[jupyter-agent] {reason}"}


@dataclass(frozen=True)
class RepairReport:
    """What :func:`repair_tool_pairs` changed.

    Attributes
    ----------
    added : tuple of str
        Call IDs that received a synthetic result.
    dropped : int
        Tool messages removed because no preceding call matched (or a duplicate).
    appended_only : bool
        True when the repaired list merely extends the input (so a plain
        ``save`` can record it).
    """

    added: tuple[str, ...] = ()
    dropped: int = 0
    appended_only: bool = True

    @property
    def changed(self) -> bool:
        """Whether the repair altered anything."""
        return bool(self.added or self.dropped)

    def describe(self) -> str:
        """One line for the store's compaction log and for notices."""
        parts = []
        if self.added:
            parts.append(f"{len(self.added)} unanswered tool call(s) given a synthetic result")
        if self.dropped:
            parts.append(f"{self.dropped} orphan tool result(s) dropped from the working context")
        return "repaired tool pairs: " + "; ".join(parts) if parts else "no repair needed"


def repair_tool_pairs(
    messages: Sequence[dict[str, Any]],
    reason: str = "not executed (the run was interrupted)",
    *,
    start: int = 0,
) -> tuple[list[dict[str, Any]], RepairReport]:
    """Give every assistant tool call exactly one result; drop orphan results.

    Existing results keep their order; synthetic ones follow them, right after the
    batch.

    Parameters
    ----------
    messages : sequence of dict
        A working context.
    reason : str
        Text of the synthetic results (prefixed with ``[jupyter-agent]``).
    start : int
        Messages before this index are known to be in order (every call answered, no
        orphan): only the rest is checked, from the message that opened the last tool
        batch before ``start`` on. Makes a check after a few appended messages cost
        O(new messages), not O(session).

    Returns
    -------
    (list of dict, RepairReport)
        The repaired list (``messages`` itself when nothing changed, else a new list of
        the same dict objects) and what changed.
    """
    start = max(0, min(start, len(messages)))
    while start > 0 and messages[start - 1].get("role") == "tool":
        start -= 1
    start = max(0, start - 1)  # the message that opened the batch (or any other)
    if start:
        tail, report = repair_tool_pairs(messages[start:], reason)
        if not report.changed:
            return (messages if isinstance(messages, list) else list(messages)), report
        return [*messages[:start], *tail], report
    out: list[dict[str, Any]] = []
    added: list[str] = []
    dropped = 0
    first_change: int | None = None
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        role = message.get("role")
        if role == "tool":  # not directly after a batch: orphan
            dropped += 1
            first_change = i if first_change is None else first_change
            i += 1
            continue
        out.append(message)
        i += 1
        calls = message.get("tool_calls") if role == "assistant" else None
        if not calls:
            continue
        pending = [c.get("id") for c in calls]
        while i < n and messages[i].get("role") == "tool":
            call_id = messages[i].get("tool_call_id")
            if call_id in pending:
                pending.remove(call_id)
                out.append(messages[i])
            else:
                dropped += 1
                first_change = i if first_change is None else first_change
            i += 1
        for call_id in pending:
            added.append(str(call_id))
            out.append(synthetic_result(str(call_id), reason))
            first_change = i if first_change is None else first_change
    appended_only = dropped == 0 and (first_change is None or first_change >= n)
    return out, RepairReport(tuple(added), dropped, appended_only)


def _is_cut_point(messages: Sequence[dict[str, Any]], i: int) -> bool:
    return messages[i].get("role") in ("user", "assistant")


def choose_cut(
    messages: Sequence[dict[str, Any]], *, keep_tokens: int, keep_turns: int = 2,
    keep_from: int | None = None,
) -> int | None:
    """Where to split the working context for compaction.

    ``messages[1:cut]`` get summarized; ``messages[cut:]`` stay verbatim; message 0
    (the system message with the notes) always stays.

    Policy: keep the last ``keep_turns`` user turns if they fit in ``keep_tokens``
    (estimated at 4 characters per token), else as many whole recent turns as fit,
    else the longest tail starting at an assistant or user message that fits, else
    the shortest such tail. Never cuts before a ``tool`` message.

    Parameters
    ----------
    messages : sequence of dict
        The working context (message 0 is the system message).
    keep_tokens : int
        Budget in tokens (estimated) for the verbatim tail.
    keep_turns : int
        Recent user turns to keep whole when they fit.
    keep_from : int, optional
        ``messages[keep_from:]`` stay verbatim whatever their size: the index of the
        request of the turn in progress, which is never summarized.

    Returns
    -------
    int or None
        The cut index, or None when there is nothing worth summarizing (no
        assistant or tool message before the cut: only the first prompt or an
        earlier summary).
    """
    n = len(messages)
    last = n - 1 if keep_from is None else min(keep_from, n - 1)
    candidates = [i for i in range(2, last + 1) if _is_cut_point(messages, i)]
    if not candidates:
        return None
    suffix = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + message_chars(messages[i]) // CHARS_PER_TOKEN + 4
    user_starts = [i for i in candidates if messages[i].get("role") == "user"]
    cut: int | None = None
    fitting_turns = [i for i in user_starts[-keep_turns:] if suffix[i] <= keep_tokens]
    if fitting_turns:
        cut = fitting_turns[0]
    else:
        fitting = [i for i in candidates if suffix[i] <= keep_tokens]
        cut = fitting[0] if fitting else candidates[-1]
    # Summarizing only user messages (a lone prompt, an earlier summary) gains nothing.
    if not any(m.get("role") in ("assistant", "tool") for m in messages[1:cut]):
        return None
    return cut


def render_for_summary(
    messages: Sequence[dict[str, Any]], *, max_chars: int, per_message: int = 4_000
) -> str:
    """A plain-text rendering of ``messages`` for the summarizing call.

    Each message is cut to ``per_message`` characters and the whole text to
    ``max_chars`` (keeping the most recent part), both by code points.
    """
    lines: list[str] = []
    for m in messages:
        role = str(m.get("role", "?")).upper()
        content = m.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        if content is None:
            text = ""
        if role == "TOOL":
            role = f"TOOL RESULT ({m.get('tool_call_id', '')})"
        if len(text) > per_message:
            text = text[:per_message] + f" ... [{len(text) - per_message:,} more characters]"
        if text:
            lines.append(f"{role}: {text}")
        for call in m.get("tool_calls") or ():
            function = call.get("function") or {}
            args = str(function.get("arguments") or "")[:per_message]
            lines.append(f"TOOL CALL {call.get('id', '')}: {function.get('name')}({args})")
    rendered = "\n\n".join(lines)
    if len(rendered) > max_chars:
        rendered = "[... earliest part omitted ...]\n" + rendered[-max_chars:]
    return rendered
