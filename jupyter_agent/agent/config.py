"""What a turn runs with (AgentConfig, Limits), what it spends (usage) and where it stops.

``max_tool_calls`` and ``max_cost_usd`` count the whole session (restored on resume);
``max_iterations`` counts model calls in one turn. Limits always come from the current
config, never from the saved session. Cost comes from a caller's ``prices`` override,
else the offline snapshot bundled with ``genai-prices``; an unknown model costs 0 and is
flagged ``price_unknown``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from jupyter_agent.errors import LimitExceededError
from jupyter_agent.notebook import PRIVACY_LEVELS, Privacy
from jupyter_agent.store import SessionState

ApprovalPolicy = Literal["auto", "ask", "deny"]
Vision = Literal["auto", "on", "off"]
NOTICE_PREFIX = "[jupyter-agent]"  # assistant-side messages written by the harness


@dataclass(frozen=True)
class Limits:
    """Resource limits; ``None`` means unlimited. Raises ValueError for a negative one."""

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
    ValueError for an unknown choice, ``compact_at`` outside (0, 1] or ``max_images`` < 0.
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
        for name, allowed in (("approve", get_args(ApprovalPolicy)), ("vision", get_args(Vision)),
                              ("context_privacy", PRIVACY_LEVELS)):
            if getattr(self, name) not in allowed:
                *most, last = map(repr, allowed)
                raise ValueError(f"{name} must be {', '.join(most)} or {last}, "
                                 f"not {getattr(self, name)!r}")
        if self.max_images < 0:
            raise ValueError(f"max_images must be 0 or more, not {self.max_images!r}")
        if not 0 < self.compact_at <= 1:
            raise ValueError(f"compact_at must be in (0, 1], not {self.compact_at!r}")


CUT_OFF_NOTICES = {
    "length": ("the model's reply was cut off at its output token limit (finish_reason "
               '"length")', "Ask it to continue, or for a shorter answer."),
    "content_filter": ("the provider's content filter cut off the model's reply (finish_reason "
                       '"content_filter")', "Rephrase the request to continue."),
}


def limit_notice(err: LimitExceededError, *, requested: int = 0) -> str:
    """The notice saved when ``err`` ends a turn (``requested``: calls of the refused batch)."""
    if err.limit == "max_tool_calls":
        detail = (f"the session reached max_tool_calls={err.maximum:g} ({err.value:g} tool "
                  f"calls made; the model asked for {requested} more, which were not run)")
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


def check_limits(limits: Limits, state: SessionState, *, iterations: int | None = None,
                 batch: int | None = None) -> None:
    """Raise the LimitExceededError that forbids the next model call (``iterations``: calls
    made in this turn) or a batch of ``batch`` calls (it then runs none), if any; the
    session's ``max_cost_usd`` is always checked."""
    tools, most = state.tool_calls, limits.max_tool_calls
    if batch is not None and most is not None and tools + batch > most:
        raise LimitExceededError("max_tool_calls", tools, most)
    spent = state.usage.cost_usd
    if limits.max_cost_usd is not None and spent >= limits.max_cost_usd:
        raise LimitExceededError("max_cost_usd", spent, limits.max_cost_usd)
    if iterations is not None and limits.max_iterations is not None \
            and iterations >= limits.max_iterations:
        raise LimitExceededError("max_iterations", iterations, limits.max_iterations)


@dataclass(frozen=True)
class TokenUsage:
    """Tokens of one model call, as the endpoint reported them."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0


def model_refs(model: str) -> list[tuple[str, str | None]]:
    """How ``genai-prices`` may know ``model``: ``(name, provider)``; "openai/gpt-4o"
    (OpenRouter, LiteLLM) also as the model under that provider, then alone."""
    refs: list[tuple[str, str | None]] = [(model, None)]
    provider, sep, name = model.partition("/")
    if sep and provider and name:
        refs += [(name, provider.lower()), (name, None)]
    return refs


_UNPRICED: set[str] = set()  # models genai-prices does not know: looked up once


def price_call(model: str, input_tokens: int, output_tokens: int,
               prices: Mapping[str, tuple[float, float]] | None = None, *, cached_tokens: int = 0
               ) -> tuple[float, bool]:
    """Cost of one call in USD, and whether the price was known (else 0.0); ``input_tokens``
    includes ``cached_tokens`` (priced at the cache rate, except by an override)."""
    if prices and model in prices:
        usd_in, usd_out = prices[model]
        return (input_tokens * usd_in + output_tokens * usd_out) / 1_000_000, True
    if model in _UNPRICED:
        return 0.0, False
    from genai_prices import Usage as PriceUsage  # imported when used: ~120 ms
    from genai_prices import calc_price

    usage = PriceUsage(input_tokens=input_tokens, output_tokens=output_tokens,
                       cache_read_tokens=min(max(cached_tokens, 0), input_tokens) or None)
    for ref, provider in model_refs(model):
        try:
            calc = calc_price(usage, ref, provider_id=provider)
        except LookupError:
            continue
        return float(calc.total_price), True
    _UNPRICED.add(model)
    return 0.0, False
