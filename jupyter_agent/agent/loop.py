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
saves the partial text as an assistant message. The run holds the session's lease
(re-entrant within one store) from the user message to the final save.

On resume -- and before every model call -- :func:`~jupyter_agent.agent.context.repair_tool_pairs`
answers unanswered calls with synthetic "not executed" results (recorded with
``save_messages`` when they only extend the saved context, else with
``store.compact(..., summary="repaired tool pairs: ...")``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import openai

from jupyter_agent.agent.batch import BatchProgress, execute_batch
from jupyter_agent.agent.builtin_tools import ApprovalPolicy, BuiltinTools
from jupyter_agent.agent.client import ReplyAccumulator, request_reply
from jupyter_agent.agent.compaction import KEEP_FRACTION, summarize_older_turns
from jupyter_agent.agent.context import (
    CHARS_PER_TOKEN,
    estimate_tokens,
    message_chars,
    synthetic_result,
)
from jupyter_agent.agent.events import (
    AgentEvent,
    EventCallback,
    Notice,
    TextDelta,
    UsageUpdate,
)
from jupyter_agent.agent.limits import (
    NOTICE_PREFIX,
    Limits,
    check_before_batch,
    check_before_model,
    limit_notice,
)
from jupyter_agent.agent.session import RESUME_REPAIR, SessionPersistence
from jupyter_agent.agent.tools import Tool, ToolRegistry, configure_memory
from jupyter_agent.agent.usage import PriceTable, add_usage, call_usage, context_window_for
from jupyter_agent.errors import LimitExceededError, ModelError
from jupyter_agent.store import SessionState, SessionStore, Usage

__all__ = ["Agent"]

LIMIT_SKIP = "not executed: limit reached"


def _ignore(_event: AgentEvent) -> None:
    return None


class Agent(SessionPersistence):
    """An agent whose conversation is a (optionally saved) session.

    Parameters
    ----------
    client : openai.OpenAI
    model : str
    store : SessionStore, optional
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
    SessionLockedError, CorruptSessionError, InvalidSessionIdError
        From the store while creating or resuming.
    """

    def __init__(
        self,
        client: openai.OpenAI,
        model: str,
        *,
        store: SessionStore | None = None,
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
        self._emit: EventCallback = _ignore
        self._builtins.notify = lambda text: self._emit(Notice(text))
        self._base_tokens: int | None = None
        self._base_len = 0
        self._has_summary = False
        self._price_noticed = False
        self.session_id = session_id
        if store is not None and session_id is not None and store.exists(session_id):
            self._resume()
        else:
            self._create(system_prompt, title, project_root)
        self._builtins.memory = configure_memory(store, self.session_id)

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
            a limit ended the turn (``stop_reason`` tells which).

        Raises
        ------
        ModelError
            When the model endpoint fails; the user's message is already saved and
            the next ``run`` goes on.
        KeyboardInterrupt
            Re-raised after the session was left consistent and saved.
        SessionLockedError
            When another process holds the session.
        """
        self.stop_reason = None
        self.last_turn_usage = Usage()
        self._emit = on_event or _ignore
        try:
            with self._lease():
                return self._turn(prompt)
        finally:
            self._emit = _ignore  # events after this run never reach its callback

    def _turn(self, prompt: str) -> str:
        self._repair(RESUME_REPAIR)
        self._append({"role": "user", "content": prompt})
        self._save()  # save point 1
        iterations = 0
        while True:
            reached = check_before_model(self.limits, self.state, iterations)
            if reached is not None:
                return self._stop(reached)
            self._maybe_compact()
            self._repair(RESUME_REPAIR)
            self._checkpoint()  # before the model request
            reply_text, calls = self._call_model()
            iterations += 1
            self._save()  # save point 2
            self._checkpoint()  # after the model request (and after a final reply)
            if not calls:
                self._after_turn()
                return reply_text
            reached = check_before_batch(self.limits, self.state, len(calls))
            if reached is not None:
                skipped = [synthetic_result(c["id"], LIMIT_SKIP) for c in calls]
                self._append(*skipped)
                self._save()
                return self._stop(reached, requested=len(calls))
            self._run_batch(calls)  # save point 3 + checkpoint

    def _call_model(self) -> tuple[str, list[dict[str, Any]]]:
        """One model request; appends the assistant message and accounts the usage."""
        acc = ReplyAccumulator()
        try:
            reply = request_reply(
                self.client,
                model=self.model,
                messages=self.messages,
                tools=self.tools.schemas(),
                stream=self.stream,
                acc=acc,
                on_text=lambda text: self._emit(TextDelta(text)),
            )
        except ModelError:
            raise
        except BaseException:
            # Interrupted mid-reply: keep what streamed, drop unexecuted tool calls.
            partial = acc.text
            marker = f"{NOTICE_PREFIX} (reply interrupted by the user)"
            self._append(
                {"role": "assistant", "content": f"{partial}\n\n{marker}" if partial else marker}
            )
            self._save()
            self._checkpoint()
            raise
        prompt_tokens = reply.prompt_tokens
        if prompt_tokens is None:  # the endpoint reported no usage: estimate it
            prompt_tokens = estimate_tokens(self.messages)
        completion_tokens = reply.completion_tokens
        if completion_tokens is None:
            completion_tokens = (
                message_chars({"content": reply.text, "tool_calls": reply.tool_calls})
                // CHARS_PER_TOKEN
            )
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        elif message["content"] is None:
            message["content"] = ""
        self._append(message)
        self._base_tokens = prompt_tokens + completion_tokens
        self._base_len = len(self.messages)
        self.account(prompt_tokens, completion_tokens)
        return reply.text, reply.tool_calls

    def account(self, input_tokens: int, output_tokens: int) -> Usage:
        """Add one model call's tokens and cost to the turn and session usage.

        Emits :class:`UsageUpdate` (and a one-time :class:`Notice` when the model's
        price is unknown). Returns the call's :class:`Usage`.
        """
        call = call_usage(self.model, input_tokens, output_tokens, self.prices)
        self.state.usage = add_usage(self.state.usage, call)
        self.last_turn_usage = add_usage(self.last_turn_usage, call)
        if call.price_unknown and not self._price_noticed:
            self._price_noticed = True
            self._emit(
                Notice(
                    f"price unknown for model {self.model!r}: its cost is counted as $0 "
                    "(pass prices={model: (usd_per_million_input, usd_per_million_output)})"
                )
            )
        self._emit(UsageUpdate(turn=self.last_turn_usage, session=self.state.usage))
        return call

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
        except BaseException:
            self._append(*progress.finish_interrupted())
            self._save()
            self._checkpoint()
            raise
        self._append(*results)
        self._save()  # save point 3
        self._checkpoint()  # after the tool batch
        if self._builtins.summary_written:
            self._has_summary = True

    # -- limits, end of turn -------------------------------------------------------------------

    def _stop(self, reached: LimitExceededError, *, requested: int = 0) -> str:
        """End the turn with a saved assistant-side notice."""
        text = limit_notice(reached, requested=requested)
        self.stop_reason = reached.limit
        self._append({"role": "assistant", "content": text})
        self._save()
        self._checkpoint()
        self._emit(Notice(text))
        self._after_turn()
        return text

    # -- compaction ---------------------------------------------------------------------------

    def estimated_tokens(self) -> int:
        """Estimated size of the working context in tokens (last reported usage plus
        ~4 characters per token for the messages since)."""
        return estimate_tokens(
            self.messages, base_tokens=self._base_tokens, base_len=self._base_len
        )

    def _maybe_compact(self) -> None:
        if self.estimated_tokens() > self.compact_at * self.context_window:
            self._compact()

    def compact(self, *, on_event: EventCallback | None = None) -> bool:
        """Summarize the older turns now (also done automatically before a model call
        when the context passes ``compact_at`` of the window).

        Parameters
        ----------
        on_event : callable, optional
            Receives the :class:`Notice` (compacted, or why not) and the usage.

        Returns
        -------
        bool
            False when there is nothing to compact or the summarizing call failed
            (the working context then stays as it was and a Notice says why).
        """
        self._emit = on_event or _ignore
        try:
            with self._lease():
                return self._compact()
        finally:
            self._emit = _ignore

    def _compact(self) -> bool:
        before = self.estimated_tokens()
        try:
            result = summarize_older_turns(
                self.client,
                self.model,
                self.messages,
                keep_tokens=int(self.context_window * self.compact_at * KEEP_FRACTION),
                keep_turns=self.keep_turns,
                max_chars=int(self.context_window * CHARS_PER_TOKEN * KEEP_FRACTION),
            )
        except ModelError as exc:
            self._emit(Notice(f"compaction failed, the context stays as it was: {exc}"))
            return False
        if result is None:
            return False
        self.account(result.input_tokens, result.output_tokens)
        if result.messages is None:
            self._checkpoint()
            self._emit(Notice("compaction failed: the model returned an empty summary"))
            return False
        if self.store is not None and self.session_id is not None:
            self.store.compact(self.session_id, result.messages, summary=result.summary)
        self.messages = result.messages
        self._base_tokens = None
        self._base_len = 0
        self._checkpoint()
        self._emit(
            Notice(
                f"compacted {result.replaced} earlier messages into a summary "
                f"(about {before:,} -> {self.estimated_tokens():,} tokens)"
            )
        )
        return True
