"""Helpers shared by the agent tests (``from tests.agent.helpers import ...``).

Everything is real: a ``ScriptedModelServer`` on loopback, the ``openai`` client with
``max_retries=0``, a ``SessionStore`` on ``tmp_path`` and a real ``InteractiveShell``.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from jupyter_agent.agent import Agent, AgentEvent
from jupyter_agent.store import SessionStore, dump_record
from jupyter_agent.testing import ScriptedModelServer


def make_client(server: ScriptedModelServer, *, api_key: str = "test") -> openai.OpenAI:
    """A real client for ``server`` that does not retry (errors surface at once)."""
    return openai.OpenAI(base_url=server.base_url, api_key=api_key, max_retries=0, timeout=30)


def make_agent(server: ScriptedModelServer, store: SessionStore | None, **kwargs: Any) -> Agent:
    """An agent on ``server`` (model "scripted", approval "auto" unless given)."""
    kwargs.setdefault("approval", "auto")
    model = kwargs.pop("model", "scripted")
    return Agent(make_client(server), model, store=store, **kwargs)


def read_record(store: SessionStore, session_id: str) -> dict[str, Any]:
    """The session as saved on disk (what a crash would leave), in its one-file JSON form."""
    record = SessionStore(store.root).load_session(session_id)
    data: dict[str, Any] = json.loads(dump_record(record))
    return data


def roles(messages: list[dict[str, Any]]) -> list[str]:
    """Roles of ``messages``, for compact assertions."""
    return [m["role"] for m in messages]


def tool_step(*calls: tuple[str, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A script step with tool calls ``(name, arguments)``."""
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in calls], **extra}


class Recorder:
    """An ``on_event`` callback that keeps every event."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.kind == kind]


def interrupt_on_second_delta(deltas: list[str] | None = None) -> Any:
    """An ``on_event`` callback that raises ``KeyboardInterrupt`` at the second text delta.

    The deltas it saw are appended to ``deltas`` when a list is given.
    """
    deltas = [] if deltas is None else deltas

    def on_event(event: AgentEvent) -> None:
        if event.kind == "text_delta":
            deltas.append(event.text)  # type: ignore[union-attr]
            if len(deltas) == 2:
                raise KeyboardInterrupt

    return on_event
