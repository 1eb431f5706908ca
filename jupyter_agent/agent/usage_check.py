"""Reported usage that cannot be true is treated as unknown and estimated.

Some endpoints report no usage, leave fields out, or report numbers no request can
have: zero prompt tokens for a request that sent messages, negative counts, more cached
tokens than prompt tokens. Trusting them would let ``max_cost_usd`` and automatic
compaction (both driven by token counts) silently stop working. :func:`checked_usage`
keeps each reported count that is plausible and replaces each one that is not with the
estimate of :mod:`~jupyter_agent.agent.context` (~4 characters per token; no tokenizer).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jupyter_agent.agent.context import CHARS_PER_TOKEN, estimate_tokens, message_chars
from jupyter_agent.agent.model import TokenUsage

__all__ = ["checked_usage", "completion_estimate"]


def completion_estimate(text: str, calls: list[dict[str, Any]]) -> int:
    """Estimated completion tokens of a reply's text and tool calls (tokens)."""
    return message_chars({"content": text, "tool_calls": calls}) // CHARS_PER_TOKEN


def checked_usage(reported: TokenUsage | None, messages: Sequence[dict[str, Any]],
                  text: str, calls: list[dict[str, Any]]) -> tuple[TokenUsage, bool]:
    """The usage to count for one model call.

    Parameters
    ----------
    reported : TokenUsage or None
        What the endpoint reported (None: nothing, or fields were missing).
    messages : sequence of dict
        The working context that was sent (the prompt).
    text : str
        The reply text that arrived.
    calls : list of dict
        The reply's tool calls.

    Returns
    -------
    (TokenUsage, bool)
        Prompt, completion and cached tokens to count, and whether any of them had to be
        estimated. A reported prompt count is used when it is positive (or zero for an
        empty prompt); a completion count when it is not negative and not zero for a
        reply that has text or tool calls; cached tokens when they lie between zero and
        the prompt count (else 0).
    """
    if reported is None:
        return TokenUsage(estimate_tokens(messages), completion_estimate(text, calls)), True
    prompt, completion = reported.input_tokens, reported.output_tokens
    estimated = False
    if prompt < 0 or (prompt == 0 and messages):
        prompt, estimated = estimate_tokens(messages), True
    if completion < 0 or (completion == 0 and (text or calls)):
        completion, estimated = completion_estimate(text, calls), True
    cached = reported.cached_tokens if 0 <= reported.cached_tokens <= prompt else 0
    return TokenUsage(prompt, completion, cached), estimated
