"""Tokens, dollars and context windows: pricing model calls and adding up usage.

Cost comes from a caller override first
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
    "known_context_window",
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


def _model_refs(model: str) -> list[tuple[str, str | None]]:
    """``(model_ref, provider_id)`` candidates for ``genai-prices``, in order.

    The name as given; then, for a provider-prefixed name such as ``"openai/gpt-4o"``
    (OpenRouter, LiteLLM), the model under that provider, then the model alone.
    """
    refs: list[tuple[str, str | None]] = [(model, None)]
    provider, sep, name = model.partition("/")
    if sep and provider and name:
        refs += [(name, provider.lower()), (name, None)]
    return refs


def known_context_window(model: str) -> int | None:
    """The context window of ``model`` in tokens if ``genai-prices`` or a small table of
    common model families knows it, else None.

    Parameters
    ----------
    model : str
        The model name as requested; a provider prefix (``"openai/gpt-4o"``) is
        understood.
    """
    from genai_prices import data_snapshot

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
    """The context window of ``model`` in tokens: :func:`known_context_window`, else
    :data:`DEFAULT_CONTEXT_WINDOW` (128k)."""
    return known_context_window(model) or DEFAULT_CONTEXT_WINDOW


def price_call(
    model: str,
    input_tokens: int,
    output_tokens: int,
    prices: PriceTable | None = None,
    *,
    cached_tokens: int = 0,
) -> tuple[float, bool]:
    """Cost of one model call in USD.

    Parameters
    ----------
    model : str
        The model name as requested; a provider prefix (``"openai/gpt-4o"``) is
        split into provider and model for ``genai-prices``.
    input_tokens, output_tokens : int
        Prompt and completion tokens the endpoint reported (``input_tokens``
        includes any cached tokens, as OpenAI reports it).
    prices : mapping, optional
        Override ``{model: (usd_per_million_input, usd_per_million_output)}``; wins
        over the bundled ``genai-prices`` snapshot (never updated online). Cached
        tokens are charged at the input price there.
    cached_tokens : int
        Prompt tokens read from the provider's cache
        (``usage.prompt_tokens_details.cached_tokens``), passed to ``genai-prices``
        as ``cache_read_tokens`` so they are priced at the cache rate.

    Returns
    -------
    (float, bool)
        The cost in USD and whether the price was known (False -> cost 0.0).
    """
    if prices and model in prices:
        usd_in, usd_out = prices[model]
        return (input_tokens * usd_in + output_tokens * usd_out) / 1_000_000, True
    from genai_prices import Usage as PriceUsage
    from genai_prices import calc_price

    usage = PriceUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=min(max(cached_tokens, 0), input_tokens) or None,
    )
    for ref, provider in _model_refs(model):
        try:
            calc = calc_price(usage, ref, provider_id=provider)
        except LookupError:
            continue
        return float(calc.total_price), True
    return 0.0, False


def add_usage(a: Usage, b: Usage) -> Usage:
    """Sum two usages.

    Parameters
    ----------
    a, b : Usage

    Returns
    -------
    Usage
        Tokens, USD and calls added; ``price_unknown`` is sticky (either one).
    """
    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cost_usd=a.cost_usd + b.cost_usd,
        calls=a.calls + b.calls,
        price_unknown=a.price_unknown or b.price_unknown,
    )


def call_usage(
    model: str,
    input_tokens: int,
    output_tokens: int,
    prices: PriceTable | None = None,
    *,
    cached_tokens: int = 0,
) -> Usage:
    """The :class:`Usage` of one model call.

    Parameters
    ----------
    model : str
    input_tokens, output_tokens : int
        Tokens of the call.
    prices : mapping, optional
        Per-model override (see :func:`price_call`).
    cached_tokens : int
        Cached prompt tokens (see :func:`price_call`).

    Returns
    -------
    Usage
        Its tokens, its cost in USD, ``calls=1`` and ``price_unknown`` when the
        model could not be priced.
    """
    cost, known = price_call(
        model, input_tokens, output_tokens, prices, cached_tokens=cached_tokens
    )
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=cost,
        calls=1,
        price_unknown=not known,
    )
