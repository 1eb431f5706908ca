"""The active session of a kernel (its store, options and agent, one turn of it) and the
records the controller's operations return. Units: tokens, USD."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jupyter_agent.client import model_key
from jupyter_agent.errors import JupyterAgentError, LimitExceededError
from jupyter_agent.notebook import CellLog, attach_references, notebook_so_far
from jupyter_agent.settings import LIMITS

if TYPE_CHECKING:
    from jupyter_agent.agent.adapters import Model
    from jupyter_agent.agent.config import Limits
    from jupyter_agent.agent.loop import Agent, TurnOutcome
    from jupyter_agent.agent.window import ContextWindow
    from jupyter_agent.settings import SessionOptions, Settings
    from jupyter_agent.store import SessionRecord, Store, Usage


@dataclass(frozen=True)
class UsageReport:
    """Usage of one session so far and its limits; ``context_tokens`` estimates the
    working context."""

    session_id: str
    usage: Usage
    tool_calls: int
    limits: Limits
    context_tokens: int = 0
    window: ContextWindow | None = None
    context_privacy: str = "schema"


@dataclass(frozen=True)
class TurnResult:
    """What one turn produced.

    ``stop_reason`` says why it ended early: a limit's name, a reply the provider cut off
    (``"length"``, ``"content_filter"``), ``"interrupted"`` or ``"error"``; ``None`` if it
    did not. ``limit_error`` is the limit the agent raised; ``limits_from_options`` those
    set by the session's options (raised with ``%agent_resume --max-...``, not ``%config``).
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
    """A resumed session's record; ``endpoint_note`` is one line (credentials and control
    characters removed) when it last used another endpoint, else ``""``."""

    record: SessionRecord
    unarchived: bool = False
    endpoint_note: str = ""


@dataclass(frozen=True)
class HandedCell:
    """The code of ``run_python`` call number ``call`` (1-based) of user turn ``turn``,
    tagged with a first-line comment naming both."""

    session_id: str
    turn: int
    call: int
    call_id: str
    code: str


@dataclass(frozen=True)
class SessionChange:
    """What archiving, unarchiving or deleting a session did; ``was_active``: it was this
    kernel's active session, whose lease is now released."""

    session_id: str
    action: str  # "archived", "unarchived" or "deleted"
    was_active: bool = False
    title: str = ""


@dataclass
class ActiveSession:
    """A session this kernel runs; its agent holds the lease. ``model_key`` is what the
    agent's model was built from, ``build`` builds another."""

    session_id: str
    store: Store
    options: SessionOptions
    agent: Agent
    model_key: tuple[Any, ...]
    build: Callable[[Settings], Model]
    _base: Settings | None = field(default=None, init=False)
    _settings: Settings | None = field(default=None, init=False)

    def settings(self, settings: Settings) -> Settings:
        """``settings`` (the kernel's) with this session's options applied."""
        if self._settings is None or settings != self._base:
            self._base, self._settings = settings, settings.with_options(self.options)
        return self._settings

    def refreshed(self, settings: Settings, environ: Mapping[str, str] | None) -> Agent:
        """The agent, reconfigured when the kernel's ``settings`` or the API key changed."""
        changed = settings != self._base
        mine = self.settings(settings)
        key = model_key(mine, environ)
        if key != self.model_key:
            self.agent.reconfigure(model=self.build(mine))
            self.model_key = key
        if changed:
            self.agent.reconfigure(config=mine.agent_config())
        return self.agent

    def ask(self, prompt: str, settings: Settings, environ: Mapping[str, str] | None, *,
            on_event: Callable[[Any], None] | None = None,
            cells: CellLog | None = None) -> TurnResult:
        """Run one turn on ``prompt`` and return its result.

        Raises
        ------
        ModelError, KeyboardInterrupt
            The model endpoint failed, or Ctrl-C; the prompt stays saved. The exception
            carries the turn so far as ``turn`` (a :class:`TurnResult`, or ``None`` when
            the turn did not start).
        """
        agent = self.refreshed(settings, environ)
        open_ = [True]

        def forward(event: Any) -> None:
            # the agent keeps its last callback; events after this turn must not reach
            # this turn's renderer (it may update an old cell's output)
            if open_[0] and on_event is not None:
                on_event(event)

        def result(outcome: TurnOutcome) -> TurnResult:
            return TurnResult(
                session_id=self.session_id, reply=outcome.reply,
                stop_reason=outcome.stop_reason, turn_usage=outcome.usage,
                session_usage=agent.state.usage.model_copy(),
                turn_tool_calls=outcome.tool_calls,
                session_tool_calls=agent.state.tool_calls, limits=agent.config.limits,
                limits_from_options=self.options.given() & set(LIMITS),
                limit_error=outcome.limit,
                context_tokens=agent.conversation.estimated_tokens(), window=agent.window,
            )

        context = None
        if cells is not None:
            from jupyter_agent.agent.events import Notice  # the agent imports openai (~0.6 s)

            privacy = agent.config.context_privacy
            refs = attach_references(prompt, cells, privacy,
                                     limit=agent.config.max_output_chars)
            prompt = refs.prompt
            context = notebook_so_far(cells, privacy,
                                      self.settings(settings).notebook_context_tokens)
            lines = [*refs.attached, *refs.unknown]
            if context is not None:
                cells_run = sum(line.startswith("In [") for line in context.splitlines())
                lines.append(f"sent the notebook since the last prompt: {cells_run} cell(s), "
                             f"{len(context):,} characters (with this turn only)")
            for line in lines:
                forward(Notice(line))
        try:
            outcome = agent.run(prompt, on_event=forward, context=context)
        except (KeyboardInterrupt, JupyterAgentError) as exc:
            carried = getattr(exc, "outcome", None)  # what Agent.run attached
            exc.turn = None if carried is None else result(carried)  # type: ignore[union-attr]
            raise
        finally:
            open_[0] = False
            if cells is not None:
                cells.mark()  # the next section starts after this turn
        return result(outcome)
