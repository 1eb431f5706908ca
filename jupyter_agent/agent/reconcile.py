"""On resume, the counters of the checkpoint are reconciled with the transcript.

The checkpoint saved before a tool batch does not yet count the batch's calls; the one
after it does. A process killed while the batch ran leaves the tool calls in the
transcript with the older checkpoint, so the session would have made calls its
``tool_calls`` counter never saw, and ``max_tool_calls`` would undercount. Resuming
therefore counts the tool calls the transcript shows as run and keeps the larger of the
two numbers: a call counts unless its result says it never ran ("not executed", or
refused by the approval policy). A call without a result counts: it may have run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jupyter_agent.store import SessionState

__all__ = ["NOT_RUN_PREFIXES", "reconcile_counters", "tool_calls_run"]

NOT_RUN_PREFIXES = ("[jupyter-agent] not executed", "error: refused:")
"""How the result of a tool call that never ran begins (a synthetic "not executed" result,
or a refusal by the approval policy)."""


def tool_calls_run(transcript: Sequence[dict[str, Any]]) -> int:
    """How many tool calls of ``transcript`` ran or may have run.

    Parameters
    ----------
    transcript : sequence of dict
        Every message of the session (Chat Completions format).

    Returns
    -------
    int
        Tool calls whose first result does not say that they never ran, plus calls
        without a result.
    """
    results: dict[str, str] = {}
    for message in transcript:
        if message.get("role") == "tool":
            content = message.get("content")
            results.setdefault(str(message.get("tool_call_id")),
                               content if isinstance(content, str) else "")
    count = 0
    for message in transcript:
        for call in message.get("tool_calls") or () if message.get("role") == "assistant" else ():
            result = results.get(str(call.get("id")) if isinstance(call, dict) else "")
            if result is None or not result.startswith(NOT_RUN_PREFIXES):
                count += 1
    return count


def reconcile_counters(state: SessionState, transcript: Sequence[dict[str, Any]]) -> bool:
    """Raise ``state.tool_calls`` to the calls ``transcript`` shows as run (never lower it).

    Parameters
    ----------
    state : SessionState
        The loaded checkpoint (changed in place).
    transcript : sequence of dict

    Returns
    -------
    bool
        Whether the counter changed (the caller saves the checkpoint).
    """
    ran = tool_calls_run(transcript)
    if ran <= state.tool_calls:
        return False
    state.tool_calls = ran
    return True
