"""Resource limits of a session, and the notices that end a turn (a limit, a cut-off reply).

``max_tool_calls`` and ``max_cost_usd`` count the whole session, including
what was recorded before a restart (the checkpoint restores both counters);
``max_iterations`` counts model calls within one user turn and starts at 0 on every
``run``. Limits always come from the current options, never from the saved session.
"""

from __future__ import annotations

from dataclasses import dataclass

from jupyter_agent.errors import LimitExceededError
from jupyter_agent.store import SessionState

__all__ = [
    "CUT_OFF_NOTICES",
    "NOTICE_PREFIX",
    "Limits",
    "check_before_batch",
    "check_before_model",
    "cut_off_notice",
    "limit_notice",
]

NOTICE_PREFIX = "[jupyter-agent]"
"""Marks assistant-side messages written by the harness, not the model."""

CUT_OFF_NOTICES = {
    "length": (
        "the model's reply was cut off at its output token limit (finish_reason \"length\")",
        "Ask it to continue, or for a shorter answer.",
    ),
    "content_filter": (
        "the provider's content filter cut off the model's reply "
        '(finish_reason "content_filter")',
        "Rephrase the request to continue.",
    ),
}
"""Finish reason -> (cause, advice) of the notice that ends a turn whose reply did not
finish normally (the agent's ``stop_reason`` is then the finish reason)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits; ``None`` means unlimited.

    Parameters
    ----------
    max_tool_calls : int, optional
        Tool calls per session. A tool batch that would go beyond it is not run at
        all (each call gets a "not executed" result) and the turn ends.
    max_cost_usd : float, optional
        Spend per session in USD. Once reached, no further model call is made.
    max_iterations : int, optional
        Model calls per user turn (``run``); compaction calls do not count.

    Raises
    ------
    ValueError
        For a negative limit.
    """

    max_tool_calls: int | None = None
    max_cost_usd: float | None = None
    max_iterations: int | None = None

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0 or None, not {value!r}")


def limit_notice(err: LimitExceededError, *, requested: int = 0) -> str:
    """The assistant-side message saved in the session when ``err`` ends a turn.

    Parameters
    ----------
    err : LimitExceededError
        Which limit, the value reached, the maximum.
    requested : int
        For ``max_tool_calls``: how many calls the refused batch had.

    Returns
    -------
    str
        ``"[jupyter-agent] Stopped: ... Raise the limit and send a message to continue."``
    """
    if err.limit == "max_tool_calls":
        detail = (
            f"the session reached max_tool_calls={err.maximum:g} "
            f"({err.value:g} tool calls made; the model asked for {requested} more, "
            "which were not run)"
        )
    elif err.limit == "max_cost_usd":
        detail = f"the session reached max_cost_usd=${err.maximum:.4f} (spent ${err.value:.4f})"
    else:
        detail = f"this turn reached max_iterations={err.maximum:g} model calls"
    return f"{NOTICE_PREFIX} Stopped: {detail}. Raise the limit and send a message to continue."


def cut_off_notice(finish_reason: str, skipped: int) -> str:
    """The assistant-side message saved when a reply was cut off (see
    :data:`CUT_OFF_NOTICES`); ``skipped`` tool calls of it were not run."""
    cause, advice = CUT_OFF_NOTICES[finish_reason]
    calls = f"; its {skipped} tool call(s) were not run" if skipped else ""
    return f"{NOTICE_PREFIX} Stopped: {cause}{calls}. {advice}"


def check_before_model(
    limits: Limits, state: SessionState, iterations: int
) -> LimitExceededError | None:
    """The limit that forbids the next model call, if any.

    Parameters
    ----------
    limits : Limits
        The current options (never the saved session's).
    state : SessionState
        The session's counters (spend in USD, restored on resume).
    iterations : int
        Model calls already made in this user turn.

    Returns
    -------
    LimitExceededError or None
        ``max_cost_usd`` (session spend already at or above it) or
        ``max_iterations`` (``iterations`` already at it); None when the call may go.
    """
    spent = state.usage.cost_usd
    if limits.max_cost_usd is not None and spent >= limits.max_cost_usd:
        return LimitExceededError("max_cost_usd", spent, limits.max_cost_usd)
    if limits.max_iterations is not None and iterations >= limits.max_iterations:
        return LimitExceededError("max_iterations", iterations, limits.max_iterations)
    return None


def check_before_batch(
    limits: Limits, state: SessionState, count: int
) -> LimitExceededError | None:
    """The limit that forbids running a batch of ``count`` tool calls, if any.

    Parameters
    ----------
    limits : Limits
    state : SessionState
        The session's tool-call count and spend (restored on resume).
    count : int
        Calls in the batch the model asked for.

    Returns
    -------
    LimitExceededError or None
        ``max_tool_calls`` when the session count plus the batch would exceed it
        (the batch is then not run at all), or ``max_cost_usd`` when the spend
        already reached it; None when the batch may run.
    """
    if limits.max_tool_calls is not None and state.tool_calls + count > limits.max_tool_calls:
        return LimitExceededError("max_tool_calls", state.tool_calls, limits.max_tool_calls)
    spent = state.usage.cost_usd
    if limits.max_cost_usd is not None and spent >= limits.max_cost_usd:
        return LimitExceededError("max_cost_usd", spent, limits.max_cost_usd)
    return None
