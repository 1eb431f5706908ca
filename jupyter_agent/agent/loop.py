"""The agent loop: user message -> model -> (tool batch -> results)* -> final reply.

Save points (spec: "Connecting Persistence to the Agent Loop"), whenever a store and
a session ID exist -- ``store.save_messages(session_id, working_context)``:

1. after appending the user message;
2. after each model response (the assistant message, with its tool calls);
3. after each completed tool batch (all of its results together).

Checkpoints (spec: "Saving Other Conversation State") -- ``store.save_state`` with the
scratchpad, todos, session tool-call count and cumulative usage: before each model
request, after it (this one also covers "after the final reply"), after each tool
batch, and after a limit notice, a compaction or an interrupt. Messages are saved
before the checkpoint, so a crash in between leaves newer messages with an older
checkpoint, never the reverse.

A tool batch is never half recorded: its results are saved in one save after the
last call. If the batch is interrupted (``KeyboardInterrupt``, also raised from an
``on_event`` callback), the calls that did not finish get "interrupted" results, the
batch is saved, and the interrupt is re-raised. A stream interrupted mid-reply
saves the partial text as an assistant message (the call is still counted). A reply
cut off by ``finish_reason`` "length"/"content_filter" ends the turn with a notice;
its tool calls are answered "not executed" and never run. The agent holds the
session's lease (re-entrant within one store) from construction to :meth:`Agent.close`.

On resume -- and before every model call -- :func:`~jupyter_agent.agent.context.repair_tool_pairs`
answers unanswered calls with synthetic results (recorded with ``save_messages``
when they only extend the saved context, else with
``store.compact(..., summary="repaired tool pairs: ...")``): on resume "result
unknown: ... check before repeating it" (the call may have run before the process
died); in a live agent "not executed" (it really was not run).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

import openai

from jupyter_agent.agent.batch import BatchProgress, execute_batch
from jupyter_agent.agent.builtin_tools import ApprovalPolicy, BuiltinTools
from jupyter_agent.agent.calls import ModelCalls
from jupyter_agent.agent.compaction import Compacting
from jupyter_agent.agent.context import synthetic_result
from jupyter_agent.agent.events import EventCallback, Notice, ignore_event
from jupyter_agent.agent.limits import (
    NOTICE_PREFIX,
    Limits,
    check_before_batch,
    check_before_model,
    limit_notice,
)
from jupyter_agent.agent.session import MEMORY_REPAIR, SessionPersistence
from jupyter_agent.agent.tools import Tool, ToolRegistry, configure_memory
from jupyter_agent.agent.usage import PriceTable, context_window_for
from jupyter_agent.errors import LimitExceededError
from jupyter_agent.store import SessionState, Store, Usage, new_session_id

__all__ = ["Agent"]

LIMIT_SKIP = "not executed: limit reached"
CUT_OFF_SKIP = "not executed: the reply was cut off"
CUT_OFF_NOTICES = {
    "length": (
        "the model's reply was cut off at its output token limit (finish_reason \"length\")",
        "Ask it to continue, or for a shorter answer.",
    ),
    "content_filter": (
        "the provider's content filter cut off the model's reply "
        '(finish_reason "content_filter")',
        "Rephrase the request to continue.",
    ),
}
"""Finish reason -> (cause, advice) of the notice that ends a turn whose reply did
not finish normally (``stop_reason`` is then the finish reason)."""


class Agent(SessionPersistence, ModelCalls, Compacting):
    """An agent whose conversation is a (optionally saved) session.

    With a store, the agent takes the session's lease (``store.acquire_lease``) when
    it is built and holds it until :meth:`close` -- spec: "The running agent holds
    the lease for its entire run" -- so no other process (or other store object)
    can take the session over between turns. The lease is re-entrant within one
    store: a caller that already holds it on the same store object (e.g. the
    magics' controller) nests its count. Use the agent as a context manager, or
    call :meth:`close`, to let the session go; a closed agent cannot ``run``.

    Parameters
    ----------
    client : openai.OpenAI
    model : str
    store : Store, optional
        Without a store the session lives in memory only.
    session_id : str, optional
        With a store: an existing session is resumed (messages, scratchpad, todos,
        tool-call count, usage; tool pairs repaired); otherwise a session is created
        with this ID (or a new one) and a system message that includes the notes.
    tools : iterable of callables or Tool, optional
        Added to the built-in tools; run without asking (the caller's own code).
    limits : Limits, optional
    system_prompt : str, optional
        Replaces the default system prompt of a *new* session (a resumed session
        keeps its saved system message).
    approval : {"ask", "auto", "deny"}
        Policy for ``run_python``.
    shell : IPython shell, optional
        Defaults to ``IPython.get_ipython()``, else a private namespace.
    stream : bool
    context_window : int, optional
        Tokens; default from ``genai-prices``/a table/128k.
    compact_at : float
        Compact when the estimated context exceeds this fraction of the window.
    max_output_chars : int
        Tool results are cut to this many code points.
    prices : mapping, optional
        ``{model: (usd_per_million_input, usd_per_million_output)}``.
    title, project_root : optional
        Stored with a new session.
    ask : callable, optional
        ``ask(code) -> bool`` for ``approval="ask"`` (default: prompt on stdin).
    keep_turns : int
        Recent user turns compaction keeps verbatim when they fit.

    Raises
    ------
    ValueError
        For an unknown approval policy, ``compact_at`` outside (0, 1], or a user
        tool whose name clashes with a built-in one.
    SessionLockedError
        At construction, when another process or another store object holds the
        session's lease (the message names the holder's pid).
    CorruptSessionError, InvalidSessionIdError, OSError
        From the store while creating or resuming (the lease is released again).
    """

    def __init__(
        self,
        client: openai.OpenAI,
        model: str,
        *,
        store: Store | None = None,
        session_id: str | None = None,
        tools: Iterable[Callable[..., Any] | Tool] | None = None,
        limits: Limits | None = None,
        system_prompt: str | None = None,
        approval: ApprovalPolicy | str = "ask",
        shell: Any = None,
        stream: bool = True,
        context_window: int | None = None,
        compact_at: float = 0.8,
        max_output_chars: int = 10_000,
        prices: PriceTable | None = None,
        title: str = "",
        project_root: str | None = None,
        ask: Callable[[str], bool] | None = None,
        keep_turns: int = 2,
    ) -> None:
        if approval not in ("auto", "ask", "deny"):
            raise ValueError(f"approval must be 'auto', 'ask' or 'deny', not {approval!r}")
        if not 0 < compact_at <= 1:
            raise ValueError(f"compact_at must be in (0, 1], not {compact_at!r}")
        self.client = client
        self.model = model
        self.store = store
        self.limits = limits or Limits()
        self.stream = stream
        self.context_window = context_window or context_window_for(model)
        self.compact_at = compact_at
        self.max_output_chars = max_output_chars
        self.keep_turns = keep_turns
        self.prices: dict[str, tuple[float, float]] = dict(prices or {})
        self.stop_reason: str | None = None
        self.last_turn_usage = Usage()
        self.state = SessionState()
        self.messages: list[dict[str, Any]] = []
        self._builtins = BuiltinTools(
            lambda: self.state,
            shell=shell,
            approval=approval,
            ask=ask,
        )
        self.tools = ToolRegistry(self._builtins.tools())
        for tool in tools or ():
            self.tools.add(tool)
        self._emit: EventCallback = ignore_event
        self._builtins.notify = lambda text: self._emit(Notice(text))
        self._base_tokens: int | None = None
        self._base_len = 0
        self._has_summary = False
        self._price_noticed = False
        self.session_id = session_id
        self._leased = False
        if store is not None:
            self.session_id = session_id if session_id is not None else new_session_id()
            store.acquire_lease(self.session_id)  # held until close() (spec: "Session Locks")
            self._leased = True
        try:
            if store is not None and session_id is not None and store.exists(session_id):
                self._resume()
            else:
                self._create(system_prompt, title, project_root)
        except BaseException:
            self.close()
            raise
        self._builtins.memory = configure_memory(store, self.session_id)

    # -- the lease -------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the session lease this agent took when it was built.

        Idempotent; a closed agent must not ``run`` again (build a new one to resume).
        Without a store this does nothing. The session file is not touched.
        """
        if self._leased and self.store is not None and self.session_id is not None:
            self._leased = False
            self.store.release_lease(self.session_id)

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(
                f"this Agent was closed and released session {self.session_id!r}; "
                "build a new Agent to resume it"
            )

    @property
    def closed(self) -> bool:
        """True after :meth:`close` (always False without a store)."""
        return self.store is not None and not self._leased

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- options forwarded to the built-in tools ------------------------------------------

    @property
    def approval(self) -> ApprovalPolicy:
        """The approval policy for ``run_python`` ("auto", "ask", "deny"); settable."""
        return self._builtins.approval

    @approval.setter
    def approval(self, value: ApprovalPolicy | str) -> None:
        if value not in ("auto", "ask", "deny"):
            raise ValueError(f"approval must be 'auto', 'ask' or 'deny', not {value!r}")
        self._builtins.approval = value

    # -- the turn ------------------------------------------------------------------------------

    def run(self, prompt: str, *, on_event: EventCallback | None = None) -> str:
        """Run one user turn and return the final reply text (or the limit notice).

        Parameters
        ----------
        prompt : str
            The user's message.
        on_event : callable, optional
            Receives :mod:`~jupyter_agent.agent.events` as the turn progresses.

        Returns
        -------
        str
            The model's final reply, or the "[jupyter-agent] Stopped: ..." notice when
            a limit ended the turn or the reply was cut off (``stop_reason`` tells
            which: a limit name, "length" or "content_filter").

        Raises
        ------
        ModelError
            When the model endpoint fails; the user's message is already saved and
            the next ``run`` goes on.
        KeyboardInterrupt
            Re-raised after the session was left consistent and saved. Any other
            exception from ``on_event`` is handled the same way and re-raised.
        RuntimeError
            When the agent was closed.
        SessionLockedError
            When the lease was lost (e.g. the controller called
            ``store.release_all()``) and another process or store now holds it.
        ContextMismatchError
            When the saved working context no longer matches this agent's (someone
            else changed the session file); nothing is written.
        CorruptSessionError
            When the session file became unreadable.
        OSError
            When a save fails (disk full, permissions); the previous file is intact.

        Notes
        -----
        When the turn ends -- normally, by a limit, a model error or an interrupt --
        the fallback summary is written if the session has none (spec: "Session
        Summaries").
        """
        self._check_open()
        self.stop_reason = None
        self.last_turn_usage = Usage()
        self._emit = on_event or ignore_event
        try:
            with self._lease():
                try:
                    reply = self._turn(prompt)
                except BaseException:
                    # Also after a ModelError or an interrupt (spec: "the session might
                    # stop before the chance arises"); never masks the original error.
                    with contextlib.suppress(Exception):
                        self._after_turn()
                    raise
                self._after_turn()
                return reply
        finally:
            self._emit = ignore_event  # events after this run never reach its callback

    def _turn(self, prompt: str) -> str:
        self._repair(MEMORY_REPAIR)
        self._append({"role": "user", "content": prompt})
        self._save()  # save point 1
        iterations = 0
        while True:
            reached = check_before_model(self.limits, self.state, iterations)
            if reached is not None:
                return self._stop(reached)
            self._maybe_compact()
            self._repair(MEMORY_REPAIR)
            self._checkpoint()  # before the model request
            reply = self._call_model()
            iterations += 1
            self._save()  # save point 2
            self._checkpoint()  # after the model request (and after a final reply)
            calls = reply.tool_calls
            if reply.finish_reason in CUT_OFF_NOTICES:
                return self._cut_off(str(reply.finish_reason), calls)
            if not calls:
                return reply.text
            reached = check_before_batch(self.limits, self.state, len(calls))
            if reached is not None:
                self._skip(calls, LIMIT_SKIP)
                return self._stop(reached, requested=len(calls))
            self._run_batch(calls)  # save point 3 + checkpoint

    def _run_batch(self, calls: list[dict[str, Any]]) -> None:
        """Execute one tool batch and record all of its results in one save."""
        progress = BatchProgress(calls)

        def count() -> None:
            self.state.tool_calls += 1

        try:
            results = execute_batch(
                progress,
                self.tools,
                emit=self._emit,
                on_start=count,
                max_output_chars=self.max_output_chars,
            )
        except BaseException as exc:
            self._append(*progress.finish_interrupted(exc))
            self._save()
            self._checkpoint()
            raise
        self._append(*results)
        self._save()  # save point 3
        self._checkpoint()  # after the tool batch
        if self._builtins.summary_written:
            self._has_summary = True

    # -- limits, end of turn -------------------------------------------------------------------

    def _skip(self, calls: list[dict[str, Any]], reason: str) -> None:
        """Answer calls that will not run (so tool pairs stay intact) and save."""
        self._append(*(synthetic_result(c["id"], reason) for c in calls))
        self._save()

    def _stop(self, reached: LimitExceededError, *, requested: int = 0) -> str:
        """End the turn with a saved assistant-side limit notice."""
        return self._end_with_notice(limit_notice(reached, requested=requested), reached.limit)

    def _cut_off(self, finish_reason: str, calls: list[dict[str, Any]]) -> str:
        """The reply ended with ``finish_reason`` "length" or "content_filter": its tool
        calls may be truncated, so none of them runs; the turn ends with a notice."""
        if calls:
            self._skip(calls, CUT_OFF_SKIP)
        cause, advice = CUT_OFF_NOTICES[finish_reason]
        skipped = f"; its {len(calls)} tool call(s) were not run" if calls else ""
        text = f"{NOTICE_PREFIX} Stopped: {cause}{skipped}. {advice}"
        return self._end_with_notice(text, finish_reason)

    def _end_with_notice(self, text: str, reason: str) -> str:
        self.stop_reason = reason
        self._append({"role": "assistant", "content": text})
        self._save()
        self._checkpoint()
        self._emit(Notice(text))
        return text
