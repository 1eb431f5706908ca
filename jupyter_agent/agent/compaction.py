"""Compaction: replace older turns of the working context with one summary message.

Policy (issue 3): the system message (which carries the notes) stays first; the most
recent turns stay verbatim (:func:`~jupyter_agent.agent.context.choose_cut`: the last
``keep_turns`` user turns if they fit in ``keep_tokens``, else as much recent context
as fits, cut only before a user or assistant message so a tool call never loses its
results); everything in between is summarized by *one* model call (no tools, not
streamed) into a single ``user`` message starting with
:data:`~jupyter_agent.agent.context.SUMMARY_MARKER`. The caller records the new
context with ``store.compact`` (the transcript keeps the originals). If the call
fails, nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai

from jupyter_agent.agent.client import ReplyAccumulator, request_reply
from jupyter_agent.agent.context import (
    CHARS_PER_TOKEN,
    SUMMARY_MARKER,
    choose_cut,
    estimate_tokens,
    render_for_summary,
)
from jupyter_agent.agent.prompts import SUMMARIZER_PROMPT
from jupyter_agent.store import to_message_dict

__all__ = ["KEEP_FRACTION", "CompactionResult", "summarize_older_turns"]

KEEP_FRACTION = 0.5
"""Share of the compaction threshold that the verbatim recent turns may use."""


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
    input_tokens, output_tokens : int
        Usage of the summarizing call (reported, else estimated).
    """

    messages: list[dict[str, Any]] | None
    summary: str
    replaced: int
    input_tokens: int
    output_tokens: int


def summarize_older_turns(
    client: openai.OpenAI,
    model: str,
    messages: list[dict[str, Any]],
    *,
    keep_tokens: int,
    keep_turns: int,
    max_chars: int,
) -> CompactionResult | None:
    """Summarize ``messages[1:cut]`` with one model call.

    Parameters
    ----------
    client, model
        Where to send the summarizing request.
    messages : list of dict
        The working context (tool pairs intact).
    keep_tokens : int
        Budget (tokens, estimated) for the verbatim recent part.
    keep_turns : int
        Recent user turns to keep when they fit.
    max_chars : int
        Cap on the rendered conversation sent for summarizing (code points).

    Returns
    -------
    CompactionResult or None
        None when there is nothing worth compacting (no model call was made).

    Raises
    ------
    ModelError
        When the summarizing call fails; the caller keeps the context unchanged.
    """
    cut = choose_cut(messages, keep_tokens=keep_tokens, keep_turns=keep_turns)
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
    reply = request_reply(
        client, model=model, messages=request, tools=None, stream=False, acc=ReplyAccumulator()
    )
    input_tokens = reply.prompt_tokens
    if input_tokens is None:
        input_tokens = estimate_tokens(request)
    output_tokens = reply.completion_tokens
    if output_tokens is None:
        output_tokens = len(reply.text) // CHARS_PER_TOKEN
    summary = reply.text.strip()
    if not summary:
        return CompactionResult(None, "", len(head), input_tokens, output_tokens)
    note = to_message_dict(
        {
            "role": "user",
            "content": f"{SUMMARY_MARKER} ({len(head)} messages replaced):\n\n{summary}",
        }
    )
    new = [messages[0], note, *messages[cut:]]
    return CompactionResult(new, summary, len(head), input_tokens, output_tokens)
