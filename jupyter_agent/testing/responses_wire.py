"""The Responses wire format (``POST /v1/responses``) as the scripted server speaks it.

Pure functions with the shapes and event names of ``openai.types.responses``. A stream is
``response.created``, ``response.in_progress``, the events of each output item, then
``response.completed`` (or ``response.incomplete`` for a "length" / "content_filter"
finish) with the usage; no ``[DONE]``. A step's ``reasoning`` becomes a first reasoning
item carrying encrypted content when the request includes it; sent back, that item must
be one this server issued and be followed by the item it preceded.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Container
from typing import Any

from jupyter_agent.testing.chat_wire import Answer, reject, split_text
from jupyter_agent.testing.script import Step

_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}
_STARTED: dict[str, dict[str, Any]] = {  # an item as first announced, by type
    "message": {"status": "in_progress", "content": []},
    "function_call": {"status": "in_progress", "arguments": ""}}


def validate_responses_request(body: object, issued: Container[str]) -> None:
    """Reject what the real API rejects for ``POST /v1/responses`` (``issued``: the encrypted
    reasoning contents this server handed out): ``RequestRejected`` 400 for no model or
    input, a bad item, an output answering no call, a call without an output, or a reasoning
    item not issued here or missing its following item."""
    if not isinstance(body, dict):
        raise reject("Invalid type for request body: expected an object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise reject("Missing required parameter: 'model'.", "model")
    items = body.get("input")
    if isinstance(items, str):
        return
    if not isinstance(items, list) or not items:
        raise reject("Missing required parameter: 'input'.", "input")
    calls: set[str] = set()
    answered: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise reject(f"Invalid type for 'input[{i}]': expected an object.", f"input[{i}]")
        kind = item.get("type", "message")
        if kind == "message":
            if item.get("role") not in ("user", "assistant", "system", "developer"):
                raise reject(f"Invalid value for 'input[{i}].role'.", f"input[{i}].role")
        elif kind == "function_call":
            calls.add(str(item.get("call_id")))
        elif kind == "function_call_output":
            if item.get("call_id") not in calls:
                raise reject("No tool call found for function call output with call_id "
                              f"{item.get('call_id')}.", "input")
            answered.add(str(item["call_id"]))
        elif kind == "reasoning":
            if item.get("encrypted_content") not in issued:
                raise reject(f"The encrypted content for item {item.get('id')} could not be "
                              "verified.", "input")
            following = items[i + 1] if i + 1 < len(items) else {}
            if not isinstance(following, dict) or (
                    following.get("type", "message") not in ("function_call", "reasoning")
                    and following.get("role") != "assistant"):
                raise reject(f"Item '{item.get('id')}' of type 'reasoning' was provided "
                              "without its required following item.", "input")
        else:
            raise reject(f"Invalid value: '{kind}' for 'input[{i}].type'.", f"input[{i}].type")
    for call_id in sorted(calls - answered):
        raise reject(f"No tool output found for function call {call_id}.", "input")


class ResponseAnswer:
    """A step resolved for a Responses request; an encrypted reasoning content handed out
    is added to ``issued``."""

    def __init__(self, step: Step, body: dict[str, Any], issued: set[str]) -> None:
        answer = Answer(step, body)
        self.id = "resp_" + uuid.uuid4().hex
        self.created = time.time()
        self.body = body
        self.items: list[dict[str, Any]] = []
        included = body.get("include") or []
        if step.reasoning is not None and "reasoning.encrypted_content" in included:
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
        for call_id, name, arguments in answer.calls:
            self.items.append({"id": "fc_" + uuid.uuid4().hex[:24], "type": "function_call",
                               "status": "completed", "call_id": call_id, "name": name,
                               "arguments": arguments})
        reason = _INCOMPLETE.get(step.finish_reason or "")
        self.status = "incomplete" if reason else "completed"
        self.incomplete = {"reason": reason} if reason else None
        self.usage = {
            "input_tokens": answer.prompt,
            "input_tokens_details": {"cached_tokens": answer.cached, "cache_write_tokens": 0},
            "output_tokens": answer.completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": answer.prompt + answer.completion,
        }

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
            "store": body.get("store", True), "usage": self.usage if done else None,
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
                text = item["content"][0]["text"]
                part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                emit("response.content_part.added", **where, content_index=0, part=part)
                for piece in split_text(text):
                    emit("response.output_text.delta", **where, content_index=0, delta=piece,
                         logprobs=[])
                emit("response.output_text.done", **where, content_index=0, text=text,
                     logprobs=[])
                emit("response.content_part.done", **where, content_index=0,
                     part={**part, "text": text})
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
