"""Events a turn reports as it runs, so front ends can render live.

``Agent.run(prompt, on_event=callback)`` calls ``callback(event)`` synchronously from the
thread running the turn. A callback that raises ends the turn as Ctrl-C does (the
session is saved first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from jupyter_agent.store import Usage


@dataclass(frozen=True)
class TextDelta:
    """A piece of the assistant's reply text, as it streams in."""

    text: str
    kind: Literal["text_delta"] = field(default="text_delta", init=False)


@dataclass(frozen=True)
class ToolCallStart:
    """A tool call is about to run."""

    call_id: str
    name: str
    arguments: str
    asks: bool = False
    kind: Literal["tool_call_start"] = field(default="tool_call_start", init=False)


@dataclass(frozen=True)
class ToolCallEnd:
    """A tool call finished; ``result`` is exactly what the model will see."""

    call_id: str
    name: str
    result: str
    ok: bool
    kind: Literal["tool_call_end"] = field(default="tool_call_end", init=False)


@dataclass(frozen=True)
class UsageUpdate:
    """Token usage and cost after a model call."""

    turn: Usage
    session: Usage
    kind: Literal["usage"] = field(default="usage", init=False)


@dataclass(frozen=True)
class Notice:
    """Something the user should know: a limit stopped the turn, the context was
    compacted, a tool call was refused, a price is unknown."""

    text: str
    kind: Literal["notice"] = field(default="notice", init=False)


@dataclass(frozen=True)
class Displayed:
    """Code the agent runs displayed something: a figure, an image, a DataFrame."""

    data: dict[str, Any]
    metadata: dict[str, Any]
    figure: dict[str, Any] | None
    shown: bool = True
    kind: Literal["display"] = field(default="display", init=False)


@dataclass(frozen=True)
class ApprovalAnswered:
    """The user answered the approval question of the running call (see
    :attr:`ToolCallStart.asks`); if ``approved``, the code runs from now on."""

    approved: bool
    kind: Literal["approval_answered"] = field(default="approval_answered", init=False)


AgentEvent: TypeAlias = (TextDelta | ToolCallStart | ToolCallEnd | UsageUpdate | Notice
                         | Displayed | ApprovalAnswered)
EventCallback: TypeAlias = Callable[[AgentEvent], object]


def ignore_event(event: AgentEvent) -> None:
    """The callback used when none is given: drops ``event``."""
