"""One model request of the agent, and the accounting of what it cost.

:class:`ModelCalls` is the part of :class:`~jupyter_agent.agent.loop.Agent` that
sends the working context to the model and turns the reply into an assistant
message:

* the reply (text and tool calls, normalized) is appended to ``messages``; the
  caller saves it (save point 2);
* its usage -- reported tokens, or ~4 characters per token when the endpoint
  reported none; cached prompt tokens priced at the cache rate -- is added to the
  turn's and the session's :class:`~jupyter_agent.store.Usage` (issue 3: "cumulative
  usage ... cost in USD, call count");
* a request stopped mid-reply (``KeyboardInterrupt``, or an exception from an
  ``on_event`` callback) keeps the partial text as an assistant message with a
  marker saying what stopped it, drops the tool calls that never ran, and is
  **still counted** (one call; prompt tokens estimated from the request, completion
  tokens from the partial text), so repeated Ctrl-C cannot get around
  ``max_cost_usd``. It is saved and checkpointed before the exception propagates.
* a :class:`~jupyter_agent.errors.ModelError` (the endpoint failed) propagates
  untouched; such a request is not counted (nothing was generated).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import openai

from jupyter_agent.agent.batch import describe_stop
from jupyter_agent.agent.client import ModelReply, ReplyAccumulator, request_reply
from jupyter_agent.agent.context import CHARS_PER_TOKEN, estimate_tokens, message_chars
from jupyter_agent.agent.events import EventCallback, Notice, TextDelta, UsageUpdate
from jupyter_agent.agent.limits import NOTICE_PREFIX
from jupyter_agent.agent.tools import ToolRegistry
from jupyter_agent.agent.usage import add_usage, call_usage
from jupyter_agent.errors import ModelError
from jupyter_agent.store import SessionState, Usage

__all__ = ["ModelCalls"]


class ModelCalls:
    """Mixin: the model request and usage accounting (see the module docstring)."""

    client: openai.OpenAI
    model: str
    stream: bool
    messages: list[dict[str, Any]]
    tools: ToolRegistry
    prices: dict[str, tuple[float, float]]
    state: SessionState
    last_turn_usage: Usage
    _emit: EventCallback
    _price_noticed: bool
    _base_tokens: int | None
    _base_len: int

    if TYPE_CHECKING:  # provided by SessionPersistence

        def _append(self, *messages: dict[str, Any]) -> None: ...
        def _save(self) -> None: ...
        def _checkpoint(self) -> None: ...

    def _call_model(self) -> ModelReply:
        """One model request; appends the assistant message and accounts the usage.

        Returns
        -------
        ModelReply
            The reply (``finish_reason`` tells whether it was cut off).

        Raises
        ------
        ModelError
            When the endpoint fails (nothing appended, nothing counted).
        BaseException
            Whatever interrupted the reply, after the partial reply was appended,
            counted, saved and checkpointed.
        """
        acc = ReplyAccumulator()
        request_tokens = estimate_tokens(self.messages)
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
        except BaseException as exc:
            self._record_interrupted(acc, exc, request_tokens)
            raise
        prompt_tokens = reply.prompt_tokens
        if prompt_tokens is None:  # the endpoint reported no usage: estimate it
            prompt_tokens = request_tokens
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
            message["content"] = ""  # the API rejects content null without tool calls
        self._append(message)
        self._base_tokens = prompt_tokens + completion_tokens
        self._base_len = len(self.messages)
        self.account(prompt_tokens, completion_tokens, cached_tokens=reply.cached_tokens)
        return reply

    def _record_interrupted(
        self, acc: ReplyAccumulator, exc: BaseException, request_tokens: int
    ) -> None:
        """Keep the partial reply, count the call, save and checkpoint (see module doc)."""
        partial = acc.text
        marker = f"{NOTICE_PREFIX} (reply {describe_stop(exc)})"
        self._append(
            {"role": "assistant", "content": f"{partial}\n\n{marker}" if partial else marker}
        )
        prompt_tokens = acc.prompt_tokens if acc.prompt_tokens is not None else request_tokens
        completion_tokens = acc.completion_tokens
        if completion_tokens is None:
            completion_tokens = (
                message_chars({"content": partial, "tool_calls": acc.tool_calls()})
                // CHARS_PER_TOKEN
            )
        # No events here: the callback may be what raised.
        self.account(prompt_tokens, completion_tokens, cached_tokens=acc.cached_tokens, emit=False)
        self._save()
        self._checkpoint()

    def account(
        self,
        input_tokens: int,
        output_tokens: int,
        *,
        cached_tokens: int = 0,
        emit: bool = True,
    ) -> Usage:
        """Add one model call's tokens and cost to the turn and session usage.

        Parameters
        ----------
        input_tokens, output_tokens : int
            Prompt and completion tokens of the call.
        cached_tokens : int
            Prompt tokens served from the provider's cache (priced at the cache
            rate by ``genai-prices``).
        emit : bool
            Emit :class:`UsageUpdate` (and a one-time :class:`Notice` when the
            model's price is unknown).

        Returns
        -------
        Usage
            The call's own usage (tokens, cost in USD, ``calls=1``).
        """
        call = call_usage(
            self.model, input_tokens, output_tokens, self.prices, cached_tokens=cached_tokens
        )
        self.state.usage = add_usage(self.state.usage, call)
        self.last_turn_usage = add_usage(self.last_turn_usage, call)
        if not emit:
            return call
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
