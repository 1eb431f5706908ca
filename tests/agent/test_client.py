"""Model errors, usage and cost accounting, the client factory."""

from __future__ import annotations

import socket

import openai
import pytest

from jupyter_agent.agent import context_window_for, price_call
from jupyter_agent.agent import make_client as factory
from jupyter_agent.errors import ModelError, ModelNotConfiguredError
from jupyter_agent.store import SessionStore
from jupyter_agent.testing import ScriptedModelServer
from tests.agent.helpers import make_agent, make_client, read_record, roles


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connection_refused_is_a_model_error_and_the_prompt_stays_saved(
    model_server: ScriptedModelServer, store: SessionStore
) -> None:
    dead = openai.OpenAI(
        base_url=f"http://127.0.0.1:{_unused_port()}/v1", api_key="test", max_retries=0
    )
    agent = make_agent(model_server, store)
    agent.client = dead
    with pytest.raises(ModelError) as info:
        agent.run("are you there?")
    assert info.value.status_code is None
    assert "could not be reached" in str(info.value)
    saved = read_record(store, agent.session_id or "")
    assert roles(saved["messages"]) == ["system", "user"]
    assert saved["messages"][1]["content"] == "are you there?"

    agent.client = make_client(model_server)
    model_server.add_steps([{"text": "back"}])
    assert agent.run("again") == "back"
    assert [m["content"] for m in model_server.requests[0]["messages"][1:]] == [
        "are you there?",
        "again",
    ]


def test_wrong_api_key_is_a_401_model_error(store: SessionStore) -> None:
    with ScriptedModelServer([{"text": "never"}], require_api_key="right-key") as server:
        agent = make_agent(server, store)  # the client sends "test"
        with pytest.raises(ModelError) as info:
            agent.run("hi")
    assert info.value.status_code == 401
    assert "rejected the API key" in str(info.value)
    assert "Incorrect API key" in str(info.value)


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (429, "rate limited"),
        (500, "failed (500)"),
        (503, "failed (503)"),
        (400, "rejected the request"),
    ],
)
def test_error_statuses_map_to_model_errors(
    model_server: ScriptedModelServer, store: SessionStore, status: int, words: str
) -> None:
    model_server.add_steps(
        [{"error": {"status": status, "message": f"boom {status}"}}, {"text": "recovered"}]
    )
    agent = make_agent(model_server, store)
    with pytest.raises(ModelError) as info:
        agent.run("first")
    assert info.value.status_code == status
    assert words in str(info.value) and f"boom {status}" in str(info.value)
    assert agent.run("second") == "recovered"
    assert roles(agent.messages) == ["system", "user", "user", "assistant"]


def test_rate_limit_after_the_clients_own_retries(store: SessionStore) -> None:
    retry_fast = {"retry-after-ms": "1"}
    steps = [{"error": {"status": 429, "message": "slow down", "headers": retry_fast}}] * 2
    with ScriptedModelServer([*steps, {"text": "finally"}]) as server:
        from jupyter_agent.agent import Agent

        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=1)
        agent = Agent(client, "scripted", store=store, approval="auto")
        with pytest.raises(ModelError) as info:
            agent.run("hi")
        assert info.value.status_code == 429
        assert len(server.requests) == 2  # the client retried once before giving up
        assert agent.run("hi again") == "finally"


def test_known_model_is_priced_from_genai_prices(
    model_server: ScriptedModelServer, store: SessionStore
) -> None:
    model_server.add_steps(
        [{"text": "hi", "usage": {"prompt_tokens": 2000, "completion_tokens": 500}}]
    )
    agent = make_agent(model_server, store, model="gpt-4o-mini")
    agent.run("price me")
    usage = agent.state.usage
    assert (usage.input_tokens, usage.output_tokens, usage.calls) == (2000, 500, 1)
    # gpt-4o-mini: $0.15 per million input tokens, $0.60 per million output tokens
    assert usage.cost_usd == pytest.approx((2000 * 0.15 + 500 * 0.60) / 1e6)
    assert not usage.price_unknown
    saved = read_record(store, agent.session_id or "")["state"]["usage"]
    assert saved["cost_usd"] == pytest.approx(usage.cost_usd)


def test_price_override_and_unknown_price(
    model_server: ScriptedModelServer, store: SessionStore
) -> None:
    step = {"text": "x", "usage": {"prompt_tokens": 1_000_000, "completion_tokens": 2_000_000}}
    model_server.add_steps([step, step])
    priced = make_agent(model_server, store, model="in-house", prices={"in-house": (1.5, 2.0)})
    priced.run("a")
    assert priced.state.usage.cost_usd == pytest.approx(1.5 + 4.0)
    unknown = make_agent(model_server, store, model="in-house")
    unknown.run("b")
    assert unknown.state.usage.cost_usd == 0.0
    assert unknown.state.usage.price_unknown
    assert read_record(store, unknown.session_id or "")["state"]["usage"]["price_unknown"]


def test_price_call_and_context_windows() -> None:
    assert price_call("gpt-4o-mini", 1_000_000, 0) == (pytest.approx(0.15), True)
    assert price_call("gpt-4o-mini", 10, 10, {"gpt-4o-mini": (0.0, 0.0)}) == (0.0, True)
    assert price_call("no-such-model-xyz", 10, 10) == (0.0, False)
    assert context_window_for("gpt-4o-mini") == 128_000
    assert context_window_for("no-such-model-xyz") == 128_000
    assert context_window_for("gpt-3.5-turbo") == 16_385


def test_client_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelNotConfiguredError):
        factory()
    client = factory(base_url="http://127.0.0.1:1/v1")
    assert str(client.base_url).startswith("http://127.0.0.1:1/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert factory().api_key == "sk-from-env"


def test_connection_dropped_mid_stream_is_a_model_error_and_the_prompt_stays_saved(
    store: SessionStore,
) -> None:
    import threading

    server = ScriptedModelServer([{"text": "word " * 60, "chunk_delay": 0.05}]).start()
    try:
        agent = make_agent(server, store)
        threading.Timer(0.3, server.stop).start()  # the server goes away while streaming
        with pytest.raises(ModelError) as info:
            agent.run("a long answer, please")
        assert info.value.status_code is None
    finally:
        server.stop()
    saved = read_record(store, agent.session_id or "")
    assert saved["messages"][1] == {"role": "user", "content": "a long answer, please"}
    server.start()
    server.add_steps([{"text": "short this time"}])
    assert agent.run("again") == "short this time"
