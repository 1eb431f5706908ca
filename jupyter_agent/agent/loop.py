"""The agent loop: user message -> model -> (tool batch -> results)* -> final reply.

:class:`Agent` is composed of parts it holds, not built from base classes: a
:class:`~jupyter_agent.agent.model.Model` (the API), a
:class:`~jupyter_agent.agent.conversation.Conversation` (messages, checkpoint, lease,
persistence), an :class:`~jupyter_agent.agent.config.AgentConfig`, the tool registry
with the built-in tools, and a :class:`~jupyter_agent.agent.calls.Meter` for usage.

Save points, each one ``Conversation.save`` -- one store call recording the
new messages and the checkpoint together:

1. after appending the user message;
2. after each model response (the assistant message, with its tool calls);
3. after each completed tool batch (all of its results together).

The checkpoint is also saved before each model request when it changed, and
after a limit notice, a compaction or an interrupt. A tool batch is never half recorded:
if it is interrupted (``KeyboardInterrupt``, also raised from an ``on_event`` callback),
the calls that did not finish get "interrupted" results, the batch is saved, and the
interrupt is re-raised. A stream interrupted or dropped mid-reply keeps the partial text
(the call is still counted). A reply cut off by ``finish_reason``
"length"/"content_filter" ends the turn with a notice; its tool calls are answered "not
executed" and never run.

Before every model call, :meth:`Conversation.repair` answers unanswered tool calls ("not
executed": the agent never ran them), so the request is always accepted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from jupyter_agent.agent.batch import BatchProgress, execute_batch
from jupyter_agent.agent.builtin_tools import BUILTIN_TOOL_NAMES, SMALL_WINDOW_TOOLS, BuiltinTools
from jupyter_agent.agent.calls import Meter, call_model
from jupyter_agent.agent.compaction import compact, should_compact
from jupyter_agent.agent.config import AgentConfig, ApprovalPolicy, Limits
from jupyter_agent.agent.context import estimate_schema_tokens, synthetic_result
from jupyter_agent.agent.conversation import MEMORY_REPAIR, Conversation
from jupyter_agent.agent.events import EventCallback, Notice, ignore_event
from jupyter_agent.agent.limits import (
    CUT_OFF_NOTICES,
    check_before_batch,
    check_before_model,
    cut_off_notice,
    limit_notice,
)
from jupyter_agent.agent.model import Model, ModelReply, TokenUsage
from jupyter_agent.agent.prompts import short_system_prompt
from jupyter_agent.agent.request_fit import check_prompt_fits, request_index
from jupyter_agent.agent.tools import Tool, ToolRegistry, configure_memory
from jupyter_agent.agent.vision import RequestView, VisionModel, drop_old_images
from jupyter_agent.agent.window import (
    ContextWindow,
    plausible,
    reply_budget,
    resolve_window,
    window_key,
)
from jupyter_agent.errors import LimitExceededError, ModelError
from jupyter_agent.notebook import CellLog
from jupyter_agent.store import SessionState, Store, Usage, to_message_dict

__all__ = ["Agent"]

LIMIT_SKIP = "not executed: limit reached"
CUT_OFF_SKIP = "not executed: the reply was cut off"


class Agent:
    """An agent whose conversation is a (optionally saved) session.

    The agent owns its conversation and so the session's lease: from
    construction until :meth:`close` no other process, and no other store object, can
    take the session over. Use it as a context manager, or call :meth:`close`; a closed
    agent cannot ``run``.

    Parameters
    ----------
    model : Model
        E.g. ``ChatModel(openai.OpenAI(), "gpt-4o-mini")``; replaceable between turns
        (:meth:`reconfigure`).
    conversation : Conversation, optional
        An open conversation (``Conversation.open(store, id)`` or ``.create(...)``); the
        agent takes it over and closes it (also when the agent cannot be built). Default:
        one built from ``store`` and ``session_id``.
    store : Store, optional
        Without a store (and without ``conversation``) the session lives in memory.
    session_id : str, optional
        With a store: a saved session is resumed (messages, scratchpad, todos, tool-call
        count, usage; tool pairs repaired); otherwise a session is created with this ID
        (or a new one) and a system message that includes the notes.
    config : AgentConfig, optional
        Approval, streaming, context window, limits, prices...; replaceable between turns.
    tools : iterable of callables or Tool, optional
        Added to the built-in tools; run without asking (the caller's own code).
    shell : IPython shell, optional
        Whose namespace ``run_python`` uses; default ``IPython.get_ipython()``, else a
        private namespace.
    ask : callable, optional
        ``ask(code) -> bool`` for ``approve="ask"`` (default: the whole code, then a
        prompt on stdin).
    show_question : callable, optional
        ``show(intro, text)``: how an approval question on stdin shows its whole text
        (a front end's scrollable view; default: printed).
    cells : CellLog, optional
        The log of the user's cells the notebook tools read (the front end keeps one
        watching the shell); default: one reading the shell's history, without errors
        by cell.

    Raises
    ------
    ValueError
        A user tool whose name clashes with a built-in one.
    SessionLockedError
        When another process or store object holds the session (names the holder).
    SessionNotFoundError, CorruptSessionError, InvalidSessionIdError, OSError
        From the store while creating or resuming (the lease is released again).
    """

    def __init__(
        self,
        model: Model,
        conversation: Conversation | None = None,
        *,
        store: Store | None = None,
        session_id: str | None = None,
        config: AgentConfig | None = None,
        tools: Iterable[Callable[..., Any] | Tool] | None = None,
        shell: Any = None,
        ask: Callable[[str], bool] | None = None,
        show_question: Callable[[str, str], object] | None = None,
        cells: CellLog | None = None,
    ) -> None:
        self.model = model
        self.config = config or AgentConfig()
        self.stop_reason: str | None = None
        self.limit_error: LimitExceededError | None = None
        self._meter = Meter()
        self._request: dict[str, Any] | None = None  # the user message of the running turn
        self._context: str | None = None  # sent with the running turn's requests only
        self._emit: EventCallback = ignore_event
        self._windows: dict[str, ContextWindow] = {}  # "model at URL" -> its window
        self._window = ContextWindow(0, "default")
        self._tool_tokens: dict[bool, int] = {}
        self._builtins = BuiltinTools(lambda: self.conversation.state, shell=shell,
                                      approval=self.config.approve, ask=ask,
                                      show_question=show_question,
                                      privacy=self.config.context_privacy, cells=cells)
        self._builtins.notify = lambda text: self._emit(Notice(text))
        self._builtins.emit = lambda event: self._emit(event)
        figures = self._builtins.figures  # kept with the session, shown, sent
        figures.save = lambda fid, data, media_type: self.conversation.save_figure(
            fid, data, media_type)
        figures.emit = lambda event: self._emit(event)
        self._view = RequestView(lambda fid: self.conversation.read_figure(fid))
        self.tools = ToolRegistry(self._builtins.tools())
        try:
            for tool in tools or ():
                self.tools.add(tool)
        except BaseException:
            if conversation is not None:
                conversation.close()  # taken over: let the session go again
            raise
        if conversation is None:
            if store is not None and session_id is not None and store.exists(session_id):
                conversation = Conversation.open(store, session_id)
            else:
                conversation = Conversation.create(store, session_id=session_id,
                                                   system_prompt=self.config.system_prompt)
        self.conversation = conversation
        self._builtins.memory = configure_memory(conversation.store, conversation.session_id)
        self._resolve_window()

    # -- the parts -------------------------------------------------------------------------
    @property
    def messages(self) -> list[dict[str, Any]]:
        """The working context (the conversation's)."""
        return self.conversation.messages

    @property
    def state(self) -> SessionState:
        """The checkpointed state: scratchpad, todos, tool-call count, usage."""
        return self.conversation.state

    @property
    def session_id(self) -> str | None:
        """The session's ID (None for an in-memory agent)."""
        return self.conversation.session_id

    @property
    def store(self) -> Store | None:
        """Where the session is saved (None: in memory)."""
        return self.conversation.store

    @property
    def limits(self) -> Limits:
        """The current limits (``config.limits``)."""
        return self.config.limits

    @property
    def approval(self) -> ApprovalPolicy:
        """The approval policy for ``run_python``; setting it replaces :attr:`config`."""
        return self.config.approve

    @approval.setter
    def approval(self, value: ApprovalPolicy) -> None:
        self.reconfigure(config=replace(self.config, approve=value))

    @property
    def context_window(self) -> int:
        """The context window compaction works against, in tokens."""
        return self._window.tokens

    @property
    def window(self) -> ContextWindow:
        """The context window and where it came from (the setting, the server, a refusal,
        ``genai-prices`` or a default)."""
        return self._window

    @property
    def last_turn_usage(self) -> Usage:
        """Usage of the last (or current) turn: tokens, USD, model calls."""
        return self._meter.turn

    def reconfigure(self, *, model: Model | None = None, config: AgentConfig | None = None) -> None:
        """Use another model and/or config from the next turn on (same session, same lease).

        Raises
        ------
        ValueError
            For an invalid config (see :class:`AgentConfig`).
        """
        self.model = model or self.model
        self.config = config or self.config
        self._resolve_window()
        self._builtins.approval = self.config.approve
        self._builtins.privacy = self.config.context_privacy

    def _resolve_window(self) -> None:
        """Set the window: the setting, else what this endpoint and model reported or
        refused with (asked once; a value saved with the session counts only for the
        same model at the same configured endpoint), else ``genai-prices``, else a
        default (see :mod:`~jupyter_agent.agent.window`)."""
        key = window_key(self.model.name, self.model.base_url)
        found = self._windows.get(key)
        configured = self.config.context_window
        if configured and (found is None or found.source != "refusal"
                           or found.tokens >= configured):
            self._window = ContextWindow(int(configured), "setting")
            return
        if found is None:
            state = self.conversation.state
            saved = plausible(state.context_window) if state.context_window_of == key else None
            hint = None if saved is None else ContextWindow(
                saved, "refusal" if state.context_window_source == "refusal" else "server")
            found = resolve_window(self.model, None, learned=hint)
            self._remember_window(key, found)
        self._window = found

    def _remember_window(self, key: str, window: ContextWindow) -> None:
        """Keep what the endpoint said for this session (and in its checkpoint)."""
        self._windows[key] = window
        if window.source in ("server", "refusal"):
            state = self.conversation.state
            state.context_window, state.context_window_of = window.tokens, key
            state.context_window_source = window.source

    def request_overhead(self) -> int:
        """Tokens a request adds to the working context: the reply budget, and the tool
        schemas until the endpoint has counted them."""
        tools = 0 if self.conversation.counted else self._schema_tokens()
        return tools + reply_budget(self._window.tokens)

    def request_tools(self) -> list[dict[str, Any]]:
        """The tool schemas a request offers: all of them, or for a small window the short
        ones, without the bookkeeping built-ins (only :data:`SMALL_WINDOW_TOOLS` and the
        user's own tools)."""
        if not self._window.small:
            return self.tools.schemas()
        return [schema for schema in self.tools.schemas(short=True)
                if schema["function"]["name"] in SMALL_WINDOW_TOOLS
                or schema["function"]["name"] not in BUILTIN_TOOL_NAMES]

    def _schema_tokens(self) -> int:
        small = self._window.small
        if small not in self._tool_tokens:
            self._tool_tokens[small] = estimate_schema_tokens(self.request_tools())
        return self._tool_tokens[small]

    def _system_override(self) -> str | None:
        """The short system message a small window gets (None: send the saved one)."""
        messages = self.conversation.messages
        if not self._window.small or not messages or messages[0].get("role") != "system":
            return None
        content = messages[0].get("content")
        return short_system_prompt(content) if isinstance(content, str) else None

    def estimated_tokens(self) -> int:
        """Estimated size of the working context in tokens (see ``Conversation``)."""
        return self.conversation.estimated_tokens()

    # -- the lease -------------------------------------------------------------------------
    def close(self) -> None:
        """Close the conversation: release the session's lease. Idempotent; nothing is
        written. Without a store this does nothing."""
        self.conversation.close()

    @property
    def closed(self) -> bool:
        """True after :meth:`close` (always False without a store)."""
        return self.conversation.closed

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"this Agent was closed and released session "
                               f"{self.session_id!r}; build a new Agent to resume it")

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the turn ----------------------------------------------------------------------------
    def run(self, prompt: str, *, on_event: EventCallback | None = None,
            context: str | None = None) -> str:
        """Run one user turn and return the final reply text (or the limit notice).

        Parameters
        ----------
        prompt : str
            The user's message.
        on_event : callable, optional
            Receives :mod:`~jupyter_agent.agent.events` as the turn progresses.
        context : str, optional
            Text sent after the prompt in every request of this turn and never saved, so
            a later turn's requests no longer carry it (the front end's "notebook so
            far" section).

        Returns
        -------
        str
            The model's final reply, or the "[jupyter-agent] Stopped: ..." notice when a
            limit ended the turn or the reply was cut off (:attr:`stop_reason` tells
            which: a limit name, "length" or "content_filter"; :attr:`limit_error` holds
            the limit as a :class:`~jupyter_agent.errors.LimitExceededError`).

        Raises
        ------
        ModelError
            When the model endpoint fails; the user's message is already saved and the
            next ``run`` goes on.
        KeyboardInterrupt
            Re-raised after the session was left consistent and saved. Any other
            exception from ``on_event`` is handled the same way and re-raised.
        RuntimeError
            When the agent was closed.
        PromptTooLongError
            When the prompt cannot fit the context window even with only the system
            message; nothing was sent or saved.
        SessionLockedError
            When the lease was lost and another process or store now holds it.
        ContextMismatchError
            When the saved working context no longer matches this agent's (someone else
            changed the session); nothing is written.
        CorruptSessionError
            When the session became unreadable.
        OSError
            When a save fails (disk full, permissions); what was saved before is intact.

        Notes
        -----
        When the turn ends -- normally, by a limit, a model error or an interrupt -- the
        fallback summary is written if the session has none.
        """
        self._check_open()
        self.stop_reason, self.limit_error = None, None
        self._meter.start_turn()
        self._emit = on_event or ignore_event
        self._builtins.figures.forward = on_event is None  # else the front end shows them
        self._context = context
        try:
            with self.conversation.lease():
                try:
                    reply = self._turn(prompt)
                except BaseException:
                    # also after a ModelError or an interrupt; never masks the original error
                    with contextlib.suppress(Exception):
                        self._after_turn()
                    raise
                self._after_turn()
                return reply
        finally:
            self._emit = ignore_event  # events after this run never reach its callback
            self._request = None
            self._context = None

    def _turn(self, prompt: str) -> str:
        conversation = self.conversation
        conversation.repair(MEMORY_REPAIR)
        request = to_message_dict({"role": "user", "content": prompt})
        self._check_fits(request)  # nothing sent or saved when it cannot fit
        self._record_model()
        conversation.append(request)
        self._request = conversation.messages[-1]  # never compacted away
        try:
            conversation.save()  # save point 1
        except Exception:  # refused by the store: a re-run records the prompt once
            conversation.take_back(self._request)
            raise
        iterations = 0
        while True:
            reached = check_before_model(self.config.limits, conversation.state, iterations)
            if reached is not None:
                return self._stop(reached)
            if self._should_compact():
                self._compact_images_first()
                reached = check_before_model(self.config.limits, conversation.state,
                                             iterations)  # the summary may have cost the rest
                if reached is not None:
                    return self._stop(reached)
            reply = self._request_reply()
            iterations += 1
            conversation.save()  # save point 2, with the checkpoint after the request
            calls = reply.tool_calls
            if reply.finish_reason in CUT_OFF_NOTICES:
                return self._cut_off(str(reply.finish_reason), calls)
            if not calls:
                return reply.text
            reached = check_before_batch(self.config.limits, conversation.state, len(calls))
            if reached is not None:
                self._skip(calls, LIMIT_SKIP)
                return self._stop(reached, requested=len(calls))
            self._run_batch(calls)  # save point 3, with the checkpoint

    def _check_fits(self, request: dict[str, Any], *, saved: bool = False) -> None:
        system = self._system_override()
        head = self.conversation.messages[:1]
        if system is not None:
            head = [{**head[0], "content": system}]
        check_prompt_fits(head, request, window=self._window.tokens, model=self.model.name,
                          overhead=self._schema_tokens() + reply_budget(self._window.tokens),
                          saved=saved)

    def _should_compact(self) -> bool:
        return should_compact(self.conversation, self._window.tokens, self.config,
                              overhead=self.request_overhead())

    def _request_reply(self) -> ModelReply:
        """One model request; when the server refuses it as too long for its window, the
        window is learned from the refusal, the context compacted and the request sent
        once more."""
        conversation = self.conversation
        retried = False
        while True:
            conversation.repair(MEMORY_REPAIR)
            conversation.save()  # the checkpoint before the request (when it changed)
            model = VisionModel(self.model, self._view, self.config, conversation.state,
                                self._emit, system=self._system_override(),
                                note=None if self._context is None
                                else (self._request, self._context))
            try:
                return call_model(model, conversation, self.request_tools(),
                                  stream=self.config.stream, meter=self._meter,
                                  prices=self.config.prices, emit=self._emit)
            except ModelError as exc:
                if exc.context_window is None or exc.mid_reply or retried:
                    raise
                retried = True
                self._refused_for_size(exc)

    def _refused_for_size(self, exc: ModelError) -> None:
        """Learn the window from a refusal and compact; re-raise ``exc`` (or a
        :class:`PromptTooLongError`) when nothing can make the request fit."""
        window = exc.context_window or 0
        if window:
            self._remember_window(window_key(self.model.name, self.model.base_url),
                                  ContextWindow(window, "refusal"))
            self._resolve_window()
        size = f"its {window:,}-token context window" if window else "its context window"
        self._emit(Notice(f"the server refused the request as too long for {size}; "
                          "compacting the conversation and sending it again"))
        if self._request is not None:
            self._check_fits(self._request, saved=True)
        if not self._compact():
            raise exc

    def _record_model(self) -> None:
        """The checkpoint names the model, endpoint and API the session last used."""
        state = self.conversation.state
        state.model, state.base_url, state.api = self.model.name, self.model.base_url, \
            self.model.api
        state.vision = self.config.vision

    def _run_batch(self, calls: list[dict[str, Any]]) -> None:
        """Execute one tool batch and record all of its results in one save."""
        conversation = self.conversation
        progress = BatchProgress(calls)

        refusals = self._builtins.refusals
        def count() -> None:
            conversation.state.tool_calls += 1

        def uncount_refused() -> None:  # refused calls never ran
            conversation.state.tool_calls -= self._builtins.refusals - refusals

        try:
            results = execute_batch(progress, self.tools, emit=self._emit, on_start=count,
                                    max_output_chars=self.config.max_output_chars,
                                    asks=self._builtins.will_ask)
        except BaseException as exc:
            uncount_refused()
            conversation.append(*progress.finish_interrupted(exc))
            conversation.save()
            raise
        uncount_refused()
        conversation.append(*results)
        conversation.save()  # save point 3
        if self._builtins.summary_written:
            conversation.has_summary = True

    # -- compaction ---------------------------------------------------------------------------
    def compact(self, *, on_event: EventCallback | None = None) -> bool:
        """Summarize the older turns now (also done before a model call when the context
        passes ``compact_at`` of the window).

        Parameters
        ----------
        on_event : callable, optional
            Receives the :class:`Notice` (compacted, or why not) and the usage.

        Returns
        -------
        bool
            False when there is nothing to compact or the summarizing call failed (the
            working context then stays as it was and a Notice says why).

        Raises
        ------
        RuntimeError
            When the agent was closed.
        LimitExceededError
            The session reached ``max_cost_usd``: nothing is sent to the model.
        SessionLockedError, CorruptSessionError, ContextMismatchError, OSError
            From the store while recording the compaction.
        """
        self._check_open()
        self._emit = on_event or ignore_event
        try:
            with self.conversation.lease():
                return self._compact()
        finally:
            self._emit = ignore_event

    def _compact_images_first(self) -> None:
        """Compaction when the context grew too large: first the images of earlier
        figures leave the working context; a summary is written only if that is not
        enough."""
        dropped = drop_old_images(self.conversation)
        if dropped:
            self._emit(Notice(f"the images of {dropped} earlier figure(s) left the working "
                              "context, which was getting long (the transcript keeps them)"))
        if not dropped or self._should_compact():
            self._compact()

    def _compact(self) -> bool:
        keep_from = request_index(self.conversation.messages, self._request)
        return compact(self.conversation, self.model, self.config,
                       window=self._window.tokens, account=self._account, emit=self._emit,
                       keep_from=keep_from)

    def _account(self, usage: TokenUsage) -> None:
        self._meter.account(self.conversation.state, self.model.name, usage,
                            prices=self.config.prices, emit=self._emit)

    # -- limits, end of turn -----------------------------------------------------------------
    def _skip(self, calls: list[dict[str, Any]], reason: str) -> None:
        """Answer calls that will not run (so tool pairs stay intact) and save."""
        self.conversation.append(*(synthetic_result(c["id"], reason) for c in calls))
        self.conversation.save()

    def _stop(self, reached: LimitExceededError, *, requested: int = 0) -> str:
        """End the turn with a saved assistant-side limit notice."""
        self.limit_error = reached
        return self._end_with_notice(limit_notice(reached, requested=requested), reached.limit)

    def _cut_off(self, finish_reason: str, calls: list[dict[str, Any]]) -> str:
        """The reply ended with ``finish_reason`` "length" or "content_filter": its tool
        calls may be truncated, so none of them runs; the turn ends with a notice."""
        if calls:
            self._skip(calls, CUT_OFF_SKIP)
        return self._end_with_notice(cut_off_notice(finish_reason, len(calls)), finish_reason)

    def _end_with_notice(self, text: str, reason: str) -> str:
        self.stop_reason = reason
        self.conversation.append({"role": "assistant", "content": text})
        self.conversation.save()
        self._emit(Notice(text))
        return text

    def _after_turn(self) -> None:
        """Fallback summary when the session still has none."""
        self.conversation.ensure_summary()
