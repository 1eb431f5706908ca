"""ScriptedModel: an in-process :class:`~jupyter_agent.agent.model.Model` for unit tests.

It answers from the same script steps as
:class:`~jupyter_agent.testing.ScriptedModelServer` (text, tool calls, usage, errors,
finish reasons, delays, callables of the request), without HTTP: tests of the loop, the
tools, limits or compaction run fast and need no sockets. Tests of the wire formats, the
``openai`` client and the notebooks use the server.

Usage is the server's estimate (~4 characters per token) unless a step overrides it; an
``error`` step raises the :class:`~jupyter_agent.errors.ModelError` the real models
raise for that HTTP status; streamed text arrives in the server's word-sized pieces
(``chunk_delay`` seconds apart).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from jupyter_agent.agent.adapters import ModelReply, PartialReply, TextCallback, TokenUsage
from jupyter_agent.agent.endpoint import Endpoint, refused_window, status_error
from jupyter_agent.testing.protocol import (
    estimate_completion_tokens,
    estimate_prompt_tokens,
    new_tool_call_id,
    split_text,
)
from jupyter_agent.testing.script import ScriptError, Step, StepCallable, parse_step, parse_steps

__all__ = ["ScriptedModel"]


class ScriptedModel:
    """A model that answers each request with the next step of a script.

    Parameters
    ----------
    script : iterable of steps, optional
        Step dicts, strings or callables ``f(request) -> step``, as for
        :class:`~jupyter_agent.testing.ScriptedModelServer`.
    name : str
        The model name (what usage is priced as).

    Attributes
    ----------
    requests : list of dict
        Every request, shaped like a Chat Completions body: ``model``, ``messages``, and
        ``tools`` / ``stream`` when given (JSON copies taken when it was made).

    Raises
    ------
    ScriptError
        For an invalid step; from :meth:`respond` when the script is exhausted.
    """

    api = "scripted"
    base_url = ""

    def __init__(self, script: Iterable[Any] | None = None, *, name: str = "scripted") -> None:
        self.name = name
        self.requests: list[dict[str, Any]] = []
        self._steps: list[Step | StepCallable] = parse_steps(script or [])
        self._served = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<ScriptedModel {self.name!r} remaining={self.remaining}>"

    def add_steps(self, steps: Iterable[Any]) -> None:
        """Append steps (validated now; nothing is appended if one is invalid)."""
        with self._lock:
            self._steps.extend(parse_steps(steps, start=len(self._steps)))

    @property
    def remaining(self) -> int:
        """Steps not consumed yet."""
        with self._lock:
            return len(self._steps) - self._served

    def _next(self, body: dict[str, Any]) -> Step:
        with self._lock:
            if self._served >= len(self._steps):
                raise ScriptError(f"script exhausted after {self._served} steps; "
                                  "add steps to the script (add_steps() in Python, or more "
                                  "entries in the script file)")
            index, step = self._served, self._steps[self._served]
            self._served += 1
        return step if isinstance(step, Step) else parse_step(step(body), index=index)

    def respond(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *,
                stream: bool, partial: PartialReply,
                on_text: TextCallback | None = None) -> ModelReply:
        """Answer with the next step; see :meth:`jupyter_agent.agent.model.Model.respond`."""
        request: dict[str, Any] = {"model": self.name, "messages": list(messages)}
        if tools:
            request["tools"] = list(tools)
        if stream:
            request["stream"] = True
        body: dict[str, Any] = json.loads(json.dumps(request))
        self.requests.append(body)
        step = self._next(body)
        if step.delay:
            time.sleep(step.delay)
        if step.error is not None:
            e = step.error
            raise status_error(e.status, e.message, Endpoint("", self.name, api=self.api),
                               e.code or "", window=refused_window(e.status, e.message,
                                                                   e.code or "", e.type or ""))
        partial.received = True
        text = step.text or ""
        if stream:
            for piece in split_text(text):
                partial.add_text(piece, on_text)
                if step.chunk_delay:
                    time.sleep(step.chunk_delay)
        else:
            partial.add_text(text, on_text)
        calls = [(spec.id or new_tool_call_id(), spec.name, spec.arguments_json())
                 for spec in step.tool_calls or []]
        for index, (call_id, name, arguments) in enumerate(calls):
            partial.calls[index] = {"id": call_id, "name": name, "arguments": arguments}
        partial.finish_reason = step.finish_reason or ("tool_calls" if calls else "stop")
        usage = step.usage
        prompt = (usage.prompt_tokens if usage and usage.prompt_tokens is not None
                  else estimate_prompt_tokens(body))
        completion = (usage.completion_tokens if usage and usage.completion_tokens is not None
                      else estimate_completion_tokens(text, [(n, a) for _, n, a in calls]))
        partial.usage = TokenUsage(prompt, completion, usage.cached_tokens if usage else 0)
        return partial.reply()
