"""The turn: user message -> model -> (tool batch -> results)* -> reply, as a TurnOutcome.

Each save point (docs/design.md, "Save points") is one ``Conversation.save``; the
checkpoint is also saved before a request when it changed. A limit is raised as
``LimitExceededError`` and caught here: the turn ends with a saved notice. An interrupt or
a model error leaves the session saved and propagates with ``.outcome``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from jupyter_agent.agent.adapters import Model, ModelReply, PartialReply
from jupyter_agent.agent.config import (
    CUT_OFF_NOTICES,
    NOTICE_PREFIX,
    AgentConfig,
    TokenUsage,
    check_limits,
    cut_off_notice,
    limit_notice,
    price_call,
)
from jupyter_agent.agent.conversation import MEMORY_REPAIR, Conversation, drop_old_images
from jupyter_agent.agent.endpoint import ContextWindow, resolve_window
from jupyter_agent.agent.events import EventCallback, Notice, TextDelta, UsageUpdate, ignore_event
from jupyter_agent.agent.tools import (
    BUILTIN_TOOL_NAMES,
    SMALL_WINDOW_TOOLS,
    BuiltinTools,
    Tool,
    describe_stop,
    run_batch,
    short_schema,
    tool_from_function,
)
from jupyter_agent.agent.working_context import (
    CHARS_PER_TOKEN,
    SUMMARIZER_PROMPT,
    SUMMARY_MARKER,
    RequestView,
    checked_usage,
    choose_cut,
    clip_reason,
    estimate_schema_tokens,
    estimate_tokens,
    render_for_summary,
    request_index,
    shaped,
    short_system_prompt,
    synthetic_result,
)
from jupyter_agent.errors import (
    JupyterAgentError,
    LimitExceededError,
    ModelError,
    PromptTooLongError,
)
from jupyter_agent.notebook import CellLog
from jupyter_agent.store import Store, Usage, to_message_dict

LIMIT_SKIP = "not executed: limit reached"
CUT_OFF_SKIP = "not executed: the reply was cut off"
DROPPED = "cut off: the connection dropped mid-reply"
KEEP_FRACTION = 0.5  # of the compaction threshold, for the verbatim recent turns


@dataclass(frozen=True)
class TurnOutcome:
    """What one turn produced (``usage``: this turn's tokens, USD and model calls)."""

    reply: str  # the final reply, or the saved "[jupyter-agent] Stopped: ..." notice
    # None when the model finished; else the limit's name, "length" or "content_filter"
    # (cut off), and on the outcome an exception carries, "interrupted" or "error"
    stop_reason: str | None
    usage: Usage
    tool_calls: int = 0  # run this turn (refused ones excluded)
    limit: LimitExceededError | None = None  # the limit that ended the turn


class Agent:
    """An agent whose conversation is a (saved or in-memory) session.

    The agent holds the session's lease from construction until ``conversation.close()``
    (or the end of a ``with`` block); a closed agent cannot run. Without ``conversation``, a saved
    session ``session_id`` of ``store`` is resumed, else one is created (in memory
    without a store). ``tools`` are added to the built-in ones and run without asking.
    ``ask(code) -> bool`` answers approval questions (default: on stdin, shown with
    ``show_question(intro, text)``).

    Raises
    ------
    ValueError
        A user tool whose name clashes with a built-in one.
    SessionLockedError, SessionNotFoundError, CorruptSessionError, OSError
        From the store while creating or resuming (the lease is released again).
    """

    def __init__(self, model: Model, conversation: Conversation | None = None, *,
                 store: Store | None = None, session_id: str | None = None,
                 config: AgentConfig | None = None,
                 tools: Iterable[Callable[..., Any] | Tool] | None = None, shell: Any = None,
                 ask: Callable[[str], bool] | None = None,
                 show_question: Callable[[str, str], object] | None = None,
                 cells: CellLog | None = None) -> None:
        self.model = model
        self.config = config or AgentConfig()
        self.window = ContextWindow(0, "default")
        self._turn_usage = Usage()  # this turn's tokens, USD and model calls
        self._price_noticed = False
        self._before = 0  # the session's tool calls when the running turn began
        self._request: dict[str, Any] | None = None  # the user message of the running turn
        self._context: str | None = None  # sent with the running turn's requests only
        self._emit: EventCallback = ignore_event
        self._tool_schemas: dict[tuple[bool, int], tuple[list[dict[str, Any]], int]] = {}
        self._builtins = BuiltinTools(lambda: self.conversation.state, shell=shell,
                                      approval=self.config.approve, ask=ask,
                                      show_question=show_question,
                                      privacy=self.config.context_privacy, cells=cells)
        figures = self._builtins.figures  # kept with the session, shown, sent
        self._builtins.emit = figures.emit = lambda event: self._emit(event)
        figures.save = lambda *figure: self.conversation.save_figure(*figure)
        self._view = RequestView(lambda fid: self.conversation.read_figure(fid))
        self.tools = {tool.name: tool for tool in self._builtins.tools()}
        try:
            for tool in tools or ():
                built = tool if isinstance(tool, Tool) else tool_from_function(tool)
                if built.name in self.tools:
                    raise ValueError(f"a tool named {built.name!r} is already registered")
                self.tools[built.name] = built
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
        self._builtins.conversation = conversation
        self._resolve_window()

    def reconfigure(self, *, model: Model | None = None, config: AgentConfig | None = None) -> None:
        """Use another model and/or config from the next turn on (same session, same lease)."""
        old_key = (self.model.name, self.model.base_url, self.config.context_window)
        self.model = model or self.model
        self.config = config or self.config
        if (self.model.name, self.model.base_url, self.config.context_window) != old_key:
            self._resolve_window()  # else the window stays what it is (limits, approval...)
        self._builtins.approval = self.config.approve
        self._builtins.privacy = self.config.context_privacy

    def _resolve_window(self, learned: ContextWindow | None = None) -> None:
        self.window = resolve_window(self.model, self.conversation.state,
                                     self.config.context_window, learned)

    def request_tools(self) -> tuple[list[dict[str, Any]], int]:
        """The tool schemas a request offers (cached: do not change) and their tokens; a
        small window gets short schemas of :data:`SMALL_WINDOW_TOOLS` and the user's tools."""
        small = self.window.small
        key = (small, len(self.tools))
        if key not in self._tool_schemas:
            schemas = [short_schema(t.schema()) if small else t.schema()
                       for name, t in self.tools.items() if not small
                       or name in SMALL_WINDOW_TOOLS or name not in BUILTIN_TOOL_NAMES]
            self._tool_schemas[key] = (schemas, estimate_schema_tokens(schemas))
        return self._tool_schemas[key]

    def _system_override(self) -> str | None:
        messages = self.conversation.messages
        if not self.window.small or not messages or messages[0].get("role") != "system":
            return None
        content = messages[0].get("content")
        return short_system_prompt(content) if isinstance(content, str) else None

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.conversation.close()  # the conversation owns the lease

    @contextlib.contextmanager
    def _running(self, on_event: EventCallback | None) -> Iterator[None]:
        """Hold the lease and send events to ``on_event`` for a block (a turn, a compaction)."""
        if self.conversation.closed:
            raise RuntimeError(f"this Agent was closed and released session "
                               f"{self.conversation.session_id!r}; build a new Agent to resume it")
        self._emit = on_event or ignore_event
        try:
            with self.conversation.lease():
                yield
        finally:
            self._emit = ignore_event  # events after this block never reach its callback
            self._request = self._context = None

    def run(self, prompt: str, *, on_event: EventCallback | None = None,
            context: str | None = None) -> TurnOutcome:
        """Run one user turn; ``context`` is sent after the prompt in this turn's requests
        only, never saved. However the turn ends, a fallback summary is written if none.

        Raises
        ------
        ModelError
            The endpoint failed; the prompt is saved (``.outcome``: stop reason "error").
        KeyboardInterrupt
            After the session was saved (``.outcome``: "interrupted"); so does any other
            exception from ``on_event``.
        PromptTooLongError
            The prompt cannot fit the window even alone; nothing was sent or saved.
        RuntimeError, SessionLockedError, ContextMismatchError, CorruptSessionError, OSError
            The agent was closed; from the store (lease lost, session changed, save failed).
        """
        self._turn_usage = Usage()
        self._builtins.figures.forward = on_event is None  # else the front end shows them
        self._before = self.conversation.state.tool_calls
        try:
            with self._running(on_event):
                self._context = context
                try:
                    outcome = self._turn(prompt)
                except BaseException:
                    # also after a ModelError or an interrupt; never masks the original error
                    with contextlib.suppress(Exception):
                        self.conversation.ensure_summary()
                    raise
                self.conversation.ensure_summary()
                return outcome
        except (KeyboardInterrupt, JupyterAgentError) as exc:
            stop = "interrupted" if isinstance(exc, KeyboardInterrupt) else "error"
            exc.outcome = self._outcome("", stop)  # type: ignore[union-attr]
            raise

    def _outcome(self, reply: str, stop: str | None,
                 limit: LimitExceededError | None = None) -> TurnOutcome:
        return TurnOutcome(reply, stop, self._turn_usage.model_copy(),
                           self.conversation.state.tool_calls - self._before, limit)

    def _turn(self, prompt: str) -> TurnOutcome:
        conversation = self.conversation
        conversation.repair(MEMORY_REPAIR)
        request = to_message_dict({"role": "user", "content": prompt})
        self._check_fits(request)  # nothing sent or saved when it cannot fit
        state = conversation.state
        state.model, state.base_url = self.model.name, self.model.base_url
        state.api, state.vision = self.model.api, self.config.vision
        conversation.append(request)
        self._request = conversation.messages[-1]  # never compacted away
        try:
            conversation.save()  # save point 1
        except Exception:  # refused by the store: a re-run records the prompt once
            conversation.take_back(self._request)
            raise
        limits, iterations, calls = self.config.limits, 0, []
        try:
            while True:
                check_limits(limits, state, iterations=iterations)
                if self._should_compact():
                    dropped = drop_old_images(conversation)
                    if dropped:
                        self._emit(Notice(f"the images of {dropped} earlier figure(s) left the "
                                          "working context, which was getting long (the "
                                          "transcript keeps them)"))
                    if not dropped or self._should_compact():
                        self._compact()
                    check_limits(limits, state, iterations=iterations)  # the summary cost too
                reply = self._request_reply()
                iterations += 1
                conversation.save()  # save point 2, with the checkpoint after the request
                calls = reply.tool_calls
                if reply.finish_reason in CUT_OFF_NOTICES:
                    text = cut_off_notice(str(reply.finish_reason), len(calls))
                    return self._end(text, str(reply.finish_reason), calls, CUT_OFF_SKIP)
                if not calls:
                    return self._outcome(reply.text, None)
                check_limits(limits, state, batch=len(calls))
                results: list[dict[str, Any]] = []
                try:  # a refused call is not counted: the tools take it back
                    run_batch(calls, self.tools, state, results, emit=self._emit,
                              max_output_chars=self.config.max_output_chars,
                              asks=self._builtins.will_ask)
                finally:
                    conversation.append(*results)
                    conversation.save()  # save point 3, with the checkpoint
                calls = []
        except LimitExceededError as reached:
            text = limit_notice(reached, requested=len(calls))
            return self._end(text, reached.limit, calls, LIMIT_SKIP, reached)

    def _check_fits(self, request: dict[str, Any], *, saved: bool = False) -> None:
        head = shaped(self.conversation.messages[:1], self._system_override())
        tokens = (estimate_tokens([*head, request]) + self.request_tools()[1]
                  + self.window.reserve)
        if tokens > self.window.tokens:
            raise PromptTooLongError(tokens, self.window.tokens, self.model.name, saved=saved)

    def _should_compact(self) -> bool:
        # the tool schemas count until the endpoint has counted them (with the context)
        tools = 0 if self.conversation.reported else self.request_tools()[1]
        return (self.conversation.estimated_tokens() + tools + self.window.reserve
                > self.config.compact_at * self.window.tokens)

    def _request_reply(self) -> ModelReply:
        """One model call, sent again once (compacted) when refused as too long."""
        conversation, emit = self.conversation, self._emit
        retried = False
        while True:
            conversation.repair(MEMORY_REPAIR)
            conversation.save()  # the checkpoint before the request (when it changed)
            partial = PartialReply()
            try:
                reply, images = self._respond(partial)
                break
            except ModelError as exc:
                if exc.mid_reply:  # the live turn shows the marker the saved message has
                    marker = self._keep_interrupted(partial, exc)
                    emit(TextDelta(f"\n\n{marker}" if partial.text else marker))
                if exc.context_window is None or exc.mid_reply or retried:
                    raise
                retried, window = True, exc.context_window
                if window:
                    self._resolve_window(ContextWindow(window, "refusal"))
                size = f"its {window:,}-token context window" if window else "its context window"
                emit(Notice(f"the server refused the request as too long for {size}; "
                            "compacting the conversation and sending it again"))
                if self._request is not None:
                    self._check_fits(self._request, saved=True)
                if not self._compact():
                    raise
            except BaseException as exc:
                self._keep_interrupted(partial, exc)
                raise
        # the last reported count plus the messages since (never all of them again) and images
        usage = checked_usage(reply.usage, lambda: conversation.estimated_tokens() + images,
                              reply.text, reply.tool_calls)
        # the API rejects content null without tool calls
        message: dict[str, Any] = {"role": "assistant",
                                   "content": reply.text or (None if reply.tool_calls else "")}
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        conversation.append(message)
        conversation.reported = (usage.input_tokens + usage.output_tokens,
                                 len(conversation.messages))
        self._account(usage)
        return reply

    def _respond(self, partial: PartialReply) -> tuple[ModelReply, int]:
        """Send one request, with the newest figures as images when they may go (vision
        "auto" sends a refused request again without them, and remembers for the session
        that the endpoint takes none); the reply and the images' estimated tokens."""
        config, model, state, emit = self.config, self.model, self.conversation.state, self._emit
        system, note = self._system_override(), None if self._context is None else (
            self._request, self._context)
        plain = shaped(self._view.plain(self.conversation.messages), system, note)
        key = f"{model.name} at {model.base_url}" if model.base_url else model.name
        request, tokens = plain, 0
        if config.max_images > 0 and (config.vision == "on" or (
                config.vision == "auto" and state.images_refused != key)):
            request, tokens = self._view.with_images(config.max_images, model.api)
            request = shaped(request, system, note) if tokens else plain
        tools, on_text = self.request_tools()[0], lambda text: emit(TextDelta(text))
        try:
            return model.respond(request, tools, stream=config.stream, partial=partial,
                                 on_text=on_text), tokens
        except ModelError as err:
            text, status = str(err).lower(), err.status_code or 0
            images = err.context_window is None and (  # may be what the endpoint refused
                any(word in text for word in ("image", "vision", "multimodal", "multi-modal"))
                or (400 <= status < 500 and status not in (401, 403, 404, 408, 409, 429)))
            if not tokens or partial.received or not images:
                raise
            if config.vision == "on":
                raise ModelError(f"{err} (the request carried images of figures: if this "
                                 "model cannot read images, use %agent_resume --vision off "
                                 "or --vision auto)", err.status_code, err.code) from err
            reply = model.respond(plain, tools, stream=config.stream, partial=partial,
                                  on_text=on_text)
            state.images_refused = key
            said = f"{err.status_code}: " if err.status_code else ""
            emit(Notice(f"the model endpoint refused the images of figures ({said}"
                        f"{clip_reason(err.detail or str(err))}), so {model.name} is told "
                        "about figures in text only for the rest of this session; "
                        "--vision on (always send images) or --vision off (never) with "
                        "%agent_new or %agent_resume changes this"))
            return reply, 0

    def _keep_interrupted(self, partial: PartialReply, exc: BaseException) -> str:
        """Keep the partial reply with a marker, count the call (so Ctrl-C cannot get around
        ``max_cost_usd``) and save; no events (the callback may be what raised)."""
        conversation, text = self.conversation, partial.text
        how = DROPPED if isinstance(exc, ModelError) and exc.mid_reply else describe_stop(exc)
        marker = f"{NOTICE_PREFIX} (reply {how})"
        usage = checked_usage(partial.usage, conversation.estimated_tokens, text,
                              partial.tool_calls())
        conversation.append({"role": "assistant",
                             "content": f"{text}\n\n{marker}" if text else marker})
        self._account(usage, emit=False)
        conversation.save()
        return marker

    def compact(self, *, on_event: EventCallback | None = None) -> bool:
        """Summarize the older turns now; False when there was nothing to compact or the
        summarizing call failed (a Notice says why).

        Raises
        ------
        LimitExceededError
            The session reached ``max_cost_usd``: nothing is sent.
        RuntimeError, SessionLockedError, CorruptSessionError, ContextMismatchError, OSError
            As :meth:`run`.
        """
        with self._running(on_event):
            return self._compact()

    def _compact(self) -> bool:
        """:meth:`compact`: one model call (no tools, not streamed); the running turn stays."""
        conversation, config, window = self.conversation, self.config, self.window.tokens
        check_limits(config.limits, conversation.state)
        messages, before = conversation.messages, conversation.estimated_tokens()
        cut = choose_cut(messages, keep_tokens=int(window * config.compact_at * KEEP_FRACTION),
                         keep_turns=config.keep_turns,
                         keep_from=request_index(messages, self._request))
        if cut is None:
            return False
        head = messages[1:cut]
        rendered = render_for_summary(head, max_chars=max(
            4_000, int(window * CHARS_PER_TOKEN * KEEP_FRACTION)))
        request = [{"role": "system", "content": SUMMARIZER_PROMPT},
                   {"role": "user", "content": "Summarize this conversation:\n\n" + rendered}]
        try:
            reply = self.model.respond(request, [], stream=False, partial=PartialReply())
        except ModelError as exc:
            self._emit(Notice(f"compaction failed, the context stays as it was: {exc}"))
            return False
        self._account(checked_usage(reply.usage, lambda: estimate_tokens(request), reply.text,
                                    []))
        summary, most = reply.text.strip(), int(window * CHARS_PER_TOKEN * config.compact_at / 4)
        if len(summary) > most:
            summary = summary[:most].rstrip() + " [... summary cut to fit the window]"
        if not summary:
            conversation.save()
            self._emit(Notice("compaction failed: the model returned an empty summary"))
            return False
        note = {"role": "user",
                "content": f"{SUMMARY_MARKER} ({len(head)} messages replaced):\n\n{summary}"}
        conversation.replace([messages[0], note, *messages[cut:]], summary=summary,
                             replaced=len(head))
        self._emit(Notice(f"compacted {len(head)} earlier messages into a summary "
                          f"(about {before:,} -> {conversation.estimated_tokens():,} tokens)"))
        return True

    def _account(self, usage: TokenUsage, *, emit: bool = True) -> None:
        """Count one call in the checkpoint and the turn; ``emit``: a UsageUpdate (and Notice)."""
        model, state = self.model.name, self.conversation.state
        cost, known = price_call(model, usage.input_tokens, usage.output_tokens,
                                 self.config.prices, cached_tokens=usage.cached_tokens)
        state.usage, self._turn_usage = (Usage(
            input_tokens=u.input_tokens + usage.input_tokens,
            output_tokens=u.output_tokens + usage.output_tokens, cost_usd=u.cost_usd + cost,
            calls=u.calls + 1, price_unknown=u.price_unknown or not known)
            for u in (state.usage, self._turn_usage))
        if not emit:
            return
        if not known and not self._price_noticed:
            self._price_noticed = True
            self._emit(Notice(f"price unknown for model {model!r}: its cost is counted as $0 "
                              "(pass prices={model: (usd_per_million_input, "
                              "usd_per_million_output)})"))
        self._emit(UsageUpdate(turn=self._turn_usage, session=state.usage))

    def _end(self, text: str, reason: str, calls: list[dict[str, Any]], skip: str,
             limit: LimitExceededError | None = None) -> TurnOutcome:
        """End the turn with the saved notice ``text``; ``calls`` are answered ``skip``."""
        self.conversation.append(*(synthetic_result(c["id"], skip) for c in calls),
                                 {"role": "assistant", "content": text})
        self.conversation.save()
        self._emit(Notice(text))
        return self._outcome(text, reason, limit)
