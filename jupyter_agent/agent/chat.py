"""The Chat Completions model: request building, streaming, usage, errors.

:class:`ChatModel` implements :class:`~jupyter_agent.agent.model.Model` over
``client.chat.completions.create`` of the official ``openai`` client, which keeps doing
what it is good at: retries, timeouts, error classes, SSE parsing.

The fast request path: the client runs every request argument through a client-side
transform that walks it against its typed parameter graph -- for a long session, tens
of milliseconds per request spent re-checking messages that are already plain JSON in
the wire format. The bulk fields (``messages``, ``tools``) therefore travel in
``extra_body`` and an empty placeholder of each goes through the typed arguments: the
client merges ``extra_body`` over the transformed body, so each field keeps the place
the typed path gives it and the JSON body sent is byte for byte the one the typed path
would send (a test compares the raw bytes). ``fast=False`` sends everything through the
typed arguments. A streamed answer is read to its end as plain events
(:mod:`~jupyter_agent.agent.sse`), so the connection is reused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import openai

from jupyter_agent.agent.model import (
    ModelReply,
    PartialReply,
    TextCallback,
    TokenUsage,
    request_arguments,
    usage_of,
)
from jupyter_agent.agent.model_errors import Endpoint, failures, model_error, parse_event
from jupyter_agent.agent.sse import DONE, events

__all__ = ["ChatModel"]


def _usage(usage: Any) -> TokenUsage | None:
    """A reported ``CompletionUsage`` object as :class:`TokenUsage` (None when incomplete)."""
    if usage is None:
        return None
    return usage_of(usage.model_dump(), "prompt_tokens", "completion_tokens",
                    "prompt_tokens_details")


class ChatModel:
    """A model behind the Chat Completions API (``POST /chat/completions``).

    Parameters
    ----------
    client : openai.OpenAI
        Its base URL, key, retries and timeout are used as they are.
    name : str
        The model name sent with every request.
    params : mapping, optional
        Further request fields sent with every request (e.g. ``{"temperature": 0.2}``).
    key_env : str or None
        The environment variable the client's key came from, named when the endpoint
        rejects it (401); ``None`` when no real key was sent (a local server).
    fast : bool
        Send ``messages`` and ``tools`` past the client's request transform (see the
        module docstring); the body is the same either way.
    """

    api = "chat"

    def __init__(self, client: openai.OpenAI, name: str, *,
                 params: Mapping[str, Any] | None = None,
                 key_env: str | None = "OPENAI_API_KEY", fast: bool = True) -> None:
        self.client = client
        self.name = name
        self.params = dict(params or {})
        self.fast = fast
        self.base_url = str(client.base_url)
        self.endpoint = Endpoint.of(client, name, key_env=key_env, api=self.api)
        self._failures = failures()

    def __repr__(self) -> str:
        return f"ChatModel({self.name!r} at {self.base_url})"

    def request(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]],
                *, stream: bool) -> dict[str, Any]:
        """The keyword arguments of ``client.chat.completions.create`` for one request.

        Parameters
        ----------
        messages : sequence of dict
            Chat Completions messages (plain JSON values).
        tools : sequence of dict
            Tool schemas; empty: no ``tools`` field.
        stream : bool
            Ask for a stream, with a final usage chunk (``stream_options.include_usage``).

        Returns
        -------
        dict
        """
        kwargs: dict[str, Any] = {"model": self.name, **self.params}
        if stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        bulk: dict[str, Any] = {"messages": messages if isinstance(messages, list)
                                else list(messages)}
        if tools:
            bulk["tools"] = tools if isinstance(tools, list) else list(tools)
        return request_arguments(kwargs, bulk, fast=self.fast)

    def respond(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *,
                stream: bool, partial: PartialReply,
                on_text: TextCallback | None = None) -> ModelReply:
        """Send one request; see :meth:`jupyter_agent.agent.model.Model.respond`."""
        kwargs = self.request(messages, tools, stream=stream)
        try:
            if stream:
                self._stream_into(kwargs, partial, on_text)
            else:
                self._complete_into(kwargs, partial, on_text)
        except self._failures as exc:
            raise model_error(exc, self.endpoint, received=partial.received) from exc
        return partial.reply()

    def _complete_into(self, kwargs: dict[str, Any], partial: PartialReply,
                       on_text: TextCallback | None) -> None:
        response = self.client.chat.completions.create(**kwargs)
        partial.received = True
        partial.usage = _usage(response.usage)
        if not response.choices:
            return
        choice = response.choices[0]
        partial.finish_reason = choice.finish_reason
        for index, call in enumerate(choice.message.tool_calls or []):
            function = getattr(call, "function", None)
            partial.calls[index] = {"id": call.id,
                                    "name": function.name if function else "",
                                    "arguments": function.arguments if function else "{}"}
        partial.add_text(choice.message.content or "", on_text)

    def _stream_into(self, kwargs: dict[str, Any], partial: PartialReply,
                     on_text: TextCallback | None) -> None:
        with self.client.chat.completions.with_streaming_response.create(**kwargs) as response:
            for event in events(response.iter_lines()):
                partial.received = True
                if event.data == DONE:
                    continue  # read on to the end, so the connection can be reused
                chunk = parse_event(event, self.endpoint)
                if chunk.get("usage"):
                    partial.usage = usage_of(chunk["usage"], "prompt_tokens",
                                             "completion_tokens", "prompt_tokens_details")
                for choice in chunk.get("choices") or ():
                    if choice.get("index", 0) == 0:
                        self._take_delta(choice, partial, on_text)

    @staticmethod
    def _take_delta(choice: dict[str, Any], partial: PartialReply,
                    on_text: TextCallback | None) -> None:
        if choice.get("finish_reason"):
            partial.finish_reason = choice["finish_reason"]
        delta = choice.get("delta") or {}
        for call in delta.get("tool_calls") or ():
            slot = partial.calls.setdefault(call.get("index", 0), {})
            if call.get("id"):
                slot["id"] = call["id"]
            function = call.get("function") or {}
            if function.get("name"):
                slot["name"] = slot.get("name", "") + function["name"]
            if function.get("arguments"):
                slot["arguments"] = slot.get("arguments", "") + function["arguments"]
        if delta.get("content"):
            partial.add_text(delta["content"], on_text)
