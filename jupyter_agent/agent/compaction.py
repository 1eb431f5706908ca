"""Compaction: replace older turns of the working context with one summary message.

Policy: the system message (which carries the notes) stays first; the most
recent turns stay verbatim (:func:`~jupyter_agent.agent.context.choose_cut`: the last
``keep_turns`` user turns if they fit in ``keep_tokens``, else as much recent context
as fits, cut only before a user or assistant message so a tool call never loses its
results); everything in between is summarized by *one* model call (no tools, not
streamed) into a single ``user`` message starting with
:data:`~jupyter_agent.agent.context.SUMMARY_MARKER`. If the call fails, nothing changes.

:func:`compact` is a function over a :class:`~jupyter_agent.agent.conversation.Conversation`:
it makes the summarizing call through a :class:`~jupyter_agent.agent.model.Model`,
accounts its usage (session cost, not iterations), records the new working context
(``Conversation.replace``: the transcript keeps the originals, a compaction event is
saved) and reports a :class:`~jupyter_agent.agent.events.Notice`; once the session's
``max_cost_usd`` is reached it makes no call at all. :func:`should_compact`
says when the agent does it by itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jupyter_agent.agent.config import AgentConfig
from jupyter_agent.agent.context import (
    CHARS_PER_TOKEN,
    SUMMARY_MARKER,
    choose_cut,
    render_for_summary,
)
from jupyter_agent.agent.conversation import Conversation
from jupyter_agent.agent.events import EventCallback, Notice
from jupyter_agent.agent.model import Model, PartialReply, TokenUsage
from jupyter_agent.agent.prompts import SUMMARIZER_PROMPT
from jupyter_agent.agent.usage_check import checked_usage
from jupyter_agent.errors import LimitExceededError, ModelError
from jupyter_agent.store import to_message_dict

__all__ = [
    "KEEP_FRACTION",
    "CompactionResult",
    "compact",
    "should_compact",
    "summarize_older_turns",
]

KEEP_FRACTION = 0.5
"""Share of the compaction threshold that the verbatim recent turns may use."""


Account = Callable[[TokenUsage], object]
"""Adds one model call's usage to the session (the agent's accounting)."""


@dataclass(frozen=True)
class CompactionResult:
    """The outcome of one summarizing call.

    Attributes
    ----------
    messages : list of dict or None
        The new working context, or None when the model returned no summary text.
    summary : str
        The summary text (recorded in the store's compaction log).
    replaced : int
        How many messages the summary replaces.
    usage : TokenUsage
        Usage of the summarizing call (reported, else estimated).
    """

    messages: list[dict[str, Any]] | None
    summary: str
    replaced: int
    usage: TokenUsage


def summarize_older_turns(
    model: Model,
    messages: list[dict[str, Any]],
    *,
    keep_tokens: int,
    keep_turns: int,
    max_chars: int,
    keep_from: int | None = None,
    max_summary_chars: int | None = None,
) -> CompactionResult | None:
    """Summarize ``messages[1:cut]`` with one model call.

    Parameters
    ----------
    model : Model
        Where to send the summarizing request (no tools, not streamed).
    messages : list of dict
        The working context (tool pairs intact).
    keep_tokens : int
        Budget (tokens, estimated) for the verbatim recent part.
    keep_turns : int
        Recent user turns to keep when they fit.
    max_chars : int
        Cap on the rendered conversation sent for summarizing (code points).
    keep_from : int, optional
        ``messages[keep_from:]`` stay verbatim (the request of the turn in progress).
    max_summary_chars : int, optional
        A longer summary is cut to this many code points (a small context window).

    Returns
    -------
    CompactionResult or None
        None when there is nothing worth compacting (no model call was made).

    Raises
    ------
    ModelError
        When the summarizing call fails; the caller keeps the context unchanged.
    """
    cut = choose_cut(messages, keep_tokens=keep_tokens, keep_turns=keep_turns,
                     keep_from=keep_from)
    if cut is None:
        return None
    head = messages[1:cut]
    request = [
        {"role": "system", "content": SUMMARIZER_PROMPT},
        {
            "role": "user",
            "content": "Summarize this conversation:\n\n"
            + render_for_summary(head, max_chars=max(4_000, max_chars)),
        },
    ]
    reply = model.respond(request, [], stream=False, partial=PartialReply())
    usage, _ = checked_usage(reply.usage, request, reply.text, [])
    summary = reply.text.strip()
    if max_summary_chars is not None and len(summary) > max_summary_chars:
        summary = summary[:max_summary_chars].rstrip() + " [... summary cut to fit the window]"
    if not summary:
        return CompactionResult(None, "", len(head), usage)
    note = to_message_dict(
        {
            "role": "user",
            "content": f"{SUMMARY_MARKER} ({len(head)} messages replaced):\n\n{summary}",
        }
    )
    return CompactionResult([messages[0], note, *messages[cut:]], summary, len(head), usage)


def should_compact(conversation: Conversation, window: int, config: AgentConfig, *,
                   overhead: int = 0) -> bool:
    """Whether the estimated request passed ``compact_at`` of ``window`` (tokens).

    ``overhead`` is what the request adds to the working context: the reply budget, and
    the tool schemas until the endpoint has counted them (``Conversation.counted``).
    """
    return conversation.estimated_tokens() + overhead > config.compact_at * window


def compact(
    conversation: Conversation,
    model: Model,
    config: AgentConfig,
    *,
    window: int,
    account: Account,
    emit: EventCallback,
    keep_from: int | None = None,
) -> bool:
    """Summarize the older turns of ``conversation`` now (see the module docstring).

    Parameters
    ----------
    conversation : Conversation
    model : Model
        Writes the summary.
    config : AgentConfig
        ``compact_at`` and ``keep_turns``.
    window : int
        The model's context window in tokens.
    account : callable
        Receives the summarizing call's :class:`TokenUsage` (it counts toward cost).
    emit : callable
        Receives a :class:`Notice`: compacted (tokens before and after), or why not.
    keep_from : int, optional
        Index of the request of the turn in progress: it and everything after it stay
        verbatim however long they are.

    Returns
    -------
    bool
        False when there was nothing to compact or the summarizing call failed (the
        working context then stays as it was).

    Raises
    ------
    LimitExceededError
        ``max_cost_usd`` of ``config.limits`` is reached: no model call is made.
    SessionLockedError, CorruptSessionError, ContextMismatchError, OSError
        From the store while recording the compaction.
    """
    spent, cap = conversation.state.usage.cost_usd, config.limits.max_cost_usd
    if cap is not None and spent >= cap:
        raise LimitExceededError("max_cost_usd", spent, cap)
    before = conversation.estimated_tokens()
    try:
        result = summarize_older_turns(
            model,
            conversation.messages,
            keep_tokens=int(window * config.compact_at * KEEP_FRACTION),
            keep_turns=config.keep_turns,
            max_chars=int(window * CHARS_PER_TOKEN * KEEP_FRACTION),
            keep_from=keep_from,
            max_summary_chars=int(window * CHARS_PER_TOKEN * config.compact_at / 4),
        )
    except ModelError as exc:
        emit(Notice(f"compaction failed, the context stays as it was: {exc}"))
        return False
    if result is None:
        return False
    account(result.usage)
    if result.messages is None:
        conversation.save()
        emit(Notice("compaction failed: the model returned an empty summary"))
        return False
    conversation.replace(result.messages, summary=result.summary, replaced=result.replaced)
    emit(
        Notice(
            f"compacted {result.replaced} earlier messages into a summary "
            f"(about {before:,} -> {conversation.estimated_tokens():,} tokens)"
        )
    )
    return True
