"""Tokens, dollars and context windows: pricing model calls and adding up usage.

Cost (issue 3) comes from a caller override first
(``prices={"model": (usd_per_million_input, usd_per_million_output)}``), then the
offline snapshot bundled with ``genai-prices`` (never updated over the network); a
model neither knows costs 0 and is flagged ``price_unknown`` so front ends can show
"price unknown".
"""

from __future__ import annotations

from collections.abc import Mapping

from jupyter_agent.store import Usage

__all__ = [
    "DEFAULT_CONTEXT_WINDOW",
    "PriceTable",
    "add_usage",
    "call_usage",
    "context_window_for",
    "price_call",
]

PriceTable = Mapping[str, tuple[float, float]]
"""Per-model price override: model name -> (USD per million input tokens, USD per million
output tokens)."""


DEFAULT_CONTEXT_WINDOW = 128_000
"""Context window (tokens) assumed for models neither configured nor known."""

_FALLBACK_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4.1", 1_000_000),
    ("gpt-5", 400_000),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-4", 8_192),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
)


def context_window_for(model: str) -> int:
    """The context window of ``model`` in tokens.

    From the ``genai-prices`` snapshot when it knows the model, else a small table of
    common model families, else :data:`DEFAULT_CONTEXT_WINDOW` (128k).
    """
    try:
        from genai_prices import data_snapshot

        _, info = data_snapshot.get_snapshot().find_provider_model(model, None, None, None)
        if info.context_window:
            return int(info.context_window)
    except LookupError:
        pass
    name = model.lower().rsplit("/", 1)[-1]
    for prefix, window in _FALLBACK_WINDOWS:
        if name.startswith(prefix):
            return window
    return DEFAULT_CONTEXT_WINDOW


def price_call(
    model: str, input_tokens: int, output_tokens: int, prices: PriceTable | None = None
) -> tuple[float, bool]:
    """Cost of one model call in USD.

    Parameters
    ----------
    model : str
        The model name as requested.
    input_tokens, output_tokens : int
        Prompt and completion tokens the endpoint reported.
    prices : mapping, optional
        Override ``{model: (usd_per_million_input, usd_per_million_output)}``; wins
        over the bundled ``genai-prices`` snapshot (never updated online).

    Returns
    -------
    (float, bool)
        The cost in USD and whether the price was known (False -> cost 0.0).
    """
    if prices and model in prices:
        usd_in, usd_out = prices[model]
        return (input_tokens * usd_in + output_tokens * usd_out) / 1_000_000, True
    try:
        from genai_prices import Usage as PriceUsage
        from genai_prices import calc_price

        calc = calc_price(PriceUsage(input_tokens=input_tokens, output_tokens=output_tokens), model)
    except LookupError:
        return 0.0, False
    return float(calc.total_price), True


def add_usage(a: Usage, b: Usage) -> Usage:
    """Sum two usages (tokens, USD, calls); ``price_unknown`` is sticky."""
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cost_usd=a.cost_usd + b.cost_usd,
        calls=a.calls + b.calls,
        price_unknown=a.price_unknown or b.price_unknown,
    )


def call_usage(
    model: str, input_tokens: int, output_tokens: int, prices: PriceTable | None = None
) -> Usage:
    """The :class:`Usage` of one model call: its tokens, its cost in USD, ``calls=1``
    and ``price_unknown`` when the model could not be priced."""
    cost, known = price_call(model, input_tokens, output_tokens, prices)
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=cost,
        calls=1,
        price_unknown=not known,
    )
