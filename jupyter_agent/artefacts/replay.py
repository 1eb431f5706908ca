"""The checkpointed state of a session as it stood after an earlier turn.

A session keeps only its latest checkpoint. The scratchpad, the todo list
and the model-written summary change only through the built-in tools
``write_scratchpad``, ``add_todo``, ``update_todo`` and ``write_summary``, whose calls
and results are all in the transcript. So the state after turn N is rebuilt by running
those calls of turns 1 to N again, in order, through the agent's own tool functions, on
an empty state: the tools are deterministic, so the result is the state the session had
then. Nothing else runs: ``run_python`` and every other tool are skipped.

The tool-call count is rebuilt by the rule resuming uses
(:func:`jupyter_agent.agent.reconcile.tool_calls_run`): a call counts unless its result
says it never ran (``[jupyter-agent] not executed ...``, or refused by the approval
policy). A call that was interrupted or whose result is unknown is counted but not
replayed; a call that never ran is neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from jupyter_agent.artefacts.turns import SYNTHETIC_PREFIX, call_results
from jupyter_agent.store import SessionState, Usage
from jupyter_agent.store.messages import message_text

__all__ = ["STATE_TOOLS", "ReplayedState", "replay_state"]

STATE_TOOLS = ("write_scratchpad", "add_todo", "update_todo", "write_summary")
"""The built-in tools whose calls change the checkpointed state or the summary."""


@dataclass(frozen=True)
class ReplayedState:
    """What :func:`replay_state` rebuilt.

    Attributes
    ----------
    state : SessionState
        Scratchpad, todos and tool-call count as of the end of the messages; usage,
        model and endpoint as given.
    summary : str
        The last summary written with ``write_summary`` in the messages ("" if none).
    """

    state: SessionState
    summary: str


class _SummaryRecorder:
    """Stands in for the store where ``write_summary`` saves: keeps the last text."""

    def __init__(self) -> None:
        self.summary = ""

    def update(self, session_id: str, *, summary: str) -> None:
        self.summary = summary


def replay_state(
    messages: Sequence[dict[str, Any]], *, usage: Usage, model: str = "", base_url: str = ""
) -> ReplayedState:
    """Rebuild the checkpoint of a session from (a prefix of) its transcript.

    Parameters
    ----------
    messages : sequence of dict
        The transcript up to the point of interest (e.g. the end of a user turn).
    usage : Usage
        Copied into the state as it is: usage is not recorded per turn.
    model, base_url : str
        The model and endpoint to record in the state.

    Returns
    -------
    ReplayedState
    """
    from jupyter_agent.agent.builtin_tools import BuiltinTools
    from jupyter_agent.agent.reconcile import NOT_RUN_PREFIXES, tool_calls_run
    from jupyter_agent.agent.tools import MemoryContext, tool_from_function

    state = SessionState(usage=usage.model_copy(), model=model, base_url=base_url)
    recorder = _SummaryRecorder()
    tools = BuiltinTools(lambda: state, approval="deny")
    tools.memory = MemoryContext(cast(Any, recorder), "replay")
    replayable = {name: tool_from_function(getattr(tools, name)) for name in STATE_TOOLS}
    results = call_results(messages)
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            result = results.get(str(call.get("id")))
            if result is None:
                continue
            text = message_text(result)
            if text.startswith(NOT_RUN_PREFIXES):
                continue
            function = call.get("function") or {}
            tool = replayable.get(str(function.get("name")))
            if tool is not None and not text.startswith(SYNTHETIC_PREFIX):
                tool.invoke(str(function.get("arguments") or ""))
    state.tool_calls = tool_calls_run(messages)
    return ReplayedState(state, recorder.summary)
