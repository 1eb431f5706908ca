"""The newest user request: never compacted away, refused up front when it cannot fit.

Automatic compaction inside a turn summarizes only what came before the turn's
request: the request and the turn's tool calls and results after it stay verbatim,
however long they are. A request that cannot fit the context window even alone, with
just the system message, could therefore never be answered; :func:`check_prompt_fits`
refuses it before anything is sent or saved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jupyter_agent.agent.context import estimate_tokens
from jupyter_agent.errors import PromptTooLongError

__all__ = ["check_prompt_fits", "request_index"]


def check_prompt_fits(system: Sequence[dict[str, Any]], prompt: dict[str, Any], *,
                      window: int, model: str, overhead: int = 0, saved: bool = False) -> None:
    """Refuse a prompt that cannot fit the context window with the system message.

    Parameters
    ----------
    system : sequence of dict
        The messages always sent with it (the system message).
    prompt : dict
        The user message.
    window : int
        The context window (tokens).
    model : str
        The model name (for the message).
    overhead : int
        Tokens every request adds: the tool schemas and the room kept for the reply.
    saved : bool
        The prompt is already saved (the message says so).

    Raises
    ------
    PromptTooLongError
        When the estimated size (~4 characters per token) exceeds ``window``.
    """
    tokens = estimate_tokens([*system, prompt]) + overhead
    if tokens > window:
        raise PromptTooLongError(tokens, window, model, saved=saved)


def request_index(messages: Sequence[dict[str, Any]], request: dict[str, Any] | None) -> int | None:
    """Where ``request`` (the turn's user message) is in ``messages``: the last equal one.

    Returns
    -------
    int or None
        None outside a turn, or when it is not there.
    """
    if request is None:
        return None
    for index in range(len(messages) - 1, -1, -1):
        if messages[index] is request or messages[index] == request:
            return index
    return None
