"""One model request of a turn, and the accounting of what model calls cost.

:func:`call_model` sends the working context through a
:class:`~jupyter_agent.agent.model.Model` and turns the reply into an assistant message
of the :class:`~jupyter_agent.agent.conversation.Conversation`:

* the reply (text and tool calls) is appended; the caller saves it (save point 2);
* its usage -- reported tokens, or ~4 characters per token where the endpoint reported
  none or numbers that cannot be true (:mod:`~jupyter_agent.agent.usage_check`) -- goes
  to the :class:`Meter` (session and turn usage);
* a request stopped mid-reply (``KeyboardInterrupt``, or an exception from an
  ``on_event`` callback) keeps the partial text as an assistant message with a marker
  saying what stopped it, drops the tool calls that never ran, and is **still
  counted** (prompt tokens estimated from the request, completion tokens from the
  partial text), so repeated Ctrl-C cannot get around ``max_cost_usd``. It is saved
  before the exception propagates;
* a connection that drops mid-reply (a :class:`~jupyter_agent.errors.ModelError` with
  ``mid_reply``) is kept the same way -- the text that arrived, marked "cut off: the
  connection dropped mid-reply", counted and saved -- before the error propagates;
* any other :class:`~jupyter_agent.errors.ModelError` (the endpoint failed) propagates
  untouched; such a request is not counted (nothing was generated).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jupyter_agent.agent.batch import describe_stop
from jupyter_agent.agent.conversation import Conversation
from jupyter_agent.agent.events import EventCallback, Notice, TextDelta, UsageUpdate
from jupyter_agent.agent.limits import NOTICE_PREFIX
from jupyter_agent.agent.model import Model, ModelReply, PartialReply, TokenUsage
from jupyter_agent.agent.usage import add_usage, call_usage
from jupyter_agent.agent.usage_check import checked_usage
from jupyter_agent.errors import ModelError
from jupyter_agent.store import SessionState, Usage

__all__ = ["DROPPED", "Meter", "call_model"]

DROPPED = "cut off: the connection dropped mid-reply"
"""How the marker of a reply whose connection dropped says so."""


class Meter:
    """Adds each model call's usage to the session's checkpoint and to the turn's.

    Attributes
    ----------
    turn : Usage
        Usage of the current turn (reset with :meth:`start_turn`).
    """

    def __init__(self) -> None:
        self.turn = Usage()
        self._price_noticed = False

    def start_turn(self) -> None:
        """Start counting a new turn."""
        self.turn = Usage()

    def account(self, state: SessionState, model: str, usage: TokenUsage, *,
                prices: Mapping[str, tuple[float, float]] | None = None,
                emit: EventCallback | None = None) -> Usage:
        """Add one call's tokens and cost to ``state.usage`` and to :attr:`turn`.

        Parameters
        ----------
        state : SessionState
            The session's checkpoint (changed in place).
        model : str
            What the call is priced as.
        usage : TokenUsage
            Its tokens; cached prompt tokens are priced at the cache rate.
        prices : mapping, optional
            Price overrides (see :func:`~jupyter_agent.agent.usage.price_call`).
        emit : callable, optional
            Receives a :class:`UsageUpdate` (and, once, a :class:`Notice` when the
            model's price is unknown). None: no events.

        Returns
        -------
        Usage
            The call's own usage (tokens, cost in USD, ``calls=1``).
        """
        call = call_usage(model, usage.input_tokens, usage.output_tokens, prices,
                          cached_tokens=usage.cached_tokens)
        state.usage = add_usage(state.usage, call)
        self.turn = add_usage(self.turn, call)
        if emit is None:
            return call
        if call.price_unknown and not self._price_noticed:
            self._price_noticed = True
            emit(Notice(f"price unknown for model {model!r}: its cost is counted as $0 "
                        "(pass prices={model: (usd_per_million_input, usd_per_million_output)})"))
        emit(UsageUpdate(turn=self.turn, session=state.usage))
        return call


def call_model(
    model: Model,
    conversation: Conversation,
    tools: Sequence[dict[str, Any]],
    *,
    stream: bool,
    meter: Meter,
    prices: Mapping[str, tuple[float, float]] | None,
    emit: EventCallback,
) -> ModelReply:
    """One model request; appends the assistant message and accounts the usage.

    Parameters
    ----------
    model : Model
    conversation : Conversation
        Its working context is sent; the reply is appended to it.
    tools : sequence of dict
        Tool schemas offered.
    stream : bool
    meter : Meter
    prices : mapping, optional
    emit : callable
        Receives text deltas, usage updates and notices.

    Returns
    -------
    ModelReply
        The reply (``finish_reason`` tells whether it was cut off).

    Raises
    ------
    ModelError
        When the endpoint fails (nothing appended, nothing counted), or the connection
        dropped mid-reply (what arrived is appended, counted and saved first).
    BaseException
        Whatever interrupted the reply, after the partial reply was appended, counted
        and saved.
    """
    partial = PartialReply()
    try:
        reply = model.respond(conversation.messages, tools, stream=stream, partial=partial,
                              on_text=lambda text: emit(TextDelta(text)))
    except ModelError as exc:
        if exc.mid_reply:  # the live turn shows the marker the saved message has
            marker = _keep_interrupted(model, conversation, partial, exc, meter, prices)
            emit(TextDelta(f"\n\n{marker}" if partial.text else marker))
        raise
    except BaseException as exc:
        _keep_interrupted(model, conversation, partial, exc, meter, prices)
        raise
    usage, _ = checked_usage(reply.usage, conversation.messages, reply.text, reply.tool_calls)
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    elif message["content"] is None:
        message["content"] = ""  # the API rejects content null without tool calls
    conversation.append(message)
    conversation.note_reported_tokens(usage.input_tokens + usage.output_tokens)
    meter.account(conversation.state, model.name, usage, prices=prices, emit=emit)
    return reply


def _keep_interrupted(model: Model, conversation: Conversation, partial: PartialReply,
                      exc: BaseException, meter: Meter,
                      prices: Mapping[str, tuple[float, float]] | None) -> str:
    """Keep the partial reply, count the call, save (see the module docstring); return
    the marker added to the text that arrived."""
    text = partial.text
    how = (DROPPED if isinstance(exc, ModelError) and exc.mid_reply
           else describe_stop(exc))
    marker = f"{NOTICE_PREFIX} (reply {how})"
    usage, _ = checked_usage(partial.usage, conversation.messages, text, partial.tool_calls())
    conversation.append({"role": "assistant",
                         "content": f"{text}\n\n{marker}" if text else marker})
    # No events here: the callback may be what raised.
    meter.account(conversation.state, model.name, usage, prices=prices)
    conversation.save()
    return marker
