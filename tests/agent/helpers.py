"""Helpers shared by the agent tests (``from tests.agent.helpers import ...``).

Everything is real: a ``ScriptedModelServer`` on loopback with the ``openai`` client
(``max_retries=0``) and :class:`~jupyter_agent.agent.ChatModel`, or the in-process
:class:`~jupyter_agent.testing.ScriptedModel`; a ``FileStore`` on ``tmp_path``; a
real ``InteractiveShell``.
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

import openai

from jupyter_agent.agent import Agent, AgentConfig, AgentEvent, ChatModel, Conversation, Model
from jupyter_agent.store import FileStore, dump_record
from jupyter_agent.testing import ScriptedModel, ScriptedModelServer

Scripted = ScriptedModelServer | ScriptedModel
"""Where a test's model answers from: over HTTP, or in process."""

_CONFIG_FIELDS = {f.name for f in fields(AgentConfig)}

# A working context with text, tool calls, tool results and an image, and a tool schema:
# what the request-body tests send.
IMAGE = "data:image/png;base64," + "iVBORw0KGgo" * 40
SESSION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse. Ünïcödé and emoji 🐧 stay as they are."},
    {"role": "user", "content": "Look at df"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "run_python", "arguments": '{"code": "df.head()"}'}},
        {"id": "call_2", "type": "function",
         "function": {"name": "list_variables", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "   a  b\n0  1  2"},
    {"role": "tool", "tool_call_id": "call_2", "content": "df: DataFrame = shape=(3, 2)"},
    {"role": "user", "content": [
        {"type": "text", "text": "And this plot?"},
        {"type": "image_url", "image_url": {"url": IMAGE, "detail": "low"}}]},
    {"role": "assistant", "content": "A rising line."},
    {"role": "user", "content": "Thanks"},
]
TOOLS = [{"type": "function", "function": {
    "name": "run_python", "description": "Run code.",
    "parameters": {"type": "object", "properties": {"code": {"type": "string"}},
                   "required": ["code"]}}}]


def make_client(server: ScriptedModelServer, *, api_key: str = "test",
                max_retries: int = 0) -> openai.OpenAI:
    """A real client for ``server`` (by default it does not retry: errors surface at once)."""
    return openai.OpenAI(base_url=server.base_url, api_key=api_key, max_retries=max_retries,
                         timeout=30)


def make_model(source: Scripted, name: str = "scripted", **kwargs: Any) -> Model:
    """``source`` itself (in process), or a :class:`ChatModel` talking to it over HTTP."""
    if isinstance(source, ScriptedModel):
        source.name = name
        return source
    return ChatModel(make_client(source), name, **kwargs)


def make_agent(source: Scripted, store: FileStore | None, *, model: str = "scripted",
               title: str = "", **kwargs: Any) -> Agent:
    """An agent on ``source`` (model "scripted", ``approve="auto"`` unless given).

    Keywords that name an :class:`AgentConfig` field go into the config; ``title`` into
    a new session; the rest (``session_id``, ``tools``, ``shell``, ``ask``) to ``Agent``.
    """
    config = {k: kwargs.pop(k) for k in list(kwargs) if k in _CONFIG_FIELDS}
    config.setdefault("approve", "auto")
    conversation = None
    if title:
        conversation = Conversation.create(store, title=title,
                                           system_prompt=config.get("system_prompt"))
    return Agent(make_model(source, model), conversation, store=store,
                 config=AgentConfig(**config), **kwargs)


def read_record(store: FileStore, session_id: str) -> dict[str, Any]:
    """The session as saved on disk (what a crash would leave), in its one-file JSON form."""
    record = FileStore(store.root).load_session(session_id)
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


class CountingStore:
    """A real :class:`FileStore` that also counts the calls made to it, by method.

    It implements the store protocol by delegation, so the agent and the controller use
    it as they would use the store itself.
    """

    def __init__(self, store: FileStore) -> None:
        self.inner = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return attr(*args, **kwargs)

        return counted

    def count(self, *names: str) -> int:
        """How many calls of these methods were made."""
        return sum(call in names for call in self.calls)

    def writes(self) -> list[str]:
        """The calls that change a session, in order."""
        changing = {"save", "compact", "create_session", "update", "delete_session"}
        return [c for c in self.calls if c in changing]
