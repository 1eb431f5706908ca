"""The OpenAI Responses wire format (``POST /v1/responses``), as the scripted server speaks it.

Pure functions, no I/O: validating a request like the real API does, the ``response``
object of an answer, and the server-sent events of a streamed one. The shapes and event
names follow the ``openai`` package's types (``openai.types.responses``):

- a stream is ``response.created``, ``response.in_progress``, then per output item
  ``response.output_item.added`` ... ``response.output_item.done`` (with
  ``response.content_part.added`` / ``response.output_text.delta`` /
  ``response.output_text.done`` / ``response.content_part.done`` for a message, and
  ``response.function_call_arguments.delta`` / ``.done`` for a function call), and last
  ``response.completed`` or ``response.incomplete`` carrying the whole response with its
  usage; every event has a ``sequence_number``; there is no ``[DONE]`` marker;
- a step's ``reasoning`` text becomes a ``reasoning`` output item placed first, with an
  ``encrypted_content`` the server issued, when the request ``include``\\ s
  ``"reasoning.encrypted_content"``; such an item sent back in a later ``input`` is
  verified (it must be one this server issued, and be followed by the item it preceded);
- a step's ``finish_reason`` "length" / "content_filter" makes the response
  ``incomplete`` (reason ``max_output_tokens`` / ``content_filter``).
"""

from __future__ import annotations

import base64
import json
import math
import time
import uuid
from collections.abc import Container
from typing import Any

from jupyter_agent.testing.protocol import (
    RequestRejected,
    error_body,
    estimate_completion_tokens,
    new_tool_call_id,
    split_text,
)
from jupyter_agent.testing.script import Step

__all__ = [
    "ENCRYPTED_REASONING",
    "build_events",
    "build_response",
    "estimate_input_tokens",
    "validate_responses_request",
]

ENCRYPTED_REASONING = "reasoning.encrypted_content"
"""The ``include`` value that asks for reasoning items to carry their encrypted content."""

_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def _reject(message: str, param: str | None = None) -> RequestRejected:
    return RequestRejected(400, error_body(400, message, param=param))


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def estimate_input_tokens(body: dict[str, Any]) -> int:
    """Estimate a request's input tokens at ~4 characters per token, at least 1.

    Counts ``instructions``, the text of every input message, function call names and
    arguments, function call outputs (their text), the JSON size of ``tools``, and the
    estimated tokens of each image.
    """
    chars = len(str(body.get("instructions") or ""))
    items = body.get("input")
    for item in [{"content": items}] if isinstance(items, str) else items or []:
        if not isinstance(item, dict):
            continue
        chars += len(_text_of(item.get("content")))
        chars += len(str(item.get("name", ""))) + len(str(item.get("arguments", "")))
        output = item.get("output", "")
        chars += len(_text_of(output)) if isinstance(output, list) else len(str(output))
    tools = body.get("tools")
    from jupyter_agent.testing.images import image_tokens_of

    return max(1, math.ceil(chars / 4) + (math.ceil(len(json.dumps(tools)) / 4) if tools else 0)
               + image_tokens_of(body))


def validate_responses_request(body: object, issued: Container[str]) -> None:
    """Reject what the real API rejects for ``POST /v1/responses`` (HTTP 400).

    Parameters
    ----------
    body : object
        The parsed JSON body.
    issued : container of str
        The encrypted reasoning contents this server handed out.

    Raises
    ------
    RequestRejected
        A missing ``model`` or ``input``; an input item that is not an object or has an
        unknown ``type``; a ``function_call_output`` answering no earlier
        ``function_call``; a ``function_call`` without an output; a ``reasoning`` item
        whose encrypted content this server did not issue, or that is not followed by
        the item it preceded.
    """
    if not isinstance(body, dict):
        raise _reject("Invalid type for request body: expected an object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _reject("Missing required parameter: 'model'.", "model")
    items = body.get("input")
    if isinstance(items, str):
        return
    if not isinstance(items, list) or not items:
        raise _reject("Missing required parameter: 'input'.", "input")
    calls: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _reject(f"Invalid type for 'input[{i}]': expected an object.", f"input[{i}]")
        kind = item.get("type", "message")
        if kind == "message":
            if item.get("role") not in ("user", "assistant", "system", "developer"):
                raise _reject(f"Invalid value for 'input[{i}].role'.", f"input[{i}].role")
        elif kind == "function_call":
            calls.add(str(item.get("call_id")))
        elif kind == "function_call_output":
            if item.get("call_id") not in calls:
                raise _reject("No tool call found for function call output with call_id "
                              f"{item.get('call_id')}.", "input")
            answered.add(str(item["call_id"]))
        elif kind == "reasoning":
            if item.get("encrypted_content") not in issued:
                raise _reject(f"The encrypted content for item {item.get('id')} could not be "
                              "verified.", "input")
            following = items[i + 1] if i + 1 < len(items) else {}
            if not isinstance(following, dict) or (
                    following.get("type", "message") not in ("function_call", "reasoning")
                    and following.get("role") != "assistant"):
                raise _reject(f"Item '{item.get('id')}' of type 'reasoning' was provided "
                              "without its required following item.", "input")
        else:
            raise _reject(f"Invalid value: '{kind}' for 'input[{i}].type'.", f"input[{i}].type")
    for call_id in sorted(calls - answered):
        raise _reject(f"No tool output found for function call {call_id}.", "input")


class _Answer:
    """A resolved step: output items, status, usage."""

    def __init__(self, step: Step, body: dict[str, Any], issue: Any) -> None:
        self.id = "resp_" + uuid.uuid4().hex
        self.created = time.time()
        self.body = body
        self.items: list[dict[str, Any]] = []
        include = body.get("include") or []
        if step.reasoning is not None and ENCRYPTED_REASONING in include:
            item_id = "rs_" + uuid.uuid4().hex[:24]
            secret = base64.b64encode(json.dumps([item_id, step.reasoning]).encode()).decode()
            self.items.append({"id": item_id, "type": "reasoning", "summary": [
                {"type": "summary_text", "text": step.reasoning}],
                "encrypted_content": issue("enc_" + secret)})
        if step.text is not None:
            self.items.append({
                "id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant",
                "status": "completed", "content": [
                    {"type": "output_text", "text": step.text, "annotations": [],
                     "logprobs": []}]})
        calls = [(spec.id or new_tool_call_id(), spec.name, spec.arguments_json())
                 for spec in step.tool_calls or []]
        for call_id, name, arguments in calls:
            self.items.append({"id": "fc_" + uuid.uuid4().hex[:24], "type": "function_call",
                               "status": "completed", "call_id": call_id, "name": name,
                               "arguments": arguments})
        reason = _INCOMPLETE.get(step.finish_reason or "")
        self.status = "incomplete" if reason else "completed"
        self.incomplete = {"reason": reason} if reason else None
        override = step.usage
        tokens_in = (override.prompt_tokens if override and override.prompt_tokens is not None
                     else estimate_input_tokens(body))
        tokens_out = (override.completion_tokens
                      if override and override.completion_tokens is not None
                      else estimate_completion_tokens(step.text, [(n, a) for _, n, a in calls]))
        self.usage = {
            "input_tokens": tokens_in,
            "input_tokens_details": {"cached_tokens": override.cached_tokens if override else 0,
                                     "cache_write_tokens": 0},
            "output_tokens": tokens_out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": tokens_in + tokens_out,
        }

    def response(self, *, done: bool) -> dict[str, Any]:
        body = self.body
        return {
            "id": self.id, "object": "response", "created_at": self.created,
            "status": self.status if done else "in_progress", "error": None,
            "incomplete_details": self.incomplete if done else None,
            "instructions": body.get("instructions"), "model": str(body.get("model")),
            "output": self.items if done else [], "parallel_tool_calls": True,
            "temperature": body.get("temperature"), "tool_choice": "auto",
            "tools": body.get("tools") or [], "top_p": body.get("top_p"),
            "store": body.get("store", True), "usage": self.usage if done else None,
            "completed_at": time.time() if done and self.status == "completed" else None,
        }


def build_response(step: Step, body: dict[str, Any], issue: Any) -> dict[str, Any]:
    """The ``response`` object answering ``body`` with ``step`` (not streamed).

    ``issue(secret) -> secret`` records an encrypted reasoning content as handed out.
    """
    return _Answer(step, body, issue).response(done=True)


def build_events(step: Step, body: dict[str, Any], issue: Any) -> list[dict[str, Any]]:
    """The events of a streamed answer, in order (see the module docstring)."""
    answer = _Answer(step, body, issue)
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    emit("response.created", response=answer.response(done=False))
    emit("response.in_progress", response=answer.response(done=False))
    for index, item in enumerate(answer.items):
        kind = item["type"]
        if kind == "message":
            text = item["content"][0]["text"]
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "content": []})
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            emit("response.content_part.added", item_id=item["id"], output_index=index,
                 content_index=0, part=part)
            for piece in split_text(text):
                emit("response.output_text.delta", item_id=item["id"], output_index=index,
                     content_index=0, delta=piece, logprobs=[])
            emit("response.output_text.done", item_id=item["id"], output_index=index,
                 content_index=0, text=text, logprobs=[])
            emit("response.content_part.done", item_id=item["id"], output_index=index,
                 content_index=0, part={**part, "text": text})
        elif kind == "function_call":
            arguments = item["arguments"]
            emit("response.output_item.added", output_index=index,
                 item={**item, "status": "in_progress", "arguments": ""})
            for k in range(0, len(arguments), 12):
                emit("response.function_call_arguments.delta", item_id=item["id"],
                     output_index=index, delta=arguments[k:k + 12])
            emit("response.function_call_arguments.done", item_id=item["id"],
                 output_index=index, arguments=arguments)
        else:
            emit("response.output_item.added", output_index=index,
                 item={**item, "summary": [], "encrypted_content": None})
        emit("response.output_item.done", output_index=index, item=item)
    final = "response.completed" if answer.status == "completed" else "response.incomplete"
    emit(final, response=answer.response(done=True))
    return events
