"""How turns end when they do not end normally: cut-off replies, interrupted streams
(still counted), model errors (still summarized)."""

from __future__ import annotations

import pytest

from jupyter_agent.agent.config import Limits
from jupyter_agent.errors import ModelError
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer
from tests.agent.helpers import (
    Recorder,
    interrupt_on_second_delta,
    make_agent,
    read_record,
    roles,
    tool_step,
)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])
@pytest.mark.parametrize("reason", ["length", "content_filter"])
def test_a_cut_off_reply_ends_the_turn_and_its_tool_calls_do_not_run(
    model_server: ScriptedModelServer, store: FileStore, reason: str, stream: bool
) -> None:
    ran: list[str] = []

    def probe(text: str) -> str:
        """Record that the tool ran.

        Parameters
        ----------
        text : str
            Anything.
        """
        ran.append(text)
        return "ran"

    model_server.add_steps(
        [tool_step(("probe", {"text": "a"}), ("probe", {"text": "b"}), text="Let me",
                   finish_reason=reason)]
    )
    rec = Recorder()
    agent = make_agent(model_server, store, tools=[probe], stream=stream)
    outcome = agent.run("go", on_event=rec)
    reply = outcome.reply
    assert ran == []  # possibly truncated calls are never executed
    assert outcome.stop_reason == reason
    assert reply.startswith("[jupyter-agent] Stopped:") and f'"{reason}"' in reply
    assert "2 tool call(s) were not run" in reply
    assert rec.of("notice")[-1].text == reply
    saved = read_record(store, agent.conversation.session_id or "")
    assert roles(saved["messages"]) == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [m["content"] for m in saved["messages"][3:5]] == [
        "[jupyter-agent] not executed: the reply was cut off"
    ] * 2
    assert saved["messages"][-1]["content"] == reply
    assert saved["state"]["tool_calls"] == 0
    # The pairs are intact: the strict server accepts the next request.
    model_server.add_steps([{"text": "continuing"}])
    outcome = agent.run("continue")
    assert outcome.reply == "continuing"
    assert outcome.stop_reason is None


def test_a_text_reply_cut_off_at_the_length_limit(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    model_server.add_steps([{"text": "The answer is", "finish_reason": "length"}])
    agent = make_agent(model_server, store)
    outcome = agent.run("long answer please")
    reply = outcome.reply
    assert outcome.stop_reason == "length"
    assert "output token limit" in reply and "not run" not in reply
    saved = read_record(store, agent.conversation.session_id or "")["messages"]
    assert [m["content"] for m in saved[2:]] == ["The answer is", reply]


PRICES = {"priced": (1_000_000.0, 1_000_000.0)}  # $1 per token in and out


def test_an_interrupted_stream_is_still_counted_and_priced(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    model_server.add_steps([{"text": "word " * 40, "chunk_delay": 0.01}])
    agent = make_agent(model_server, store, model="priced", prices=PRICES)
    with pytest.raises(KeyboardInterrupt) as info:
        agent.run("talk", on_event=interrupt_on_second_delta())
    usage = agent.conversation.state.usage
    assert usage.calls == 1
    assert usage.input_tokens > 0  # estimated from the request
    partial = agent.conversation.messages[-1]["content"].split("\n\n")[0]
    assert usage.output_tokens == len(partial) // 4
    assert usage.cost_usd == pytest.approx(usage.input_tokens + usage.output_tokens)
    assert info.value.outcome.usage == usage  # type: ignore[attr-defined]
    assert info.value.outcome.stop_reason == "interrupted"  # type: ignore[attr-defined]
    saved = read_record(store, agent.conversation.session_id or "")["state"]["usage"]
    assert saved["calls"] == 1 and saved["cost_usd"] == pytest.approx(usage.cost_usd)


def test_repeated_ctrl_c_cannot_get_around_max_cost(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    model_server.add_steps([{"text": "word " * 40, "chunk_delay": 0.01}] * 2)
    agent = make_agent(
        model_server, store, model="priced", prices=PRICES, limits=Limits(max_cost_usd=1.0)
    )
    with pytest.raises(KeyboardInterrupt):
        agent.run("talk", on_event=interrupt_on_second_delta())
    requests = len(model_server.requests)
    outcome = agent.run("again")
    reply = outcome.reply
    assert outcome.stop_reason == "max_cost_usd" and "max_cost_usd" in reply
    assert len(model_server.requests) == requests  # no further model call was made


def test_cached_prompt_tokens_are_priced_at_the_cache_rate(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    usage = {"prompt_tokens": 1_000_000, "completion_tokens": 0, "cached_tokens": 500_000}
    model_server.add_steps([{"text": "a", "usage": usage}, {"text": "b", "usage": usage}])
    agent = make_agent(model_server, store, model="gpt-4o")
    agent.run("cached")
    # gpt-4o: $2.50 / M input, $1.25 / M cached input
    assert agent.conversation.state.usage.cost_usd == pytest.approx(0.5 * 2.5 + 0.5 * 1.25)
    prefixed = make_agent(model_server, store, model="openai/gpt-4o")
    prefixed.run("provider-prefixed name")
    assert not prefixed.conversation.state.usage.price_unknown
    assert prefixed.conversation.state.usage.cost_usd == pytest.approx(0.5 * 2.5 + 0.5 * 1.25)


@pytest.mark.parametrize("ending", ["model_error", "interrupt"])
def test_the_fallback_summary_is_written_when_a_turn_fails(
    model_server: ScriptedModelServer, store: FileStore, ending: str
) -> None:
    if ending == "model_error":
        model_server.add_steps([{"error": {"status": 400, "message": "bad request"}}])
    else:
        model_server.add_steps([{"text": "word " * 40, "chunk_delay": 0.01}])
    agent = make_agent(model_server, store)
    expected: type[BaseException] = ModelError if ending == "model_error" else KeyboardInterrupt
    with pytest.raises(expected):
        agent.run("analyse the penguins", on_event=interrupt_on_second_delta())
    summary = store.load_session(agent.conversation.session_id or "").summary
    assert summary.startswith("user: analyse the penguins")
