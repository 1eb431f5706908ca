"""The OpenAI chat-completions wire format, as spoken by the scripted server.

Pure functions, no I/O: request validation (:func:`validate_chat_request`), error
bodies (:func:`error_body`), token estimates, and building a ``chat.completion``
object or the list of ``chat.completion.chunk`` objects of a streamed answer.

Validation mirrors what the real API rejects with HTTP 400 (messages worded like
the real ones): a missing ``model``; missing or empty ``messages``; a message
that is not an object, has no or an unknown ``role``, or a ``content`` that is
not a string, a list or null; a ``tool`` message that answers no tool call of the
assistant message it follows; an assistant message whose ``tool_calls`` are not
all answered by the tool messages that directly follow it. Unknown request
fields and extra message keys are accepted and ignored.
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from typing import Any

from jupyter_agent.testing.script import Step

__all__ = [
    "ROLES",
    "RequestRejected",
    "build_chunks",
    "build_completion",
    "error_body",
    "estimate_completion_tokens",
    "estimate_prompt_tokens",
    "new_completion_id",
    "new_tool_call_id",
    "validate_chat_request",
]

ROLES = ("system", "developer", "user", "assistant", "tool")
SYSTEM_FINGERPRINT = "fp_scripted"

_DEFAULT_TYPE = {400: "invalid_request_error", 401: "invalid_request_error",
                 403: "invalid_request_error", 404: "invalid_request_error",
                 429: "requests"}
_DEFAULT_CODE = {401: "invalid_api_key", 429: "rate_limit_exceeded"}


class RequestRejected(Exception):
    """A request the server answers with an HTTP error.

    Attributes
    ----------
    status : int
        HTTP status code.
    body : dict
        OpenAI-shaped body ``{"error": {"message", "type", "param", "code"}}``.
    headers : dict
        Extra response headers.
    """

    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None):
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        super().__init__(f"{status}: {body['error']['message']}")


def error_body(
    status: int,
    message: str,
    *,
    type: str | None = None,
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    """Build an OpenAI-shaped error body; ``type`` defaults by status."""
    if type is None:
        fallback = "server_error" if status >= 500 else "invalid_request_error"
        type = _DEFAULT_TYPE.get(status, fallback)
    if code is None:
        code = _DEFAULT_CODE.get(status)
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _reject(message: str, *, param: str | None = None, code: str | None = None) -> RequestRejected:
    return RequestRejected(400, error_body(400, message, param=param, code=code))


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _validate_tool_calls(i: int, tool_calls: object) -> list[str]:
    if not isinstance(tool_calls, list):
        raise _reject(
            f"Invalid type for 'messages[{i}].tool_calls': expected an array of objects,"
            f" but got {_json_type(tool_calls)} instead.",
            param=f"messages[{i}].tool_calls", code="invalid_type")
    if not tool_calls:
        raise _reject(
            f"Invalid 'messages[{i}].tool_calls': empty array. Expected an array with minimum"
            " length 1, but got an empty array instead.",
            param=f"messages[{i}].tool_calls", code="empty_array")
    ids = []
    for j, call in enumerate(tool_calls):
        where = f"messages[{i}].tool_calls[{j}]"
        if not isinstance(call, dict):
            raise _reject(f"Invalid type for '{where}': expected an object, but got"
                          f" {_json_type(call)} instead.", param=where, code="invalid_type")
        for key in ("id", "type", "function"):
            if key not in call:
                raise _reject(f"Missing required parameter: '{where}.{key}'.",
                              param=f"{where}.{key}", code="missing_required_parameter")
        function = call["function"]
        if not isinstance(function, dict):
            raise _reject(f"Invalid type for '{where}.function': expected an object, but got"
                          f" {_json_type(function)} instead.", param=f"{where}.function",
                          code="invalid_type")
        for key in ("name", "arguments"):
            if key not in function:
                raise _reject(f"Missing required parameter: '{where}.function.{key}'.",
                              param=f"{where}.function.{key}", code="missing_required_parameter")
            if not isinstance(function[key], str):
                raise _reject(f"Invalid type for '{where}.function.{key}': expected a string,"
                              f" but got {_json_type(function[key])} instead.",
                              param=f"{where}.function.{key}", code="invalid_type")
        if not isinstance(call["id"], str):
            raise _reject(f"Invalid type for '{where}.id': expected a string, but got"
                          f" {_json_type(call['id'])} instead.", param=f"{where}.id",
                          code="invalid_type")
        ids.append(call["id"])
    return ids


def _validate_message(i: int, message: object) -> None:
    if not isinstance(message, dict):
        raise _reject(f"Invalid type for 'messages[{i}]': expected an object, but got"
                      f" {_json_type(message)} instead.", param=f"messages[{i}]",
                      code="invalid_type")
    if "role" not in message:
        raise _reject(f"Missing required parameter: 'messages[{i}].role'.",
                      param=f"messages[{i}].role", code="missing_required_parameter")
    role = message["role"]
    if role not in ROLES:
        supported = ", ".join(f"'{r}'" for r in ROLES[:-1]) + f", and '{ROLES[-1]}'"
        shown = f"'{role}'" if isinstance(role, str) else json.dumps(role)
        raise _reject(f"Invalid value: {shown}. Supported values are: {supported}.",
                      param=f"messages[{i}].role", code="invalid_value")
    content = message.get("content")
    if not (content is None or isinstance(content, str | list)):
        raise _reject(f"Invalid type for 'messages[{i}].content': expected one of a string or"
                      f" array of objects, but got {_json_type(content)} instead.",
                      param=f"messages[{i}].content", code="invalid_type")
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                raise _reject(f"Invalid type for 'messages[{i}].content[{j}]': expected an"
                              f" object, but got {_json_type(part)} instead.",
                              param=f"messages[{i}].content[{j}]", code="invalid_type")
    if role != "assistant" and content is None:
        raise _reject(f"Missing required parameter: 'messages[{i}].content'.",
                      param=f"messages[{i}].content", code="missing_required_parameter")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise _reject(f"Missing required parameter: 'messages[{i}].tool_call_id'.",
                      param=f"messages[{i}].tool_call_id", code="missing_required_parameter")


def _unanswered_error(index: int, missing: list[str]) -> RequestRejected:
    return _reject(
        "An assistant message with 'tool_calls' must be followed by tool messages responding"
        " to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(missing),
        param=f"messages.[{index}].role")


def validate_chat_request(body: object) -> None:
    """Reject what the real API rejects for ``POST /v1/chat/completions``.

    Parameters
    ----------
    body : object
        The parsed JSON request body.

    Raises
    ------
    RequestRejected
        HTTP 400 with an OpenAI-shaped body whose message mirrors the real API's.
    """
    if not isinstance(body, dict):
        raise _reject("Invalid type for request body: expected an object, but got"
                      f" {_json_type(body)} instead.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _reject("you must provide a model parameter")
    if "messages" not in body:
        raise _reject("Missing required parameter: 'messages'.", param="messages",
                      code="missing_required_parameter")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _reject(f"Invalid type for 'messages': expected an array of objects, but got"
                      f" {_json_type(messages)} instead.", param="messages", code="invalid_type")
    if not messages:
        raise _reject("Invalid 'messages': empty array. Expected an array with minimum length 1,"
                      " but got an empty array instead.", param="messages", code="empty_array")
    # Tool-pair rules: tool messages must directly follow (after other tool messages)
    # the assistant message whose tool_calls they answer, each call answered once.
    open_ids: set[str] | None = None
    unanswered: list[str] = []
    opened_at = -1
    for i, message in enumerate(messages):
        _validate_message(i, message)
        role = message["role"]
        if role == "tool":
            call_id = message["tool_call_id"]
            if open_ids is None or call_id not in unanswered:
                raise _reject("Invalid parameter: messages with role 'tool' must be a response to"
                              " a preceeding message with 'tool_calls'.",
                              param=f"messages.[{i}].role")
            unanswered.remove(call_id)
            continue
        if unanswered:
            raise _unanswered_error(opened_at, unanswered)
        open_ids, unanswered = None, []
        if role == "assistant" and message.get("tool_calls") is not None:
            ids = _validate_tool_calls(i, message["tool_calls"])
            open_ids, unanswered, opened_at = set(ids), list(ids), i
    if unanswered:
        raise _unanswered_error(opened_at, unanswered)


def _text_chars(content: object) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(p["text"]) for p in content
                   if isinstance(p, dict) and isinstance(p.get("text"), str))
    return 0


def estimate_prompt_tokens(body: dict[str, Any]) -> int:
    """Estimate a request's prompt tokens at ~4 characters per token.

    ``ceil(C / 4) + ceil(T / 4)``, at least 1, where C counts the characters of
    every message's text content (string content, or the ``text`` of content
    parts) plus its tool calls' names and argument strings, and T is the length
    of the JSON-encoded ``tools`` list (0 when absent).

    Returns
    -------
    int
        Tokens.
    """
    chars = 0
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        chars += _text_chars(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                chars += len(str(function.get("name", "")))
                chars += len(str(function.get("arguments", "")))
    tools = body.get("tools")
    tool_chars = len(json.dumps(tools)) if tools else 0
    return max(1, math.ceil(chars / 4) + math.ceil(tool_chars / 4))


def estimate_completion_tokens(text: str | None, tool_calls: list[tuple[str, str]]) -> int:
    """Estimate completion tokens: ``ceil(chars / 4)``, at least 1.

    Parameters
    ----------
    text : str or None
        Reply text.
    tool_calls : list of (name, arguments_json)

    Returns
    -------
    int
        Tokens.
    """
    chars = len(text or "") + sum(len(name) + len(args) for name, args in tool_calls)
    return max(1, math.ceil(chars / 4))


def new_completion_id() -> str:
    """Return a fresh ``chatcmpl-...`` id."""
    return "chatcmpl-" + uuid.uuid4().hex[:29]


def new_tool_call_id() -> str:
    """Return a fresh, unique ``call_...`` tool call id."""
    return "call_" + uuid.uuid4().hex[:24]


class _Answer:
    """A resolved step: ids assigned, arguments encoded, usage computed."""

    def __init__(self, step: Step, body: dict[str, Any]) -> None:
        self.text = step.text
        self.calls = [(spec.id or new_tool_call_id(), spec.name, spec.arguments_json())
                      for spec in step.tool_calls or []]
        self.finish_reason = step.finish_reason or ("tool_calls" if self.calls else "stop")
        self.model = str(body.get("model"))
        self.id = new_completion_id()
        self.created = int(time.time())
        override = step.usage
        prompt = (override.prompt_tokens if override and override.prompt_tokens is not None
                  else estimate_prompt_tokens(body))
        pairs = [(name, args) for _, name, args in self.calls]
        completion = (override.completion_tokens
                      if override and override.completion_tokens is not None
                      else estimate_completion_tokens(self.text, pairs))
        self.usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": override.cached_tokens if override else 0,
                                      "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0},
        }

    def envelope(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model,
                "service_tier": "default", "system_fingerprint": SYSTEM_FINGERPRINT}


def build_completion(step: Step, body: dict[str, Any]) -> dict[str, Any]:
    """Build the non-streaming ``chat.completion`` object answering *body* with *step*."""
    answer = _Answer(step, body)
    message: dict[str, Any] = {"role": "assistant", "content": answer.text, "refusal": None,
                               "annotations": []}
    if answer.calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in answer.calls
        ]
    out = answer.envelope("chat.completion")
    out["choices"] = [{"index": 0, "message": message, "logprobs": None,
                       "finish_reason": answer.finish_reason}]
    out["usage"] = answer.usage
    return out


_WORD = re.compile(r"\s*\S+\s*|\s+")


def split_text(text: str, size: int = 16) -> list[str]:
    """Split text into stream deltas: one word (with its whitespace) each, long
    words cut every *size* code points. Joining the pieces gives *text* back."""
    pieces: list[str] = []
    for match in _WORD.finditer(text):
        word = match.group()
        pieces.extend(word[k:k + size] for k in range(0, len(word), size))
    return pieces


def build_chunks(step: Step, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Build the ``chat.completion.chunk`` objects of a streamed answer.

    Order: a first chunk with ``role`` and empty content; one chunk per text
    piece; per tool call, one chunk with index, id, type, name and empty
    arguments, then chunks with argument fragments; a chunk with the
    ``finish_reason``; and, when ``stream_options.include_usage`` is true, a
    final chunk with ``choices: []`` and ``usage`` (other chunks then carry
    ``usage: null``, as the real API does). ``data: [DONE]`` is the caller's.
    """
    answer = _Answer(step, body)
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        out = answer.envelope("chat.completion.chunk")
        out["choices"] = [{"index": 0, "delta": delta, "logprobs": None,
                           "finish_reason": finish_reason}]
        if include_usage:
            out["usage"] = None
        return out

    chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
    chunks.extend(chunk({"content": piece}) for piece in split_text(answer.text or ""))
    for index, (cid, name, args) in enumerate(answer.calls):
        chunks.append(chunk({"tool_calls": [{"index": index, "id": cid, "type": "function",
                                             "function": {"name": name, "arguments": ""}}]}))
        chunks.extend(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                      for piece in (args[k:k + 12] for k in range(0, len(args), 12)))
    chunks.append(chunk({}, answer.finish_reason))
    if include_usage:
        final = answer.envelope("chat.completion.chunk")
        final["choices"] = []
        final["usage"] = answer.usage
        chunks.append(final)
    return chunks
