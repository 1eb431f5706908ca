"""Events the agent loop reports while a turn runs, so front ends can render live.

Every event is a frozen dataclass with a ``kind`` string. ``Agent.run(prompt,
on_event=callback)`` calls ``callback(event)`` synchronously from the thread that
runs the turn; a callback that raises ``KeyboardInterrupt`` interrupts the turn the
same way Ctrl-C does (the session is left consistent and saved first); any other
exception from a callback also ends the turn that way, and the saved markers name it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from jupyter_agent.store import Usage

__all__ = [
    "AgentEvent",
    "ApprovalAnswered",
    "Displayed",
    "EventCallback",
    "Notice",
    "TextDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "UsageUpdate",
    "ignore_event",
]


@dataclass(frozen=True)
class TextDelta:
    """A piece of the assistant's reply text, as it streams in.

    Attributes
    ----------
    text : str
        The new characters (not the whole reply so far).
    """

    text: str
    kind: Literal["text_delta"] = field(default="text_delta", init=False)


@dataclass(frozen=True)
class ToolCallStart:
    """A tool call is about to run.

    Attributes
    ----------
    call_id : str
        The model's ID for the call (links it to its result).
    name : str
        The tool's name.
    arguments : str
        The arguments as the model sent them (a JSON text).
    asks : bool
        The call waits for the user's approval first (``approve="ask"`` with someone to
        answer): the question shows the whole code, so a front end shows only the call's
        name here, and no "running" status line until :class:`ApprovalAnswered`.
    """

    call_id: str
    name: str
    arguments: str
    asks: bool = False
    kind: Literal["tool_call_start"] = field(default="tool_call_start", init=False)


@dataclass(frozen=True)
class ToolCallEnd:
    """A tool call finished; ``result`` is exactly what the model will see.

    Attributes
    ----------
    call_id : str
    name : str
    result : str
        The tool result text (already cut to ``max_output_chars``).
    ok : bool
        False when the tool failed, was refused, or was not executed.
    """

    call_id: str
    name: str
    result: str
    ok: bool
    kind: Literal["tool_call_end"] = field(default="tool_call_end", init=False)


@dataclass(frozen=True)
class UsageUpdate:
    """Token usage and cost after a model call.

    Attributes
    ----------
    turn : Usage
        Usage of the current ``run`` so far (tokens; cost in USD).
    session : Usage
        Cumulative usage of the session, including calls before a restart.
        ``session.price_unknown`` is True when some call could not be priced.
    """

    turn: Usage
    session: Usage
    kind: Literal["usage"] = field(default="usage", init=False)


@dataclass(frozen=True)
class Notice:
    """Something the user should know: a limit stopped the turn, the context was
    compacted, a tool call was refused, a price is unknown.

    Attributes
    ----------
    text : str
        One human-readable line (or a few).
    """

    text: str
    kind: Literal["notice"] = field(default="notice", init=False)


@dataclass(frozen=True)
class Displayed:
    """Code the agent runs displayed something: a figure, an image, a DataFrame.

    Sent while the tool call runs, in order, as it happens.

    A front end that passes ``on_event`` shows these itself, in their place within the
    turn (where ``shown`` is true); without ``on_event`` the agent publishes them through
    the shell, as a cell would.

    Attributes
    ----------
    data : dict
        The MIME bundle (``{"image/png": ..., "text/plain": ...}``; images as bytes or
        base64 text, as published).
    metadata : dict
        Its display metadata.
    figure : dict or None
        For an image: the figure's reference (``id``, ``n``, ``media_type``, ``width``,
        ``height``, ``bytes``, ``shown``); ``None`` for other displays.
    shown : bool
        Whether it is to be shown (False for a figure only kept for the record).
    """

    data: dict[str, Any]
    metadata: dict[str, Any]
    figure: dict[str, Any] | None
    shown: bool = True
    kind: Literal["display"] = field(default="display", init=False)


@dataclass(frozen=True)
class ApprovalAnswered:
    """The user answered the approval question of the running call (see
    :attr:`ToolCallStart.asks`); if ``approved``, the code runs from now on.

    Attributes
    ----------
    approved : bool
    """

    approved: bool
    kind: Literal["approval_answered"] = field(default="approval_answered", init=False)


AgentEvent: TypeAlias = (TextDelta | ToolCallStart | ToolCallEnd | UsageUpdate | Notice
                         | Displayed | ApprovalAnswered)
EventCallback: TypeAlias = Callable[[AgentEvent], object]


def ignore_event(event: AgentEvent) -> None:
    """The callback used when none is given: drops ``event``."""
    del event
