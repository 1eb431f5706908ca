"""Usage: pricing model calls, checking reported token counts, adding them up.

Cost comes from a caller's ``prices`` override, else the offline snapshot bundled with
``genai-prices``; an unknown model costs 0 and is flagged ``price_unknown``. A reported
count no request can have (missing, negative, zero for a non-empty prompt) is replaced
by the ~4 characters per token estimate, so limits and compaction keep working.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jupyter_agent.agent.adapters import TokenUsage
from jupyter_agent.agent.events import EventCallback, Notice, UsageUpdate
from jupyter_agent.agent.working_context import CHARS_PER_TOKEN, estimate_tokens, message_chars
from jupyter_agent.store import SessionState, Usage

PriceTable = Mapping[str, tuple[float, float]]  # model -> USD per million (input, output)
DEFAULT_CONTEXT_WINDOW = 128_000
_FALLBACK_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4.1", 1_000_000), ("gpt-5", 400_000), ("gpt-4o", 128_000), ("gpt-4-turbo", 128_000),
    ("gpt-3.5-turbo", 16_385), ("gpt-4", 8_192), ("o1", 200_000), ("o3", 200_000),
    ("o4", 200_000), ("claude", 200_000),
)


def _model_refs(model: str) -> list[tuple[str, str | None]]:
    # "openai/gpt-4o" (OpenRouter, LiteLLM): also the model under that provider, then alone
    refs: list[tuple[str, str | None]] = [(model, None)]
    provider, sep, name = model.partition("/")
    if sep and provider and name:
        refs += [(name, provider.lower()), (name, None)]
    return refs


def known_context_window(model: str) -> int | None:
    """The context window of ``model`` in tokens, if ``genai-prices`` or a small table of
    model families knows it."""
    from genai_prices import data_snapshot  # imported when used: ~120 ms

    snapshot = data_snapshot.get_snapshot()
    for ref, provider in _model_refs(model):
        try:
            _, info = snapshot.find_provider_model(ref, None, provider, None)
        except LookupError:
            continue
        if info.context_window:
            return int(info.context_window)
        break
    name = model.lower().rsplit("/", 1)[-1]
    for prefix, window in _FALLBACK_WINDOWS:
        if name.startswith(prefix):
            return window
    return None


def context_window_for(model: str) -> int:
    return known_context_window(model) or DEFAULT_CONTEXT_WINDOW


def price_call(model: str, input_tokens: int, output_tokens: int,
               prices: PriceTable | None = None, *, cached_tokens: int = 0
               ) -> tuple[float, bool]:
    """Cost of one call in USD, and whether the price was known (else 0.0).

    ``input_tokens`` includes ``cached_tokens``, which ``genai-prices`` prices at the
    cache rate (an override prices them as input).
    """
    if prices and model in prices:
        usd_in, usd_out = prices[model]
        return (input_tokens * usd_in + output_tokens * usd_out) / 1_000_000, True
    from genai_prices import Usage as PriceUsage  # imported when used: ~120 ms
    from genai_prices import calc_price

    usage = PriceUsage(input_tokens=input_tokens, output_tokens=output_tokens,
                       cache_read_tokens=min(max(cached_tokens, 0), input_tokens) or None)
    for ref, provider in _model_refs(model):
        try:
            calc = calc_price(usage, ref, provider_id=provider)
        except LookupError:
            continue
        return float(calc.total_price), True
    return 0.0, False


def add_usage(a: Usage, b: Usage) -> Usage:
    return Usage(input_tokens=a.input_tokens + b.input_tokens,
                 output_tokens=a.output_tokens + b.output_tokens,
                 cost_usd=a.cost_usd + b.cost_usd, calls=a.calls + b.calls,
                 price_unknown=a.price_unknown or b.price_unknown)


def checked_usage(reported: TokenUsage | None, messages: Sequence[dict[str, Any]],
                  text: str, calls: list[dict[str, Any]]) -> TokenUsage:
    """The usage to count for one call: each reported count that is plausible, else the
    estimate from the prompt ``messages`` and the reply's ``text`` and ``calls``."""
    completion_estimate = message_chars({"content": text, "tool_calls": calls}) // CHARS_PER_TOKEN
    if reported is None:
        return TokenUsage(estimate_tokens(messages), completion_estimate)
    prompt, completion = reported.input_tokens, reported.output_tokens
    if prompt < 0 or (prompt == 0 and messages):
        prompt = estimate_tokens(messages)
    if completion < 0 or (completion == 0 and (text or calls)):
        completion = completion_estimate
    cached = reported.cached_tokens if 0 <= reported.cached_tokens <= prompt else 0
    return TokenUsage(prompt, completion, cached)


class Meter:
    """Adds each call's usage to the session's checkpoint and to :attr:`turn`."""

    def __init__(self) -> None:
        self.turn = Usage()
        self._price_noticed = False

    def account(self, state: SessionState, model: str, usage: TokenUsage, *,
                prices: PriceTable | None = None, emit: EventCallback | None = None) -> None:
        """Count one call; ``emit`` (None: no events) gets a UsageUpdate, and once a
        Notice when the price is unknown."""
        cost, known = price_call(model, usage.input_tokens, usage.output_tokens, prices,
                                 cached_tokens=usage.cached_tokens)
        call = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                     cost_usd=cost, calls=1, price_unknown=not known)
        state.usage = add_usage(state.usage, call)
        self.turn = add_usage(self.turn, call)
        if emit is None:
            return
        if call.price_unknown and not self._price_noticed:
            self._price_noticed = True
            emit(Notice(f"price unknown for model {model!r}: its cost is counted as $0 "
                        "(pass prices={model: (usd_per_million_input, usd_per_million_output)})"))
        emit(UsageUpdate(turn=self.turn, session=state.usage))
