"""The real-model tier: conversations against a real OpenAI-compatible server.

Skipped unless ``JUPYTER_AGENT_TEST_SERVER`` names the server's base URL, e.g. a
llama.cpp ``llama-server`` serving SmolLM2-135M-Instruct with a 4096-token window, as
``tools/llama_server.sh`` builds and starts it::

    tools/llama_server.sh 8765 4096 &
    JUPYTER_AGENT_TEST_SERVER=http://127.0.0.1:8765/v1 pytest -s -m realmodel tests/realmodel

``-s`` prints the transcript. A model that small answers loosely and makes no useful tool
calls: the tier proves the protocol (window learned, requests kept under it by
compaction, streaming, usage, tool schemas accepted), not the model's skill.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import openai
import pytest

from jupyter_agent.agent.adapters import ChatModel, ModelReply, PartialReply, TextCallback
from jupyter_agent.agent.config import AgentConfig
from jupyter_agent.agent.events import AgentEvent, Notice
from jupyter_agent.agent.loop import Agent
from jupyter_agent.store import FileStore

URL = os.environ.get("JUPYTER_AGENT_TEST_SERVER", "")
MODEL = os.environ.get("JUPYTER_AGENT_TEST_MODEL", "smollm2")

pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(3600),  # a slow CPU model
              pytest.mark.skipif(not URL, reason="JUPYTER_AGENT_TEST_SERVER is not set")]

TABLE = """species,island,bill_length_mm,flipper_length_mm,body_mass_g
Adelie,Torgersen,39.1,181,3750
Adelie,Biscoe,37.8,174,3400
Chinstrap,Dream,46.5,192,3500
Gentoo,Biscoe,46.1,211,4500
Gentoo,Biscoe,50.0,230,5700
"""
PROMPTS = [
    "Here is a small table of penguins:\n" + TABLE + "Which species has the longest bills?",
    "Which island appears most often in that table?",
    "Describe in two sentences how flipper length relates to body mass here.",
    "Suggest one plot to show body mass by species, and say why.",
    "The same table again, with one more row:\n" + TABLE + "Adelie,Dream,40.3,195,3250\n"
    "How many Adelie penguins are there now?",
    "What is a fair way to compare bill lengths between species with so few rows?",
    "Name two columns you would standardise before clustering, and why.",
    "Write one sentence a biologist could put in a report about this data.",
    "What would you check first if body_mass_g had missing values?",
    "Summarise our conversation so far in three short bullet points.",
]


class WithoutTools:
    """The model with no tools offered: a plain chat (tool calls disabled)."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.api, self.name, self.base_url = model.api, model.name, model.base_url
        self.client = model.client

    def respond(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *,
                stream: bool, partial: PartialReply,
                on_text: TextCallback | None = None) -> ModelReply:
        return self.model.respond(messages, [], stream=stream, partial=partial,
                                  on_text=on_text)


def _model() -> ChatModel:
    client = openai.OpenAI(base_url=URL, api_key="not-needed", max_retries=0, timeout=300)
    return ChatModel(client, MODEL, params={"max_tokens": 300, "temperature": 0},
                     key_env=None)


def _converse(agent: Agent, prompts: list[str]) -> list[str]:
    notices: list[str] = []

    def on_event(event: AgentEvent) -> None:
        if isinstance(event, Notice):
            notices.append(event.text)
            print(f"   [notice] {event.text}")

    print(f"\nwindow: {agent.window.tokens:,} tokens, {agent.window.origin}")
    for i, prompt in enumerate(prompts, 1):
        start = time.monotonic()
        # the table goes with every prompt, so that ten turns outgrow a 4k window
        outcome = agent.run(f"{prompt}\n\n(The data again, for reference:\n{TABLE * 3})",
                            on_event=on_event)
        reply, usage = outcome.reply, outcome.usage
        print(f"-- turn {i}: {prompt[:70]!r}{'...' if len(prompt) > 70 else ''}")
        print(f"   reply ({time.monotonic() - start:.1f} s, {usage.input_tokens} in / "
              f"{usage.output_tokens} out, context ~{agent.conversation.estimated_tokens():,}/"
              f"{agent.window.tokens:,}): {reply[:300]!r}")
        assert isinstance(reply, str)
    return notices


def test_ten_turns_without_tools_stay_under_the_window(tmp_path: Any) -> None:
    store = FileStore(tmp_path / "store")
    agent = Agent(WithoutTools(_model()), store=store, config=AgentConfig(approve="deny"))
    with agent:
        assert agent.window.source == "server"  # llama.cpp said its window
        notices = _converse(agent, PROMPTS)
        record = store.load_session(agent.conversation.session_id or "")
    assert any(n.startswith("compacted ") for n in notices), notices
    assert record.compactions and record.state.usage.calls >= 10
    print(f"session: {record.state.usage.calls} model calls, {len(record.compactions)} "
          f"compaction(s), {record.state.usage.input_tokens:,} tokens in / "
          f"{record.state.usage.output_tokens:,} out")


def test_ten_turns_with_run_python_offered(tmp_path: Any) -> None:
    store = FileStore(tmp_path / "store")
    agent = Agent(_model(), store=store,
                  config=AgentConfig(approve="auto", limits=_limits()))
    prompts = ["Use run_python to compute 17 * 23 and tell me the result.",
               *PROMPTS[1:]]
    with agent:
        notices = _converse(agent, prompts)
        record = store.load_session(agent.conversation.session_id or "")
    calls = [c["function"]["name"] for m in record.transcript if m.get("role") == "assistant"
             for c in m.get("tool_calls") or []]
    print(f"tool calls the model made: {calls or 'none'}; notices: {len(notices)}")
    assert record.state.usage.calls >= 10


def _limits() -> Any:
    from jupyter_agent.agent.config import Limits

    return Limits(max_iterations=4)  # a small model may call tools in a loop


def test_a_window_set_too_large_is_corrected_by_the_servers_refusal(tmp_path: Any) -> None:
    store = FileStore(tmp_path / "store")
    agent = Agent(WithoutTools(_model()), store=store,
                  config=AgentConfig(approve="deny", context_window=100_000))
    with agent:
        assert agent.window.source == "setting"
        notices = _converse(agent, PROMPTS)
        assert agent.window.tokens == 4096 and agent.window.source == "refusal"
    refusals = [n for n in notices if "refused the request as too long" in n]
    print(f"refusals: {refusals}")
    assert refusals and any(n.startswith("compacted ") for n in notices)
