"""The OpenAI chat-completions wire format, as spoken by the scripted server.

Pure functions, no I/O: token estimates and
building a ``chat.completion`` object or the list of ``chat.completion.chunk``
objects of a streamed answer. Request validation lives in
:mod:`jupyter_agent.testing.validation`.
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from typing import Any

from jupyter_agent.testing.images import image_tokens_of
from jupyter_agent.testing.rejections import RequestRejected, error_body
from jupyter_agent.testing.script import Step

__all__ = [
    "RequestRejected",
    "build_chunks",
    "build_completion",
    "error_body",
    "estimate_completion_tokens",
    "estimate_prompt_tokens",
    "new_completion_id",
    "new_tool_call_id",
]

SYSTEM_FINGERPRINT = "fp_scripted"


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
    of the JSON-encoded ``tools`` list (0 when absent); each image part adds its
    estimated tokens (:func:`~jupyter_agent.images.image_tokens` of its size).

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

    return max(1, math.ceil(chars / 4) + math.ceil(tool_chars / 4) + image_tokens_of(body))


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
        for name in override.omit if override else ():
            self.usage.pop(name, None)

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
