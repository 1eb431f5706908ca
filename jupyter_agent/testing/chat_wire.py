"""The Chat Completions wire format as the scripted server speaks it (pure functions).

Requests are checked as the real API checks them (400 with its wording, unknown fields
ignored); answers are ``chat.completion`` objects or the ``chat.completion.chunk`` list of
a stream. Token estimates are ~4 characters per token, images by their pixel size. Also
the OpenAI-shaped errors and the image parts shared with the Responses format.
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

from jupyter_agent.images import decode_data_url, image_size, image_tokens
from jupyter_agent.testing.script import Step, UsageSpec

ROLES = ("system", "developer", "user", "assistant", "tool")


class RequestRejected(Exception):
    """A request answered with HTTP ``status``, JSON ``body`` and extra ``headers``."""

    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None):
        super().__init__(status, body)
        self.status, self.body, self.headers = status, body, dict(headers or {})


def error_body(status: int, message: str, *, type: str | None = None,
               param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """An OpenAI-shaped error body; ``type`` and ``code`` default by status."""
    if type is None:
        type = ("server_error" if status >= 500 else "requests" if status == 429
                else "invalid_request_error")
    if code is None:
        code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status)
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def reject(message: str, param: str | None = None, code: str | None = None) -> RequestRejected:
    return RequestRejected(400, error_body(400, message, param=param, code=code))


@dataclass(frozen=True)
class ImagePart:
    """One image of a request: its place (``"messages[5].content[2]"``), media type ("" for a
    non-``data:`` URL), pixels when known and estimated prompt tokens."""

    where: str
    media_type: str = ""
    width: int | None = None
    height: int | None = None
    tokens: int = 85  # an image given by URL, whose size cannot be told


def image_parts(body: Any) -> list[ImagePart]:
    """Every image of a Chat Completions or Responses body, in order (``[]`` for others)."""
    holders: list[tuple[str, Any]] = []  # (place, content) of each message or input item
    if isinstance(body, dict):
        for i, message in enumerate(body.get("messages") or ()):
            if isinstance(message, dict):
                holders.append((f"messages[{i}].content", message.get("content")))
        items = body.get("input")
        for i, item in enumerate(items if isinstance(items, list) else ()):
            if isinstance(item, dict):
                holders += [(f"input[{i}].{key}", item.get(key)) for key in ("content", "output")]
    found = []
    for where, content in holders:
        for j, part in enumerate(content if isinstance(content, list) else ()):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in ("image_url", "input_image"):
                continue
            url = part.get("image_url")
            if kind == "image_url" and isinstance(url, dict):
                url = url.get("url")
            decoded = decode_data_url(url) if isinstance(url, str) else None
            media_type = "" if decoded is None else decoded[1]
            dims = None if decoded is None else image_size(*decoded)
            place = f"{where}[{j}]"
            found.append(ImagePart(place, media_type, *dims, image_tokens(*dims)) if dims
                         else ImagePart(place, media_type))
    return found


def text_chars(content: object) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(p["text"]) for p in content
                   if isinstance(p, dict) and isinstance(p.get("text"), str))
    return 0


def estimate_prompt_tokens(body: dict[str, Any]) -> int:
    """Prompt tokens of a Chat Completions or Responses body: ``ceil(chars / 4)`` of the
    messages' texts and tool calls (Responses: ``instructions``, input texts, calls and their
    outputs), plus ``ceil(len(json(tools)) / 4)`` and the images' tokens; at least 1."""
    chars = len(str(body.get("instructions") or ""))
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        chars += text_chars(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                chars += len(str(function.get("name", "")))
                chars += len(str(function.get("arguments", "")))
    items = body.get("input")
    for item in [{"content": items}] if isinstance(items, str) else items or []:
        if not isinstance(item, dict):
            continue
        chars += text_chars(item.get("content"))
        chars += len(str(item.get("name", ""))) + len(str(item.get("arguments", "")))
        output = item.get("output", "")
        chars += text_chars(output) if isinstance(output, list) else len(str(output))
    tool_chars = len(json.dumps(body["tools"])) if body.get("tools") else 0
    return max(1, math.ceil(chars / 4) + math.ceil(tool_chars / 4)
               + sum(part.tokens for part in image_parts(body)))


def _json_type(value: object) -> str:
    return next((name for kind, name in ((type(None), "null"), (bool, "a boolean"),
                                         (int, "an integer"), (float, "a decimal"),
                                         (str, "a string"), (list, "an array"))
                 if isinstance(value, kind)), "an object")


def _wrong_type(where: str, expected: str, value: object) -> RequestRejected:
    return reject(f"Invalid type for '{where}': expected {expected}, but got"
                   f" {_json_type(value)} instead.", param=where, code="invalid_type")


def _missing(where: str) -> RequestRejected:
    return reject(f"Missing required parameter: '{where}'.", param=where,
                   code="missing_required_parameter")


def _array(where: str, value: object) -> list[Any]:
    if not isinstance(value, list):
        raise _wrong_type(where, "an array of objects", value)
    if not value:
        raise reject(f"Invalid '{where}': empty array. Expected an array with minimum length 1,"
                     " but got an empty array instead.", param=where, code="empty_array")
    return value


def _tool_call_ids(i: int, tool_calls: object) -> list[str]:
    ids = []
    for j, call in enumerate(_array(f"messages[{i}].tool_calls", tool_calls)):
        where = f"messages[{i}].tool_calls[{j}]"
        if not isinstance(call, dict):
            raise _wrong_type(where, "an object", call)
        for key in ("id", "type", "function"):
            if key not in call:
                raise _missing(f"{where}.{key}")
        function = call["function"]
        if not isinstance(function, dict):
            raise _wrong_type(f"{where}.function", "an object", function)
        for key in ("name", "arguments"):
            if key not in function:
                raise _missing(f"{where}.function.{key}")
            if not isinstance(function[key], str):
                raise _wrong_type(f"{where}.function.{key}", "a string", function[key])
        if not isinstance(call["id"], str):
            raise _wrong_type(f"{where}.id", "a string", call["id"])
        ids.append(call["id"])
    return ids


def _check_message(i: int, message: object) -> None:
    if not isinstance(message, dict):
        raise _wrong_type(f"messages[{i}]", "an object", message)
    if "role" not in message:
        raise _missing(f"messages[{i}].role")
    role = message["role"]
    if role not in ROLES:
        supported = ", ".join(f"'{r}'" for r in ROLES[:-1]) + f", and '{ROLES[-1]}'"
        shown = f"'{role}'" if isinstance(role, str) else json.dumps(role)
        raise reject(f"Invalid value: {shown}. Supported values are: {supported}.",
                      param=f"messages[{i}].role", code="invalid_value")
    content = message.get("content")
    if not (content is None or isinstance(content, str | list)):
        raise _wrong_type(f"messages[{i}].content", "one of a string or array of objects",
                          content)
    for j, part in enumerate(content if isinstance(content, list) else ()):
        if not isinstance(part, dict):
            raise _wrong_type(f"messages[{i}].content[{j}]", "an object", part)
    if role != "assistant" and content is None:
        raise _missing(f"messages[{i}].content")
    if (role == "assistant" and content is None and message.get("tool_calls") is None
            and message.get("function_call") is None):
        raise reject("Invalid value for 'content': expected a string, got null.",
                      param=f"messages.[{i}].content")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise _missing(f"messages[{i}].tool_call_id")


def _unanswered(index: int, missing: list[str]) -> RequestRejected:
    return reject(
        "An assistant message with 'tool_calls' must be followed by tool messages responding"
        " to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(missing), param=f"messages.[{index}].role")


def validate_chat_request(body: object) -> None:
    """Reject what the real API rejects for ``POST /v1/chat/completions``: ``RequestRejected``
    400 worded as the real API words it for no model, missing or empty messages, a bad
    message or tool call, or tool messages not directly answering each tool call."""
    if not isinstance(body, dict):
        raise reject("Invalid type for request body: expected an object, but got"
                      f" {_json_type(body)} instead.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise reject("you must provide a model parameter")
    if "messages" not in body:
        raise _missing("messages")
    messages = _array("messages", body["messages"])
    # tool messages must directly follow the assistant message whose calls they answer
    unanswered: list[str] | None = None
    opened_at = -1
    for i, message in enumerate(messages):
        _check_message(i, message)
        role = message["role"]
        if role == "tool":
            if unanswered is None or message["tool_call_id"] not in unanswered:
                raise reject("Invalid parameter: messages with role 'tool' must be a response to"
                              " a preceeding message with 'tool_calls'.",
                              param=f"messages.[{i}].role")
            unanswered.remove(message["tool_call_id"])
            continue
        if unanswered:
            raise _unanswered(opened_at, unanswered)
        unanswered = None
        if role == "assistant" and message.get("tool_calls") is not None:
            unanswered, opened_at = _tool_call_ids(i, message["tool_calls"]), i
    if unanswered:
        raise _unanswered(opened_at, unanswered)


class Answer:
    """A step resolved for a request: tool call ids assigned, arguments encoded, token counts
    (the step's ``usage`` or the estimate)."""

    def __init__(self, step: Step, body: dict[str, Any]) -> None:
        self.text, self.body = step.text, body
        self.calls = [(spec.id or "call_" + uuid.uuid4().hex[:24], spec.name,
                       spec.arguments if isinstance(spec.arguments, str)
                       else json.dumps(spec.arguments, ensure_ascii=False))
                      for spec in step.tool_calls or []]
        self.finish_reason = step.finish_reason or ("tool_calls" if self.calls else "stop")
        given = step.usage or UsageSpec()
        self.prompt = (given.prompt_tokens if given.prompt_tokens is not None
                       else estimate_prompt_tokens(body))
        chars = len(self.text or "") + sum(len(n) + len(a) for _, n, a in self.calls)
        self.completion = (  # the estimate: ceil(chars / 4), at least 1
            given.completion_tokens if given.completion_tokens is not None
            else max(1, math.ceil(chars / 4)))
        self.cached, self.omit = given.cached_tokens, given.omit
        self.envelope = {"id": "chatcmpl-" + uuid.uuid4().hex[:29], "object": "",
                         "created": int(time.time()), "model": str(body.get("model")),
                         "service_tier": "default", "system_fingerprint": "fp_scripted"}

    def usage(self) -> dict[str, Any]:
        usage = {
            "prompt_tokens": self.prompt,
            "completion_tokens": self.completion,
            "total_tokens": self.prompt + self.completion,
            "prompt_tokens_details": {"cached_tokens": self.cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0},
        }
        return {name: value for name, value in usage.items() if name not in self.omit}

    def whole(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.text, "refusal": None,
                                   "annotations": []}
        if self.calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in self.calls]
        return {**self.envelope, "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": self.finish_reason}],
                "usage": self.usage()}

    def stream(self) -> list[dict[str, Any]]:
        """The chunks of a stream: role, text pieces, each call (then its arguments in
        12-character pieces), the finish reason, and with ``stream_options.include_usage`` a
        last chunk with ``usage`` (the others then carry ``usage: null``). ``[DONE]`` is the
        caller's."""
        options = self.body.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            out = {**self.envelope, "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                "finish_reason": finish_reason}]}
            if include_usage:
                out["usage"] = None
            return out

        chunks = [chunk({"role": "assistant", "content": "", "refusal": None})]
        chunks.extend(chunk({"content": piece}) for piece in split_text(self.text or ""))
        for index, (cid, name, args) in enumerate(self.calls):
            chunks.append(chunk({"tool_calls": [{"index": index, "id": cid, "type": "function",
                                                 "function": {"name": name, "arguments": ""}}]}))
            chunks.extend(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in (args[k:k + 12] for k in range(0, len(args), 12)))
        chunks.append(chunk({}, self.finish_reason))
        if include_usage:
            chunks.append({**chunk({}), "choices": [], "usage": self.usage()})
        return chunks


_WORD = re.compile(r"\s*\S+\s*|\s+")


def split_text(text: str, size: int = 16) -> list[str]:
    """Stream deltas of ``text``: one word with its whitespace each, cut every ``size`` code
    points; joined they give ``text`` back."""
    pieces: list[str] = []
    for match in _WORD.finditer(text):
        word = match.group()
        pieces.extend(word[k:k + size] for k in range(0, len(word), size))
    return pieces
