"""The active session of a kernel: its store, options and agent, and one turn of it.

An :class:`ActiveSession` exists while the session's agent holds its lease. Before
every turn the agent is brought up to date with the settings of the
moment: its config (limits, approval, streaming) is refreshed, and its model is rebuilt
-- same session, same lease, nothing read from disk -- when a setting the model is
built from, or the API key in the environment, changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jupyter_agent.client import build_model, endpoint
from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.settings import LIMITS
from jupyter_agent.ui.results import TurnResult, UsageReport

if TYPE_CHECKING:
    from jupyter_agent.agent.loop import Agent, TurnOutcome
    from jupyter_agent.notebook import CellLog
    from jupyter_agent.settings import SessionOptions, Settings
    from jupyter_agent.store import Store

__all__ = ["ActiveSession", "model_key"]


def model_key(settings: Settings, environ: Mapping[str, str] | None) -> tuple[Any, ...]:
    """The settings a model is built from, and a hash of the API key the environment
    holds now (so that setting the variable takes effect at the next prompt; the key
    itself is never kept)."""
    key = endpoint(settings, environ)[1]
    return (*settings.model_key(), hashlib.sha256(key.encode()).hexdigest())


@dataclass
class ActiveSession:
    """A session this kernel runs: its ID, store, options and agent (which holds the lease).

    Attributes
    ----------
    model_key : tuple
        :func:`model_key` of the settings the agent's model was built from.
    last_result : TurnResult or None
        What the latest :meth:`ask` produced, also when it raised.
    """

    session_id: str
    store: Store
    options: SessionOptions
    agent: Agent
    model_key: tuple[Any, ...]
    last_result: TurnResult | None = field(default=None, init=False)

    def refreshed(self, settings: Settings, environ: Mapping[str, str] | None) -> Agent:
        """The agent, reconfigured for ``settings`` (the kernel's settings now, before
        this session's options are applied)."""
        settings = settings.with_options(self.options)
        key = model_key(settings, environ)
        if key != self.model_key:
            self.agent.reconfigure(model=build_model(settings, environ))
            self.model_key = key
        self.agent.reconfigure(config=settings.agent_config())
        return self.agent

    def ask(self, prompt: str, settings: Settings, environ: Mapping[str, str] | None, *,
            on_event: Callable[[Any], None] | None = None,
            cells: CellLog | None = None) -> TurnResult:
        """Run one turn on ``prompt``; keep and return what it produced.

        With ``cells``, the prompt's ``@`` references are attached first (see
        :func:`~jupyter_agent.notebook.attach_references`) and each attachment, and
        each reference not attached, is told to ``on_event`` as a ``Notice``.

        Raises
        ------
        ModelError
            The model endpoint failed; the prompt stays saved (:attr:`last_result` holds
            the turn with stop reason ``"error"``).
        KeyboardInterrupt
            After :attr:`last_result` got the turn with stop reason ``"interrupted"``.
        """
        agent = self.refreshed(settings, environ)
        open_ = [True]
        self.last_result = None

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
            from jupyter_agent.agent.events import Notice
            from jupyter_agent.notebook import attach_references, notebook_so_far

            privacy = agent.config.context_privacy
            refs = attach_references(prompt, cells, privacy,
                                     limit=agent.config.max_output_chars)
            prompt = refs.prompt
            context = notebook_so_far(cells, privacy,
                                      settings.with_options(self.options)
                                      .notebook_context_tokens)
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
            self.last_result = None if carried is None else result(carried)
            raise
        finally:
            open_[0] = False
            if cells is not None:
                cells.mark()  # the next section starts after this turn
        self.last_result = result(outcome)
        return self.last_result

    def usage(self, settings: Settings) -> UsageReport:
        """Usage of the session and its limits as ``settings`` (with its options) say."""
        settings = settings.with_options(self.options)
        state = self.agent.state
        return UsageReport(self.session_id, state.usage.model_copy(), state.tool_calls,
                           settings.limits(),
                           context_tokens=self.agent.conversation.estimated_tokens(),
                           window=self.agent.window, context_privacy=settings.context_privacy)
