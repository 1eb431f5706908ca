"""Each checkpoint and each repair point, observed at the one moment only it can explain.

The scripted model's callable steps read the session file while "the model is
thinking", i.e. exactly when the request is made (in process: these tests are about the
loop, not the wire).
"""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_agent.agent.loop import Agent
from jupyter_agent.errors import ModelError
from jupyter_agent.store import FileStore, TodoItem
from jupyter_agent.testing import ScriptedModel
from tests.agent.helpers import make_agent, read_record, roles, tool_step


def test_the_checkpoint_before_the_model_request(
    scripted: ScriptedModel, store: FileStore
) -> None:
    """State changed since the last checkpoint (here: between turns, as a front end may
    do) is on disk when the model request arrives -- only the checkpoint *before* the
    request can have written it (the user-message save point writes messages only)."""
    seen: dict[str, Any] = {}
    agent: Agent | None = None

    def step(body: dict[str, Any]) -> dict[str, Any]:
        seen.update(read_record(store, agent.conversation.session_id or "")["state"])  # type: ignore[union-attr]
        return {"text": "second"}

    scripted.add_steps([{"text": "first"}, step])
    agent = make_agent(scripted, store)
    agent.run("one")
    assert read_record(store, agent.conversation.session_id or "")["state"]["scratchpad"] == ""
    agent.conversation.state.scratchpad = "edited between turns"
    agent.conversation.state.todos.append(TodoItem(id=7, text="added between turns"))
    agent.run("two")
    assert seen["scratchpad"] == "edited between turns"
    assert [t["id"] for t in seen["todos"]] == [7]


def test_the_checkpoint_after_a_tool_batch(
    scripted: ScriptedModel, store: FileStore
) -> None:
    """The batch's todos and scratchpad are on disk when the next call (here the
    compaction request, made before the pre-request checkpoint) fails."""
    seen: dict[str, Any] = {}
    agent: Agent | None = None

    def summarizer(body: dict[str, Any]) -> dict[str, Any]:
        seen.update(read_record(store, agent.conversation.session_id or "")["state"])  # type: ignore[union-attr]
        return {"error": {"status": 500, "message": "summarizer down"}}

    scripted.add_steps(
        [
            {"text": "hello", "usage": {"prompt_tokens": 10, "completion_tokens": 2}},
            tool_step(
                ("add_todo", {"text": "plot bills"}),
                ("write_scratchpad", {"text": "species: 3"}),
                usage={"prompt_tokens": 3000, "completion_tokens": 10},  # past compact_at
            ),
            summarizer,
            {"error": {"status": 400, "message": "model down"}},
        ]
    )
    agent = make_agent(scripted, store, context_window=4000, compact_at=0.5)
    agent.run("hi")
    with pytest.raises(ModelError, match="model down"):
        agent.run("work")
    assert seen["scratchpad"] == "species: 3"
    assert [(t["text"], t["status"]) for t in seen["todos"]] == [("plot bills", "pending")]
    assert seen["tool_calls"] == 2
    state = read_record(store, agent.conversation.session_id or "")["state"]
    assert state["scratchpad"] == "species: 3" and len(state["todos"]) == 1


def test_tool_pairs_are_repaired_before_every_model_call(
    scripted: ScriptedModel,
) -> None:
    """An unanswered call that appears in memory mid-turn (no resume involved) is
    answered before the next request, which the strict server would otherwise reject."""
    agent: Agent | None = None

    def sneak() -> str:
        """Leave an extra, unanswered tool call in the running batch's message."""
        calls = agent.conversation.messages[-1]["tool_calls"]  # type: ignore[union-attr]
        calls.append(
            {"id": "call_sneaky", "type": "function",
             "function": {"name": "list_todos", "arguments": "{}"}}
        )
        return "done"

    scripted.add_steps([tool_step(("sneak", {})), {"text": "accepted"}])
    agent = make_agent(scripted, None, tools=[sneak])
    assert agent.run("go").reply == "accepted"
    sent = scripted.requests[-1]["messages"]
    assert roles(sent) == ["system", "user", "assistant", "tool", "tool"]
    synthetic = next(m for m in sent if m.get("tool_call_id") == "call_sneaky")
    assert synthetic["content"].startswith("[jupyter-agent] not executed")
