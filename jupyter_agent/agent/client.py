"""Talking to the model: one Chat Completions request, error mapping, the client factory.

* :func:`request_reply` sends one request (streaming or not) and returns a
  :class:`ModelReply` with the text, the tool calls as plain dicts, and the reported
  token usage. While streaming, text arrives in a caller-owned
  :class:`ReplyAccumulator`, so whatever streamed before an interrupt is still known.
* :func:`model_error` maps every ``openai`` failure (after the client's own retries)
  to :class:`~jupyter_agent.errors.ModelError` with a message a user can act on.
* :func:`make_client` is the one factory for an ``openai.OpenAI`` client.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai

from jupyter_agent.errors import ModelError, ModelNotConfiguredError

__all__ = [
    "ModelReply",
    "ReplyAccumulator",
    "make_client",
    "model_error",
    "request_reply",
]


def make_client(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    max_retries: int = 2,
    timeout: float = 600.0,
) -> openai.OpenAI:
    """Build the ``openai.OpenAI`` client the agent uses.

    Parameters
    ----------
    api_key : str, optional
        Explicit key; else ``OPENAI_API_KEY`` from the environment (read now, never
        stored by jupyter-agent). A ``base_url`` without a key (a local server) gets
        the placeholder key ``"not-needed"``.
    base_url : str, optional
        An OpenAI-compatible endpoint, e.g. a ``ScriptedModelServer``'s ``base_url``;
        else ``OPENAI_BASE_URL``, else the OpenAI API.
    max_retries : int
        Retries the client makes itself on 429/5xx/connection errors.
    timeout : float
        Seconds per request.

    Raises
    ------
    ModelNotConfiguredError
        When there is neither an API key nor a base URL.
    """
    key = api_key or os.environ.get("OPENAI_API_KEY")
    url = base_url or os.environ.get("OPENAI_BASE_URL")
    if not key and not url:
        raise ModelNotConfiguredError(
            "no model configured: set OPENAI_API_KEY, or pass a base_url "
            "(e.g. a local ScriptedModelServer)"
        )
    return openai.OpenAI(
        api_key=key or "not-needed", base_url=url, max_retries=max_retries, timeout=timeout
    )


@dataclass
class ReplyAccumulator:
    """What a (possibly streaming) reply has delivered so far."""

    text_parts: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int = 0
    finish_reason: str | None = None

    def take_usage(self, usage: Any) -> None:
        """Record a reported ``CompletionUsage`` (prompt, completion and cached tokens)."""
        self.prompt_tokens = usage.prompt_tokens
        self.completion_tokens = usage.completion_tokens
        details = getattr(usage, "prompt_tokens_details", None)
        self.cached_tokens = int(getattr(details, "cached_tokens", 0) or 0)

    @property
    def text(self) -> str:
        """The reply text received so far."""
        return "".join(self.text_parts)

    def tool_calls(self) -> list[dict[str, Any]]:
        """Complete tool calls as Chat Completions message dicts, in index order."""
        out = []
        for index in sorted(self.calls):
            call = self.calls[index]
            out.append(
                {
                    "id": call.get("id") or f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": {
                        "name": call.get("name", ""),
                        "arguments": call.get("arguments", "") or "{}",
                    },
                }
            )
        return out


@dataclass(frozen=True)
class ModelReply:
    """One model response, reduced to what the loop needs.

    Attributes
    ----------
    text : str
    tool_calls : list of dict
        ``{"id", "type": "function", "function": {"name", "arguments"}}`` each.
    prompt_tokens, completion_tokens : int or None
        As reported by the endpoint (None when it reported no usage).
    finish_reason : str or None
        "stop", "tool_calls", "length", "content_filter", ... as reported.
    cached_tokens : int
        Prompt tokens served from the provider's prompt cache
        (``usage.prompt_tokens_details.cached_tokens``; part of ``prompt_tokens``).
    """

    text: str
    tool_calls: list[dict[str, Any]]
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None
    cached_tokens: int = 0


def request_reply(
    client: openai.OpenAI,
    *,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    stream: bool,
    acc: ReplyAccumulator,
    on_text: Callable[[str], object] | None = None,
) -> ModelReply:
    """Send one Chat Completions request and collect the reply.

    Parameters
    ----------
    client : openai.OpenAI
    model : str
    messages : list of dict
        The working context (already tool-pair repaired).
    tools : list of dict or None
        Tool schemas; None or empty sends no ``tools``.
    stream : bool
        Stream the reply (SSE) and ask for a final usage chunk
        (``stream_options={"include_usage": True}``).
    acc : ReplyAccumulator
        Receives text and tool-call deltas as they arrive (read it after an interrupt).
    on_text : callable, optional
        Called with each text delta (once with the whole text when not streaming).

    Raises
    ------
    ModelError
        For every failure of the endpoint or the connection.
    """
    kwargs: dict[str, Any] = {"model": model, "messages": messages}
    if tools:
        kwargs["tools"] = tools
    failures: tuple[type[Exception], ...] = (openai.OpenAIError, *_http_errors())
    try:
        if stream:
            _stream_into(client, kwargs, acc, on_text)
        else:
            _complete_into(client, kwargs, acc, on_text)
    except failures as exc:
        raise model_error(exc, client) from exc
    return ModelReply(
        text=acc.text,
        tool_calls=acc.tool_calls(),
        prompt_tokens=acc.prompt_tokens,
        completion_tokens=acc.completion_tokens,
        finish_reason=acc.finish_reason,
        cached_tokens=acc.cached_tokens,
    )


def _complete_into(
    client: openai.OpenAI,
    kwargs: dict[str, Any],
    acc: ReplyAccumulator,
    on_text: Callable[[str], object] | None,
) -> None:
    response = client.chat.completions.create(**kwargs)
    if response.usage is not None:
        acc.take_usage(response.usage)
    if not response.choices:
        return
    choice = response.choices[0]
    acc.finish_reason = choice.finish_reason
    for index, call in enumerate(choice.message.tool_calls or []):
        function = getattr(call, "function", None)
        acc.calls[index] = {
            "id": call.id,
            "name": function.name if function else "",
            "arguments": function.arguments if function else "{}",
        }
    if choice.message.content:
        acc.text_parts.append(choice.message.content)
        if on_text is not None:
            on_text(choice.message.content)


def _stream_into(
    client: openai.OpenAI,
    kwargs: dict[str, Any],
    acc: ReplyAccumulator,
    on_text: Callable[[str], object] | None,
) -> None:
    stream = client.chat.completions.create(
        **kwargs, stream=True, stream_options={"include_usage": True}
    )
    with stream:
        for chunk in stream:
            if chunk.usage is not None:
                acc.take_usage(chunk.usage)
            for choice in chunk.choices:
                if choice.index != 0:
                    continue
                if choice.finish_reason:
                    acc.finish_reason = choice.finish_reason
                delta = choice.delta
                for tc in delta.tool_calls or []:
                    slot = acc.calls.setdefault(tc.index, {})
                    if tc.id:
                        slot["id"] = tc.id
                    if tc.function is not None:
                        if tc.function.name:
                            slot["name"] = slot.get("name", "") + tc.function.name
                        if tc.function.arguments:
                            slot["arguments"] = slot.get("arguments", "") + tc.function.arguments
                if delta.content:
                    acc.text_parts.append(delta.content)
                    if on_text is not None:
                        on_text(delta.content)


def _error_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    try:
        data = json.loads(exc.response.text)
        return str(data.get("error", {}).get("message") or exc.message)
    except Exception:  # best effort: the body may be unread, absent or not JSON
        return exc.message


def _http_errors() -> tuple[type[Exception], ...]:
    """The base errors of the HTTP library the ``openai`` client runs on.

    A stream read can fail with these (e.g. the server closing the connection)
    without the client wrapping them. Depending on its version, ``openai`` uses
    ``httpx`` or ``httpx2``; whichever it imported is in ``sys.modules``.
    """
    found: list[type[Exception]] = []
    for name in ("httpx", "httpx2"):
        module = sys.modules.get(name)
        error = getattr(module, "HTTPError", None)
        if isinstance(error, type) and issubclass(error, Exception):
            found.append(error)
    return tuple(found)


def model_error(exc: BaseException, client: openai.OpenAI | None = None) -> ModelError:
    """Map an ``openai`` (or its HTTP library's) failure to a :class:`ModelError` a user can act on.

    ``status_code`` is the HTTP status, or None when no response arrived.
    """
    where = f" at {client.base_url}" if client is not None else ""
    if isinstance(exc, (openai.APIConnectionError, *_http_errors())):
        kind = "timed out" if isinstance(exc, openai.APITimeoutError) else "could not be reached"
        return ModelError(f"the model endpoint{where} {kind}: {exc}", status_code=None)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = _error_detail(exc)
        if isinstance(exc, openai.AuthenticationError):
            text = f"the model endpoint{where} rejected the API key (401): {detail}"
        elif isinstance(exc, openai.PermissionDeniedError):
            text = f"the API key may not use this model (403): {detail}"
        elif isinstance(exc, openai.NotFoundError):
            text = f"model or endpoint not found (404): {detail}"
        elif isinstance(exc, openai.RateLimitError):
            text = f"rate limited or out of quota (429), after the client's retries: {detail}"
        elif status >= 500:
            text = f"the model endpoint failed ({status}), after the client's retries: {detail}"
        else:
            text = f"the model endpoint rejected the request ({status}): {detail}"
        return ModelError(text, status_code=status)
    return ModelError(f"the model call failed: {exc}", status_code=None)
