"""What the controller's operations return: plain frozen records the display formats.

:class:`TurnResult` (one ``%agent`` turn), :class:`UsageReport` (``%agent_usage``) and
:class:`Resumed` (``%agent_resume`` and the panel's Resume). Units: tokens, USD.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jupyter_agent.errors import LimitExceededError

if TYPE_CHECKING:
    from jupyter_agent.agent.config import Limits
    from jupyter_agent.agent.window import ContextWindow
    from jupyter_agent.store import SessionRecord, Usage

__all__ = ["Resumed", "SessionChange", "TurnResult", "UsageReport"]


@dataclass(frozen=True)
class UsageReport:
    """Usage of one session so far, with its limits (see :func:`display.format_usage`);
    ``context_tokens`` is the estimated working context, ``window`` the context window
    and where it came from."""

    session_id: str
    usage: Usage
    tool_calls: int
    limits: Limits
    context_tokens: int = 0
    window: ContextWindow | None = None
    context_privacy: str = "schema"


@dataclass(frozen=True)
class TurnResult:
    """What one ``%agent`` turn produced.

    Attributes
    ----------
    reply : str
        The final reply text (or the agent's limit notice).
    stop_reason : str or None
        ``None``, or why the turn ended early: the limit that ended it
        (``"max_tool_calls"``, ``"max_cost_usd"``, ``"max_iterations"``), a reply the
        provider cut off (``"length"``, ``"content_filter"``), ``"interrupted"``
        (Ctrl-C) or ``"error"`` (the model endpoint failed).
    turn_usage, session_usage : Usage
        Tokens and USD of this turn, and of the whole session so far.
    turn_tool_calls, session_tool_calls : int
    limits : Limits
    limits_from_options : frozenset of str
        The limits set by the session's options (not by the settings): raising them
        takes ``%agent_resume --max-...``, not ``%config``.
    limit_error : LimitExceededError or None
        The limit that ended the turn, as the agent raised it (``None`` when no limit
        did: also for a reply the provider cut off, ``"length"`` or ``"content_filter"``).
    context_tokens : int
        The estimated working context after the turn (tokens).
    window : ContextWindow or None
        The context window and where it came from.
    """

    session_id: str
    reply: str
    stop_reason: str | None
    turn_usage: Usage
    session_usage: Usage
    turn_tool_calls: int
    session_tool_calls: int
    limits: Limits
    limits_from_options: frozenset[str] = frozenset()
    limit_error: LimitExceededError | None = None
    context_tokens: int = 0
    window: ContextWindow | None = None


@dataclass(frozen=True)
class Resumed:
    """What :meth:`AgentController.resume` did: the session's record (after the resume),
    whether the session was archived and is now unarchived, and ``endpoint_note``: one
    line when the session last used another endpoint than the one it now talks to ("" if
    not; credentials and control characters are not in it)."""

    record: SessionRecord
    unarchived: bool = False
    endpoint_note: str = ""



@dataclass(frozen=True)
class HandedCell:
    """The code of one ``run_python`` call, handed out as a cell by ``%agent_cell``.

    Attributes
    ----------
    session_id : str
    turn : int
        The user turn (1 is the first prompt) whose reply made the call.
    call : int
        The call's number among the session's ``run_python`` calls (1 is the first).
    call_id : str
        The tool call's ID (recorded in the checkpoint's ``handed_out``).
    code : str
        The call's code, after a first-line comment naming the session, turn and call.
    """

    session_id: str
    turn: int
    call: int
    call_id: str
    code: str


@dataclass(frozen=True)
class SessionChange:
    """What archiving, unarchiving or deleting a session did.

    Attributes
    ----------
    session_id : str
    action : {"archived", "unarchived", "deleted"}
    was_active : bool
        The session was this kernel's active session and is no longer: its lease is
        released and the next prompt starts a new session.
    title : str
        The session's title ("" when it has none or it could not be read).
    """

    session_id: str
    action: str
    was_active: bool = False
    title: str = ""

    def describe(self) -> str:
        """One line for the user, e.g. ``"Archived session ‘Penguins’ (X); it was this
        kernel's active session: the next %agent starts a new one (%agent_resume X takes
        it back)."`` (the title, escaped of line breaks, when the session has one)."""
        from jupyter_agent.ui.display import one_line

        name = (f"‘{one_line(self.title, 60)}’ ({self.session_id})" if self.title.strip()
                else self.session_id)
        text = f"{self.action.capitalize()} session {name}"
        if not self.was_active:
            return text + "."
        back = ("" if self.action == "deleted" else
                f", %agent_resume {self.session_id} takes it back")
        return (f"{text}; it was this kernel's active session, so none is active now: the "
                f"next %agent starts a new one{back}.")
