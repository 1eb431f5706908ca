"""Executing one tool batch: the calls of one assistant message, in order.

The batch is recorded by the caller in *one* save after it completes. If
anything interrupts it -- ``KeyboardInterrupt`` from a tool or from an ``on_event``
callback -- :meth:`BatchProgress.finish_interrupted` answers every call that has no
result yet (the running one: "interrupted"; the rest: "not executed"),
so the saved batch is complete and the next request is accepted by the API. Code
interrupted by Ctrl-C keeps what it had printed in its result, which is also shown
(a :class:`ToolCallEnd`). Ctrl-C at the approval question is the user declining: that
call is answered as refused (it never ran), then the turn ends the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jupyter_agent.agent.context import synthetic_result
from jupyter_agent.agent.events import EventCallback, ToolCallEnd, ToolCallStart
from jupyter_agent.agent.pyexec import ApprovalInterrupted, ToolInterrupted, truncate
from jupyter_agent.agent.tools import ToolRegistry
from jupyter_agent.store import to_message_dict

__all__ = [
    "DECLINED_BY_INTERRUPT",
    "INTERRUPTED_PENDING",
    "INTERRUPTED_RUNNING",
    "BatchProgress",
    "describe_stop",
    "execute_batch",
]

INTERRUPTED_RUNNING = "interrupted by the user while this tool call was running"
INTERRUPTED_PENDING = "not executed: the tool batch was interrupted by the user"
DECLINED_BY_INTERRUPT = ("error: refused: the user pressed Ctrl-C at the approval question "
                         "(declined); the code did not run")


def describe_stop(exc: BaseException) -> str:
    """How a turn was stopped, for synthetic results and markers.

    ``KeyboardInterrupt`` is "interrupted by the user"; anything else (e.g. an
    exception raised by an ``on_event`` callback) is described by its message, never by
    its Python class name (the text reaches the user and the model).
    """
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted by the user"
    return f"stopped by an error ({exc})" if str(exc) else "stopped by an unexpected error"


@dataclass
class BatchProgress:
    """Results of a batch so far (caller-owned, so they survive an interrupt).

    Attributes
    ----------
    calls : list of dict
        The assistant message's ``tool_calls``.
    results : list of dict
        ``tool`` messages, in call order, for the calls that finished.
    running : str or None
        The ID of the call executing right now.
    """

    calls: list[dict[str, Any]]
    results: list[dict[str, Any]] = field(default_factory=list)
    running: str | None = None

    def finish_interrupted(self, exc: BaseException | None = None) -> list[dict[str, Any]]:
        """Answer every call without a result; return all results in call order.

        Parameters
        ----------
        exc : BaseException, optional
            What stopped the batch. ``KeyboardInterrupt`` (or None) gives the
            "interrupted by the user" wording; another exception is named instead.

        Returns
        -------
        list of dict
            One ``tool`` message per call, in call order.
        """
        user = exc is None or isinstance(exc, KeyboardInterrupt)
        how = "interrupted by the user" if exc is None else describe_stop(exc)
        answered = {r["tool_call_id"] for r in self.results}
        for call in self.calls:
            if call["id"] not in answered:
                if call["id"] == self.running:
                    reason = (
                        INTERRUPTED_RUNNING if user else f"{how} while this tool call was running"
                    )
                else:
                    reason = (
                        INTERRUPTED_PENDING if user else f"not executed: the tool batch was {how}"
                    )
                self.results.append(synthetic_result(call["id"], reason))
        self.running = None
        return self.results


def execute_batch(
    progress: BatchProgress,
    registry: ToolRegistry,
    *,
    emit: EventCallback,
    on_start: Callable[[], object],
    max_output_chars: int,
    asks: Callable[[str], bool] = lambda name: False,
) -> list[dict[str, Any]]:
    """Run every call of ``progress.calls``; return the ``tool`` messages.

    Parameters
    ----------
    progress : BatchProgress
        Filled as calls finish.
    registry : ToolRegistry
        Where tools are looked up (an unknown name is an error result).
    emit : callable
        Receives :class:`ToolCallStart` and :class:`ToolCallEnd`.
    on_start : callable
        Called as each call starts (the agent counts session tool calls there).
    max_output_chars : int
        Each result is cut to this many code points.
    asks : callable, optional
        ``asks(name)``: whether a call of that tool will wait for the user's approval
        (told to the front end with :class:`ToolCallStart`).

    Raises
    ------
    BaseException
        Whatever interrupted the batch (``KeyboardInterrupt``...); tool failures
        themselves are results, not exceptions.
    """
    for call in progress.calls:
        call_id, function = call["id"], call.get("function") or {}
        name, arguments = str(function.get("name", "")), str(function.get("arguments", ""))
        emit(ToolCallStart(call_id, name, arguments, asks=asks(name)))
        progress.running = call_id
        on_start()
        try:
            outcome = registry.invoke(name, arguments)
        except ApprovalInterrupted:  # declined at the question: refused, never ran
            declined = to_message_dict({"role": "tool", "tool_call_id": call_id,
                                        "content": DECLINED_BY_INTERRUPT})
            progress.results.append(declined)
            progress.running = None
            with contextlib.suppress(Exception):  # the interrupt is what propagates
                emit(ToolCallEnd(call_id, name, declined["content"], False))
            raise
        except ToolInterrupted as exc:  # keep what it printed: on screen and for the model
            if exc.output:
                kept = synthetic_result(call_id, f"{INTERRUPTED_RUNNING}; it had printed:\n"
                                                 f"{truncate(exc.output, max_output_chars)}")
                progress.results.append(to_message_dict(kept))
                progress.running = None
                with contextlib.suppress(Exception):  # the interrupt is what propagates
                    emit(ToolCallEnd(call_id, name, kept["content"], False))
            raise
        text = truncate(outcome.text, max_output_chars)
        result: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": text}
        if outcome.figures:  # references of the figures it made
            result["figures"] = list(outcome.figures)
        message = to_message_dict(result)
        progress.results.append(message)
        progress.running = None
        emit(ToolCallEnd(call_id, name, message["content"], outcome.ok))
    return progress.results
