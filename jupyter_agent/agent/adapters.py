"""Model adapters: the Model protocol, and Chat Completions and Responses over ``openai``.

A Model sends the working context (stored Chat Completions messages) and tool schemas,
and returns one ModelReply; what arrives is kept in a caller-owned PartialReply, so an
interrupted reply keeps its text. A body is encoded once with ``msgspec`` and posted with
the client's ``post`` (its headers and retries), past its request transform. The
Responses adapter sends ``store: false`` and keeps reasoning items in memory only.
"""

from __future__ import annotations

import json
import sys
import uuid
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import msgspec
import openai

from jupyter_agent.agent.config import TokenUsage
from jupyter_agent.agent.endpoint import Endpoint, events, json_object, model_error
from jupyter_agent.errors import ModelError

TextCallback = Callable[[str], object]


def usage_of(data: Any, input_key: str, output_key: str, details_key: str) -> TokenUsage | None:
    """The :class:`TokenUsage` of a reported usage dict, or None when it lacks the counts."""
    if not isinstance(data, dict):
        return None
    tokens_in, tokens_out = data.get(input_key), data.get(output_key)
    if not isinstance(tokens_in, int) or not isinstance(tokens_out, int):
        return None
    details = data.get(details_key)
    cached = details.get("cached_tokens") if isinstance(details, dict) else 0
    return TokenUsage(tokens_in, tokens_out, cached if isinstance(cached, int) else 0)


@dataclass
class PartialReply:
    """What a (possibly streaming) reply has delivered so far; owned by the caller."""

    text_parts: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    usage: TokenUsage | None = None
    finish_reason: str | None = None
    received: bool = False

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    def add_text(self, text: str, on_text: TextCallback | None) -> None:
        if text:
            self.text_parts.append(text)
            if on_text is not None:
                on_text(text)

    def add_call(self, index: int, call_id: Any = None, name: Any = None,
                 arguments: Any = None) -> None:
        """Add to the tool call at position ``index``: its id, more of its name and arguments."""
        slot = self.calls.setdefault(index, {})
        slot["id"] = str(call_id or slot.get("id", ""))
        slot["name"] = slot.get("name", "") + str(name or "")
        slot["arguments"] = slot.get("arguments", "") + str(arguments or "")

    def tool_calls(self) -> list[dict[str, Any]]:
        """The tool calls as Chat Completions ``tool_calls`` dicts, in position order."""
        return [{"id": call.get("id") or f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                 "function": {"name": call.get("name", ""),
                              "arguments": call.get("arguments", "") or "{}"}}
                for _, call in sorted(self.calls.items())]

    def reply(self) -> ModelReply:
        return ModelReply(self.text, self.tool_calls(), self.finish_reason, self.usage)


@dataclass(frozen=True)
class ModelReply:
    """One model response, reduced to what the loop needs."""

    text: str
    tool_calls: list[dict[str, Any]]
    finish_reason: str | None
    usage: TokenUsage | None = None


@runtime_checkable
class Model(Protocol):
    """A model the agent can talk to (see the module docstring)."""

    api: str
    name: str
    base_url: str

    def respond(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *,
                stream: bool, partial: PartialReply,
                on_text: TextCallback | None = None) -> ModelReply: ...


class OpenAIModel(ABC):
    """A model at :attr:`path` under an ``openai`` client's base URL; ``key_env``: the
    variable the key came from, named when it is refused (None: no real key was sent)."""

    api = ""
    path = ""

    def __init__(self, client: openai.OpenAI, name: str, *,
                 params: Mapping[str, Any] | None = None,
                 key_env: str | None = "OPENAI_API_KEY") -> None:
        self.client, self.name, self.params = client, name, dict(params or {})
        self.base_url = str(client.base_url)
        self.endpoint = Endpoint(self.base_url, name, key_env or "OPENAI_API_KEY",
                                 key_env is not None, self.api)
        # its HTTP library: the client returns a raw reply when asked for its Response class
        http = next(sys.modules[root] for cls in type(client._client).__mro__
                    if (root := cls.__module__.split(".")[0]) in ("httpx", "httpx2"))
        self._raw, self._failures = http.Response, (openai.OpenAIError, http.HTTPError)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r} at {self.base_url})"

    def respond(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *,
                stream: bool, partial: PartialReply,
                on_text: TextCallback | None = None) -> ModelReply:
        """Send one request, filling ``partial`` as the reply arrives; ModelError (worded
        for the user) when the endpoint failed, after retries, or was not understood."""
        body = self.body(messages, tools, stream=stream)
        try:
            content = msgspec.json.encode(body)
        except UnicodeEncodeError:  # a lone surrogate (e.g. a file name): escaped, not refused
            content = json.dumps(body).encode()
        try:
            response: Any = self.client.post(self.path, cast_to=self._raw, content=content,
                                             stream=stream)
            try:
                url = self.endpoint.url
                replies = (events(response.iter_lines(), url) if stream
                           else [(None, json_object(response.text, url, "reply"))])
                for event, data in replies:
                    partial.received = True
                    self._take(event, data, partial, on_text)
            finally:
                response.close()
        except self._failures as exc:
            raise model_error(exc, self.endpoint, received=partial.received) from exc
        return partial.reply()

    @abstractmethod
    def body(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *,
             stream: bool) -> dict[str, Any]: ...

    @abstractmethod
    def _take(self, event: str | None, data: dict[str, Any], partial: PartialReply,
              on_text: TextCallback | None) -> None:
        """Fill ``partial`` from a streamed event named ``event`` or (None) a whole reply."""


class ChatModel(OpenAIModel):
    """A model behind the Chat Completions API (``POST /chat/completions``)."""

    api = "chat"
    path = "/chat/completions"

    def body(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *,
             stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.name, **self.params,
                                "messages": messages if isinstance(messages, list)
                                else list(messages)}
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        if tools:
            body["tools"] = tools if isinstance(tools, list) else list(tools)
        return body

    def _take(self, event: str | None, chunk: dict[str, Any], partial: PartialReply,
              on_text: TextCallback | None) -> None:
        # a streamed chunk has a "delta", a whole reply a "message"
        if chunk.get("usage"):
            partial.usage = usage_of(chunk["usage"], "prompt_tokens", "completion_tokens",
                                     "prompt_tokens_details")
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason"):
                partial.finish_reason = choice["finish_reason"]
            delta = choice.get("delta") or choice.get("message") or {}
            for position, call in enumerate(delta.get("tool_calls") or ()):
                function = call.get("function") or {}
                partial.add_call(call.get("index", position), call.get("id"),
                                 function.get("name"), function.get("arguments"))
            partial.add_text(delta.get("content") or "", on_text)


REASONING_MODELS = ("o1", "o3", "o4", "gpt-5", "codex")
_MAX_REASONING = 256
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _content(content: Any, role: str) -> Any:
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
            image = image if isinstance(image, dict) else {"url": str(image)}
            parts.append({"type": "input_image", "image_url": image.get("url", ""),
                          "detail": image.get("detail") or "auto"})
        elif isinstance(part, dict):
            parts.append(part)
    return parts


def _key(message: Mapping[str, Any]) -> tuple[str, ...]:
    calls = message.get("tool_calls") or ()
    return (("calls", *(str(c.get("id")) for c in calls)) if calls
            else ("text", str(message.get("content") or "")))


def to_input(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Responses input items of one stored (Chat Completions) message."""
    role = str(message.get("role", "user"))
    if role == "tool":
        output = message.get("content")
        return [{"type": "function_call_output", "call_id": message.get("tool_call_id"),
                 "output": _content(output, role) if isinstance(output, list)  # and images
                 else output if isinstance(output, str) else str(output or "")}]
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


class ResponsesModel(OpenAIModel):
    """A model behind the Responses API (``POST /responses``); for the model names of
    :data:`REASONING_MODELS` it asks for encrypted reasoning items."""

    api = "responses"
    path = "/responses"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reasoning = self.name.lower().rsplit("/", 1)[-1].startswith(REASONING_MODELS)
        self._converted: list[tuple[Mapping[str, Any], list[dict[str, Any]]]] = []
        self._carried: OrderedDict[tuple[str, ...], list[dict[str, Any]]] = OrderedDict()

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

    def body(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *,
             stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.name, **self.params, "store": False,
                                "input": self.input(messages)}
        if self.reasoning:
            body["include"] = ["reasoning.encrypted_content"]
        if stream:
            body["stream"] = True
        if tools:
            functions = [tool.get("function") or {} for tool in tools]
            body["tools"] = [{"type": "function", "name": f.get("name"),
                              "description": f.get("description", ""),
                              "parameters": f.get("parameters") or {"type": "object"},
                              "strict": False} for f in functions]
        return body

    def _take(self, event: str | None, data: dict[str, Any], partial: PartialReply,
              on_text: TextCallback | None) -> None:
        kind = "response.completed" if event is None else data.get("type", event)
        if kind == "response.output_text.delta":
            partial.add_text(str(data.get("delta", "")), on_text)
        elif kind == "response.output_item.added":
            item = data.get("item") or {}
            if item.get("type") == "function_call":
                partial.add_call(int(data.get("output_index", 0)), item.get("call_id"),
                                 item.get("name"), item.get("arguments"))
        elif kind == "response.function_call_arguments.delta":
            partial.add_call(int(data.get("output_index", 0)), arguments=data.get("delta"))
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            # a whole reply (no event), or the one a stream ends with
            self._finish(data if event is None else data.get("response") or {}, partial, on_text)

    def _finish(self, response: Mapping[str, Any], partial: PartialReply,
                on_text: TextCallback | None) -> None:
        status, streamed_text = response.get("status"), bool(partial.text_parts)
        if status == "failed":
            error = response.get("error") or {}
            detail = error.get("message") if isinstance(error, dict) else None
            raise ModelError(f"the model endpoint at {self.base_url} could not finish the "
                             f"reply ({detail or 'no details'}): send the prompt again")
        output = [item for item in response.get("output") or () if isinstance(item, dict)]
        reasoning: list[dict[str, Any]] = []
        if output:  # the whole reply: what streamed before is replaced
            partial.calls = {}
        for index, item in enumerate(output):
            kind = item.get("type")
            if kind == "function_call":
                partial.add_call(index, item.get("call_id"), item.get("name"),
                                 item.get("arguments"))
            elif kind == "reasoning" and item.get("encrypted_content"):
                reasoning.append({k: item[k] for k in ("type", "id", "summary",
                                                        "encrypted_content") if k in item})
            elif kind == "message" and not streamed_text:
                for part in item.get("content") or ():
                    if part.get("type") in ("output_text", "refusal"):
                        partial.add_text(str(part.get("text") or part.get("refusal") or ""),
                                         on_text)
        partial.usage = usage_of(response.get("usage"), "input_tokens", "output_tokens",
                                 "input_tokens_details") or partial.usage
        incomplete = response.get("incomplete_details") or {}
        partial.finish_reason = (_INCOMPLETE.get(str(incomplete.get("reason")), "length")
                                 if status == "incomplete" else
                                 "tool_calls" if partial.calls else "stop")
        if not reasoning:
            return
        tool_calls = partial.tool_calls()
        for index, call in zip(sorted(partial.calls), tool_calls, strict=True):
            partial.calls[index]["id"] = call["id"]  # fixed now, so the key matches
        key = _key({"content": partial.text, "tool_calls": tool_calls})
        self._carried[key] = reasoning
        self._carried.move_to_end(key)
        while len(self._carried) > _MAX_REASONING:
            self._carried.popitem(last=False)
