"""Helpers of the artefact tests (``from tests.artefacts.helpers import ...``).

:func:`run_turns` drives a real :class:`~jupyter_agent.agent.Agent` against a
``ScriptedModelServer`` and snapshots what the session looked like after each turn,
so a fork cut after turn N can be compared with the parent as it really was then.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jupyter_agent.agent.working_context import SUMMARIZER_PROMPT
from jupyter_agent.store import FileStore, SessionState
from jupyter_agent.testing import ScriptedModelServer
from tests.agent.helpers import make_agent, tool_step

__all__ = ["ANALYSIS", "Snapshot", "router", "run_turns", "tool_step"]


@dataclass(frozen=True)
class Snapshot:
    """The parent session right after one turn."""

    messages: list[dict[str, Any]]
    state: SessionState
    summary: str
    compactions: int


def router(steps: Sequence[Any], summary: str = "- earlier work summarised") -> Callable[..., Any]:
    """A step function answering summarizing requests with ``summary`` and every other
    request with the next of ``steps`` (so compactions can happen anywhere)."""
    queue = list(steps)

    def step(body: dict[str, Any]) -> Any:
        first = body["messages"][0]
        if first.get("role") == "system" and first.get("content") == SUMMARIZER_PROMPT:
            return {"text": summary}
        return queue.pop(0)

    return step


#: Four turns of an analysis: a plan on the todo list, code, a retried item, a reply.
ANALYSIS: list[tuple[str, list[Any]]] = [
    ("Plan the analysis of the numbers 1 to 10.", [
        tool_step(("add_todo", {"text": "Sum the numbers"}),
                  ("add_todo", {"text": "Mean of the numbers"}),
                  ("write_scratchpad", {"text": "numbers = 1..10"})),
        {"text": "The plan is on the todo list."},
    ]),
    ("Work through the first item.", [
        tool_step(("update_todo", {"id": 1, "status": "in_progress"}),
                  ("run_python", {"code": "numbers = list(range(1, 11))\nsum(numbers)"})),
        tool_step(("update_todo", {"id": 1, "status": "done"}),
                  ("write_scratchpad", {"text": "sum = 55", "append": True}),
                  ("write_summary", {"goal": "Numbers", "completed": "sum",
                                     "decisions": "none", "remaining": "mean"})),
        {"text": "The sum is 55."},
    ]),
    ("Now the mean, please.", [
        tool_step(("update_todo", {"id": 2, "status": "in_progress"}),
                  ("run_python", {"code": "mean = sum(nums) / len(nums)"})),
        tool_step(("update_todo", {"id": 2, "status": "failed"}),
                  ("run_python", {"code": "mean = sum(numbers) / len(numbers)\nprint(mean)"})),
        tool_step(("update_todo", {"id": 2, "status": "done"}),
                  ("write_summary", {"goal": "Numbers", "completed": "sum and mean",
                                     "decisions": "none", "remaining": "nothing"})),
        {"text": "The mean is 5.5 (one retry)."},
    ]),
    ("Anything else worth noting?", [
        {"text": "No: the numbers are evenly spaced, so the mean is the midpoint."},
    ]),
]


def run_turns(server: ScriptedModelServer, store: FileStore,
              turns: Sequence[tuple[str, list[Any]]] = ANALYSIS,
              **agent_options: Any) -> tuple[str, list[Snapshot]]:
    """Run ``turns`` with a real agent; return the session ID and a snapshot per turn."""
    steps = [step for _, answers in turns for step in answers]
    route = router(steps)
    server.add_steps([route] * (len(steps) + 20))
    snapshots: list[Snapshot] = []
    with make_agent(server, store, **agent_options) as agent:
        for prompt, _ in turns:
            agent.run(prompt)
            record = store.load_session(str(agent.conversation.session_id))
            conversation = agent.conversation
            snapshots.append(Snapshot(list(conversation.messages),
                                      conversation.state.model_copy(deep=True),
                                      record.summary, len(record.compactions)))
        return str(agent.conversation.session_id), snapshots
