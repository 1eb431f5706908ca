"""The Responses API model: the session's Chat Completions messages as Responses input.

:class:`ResponsesModel` implements :class:`~jupyter_agent.agent.model.Model` over
``client.responses.create`` (``POST /responses``). The session keeps its stored format
(Chat Completions messages); each request converts them:

==========================================  ============================================
stored message                              Responses input item(s)
==========================================  ============================================
``system`` / ``user`` / ``assistant`` text  ``{"role", "content"}`` message
user content parts (text, ``image_url``)    ``input_text`` / ``input_image`` parts
assistant ``tool_calls``                    one ``function_call`` per call (``call_id``)
``tool`` result                             ``function_call_output`` (``call_id``)
``tool`` result with parts (figures)        its output: ``input_text``/``input_image``
==========================================  ============================================

and the tool schemas become Responses function tools (``strict`` off: the schemas are
generated with optional parameters). A reply comes back the other way: output text,
``function_call`` items as ``tool_calls``, usage (``input_tokens``, ``output_tokens``,
cached input tokens), and the finish reason from the response's status (``incomplete``
for ``max_output_tokens`` is "length", for ``content_filter`` "content_filter").

Requests are stateless (``store: false``): the session lives in the memory directory,
not on the provider's servers. For reasoning models the request asks for
``reasoning.encrypted_content``; reasoning items the server returns are kept in memory,
keyed by the assistant message they came with, and sent again before that message's
items in later requests, so the model keeps its reasoning across tool calls. They are
not saved in the session (its format stays Chat Completions): after a resume the model
reasons afresh.

Requests take the fast path of :mod:`~jupyter_agent.agent.chat` (``input`` and
``tools`` in ``extra_body``, same bytes), each message is converted once and reused
while it stays in the working context, and streams are read to the end as plain events
(:mod:`~jupyter_agent.agent.sse`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import openai

from jupyter_agent.agent.model import (
    ModelReply,
    PartialReply,
    TextCallback,
    request_arguments,
    usage_of,
)
from jupyter_agent.agent.model_errors import Endpoint, failures, model_error, parse_event
from jupyter_agent.agent.sse import DONE, events
from jupyter_agent.errors import ModelError

__all__ = ["REASONING_MODELS", "ResponsesModel", "to_input", "to_tools"]

REASONING_MODELS = ("o1", "o3", "o4", "gpt-5", "codex")
"""Name prefixes of models that reason (a provider prefix such as ``openai/`` aside):
their requests ask for encrypted reasoning items."""

_MAX_REASONING = 256
"""Reasoning entries kept in memory (the oldest are dropped first)."""

_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _content(content: Any, role: str) -> Any:
    """A message's content as Responses content (parts converted, text kept as text)."""
    if not isinstance(content, list):
        return "" if content is None else content
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            parts.append({"type": "output_text" if role == "assistant" else "input_text",
                          "text": part.get("text", "")})
        elif kind == "image_url":
            image = part.get("image_url") or {}
            url = image.get("url", "") if isinstance(image, dict) else str(image)
            parts.append({"type": "input_image", "image_url": url,
                          "detail": (image.get("detail") if isinstance(image, dict) else None)
                          or "auto"})
        elif isinstance(part, dict):
            parts.append(part)
    return parts


def _key(message: Mapping[str, Any]) -> tuple[str, ...]:
    """What identifies an assistant message for its reasoning items."""
    calls = message.get("tool_calls") or ()
    if calls:
        return ("calls", *(str(c.get("id")) for c in calls))
    return ("text", str(message.get("content") or ""))


def to_input(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Responses input items of one stored (Chat Completions) message."""
    role = str(message.get("role", "user"))
    if role == "tool":
        output = message.get("content")
        if isinstance(output, list):  # text and images
            return [{"type": "function_call_output", "call_id": message.get("tool_call_id"),
                     "output": _content(output, role)}]
        return [{"type": "function_call_output", "call_id": message.get("tool_call_id"),
                 "output": output if isinstance(output, str) else str(output or "")}]
    items: list[dict[str, Any]] = []
    content = message.get("content")
    if content or role != "assistant" or not message.get("tool_calls"):
        items.append({"role": role, "content": _content(content, role)})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        items.append({"type": "function_call", "call_id": call.get("id"),
                      "name": function.get("name", ""),
                      "arguments": function.get("arguments", "") or "{}"})
    return items


def to_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions tool schemas as Responses function tools."""
    out = []
    for tool in tools:
        function = tool.get("function") or {}
        out.append({"type": "function", "name": function.get("name"),
                    "description": function.get("description", ""),
                    "parameters": function.get("parameters") or {"type": "object"},
                    "strict": False})
    return out


class ResponsesModel:
    """A model behind the Responses API (``POST /responses``).

    Parameters
    ----------
    client : openai.OpenAI
    name : str
        The model name sent with every request.
    params : mapping, optional
        Further request fields sent with every request (e.g. ``{"temperature": 0.2}``).
    key_env : str or None
        The environment variable the key came from (named when it is refused); ``None``
        when no real key was sent.
    fast : bool
        Send ``input`` and ``tools`` past the client's request transform.
    reasoning : bool, optional
        Ask for encrypted reasoning items; default: when the model name starts with one
        of :data:`REASONING_MODELS`.
    """

    api = "responses"

    def __init__(self, client: openai.OpenAI, name: str, *,
                 params: Mapping[str, Any] | None = None,
                 key_env: str | None = "OPENAI_API_KEY", fast: bool = True,
                 reasoning: bool | None = None) -> None:
        self.client = client
        self.name = name
        self.params = dict(params or {})
        self.fast = fast
        self.base_url = str(client.base_url)
        self.endpoint = Endpoint.of(client, name, key_env=key_env, api=self.api)
        bare = name.lower().rsplit("/", 1)[-1]
        self.reasoning = (bare.startswith(REASONING_MODELS) if reasoning is None
                          else reasoning)
        self._failures = failures()
        self._converted: list[tuple[Mapping[str, Any], list[dict[str, Any]]]] = []
        self._tools: tuple[Sequence[Mapping[str, Any]], list[dict[str, Any]]] | None = None
        self._carried: OrderedDict[tuple[str, ...], list[dict[str, Any]]] = OrderedDict()

    def __repr__(self) -> str:
        return f"ResponsesModel({self.name!r} at {self.base_url})"

    # ---- requests -------------------------------------------------------------------
    def input(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The ``input`` of a request: every message converted (each once, while it stays
        in the working context), with carried reasoning items before the assistant
        messages they came with."""
        cache, items = self._converted, []
        for index, message in enumerate(messages):
            if index < len(cache) and cache[index][0] is message:
                converted = cache[index][1]
            else:
                converted = to_input(message)
                if message.get("role") == "assistant":
                    converted = self._carried.get(_key(message), []) + converted
                del cache[index:]
                cache.append((message, converted))
            items.extend(converted)
        del cache[len(messages):]
        return items

    def request(self, messages: Sequence[Mapping[str, Any]],
                tools: Sequence[Mapping[str, Any]], *, stream: bool) -> dict[str, Any]:
        """The keyword arguments of ``client.responses.create`` for one request."""
        kwargs: dict[str, Any] = {"model": self.name, **self.params, "store": False}
        if self.reasoning:
            kwargs["include"] = ["reasoning.encrypted_content"]
        if stream:
            kwargs["stream"] = True
        bulk: dict[str, Any] = {"input": self.input(messages)}
        if tools:
            if self._tools is None or self._tools[0] is not tools:
                self._tools = (tools, to_tools(tools))
            bulk["tools"] = self._tools[1]
        return request_arguments(kwargs, bulk, fast=self.fast)

    def respond(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *,
                stream: bool, partial: PartialReply,
                on_text: TextCallback | None = None) -> ModelReply:
        """Send one request; see :meth:`jupyter_agent.agent.model.Model.respond`."""
        kwargs = self.request(messages, tools, stream=stream)
        try:
            if stream:
                response = self._stream_into(kwargs, partial, on_text)
            else:
                response = self.client.responses.create(**kwargs).model_dump(mode="json")
                partial.received = True
        except self._failures as exc:
            raise model_error(exc, self.endpoint, received=partial.received) from exc
        if response is not None:
            self._take(response, partial, on_text, streamed=stream)
        return partial.reply()

    # ---- replies ----------------------------------------------------------------------
    def _stream_into(self, kwargs: dict[str, Any], partial: PartialReply,
                     on_text: TextCallback | None) -> dict[str, Any] | None:
        """Read a stream to its end; return the final response object (if it came)."""
        final = None
        with self.client.responses.with_streaming_response.create(**kwargs) as http:
            for event in events(http.iter_lines()):
                partial.received = True
                if event.data == DONE:  # not sent by the Responses API, but by some servers
                    continue
                data = parse_event(event, self.endpoint)
                kind = data.get("type", event.name)
                if kind == "response.output_text.delta":
                    partial.add_text(str(data.get("delta", "")), on_text)
                elif kind == "response.output_item.added":
                    self._take_item(data.get("output_index", 0), data.get("item") or {},
                                    partial)
                elif kind == "response.function_call_arguments.delta":
                    slot = partial.calls.setdefault(int(data.get("output_index", 0)), {})
                    slot["arguments"] = slot.get("arguments", "") + str(data.get("delta", ""))
                elif kind in ("response.completed", "response.incomplete", "response.failed"):
                    final = data.get("response") or {}
        return final

    def _take_item(self, index: int, item: Mapping[str, Any], partial: PartialReply) -> None:
        if item.get("type") == "function_call":
            slot = partial.calls.setdefault(int(index), {})
            slot["id"] = str(item.get("call_id") or "")
            slot["name"] = str(item.get("name") or "")
            slot["arguments"] = str(item.get("arguments") or "") or slot.get("arguments", "")

    def _take(self, response: Mapping[str, Any], partial: PartialReply,
              on_text: TextCallback | None, *, streamed: bool) -> None:
        """Read the final response object: status, output items, usage."""
        status = response.get("status")
        if status == "failed":
            error = response.get("error") or {}
            detail = error.get("message") if isinstance(error, dict) else None
            raise ModelError(f"the model endpoint at {self.base_url} could not finish the "
                             f"reply ({detail or 'no details'}): send the prompt again")
        output = [item for item in response.get("output") or () if isinstance(item, dict)]
        calls, reasoning = {}, []
        for index, item in enumerate(output):
            kind = item.get("type")
            if kind == "function_call":
                calls[index] = {"id": str(item.get("call_id") or ""),
                                "name": str(item.get("name") or ""),
                                "arguments": str(item.get("arguments") or "")}
            elif kind == "reasoning" and item.get("encrypted_content"):
                reasoning.append({k: item[k] for k in ("type", "id", "summary",
                                                        "encrypted_content") if k in item})
            elif kind == "message" and not (streamed and partial.text_parts):
                for part in item.get("content") or ():
                    if part.get("type") in ("output_text", "refusal"):
                        partial.add_text(str(part.get("text") or part.get("refusal") or ""),
                                         on_text)
        if output:
            partial.calls = calls
        partial.usage = usage_of(response.get("usage"), "input_tokens", "output_tokens",
                                 "input_tokens_details") or partial.usage
        incomplete = response.get("incomplete_details") or {}
        if status == "incomplete":
            partial.finish_reason = _INCOMPLETE.get(str(incomplete.get("reason")), "length")
        else:
            partial.finish_reason = "tool_calls" if partial.calls else "stop"
        if reasoning:
            self._carry(partial, reasoning)

    def _carry(self, partial: PartialReply, items: list[dict[str, Any]]) -> None:
        """Keep reasoning items for the assistant message this reply becomes."""
        calls = partial.tool_calls()
        for index, call in zip(sorted(partial.calls), calls, strict=True):
            partial.calls[index]["id"] = call["id"]  # fixed now, so the key matches
        key = _key({"content": partial.text, "tool_calls": calls})
        self._carried[key] = items
        self._carried.move_to_end(key)
        while len(self._carried) > _MAX_REASONING:
            self._carried.popitem(last=False)
