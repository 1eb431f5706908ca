"""User turns of a transcript, and where a transcript may be cut.

Pure functions over lists of Chat Completions message dicts (no I/O). A *user turn*
starts at a ``user`` message of the transcript and runs to the next one: the request,
the assistant messages, every tool call with its result, the final reply. Compaction
summaries live in the working context only, never in the transcript, so every ``user``
message of a transcript is a request the user typed.

Cutting a transcript just before a user message never separates a tool call from its
result: a tool batch's results always follow its assistant message directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "SYNTHETIC_PREFIX",
    "call_results",
    "complete_length",
    "cut_after_turn",
    "turn_starts",
]

SYNTHETIC_PREFIX = "[jupyter-agent] "
"""First characters of a tool result the agent wrote itself because the call did not
run, or did not finish (interrupted, not executed, result unknown)."""


def turn_starts(messages: Sequence[dict[str, Any]]) -> list[int]:
    """Indices of the ``user`` messages of ``messages``, in order.

    Parameters
    ----------
    messages : sequence of dict
        A transcript.

    Returns
    -------
    list of int
        ``len(result)`` is the number of user turns.
    """
    return [i for i, m in enumerate(messages) if m.get("role") == "user"]


def cut_after_turn(messages: Sequence[dict[str, Any]], turn: int) -> int:
    """Length of the transcript that ends after user turn ``turn`` (1-based).

    Parameters
    ----------
    messages : sequence of dict
        A transcript.
    turn : int
        1 to the number of user turns.

    Returns
    -------
    int
        The index of the next turn's user message, or ``len(messages)`` for the last
        turn: ``messages[:result]`` holds turns 1 to ``turn`` whole.

    Raises
    ------
    IndexError
        When ``turn`` is below 1 or above the number of user turns.
    """
    starts = turn_starts(messages)
    if not 1 <= turn <= len(starts):
        raise IndexError(turn)
    return starts[turn] if turn < len(starts) else len(messages)


def complete_length(messages: Sequence[dict[str, Any]]) -> int:
    """Length of ``messages`` without a trailing tool batch that has not been answered.

    A session saved while its agent was running a tool batch ends with the assistant
    message that asked for the calls (their results are saved together when the batch
    completes). Copying that message without its results would separate the calls
    from their results, so it is left out.

    Returns
    -------
    int
        ``len(messages)``, or the index of the trailing assistant message whose calls
        are not all answered.
    """
    end = len(messages)
    i = end
    while i > 0 and messages[i - 1].get("role") == "tool":
        i -= 1
    if i == 0:
        return end
    last = messages[i - 1]
    calls = last.get("tool_calls") if last.get("role") == "assistant" else None
    if not calls:
        return end
    answered = {m.get("tool_call_id") for m in messages[i:]}
    if all(c.get("id") in answered for c in calls):
        return end
    return i - 1


def call_results(messages: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Map each tool-call ID to the ``tool`` message answering it.

    Parameters
    ----------
    messages : sequence of dict

    Returns
    -------
    dict
        ``{tool_call_id: tool message}``; when one ID is answered twice, the first
        answer counts (the agent drops later duplicates from the working context).
    """
    results: dict[str, dict[str, Any]] = {}
    for m in messages:
        if m.get("role") == "tool":
            results.setdefault(str(m.get("tool_call_id")), m)
    return results
