"""Limits: tool calls and spend per session (across restarts), iterations per turn
(on the in-process scripted model)."""

from __future__ import annotations

import pytest

from jupyter_agent.agent.config import Limits
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModel
from tests.agent.helpers import Recorder, make_agent, read_record, roles, tool_step

# 100 prompt tokens at $1000 per million = $0.10 per call (priced by the override).
PRICES = {"priced-model": (1000.0, 0.0)}
CALL = {"usage": {"prompt_tokens": 100, "completion_tokens": 5}}


def test_max_tool_calls_refuses_the_whole_batch_and_keeps_pairs(
    scripted: ScriptedModel, store: FileStore
) -> None:
    scripted.add_steps(
        [
            tool_step(("add_todo", {"text": "a"}), ("add_todo", {"text": "b"})),
            tool_step(("add_todo", {"text": "c"}), ("add_todo", {"text": "d"})),
        ]
    )
    rec = Recorder()
    agent = make_agent(scripted, store, limits=Limits(max_tool_calls=3))
    outcome = agent.run("go", on_event=rec)
    reply = outcome.reply

    assert outcome.stop_reason == "max_tool_calls"
    assert outcome.limit is not None and (outcome.limit.value, outcome.limit.maximum) == (2, 3)
    assert outcome.tool_calls == 2 and outcome.usage.calls == 2
    assert reply.startswith("[jupyter-agent] Stopped: the session reached max_tool_calls=3")
    # none of the 2nd batch ran
    assert [t.text for t in agent.conversation.state.todos] == ["a", "b"]
    assert agent.conversation.state.tool_calls == 2
    assert len(scripted.requests) == 2
    saved = read_record(store, agent.conversation.session_id or "")
    assert roles(saved["messages"])[-4:] == ["assistant", "tool", "tool", "assistant"]
    assert saved["messages"][-2]["content"] == "[jupyter-agent] not executed: limit reached"
    assert saved["messages"][-1]["content"] == reply
    assert saved["state"]["tool_calls"] == 2
    assert any(e.text == reply for e in rec.of("notice"))

    # The strict server accepts the context; a text turn still works at the limit.
    scripted.add_steps([{"text": "fine"}])
    outcome = agent.run("just talk")
    assert outcome.reply == "fine"
    assert outcome.stop_reason is None


def test_max_tool_calls_counts_calls_made_before_a_restart(
    scripted: ScriptedModel, store: FileStore
) -> None:
    scripted.add_steps([tool_step(("list_todos", {}), ("list_todos", {})), {"text": "ok"}])
    first = make_agent(scripted, store)
    first.run("one")
    scripted.add_steps([tool_step(("list_todos", {}))])
    again = make_agent(
        scripted, store, session_id=first.conversation.session_id, limits=Limits(max_tool_calls=2)
    )
    outcome = again.run("two")
    assert outcome.reply.startswith("[jupyter-agent] Stopped")
    assert outcome.stop_reason == "max_tool_calls"
    assert again.conversation.state.tool_calls == 2


def test_max_cost_usd_stops_and_spend_is_carried_across_a_restart(
    scripted: ScriptedModel, store: FileStore
) -> None:
    scripted.add_steps(
        [
            tool_step(("list_todos", {}), **CALL),
            tool_step(("list_todos", {}), **CALL),
            {"text": "third call", **CALL},
        ]
    )
    limits = Limits(max_cost_usd=0.25)
    first = make_agent(scripted, store, model="priced-model", prices=PRICES, limits=limits)
    outcome = first.run("spend")
    assert outcome.reply == "third call"  # 0.20 < 0.25 before the third call
    assert first.conversation.state.usage.cost_usd == pytest.approx(0.30)
    assert outcome.usage.cost_usd == pytest.approx(0.30)
    assert not first.conversation.state.usage.price_unknown
    served = len(scripted.requests)

    # A restart does not reset the recorded spend: the next turn stops before any call.
    again = make_agent(
        scripted,
        store,
        session_id=first.conversation.session_id,
        model="priced-model",
        prices=PRICES,
        limits=limits,
    )
    assert again.conversation.state.usage.cost_usd == pytest.approx(0.30)
    outcome = again.run("more")
    notice = outcome.reply
    assert outcome.stop_reason == "max_cost_usd"
    assert "max_cost_usd=$0.2500" in notice and "spent $0.3000" in notice
    assert len(scripted.requests) == served
    saved = read_record(store, again.conversation.session_id or "")
    assert saved["messages"][-1]["content"] == notice

    # Limits come from the current options: raising it lets the session go on.
    scripted.add_steps([{"text": "ok", **CALL}])
    raised = make_agent(
        scripted,
        store,
        session_id=first.conversation.session_id,
        model="priced-model",
        prices=PRICES,
        limits=Limits(max_cost_usd=1.0),
    )
    assert raised.run("more").reply == "ok"


def test_max_cost_usd_stops_mid_turn(
    scripted: ScriptedModel, store: FileStore
) -> None:
    scripted.add_steps([tool_step(("list_todos", {}), **CALL)] * 3)
    agent = make_agent(
        scripted, store, model="priced-model", prices=PRICES, limits=Limits(max_cost_usd=0.1)
    )
    outcome = agent.run("go")
    # the first call reached $0.10: its batch is not run, no second call is made
    assert outcome.stop_reason == "max_cost_usd"
    assert len(scripted.requests) == 1
    assert agent.conversation.state.tool_calls == 0
    assert roles(agent.conversation.messages)[-3:] == ["assistant", "tool", "assistant"]


def test_max_iterations_per_turn_restarts_at_zero(
    scripted: ScriptedModel, store: FileStore
) -> None:
    scripted.add_steps([tool_step(("list_todos", {}))] * 2)
    agent = make_agent(scripted, store, limits=Limits(max_iterations=2))
    outcome = agent.run("loop")
    notice = outcome.reply
    assert outcome.stop_reason == "max_iterations"
    assert "max_iterations=2" in notice
    assert len(scripted.requests) == 2
    assert agent.conversation.state.tool_calls == 2  # the second batch ran and was recorded
    assert roles(agent.conversation.messages)[-2:] == ["tool", "assistant"]

    scripted.add_steps([tool_step(("list_todos", {})), {"text": "done"}])
    outcome = agent.run("again")
    assert outcome.reply == "done"  # a new turn gets two more model calls
    assert outcome.stop_reason is None


def test_limits_reject_negative_values() -> None:
    with pytest.raises(ValueError, match="max_tool_calls"):
        Limits(max_tool_calls=-1)
