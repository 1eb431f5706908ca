"""What a turn runs with (AgentConfig, Limits) and where it stops: limits and their notices.

``max_tool_calls`` and ``max_cost_usd`` count the whole session (restored on resume);
``max_iterations`` counts model calls in one turn. Limits always come from the current
config, never from the saved session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from jupyter_agent.errors import LimitExceededError
from jupyter_agent.notebook import PRIVACY_LEVELS, Privacy
from jupyter_agent.store import SessionState

ApprovalPolicy = Literal["auto", "ask", "deny"]
Vision = Literal["auto", "on", "off"]
NOTICE_PREFIX = "[jupyter-agent]"  # assistant-side messages written by the harness


@dataclass(frozen=True)
class Limits:
    """Resource limits; ``None`` means unlimited.

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


@dataclass(frozen=True)
class AgentConfig:
    """How an agent runs its turns; replaceable between turns (``Agent.reconfigure``).

    ``context_window`` is in tokens (None: learned from the endpoint, else known, else a
    default); ``compact_at`` is a fraction (0, 1] of it; ``max_output_chars`` cuts tool
    results (code points); ``prices`` maps a model to USD per million (input, output).

    Raises
    ------
    ValueError
        For an unknown policy, vision mode or privacy level, ``compact_at`` outside
        (0, 1], or a negative ``max_images``.
    """

    approve: ApprovalPolicy = "ask"
    stream: bool = True
    context_window: int | None = None
    compact_at: float = 0.8
    keep_turns: int = 2
    max_output_chars: int = 10_000
    limits: Limits = field(default_factory=Limits)
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    system_prompt: str | None = None
    vision: Vision = "auto"
    max_images: int = 3
    context_privacy: Privacy = "schema"

    def __post_init__(self) -> None:
        if self.approve not in ("auto", "ask", "deny"):
            raise ValueError(f"approve must be 'auto', 'ask' or 'deny', not {self.approve!r}")
        if self.vision not in ("auto", "on", "off"):
            raise ValueError(f"vision must be 'auto', 'on' or 'off', not {self.vision!r}")
        if self.context_privacy not in PRIVACY_LEVELS:
            raise ValueError("context_privacy must be 'schema', 'preview' or 'none', not "
                             f"{self.context_privacy!r}")
        if self.max_images < 0:
            raise ValueError(f"max_images must be 0 or more, not {self.max_images!r}")
        if not 0 < self.compact_at <= 1:
            raise ValueError(f"compact_at must be in (0, 1], not {self.compact_at!r}")


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


def limit_notice(err: LimitExceededError, *, requested: int = 0) -> str:
    """The notice saved when ``err`` ends a turn (``requested``: calls of the refused batch)."""
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
    """The notice saved when a reply was cut off; ``skipped`` of its tool calls did not run."""
    cause, advice = CUT_OFF_NOTICES[finish_reason]
    calls = f"; its {skipped} tool call(s) were not run" if skipped else ""
    return f"{NOTICE_PREFIX} Stopped: {cause}{calls}. {advice}"


def check_cost(limits: Limits, state: SessionState) -> None:
    """Raise LimitExceededError when the session spent ``max_cost_usd``."""
    spent = state.usage.cost_usd
    if limits.max_cost_usd is not None and spent >= limits.max_cost_usd:
        raise LimitExceededError("max_cost_usd", spent, limits.max_cost_usd)


def check_before_model(limits: Limits, state: SessionState, iterations: int) -> None:
    """Raise the LimitExceededError that forbids the next model call (``iterations``:
    calls made in this turn), if any."""
    check_cost(limits, state)
    if limits.max_iterations is not None and iterations >= limits.max_iterations:
        raise LimitExceededError("max_iterations", iterations, limits.max_iterations)


def check_before_batch(limits: Limits, state: SessionState, count: int) -> None:
    """Raise the LimitExceededError that forbids a batch of ``count`` calls (it then runs
    none of them), if any."""
    if limits.max_tool_calls is not None and state.tool_calls + count > limits.max_tool_calls:
        raise LimitExceededError("max_tool_calls", state.tool_calls, limits.max_tool_calls)
    check_cost(limits, state)
