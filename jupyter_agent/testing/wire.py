"""The two wire formats the scripted server speaks: requests checked as the real API checks
them (400 with its wording, unknown fields ignored), answers in the shapes and event names of
``openai.types.chat`` and ``openai.types.responses``.
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
import uuid
from collections.abc import Container, Iterator
from dataclasses import dataclass
from typing import Any

from jupyter_agent.images import decode_data_url, image_size, image_tokens
from jupyter_agent.testing.script import Step, UsageSpec

ROLES = ("system", "developer", "user", "assistant", "tool")


class RequestRejected(Exception):
    """A request answered with HTTP ``status``, an OpenAI-shaped error body (``type`` and
    ``code`` default by status; ``body`` replaces it, in a played server's shape) and extra
    ``headers``."""

    def __init__(self, message: str, status: int = 400, *, type: str | None = None,
                 param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None,
                 body: dict[str, Any] | None = None) -> None:
        super().__init__(status, message)
        if type is None:
            type = ("server_error" if status >= 500 else "requests" if status == 429
                    else "invalid_request_error")
        if code is None:
            code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(status)
        self.status, self.headers = status, dict(headers or {})
        self.body = body or {"error": {"message": message, "type": type, "param": param,
                                       "code": code}}


@dataclass(frozen=True)
class ImagePart:
    """One image of a request: its place (``"messages[5].content[2]"``), media type ("" for a
    non-``data:`` URL), pixels when known and estimated prompt tokens."""

    where: str
    media_type: str = ""
    width: int | None = None
    height: int | None = None
    tokens: int = 85  # an image given by URL, whose size cannot be told


def _items(body: Any) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """Each message or input item that is an object, with its list's name and index; a
    string ``input`` is one item."""
    if not isinstance(body, dict):
        return
    items = body.get("input")
    for key, value in (("messages", body.get("messages")),
                       ("input", [{"content": items}] if isinstance(items, str) else items)):
        for i, item in enumerate(value if isinstance(value, list) else ()):
            if isinstance(item, dict):
                yield key, i, item


def image_parts(body: Any) -> list[ImagePart]:
    """Every image of a Chat Completions or Responses body, in order (``[]`` for others)."""
    found = []
    for name, i, item in _items(body):
        for key in ("content", "output"):
            content = item.get(key)
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
                place = f"{name}[{i}].{key}[{j}]"
                found.append(ImagePart(place, media_type, *dims, image_tokens(*dims)) if dims
                             else ImagePart(place, media_type))
    return found


def text_chars(content: object) -> int:
    """Characters of a message content: a string's length, or the summed ``text`` of its parts
    (other parts count 0)."""
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
    for name, _, item in _items(body):
        chars += text_chars(item.get("content"))
        for call in item.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                chars += len(str(function.get("name", "")))
                chars += len(str(function.get("arguments", "")))
        if name == "input":
            chars += len(str(item.get("name", ""))) + len(str(item.get("arguments", "")))
            output = item.get("output", "")
            chars += text_chars(output) if isinstance(output, list) else len(str(output))
    tool_chars = len(json.dumps(body["tools"])) if body.get("tools") else 0
    return max(1, math.ceil(chars / 4) + math.ceil(tool_chars / 4)
               + sum(part.tokens for part in image_parts(body)))


def _json_type(value: object) -> str:
    return {type(None): "null", bool: "a boolean", int: "an integer", float: "a decimal",
            str: "a string", list: "an array"}.get(type(value), "an object")


def _wrong_type(where: str, expected: str, value: object) -> RequestRejected:
    return RequestRejected(f"Invalid type for '{where}': expected {expected}, but got"
                           f" {_json_type(value)} instead.", param=where, code="invalid_type")


def _missing(where: str) -> RequestRejected:
    return RequestRejected(f"Missing required parameter: '{where}'.", param=where,
                           code="missing_required_parameter")


def _field(holder: dict[str, Any], where: str, key: str, kind: type = object,
           expected: str = "") -> Any:
    if key not in holder:
        raise _missing(f"{where}.{key}")
    if not isinstance(holder[key], kind):
        raise _wrong_type(f"{where}.{key}", expected, holder[key])
    return holder[key]


def _objects(where: str, value: object) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise _wrong_type(where, "an array of objects", value)
    if not value:
        raise RequestRejected(f"Invalid '{where}': empty array. Expected an array with minimum"
                              " length 1, but got an empty array instead.", param=where,
                              code="empty_array")
    for j, item in enumerate(value):
        if not isinstance(item, dict):
            raise _wrong_type(f"{where}[{j}]", "an object", item)
    return value


def _check_message(i: int, message: dict[str, Any]) -> None:
    if "role" not in message:  # places are worded only for a refusal: 10,000s of messages
        raise _missing(f"messages[{i}].role")
    role = message["role"]
    if role not in ROLES:
        supported = ", ".join(f"'{r}'" for r in ROLES[:-1]) + f", and '{ROLES[-1]}'"
        shown = f"'{role}'" if isinstance(role, str) else json.dumps(role)
        raise RequestRejected(f"Invalid value: {shown}. Supported values are: {supported}.",
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
        raise RequestRejected("Invalid value for 'content': expected a string, got null.",
                              param=f"messages.[{i}].content")
    if role == "tool":
        _field(message, f"messages[{i}]", "tool_call_id", str, "a string")


def _with_model(body: object, no_model: str, param: str | None = None) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise RequestRejected("Invalid type for request body: expected an object, but got"
                              f" {_json_type(body)} instead.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise RequestRejected(no_model, param=param)
    return body


def validate_chat_request(body: object) -> None:
    """Reject what the real API rejects for ``POST /v1/chat/completions``: ``RequestRejected``
    400 worded as the real API words it for no model, missing or empty messages, a bad
    message or tool call, or tool messages not directly answering each tool call."""
    request = _with_model(body, "you must provide a model parameter")
    if "messages" not in request:
        raise _missing("messages")
    # tool messages must directly follow the assistant message whose calls they answer
    unanswered: list[str] = []
    opened_at = -1
    for i, message in enumerate(_objects("messages", request["messages"])):
        _check_message(i, message)
        if message["role"] == "tool":
            if message["tool_call_id"] not in unanswered:
                raise RequestRejected("Invalid parameter: messages with role 'tool' must be a"
                                      " response to a preceeding message with 'tool_calls'.",
                                      param=f"messages.[{i}].role")
            unanswered.remove(message["tool_call_id"])
            continue
        if unanswered:
            break
        if message["role"] == "assistant" and message.get("tool_calls") is not None:
            opened_at, calls = i, f"messages[{i}].tool_calls"
            for j, call in enumerate(_objects(calls, message["tool_calls"])):
                _field(call, f"{calls}[{j}]", "type")
                function = _field(call, f"{calls}[{j}]", "function", dict, "an object")
                for key in ("name", "arguments"):
                    _field(function, f"{calls}[{j}].function", key, str, "a string")
                unanswered.append(_field(call, f"{calls}[{j}]", "id", str, "a string"))
    if unanswered:
        raise RequestRejected(
            "An assistant message with 'tool_calls' must be followed by tool messages responding"
            " to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            + ", ".join(unanswered), param=f"messages.[{opened_at}].role")


def validate_responses_request(body: object, issued: Container[str]) -> None:
    """Reject what the real API rejects for ``POST /v1/responses`` (``issued``: the encrypted
    reasoning contents this server handed out): ``RequestRejected`` 400 for no model or
    input, a bad item, an output answering no call, a call without an output, or a reasoning
    item not issued here or missing its following item."""
    request = _with_model(body, "Missing required parameter: 'model'.", "model")
    if "input" not in request:
        raise _missing("input")
    if isinstance(request["input"], str):
        return
    items = _objects("input", request["input"])
    calls: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "message":
            if item.get("role") not in ("user", "assistant", "system", "developer"):
                raise RequestRejected(f"Invalid value for 'input[{i}].role'.",
                                      param=f"input[{i}].role")
        elif kind == "function_call":
            calls.add(str(item.get("call_id")))
        elif kind == "function_call_output":
            if item.get("call_id") not in calls:
                raise RequestRejected("No tool call found for function call output with call_id"
                                      f" {item.get('call_id')}.", param="input")
            answered.add(str(item["call_id"]))
        elif kind == "reasoning":
            if item.get("encrypted_content") not in issued:
                raise RequestRejected(f"The encrypted content for item {item.get('id')} could"
                                      " not be verified.", param="input")
            following = items[i + 1] if i + 1 < len(items) else {}
            if (following.get("type", "message") not in ("function_call", "reasoning")
                    and following.get("role") != "assistant"):
                raise RequestRejected(f"Item '{item.get('id')}' of type 'reasoning' was provided"
                                      " without its required following item.", param="input")
        else:
            raise RequestRejected(f"Invalid value: '{kind}' for 'input[{i}].type'.",
                                  param=f"input[{i}].type")
    if calls - answered:
        raise RequestRejected(f"No tool output found for function call {min(calls - answered)}.",
                              param="input")


_WORD = re.compile(r"\s*\S+\s*|\s+")


def split_text(text: str) -> list[str]:
    """Stream deltas of ``text``: one word with its whitespace each, cut every 16 code points;
    joined they give ``text`` back."""
    return [match.group()[k:k + 16] for match in _WORD.finditer(text)
            for k in range(0, len(match.group()), 16)]


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
            return {**self.envelope, "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                 "finish_reason": finish_reason}],
                    **({"usage": None} if include_usage else {})}

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


_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}
_STARTED: dict[str, dict[str, Any]] = {  # an item as first announced, by type
    "message": {"status": "in_progress", "content": []},
    "function_call": {"status": "in_progress", "arguments": ""}}


class ResponseAnswer(Answer):
    """A step's ``reasoning`` becomes a first reasoning item whose encrypted content (added to
    ``issued``) the request asked for; a "length" / "content_filter" finish is incomplete."""

    def __init__(self, step: Step, body: dict[str, Any], issued: set[str]) -> None:
        super().__init__(step, body)
        self.id = "resp_" + uuid.uuid4().hex
        self.created = time.time()
        self.items: list[dict[str, Any]] = []
        if step.reasoning is not None and "reasoning.encrypted_content" in (
                body.get("include") or []):
            item_id = "rs_" + uuid.uuid4().hex[:24]
            secret = "enc_" + base64.b64encode(json.dumps([item_id, step.reasoning]).encode()
                                               ).decode()
            issued.add(secret)
            self.items.append({"id": item_id, "type": "reasoning", "summary": [
                {"type": "summary_text", "text": step.reasoning}], "encrypted_content": secret})
        if step.text is not None:
            self.items.append({
                "id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant",
                "status": "completed", "content": [
                    {"type": "output_text", "text": step.text, "annotations": [],
                     "logprobs": []}]})
        for call_id, name, arguments in self.calls:
            self.items.append({"id": "fc_" + uuid.uuid4().hex[:24], "type": "function_call",
                               "status": "completed", "call_id": call_id, "name": name,
                               "arguments": arguments})
        reason = _INCOMPLETE.get(step.finish_reason or "")
        self.status = "incomplete" if reason else "completed"
        self.incomplete = {"reason": reason} if reason else None

    def usage(self) -> dict[str, Any]:
        return {"input_tokens": self.prompt,
                "input_tokens_details": {"cached_tokens": self.cached, "cache_write_tokens": 0},
                "output_tokens": self.completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.prompt + self.completion}

    def whole(self, *, done: bool = True) -> dict[str, Any]:
        body = self.body
        return {
            "id": self.id, "object": "response", "created_at": self.created,
            "status": self.status if done else "in_progress", "error": None,
            "incomplete_details": self.incomplete if done else None,
            "instructions": body.get("instructions"), "model": str(body.get("model")),
            "output": self.items if done else [], "parallel_tool_calls": True,
            "temperature": body.get("temperature"), "tool_choice": "auto",
            "tools": body.get("tools") or [], "top_p": body.get("top_p"),
            "store": body.get("store", True), "usage": self.usage() if done else None,
            "completed_at": time.time() if done and self.status == "completed" else None,
        }

    def stream(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []

        def emit(kind: str, **fields: Any) -> None:
            events.append({"type": kind, "sequence_number": len(events), **fields})

        emit("response.created", response=self.whole(done=False))
        emit("response.in_progress", response=self.whole(done=False))
        for index, item in enumerate(self.items):
            kind, where = item["type"], {"item_id": item["id"], "output_index": index}
            started = _STARTED.get(kind, {"summary": [], "encrypted_content": None})
            emit("response.output_item.added", output_index=index, item={**item, **started})
            if kind == "message":
                text, at = item["content"][0]["text"], {**where, "content_index": 0}
                part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                emit("response.content_part.added", **at, part=part)
                for piece in split_text(text):
                    emit("response.output_text.delta", **at, delta=piece, logprobs=[])
                emit("response.output_text.done", **at, text=text, logprobs=[])
                emit("response.content_part.done", **at, part={**part, "text": text})
            elif kind == "function_call":
                arguments = item["arguments"]
                for k in range(0, len(arguments), 12):
                    emit("response.function_call_arguments.delta", **where,
                         delta=arguments[k:k + 12])
                emit("response.function_call_arguments.done", **where, arguments=arguments)
            emit("response.output_item.done", output_index=index, item=item)
        final = "response.completed" if self.status == "completed" else "response.incomplete"
        emit(final, response=self.whole(done=True))
        return events
