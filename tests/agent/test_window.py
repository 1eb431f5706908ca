"""The context window: learned from the endpoint or its refusal, kept to, said.

The model is the scripted server on loopback playing llama.cpp, vLLM or Ollama (a window
reported their way, refusals in their shape, Ollama's silent truncation); the client is
the real ``openai`` client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_agent.agent.config import AgentConfig
from jupyter_agent.agent.endpoint import ContextWindow, probe_window, refused_window
from jupyter_agent.agent.events import Notice
from jupyter_agent.agent.loop import Agent
from jupyter_agent.agent.working_context import (
    SHORT_SYSTEM_PROMPT,
    SUMMARIZER_PROMPT,
    SUMMARY_MARKER,
)
from jupyter_agent.errors import PromptTooLongError
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModel, ScriptedModelServer
from jupyter_agent.testing.wire import estimate_prompt_tokens
from tests.agent.helpers import Recorder, make_agent

WORDS = "The penguins of the Palmer archipelago differ in bill length and flipper size. "


def _answers(reply_chars: int = 600) -> Any:
    """A callable step: a summary for the summarizing call, else a reply of about
    ``reply_chars`` characters naming the request's turn."""
    def step(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        if messages[0]["content"] == SUMMARIZER_PROMPT:
            return {"text": "- the user asked about penguins; answers were given"}
        return {"text": f"answer {len(messages)}: " + (WORDS * 10)[:reply_chars]}
    return step


def _chat(server: ScriptedModelServer) -> list[Any]:
    return [x for x in server.exchanges if x.path == "/v1/chat/completions"]


@pytest.mark.parametrize("play", ["llama.cpp", "vllm", "ollama"])
def test_each_server_reports_its_window_the_way_it_does(play: str) -> None:
    with ScriptedModelServer(play=play, context_window=4096) as server:
        assert probe_window(server.base_url, "scripted") == 4096
        agent = make_agent(server, None)
        assert agent.window == ContextWindow(4096, "server")


def test_a_server_that_says_nothing_leaves_genai_prices_then_a_default() -> None:
    with ScriptedModelServer() as server:
        assert probe_window(server.base_url, "scripted") is None
        assert make_agent(server, None).window == ContextWindow(8192, "default")
        assert make_agent(server, None, model="gpt-4o-mini").window == ContextWindow(
            128_000, "genai-prices")
    assert probe_window("http://127.0.0.1:9/v1", "x") is None  # nothing listens: silent
    # the OpenAI API itself keeps the large default for unknown models (never probed)
    assert make_agent(ScriptedModel(), None).window == ContextWindow(128_000, "default")


def test_the_setting_beats_what_the_server_reports() -> None:
    with ScriptedModelServer(play="llama.cpp", context_window=4096) as server:
        agent = make_agent(server, None, context_window=16_000)
        assert agent.window == ContextWindow(16_000, "setting")
        agent.reconfigure(config=AgentConfig(approve="auto"))
        assert agent.window == ContextWindow(4096, "server")


def test_hostile_window_reports_are_ignored() -> None:
    from jupyter_agent.agent.endpoint import _listed, _ollama, _props

    for value in ("4096", -1, 0, 10**12, True, 3.5, None, [4096]):
        assert _listed({"data": [{"id": "m", "max_model_len": value}]}, "m") is None
        assert _props({"default_generation_settings": {"n_ctx": value}}, "m") is None
        assert _ollama({"model_info": {"x.context_length": value}}, "m") is None
    assert _listed({"data": "junk"}, "m") is None and _listed([1, 2], "m") is None
    assert _ollama({"parameters": "num_ctx 99999999999\n"}, "m") is None
    # LM Studio's /api/v0/models shape
    assert _listed({"data": [{"id": "m", "max_context_length": 32768}]}, "m") == 32768
    # a list of several models: only the named one counts
    assert _listed({"data": [{"id": "a", "max_model_len": 2048},
                             {"id": "b", "max_model_len": 4096}]}, "b") == 4096


def test_refusals_name_the_window() -> None:
    llama = "request (4160 tokens) exceeds the available context size (4096 tokens), try " \
            "increasing it"
    assert refused_window(400, llama, "400", "exceed_context_size_error", 4096) == 4096
    assert refused_window(400, llama) == 4096
    assert refused_window(400, "This model's maximum context length is 4096 tokens. However, "
                               "you requested 4200 tokens") == 4096
    assert refused_window(400, "too long", "context_length_exceeded") == 0
    assert refused_window(400, "unknown field temperature") is None
    assert refused_window(500, llama) is None


def test_ten_turns_against_llama_cpp_with_a_4k_window_compact_and_never_fail(
    store: FileStore,
) -> None:
    with ScriptedModelServer([_answers()] * 40, play="llama.cpp",
                             context_window=4096) as server:
        agent = make_agent(server, store)
        replies = [agent.run(f"turn {i}: tell me more. " + WORDS * 8).reply for i in range(10)]
        agent.conversation.close()
        chat = _chat(server)
    assert all(reply.startswith("answer ") for reply in replies)
    assert [x.status for x in chat] == [200] * len(chat)  # no refusal
    assert all(estimate_prompt_tokens(x.request) <= 4096 for x in chat)
    assert any(x.request["messages"][0]["content"] == SUMMARIZER_PROMPT for x in chat)
    assert agent.window == ContextWindow(4096, "server")
    # a small window gets the short system prompt and only the core tools
    request = chat[-1].request
    assert request["messages"][0]["content"] == SHORT_SYSTEM_PROMPT
    assert [t["function"]["name"] for t in request["tools"]] == [
        "run_python", "list_variables", "describe_variable"]
    record = store.load_session(agent.conversation.session_id or "")
    assert record.compactions and SUMMARY_MARKER in str(record.messages[1]["content"])
    assert record.state.context_window == 4096  # saved with the session
    assert record.state.context_window_source == "server"


def test_a_refusal_teaches_the_window_then_the_turn_compacts_and_goes_on(
    store: FileStore,
) -> None:
    refusal = {"error": {"status": 400, "type": "exceed_context_size_error",
                         "message": "request (4900 tokens) exceeds the available context "
                                    "size (4096 tokens), try increasing it"}}
    with ScriptedModelServer([_answers()] * 4) as server:  # reports no window: 8k assumed
        agent = make_agent(server, store)
        for i in range(4):
            agent.run(f"turn {i}: " + WORDS * 12)
        server.add_steps([refusal, _answers(), _answers()])
        events = Recorder()
        reply = agent.run("and now? " + WORDS * 4, on_event=events).reply
        chat = _chat(server)
    assert reply.startswith("answer ")
    notices = [e.text for e in events.events if isinstance(e, Notice)]
    assert any("refused the request as too long for its 4,096-token context window" in n
               for n in notices)
    assert any(n.startswith("compacted ") for n in notices)
    assert agent.window == ContextWindow(4096, "refusal")
    refused, summarize, retried = chat[-3:]
    assert refused.status == 400 and summarize.request["messages"][0]["content"] == \
        SUMMARIZER_PROMPT
    assert estimate_prompt_tokens(retried.request) < estimate_prompt_tokens(refused.request)
    state = store.load_session(agent.conversation.session_id or "").state
    assert (state.context_window, state.context_window_source) == (4096, "refusal")
    agent.conversation.close()
    # the saved window is a hint for the same endpoint and model only
    resumed = Agent(agent.model, store=store, session_id=agent.conversation.session_id,
                    config=AgentConfig(approve="auto"))
    assert resumed.window == ContextWindow(4096, "refusal")
    resumed.conversation.close()


def test_a_saved_window_never_counts_for_another_endpoint(store: FileStore) -> None:
    with ScriptedModelServer([_answers()]) as server:
        agent = make_agent(server, store)
        agent.run("hi")
        agent.conversation.close()
        record = store.load_session(agent.conversation.session_id or "")
        state = record.state.model_copy(update={
            "context_window": 1_000, "context_window_source": "refusal",
            "context_window_of": "scripted at http://evil.example/v1"})
        store.save(agent.conversation.session_id or "", state=state)
        resumed = Agent(agent.model, store=store, session_id=agent.conversation.session_id)
        assert resumed.window == ContextWindow(8192, "default")
        resumed.conversation.close()


def test_vllm_refusal_beats_a_setting_that_is_too_large(store: FileStore) -> None:
    with ScriptedModelServer([_answers()] * 30, play="vllm", context_window=2048) as server:
        agent = make_agent(server, store, context_window=100_000)
        for i in range(6):
            assert agent.run(f"turn {i}: " + WORDS * 6).reply.startswith("answer ")
        chat = _chat(server)
        agent.conversation.close()
    assert [x.status for x in chat].count(400) == 1  # learnt once, kept to after
    assert agent.window == ContextWindow(2048, "refusal")


def test_a_prompt_that_cannot_fit_says_the_window_and_how_to_raise_it(
    store: FileStore,
) -> None:
    with ScriptedModelServer([_answers()], play="llama.cpp", context_window=4096) as server:
        agent = make_agent(server, store)
        with pytest.raises(PromptTooLongError) as info:
            agent.run(WORDS * 250)
        assert _chat(server) == []
        agent.conversation.close()
    text = str(info.value)
    assert "4,096-token context window" in text and "nothing was sent or saved" in text
    assert "--context-window" in text and "-c N" in text and "num_ctx" in text
    assert "check the model name" not in text and "\n" not in text


def test_ollama_truncates_silently_but_the_agent_stays_under_its_window(
    store: FileStore,
) -> None:
    with ScriptedModelServer([_answers()] * 40, play="ollama", context_window=2048) as server:
        blind = make_agent(server, None, context_window=200_000)  # a wrong setting
        for i in range(3):
            blind.run(f"turn {i}: " + WORDS * 10)
        assert max(x.dropped for x in _chat(server)) > 0  # the model lost the start
        server.clear_requests()
        agent = make_agent(server, store)
        assert agent.window == ContextWindow(2048, "server")
        for i in range(10):
            agent.run(f"turn {i}: " + WORDS * 5)
        assert [x.dropped for x in _chat(server)] == [0] * len(_chat(server))
        agent.conversation.close()


def test_usage_and_the_footer_say_where_the_window_came_from(
    shell: InteractiveShell, memory_dir: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    with ScriptedModelServer([_answers()] * 3, play="llama.cpp", context_window=4096) as server:
        shell.run_line_magic("config", f'AgentMagics.base_url = "{server.base_url}"')
        shell.run_line_magic("agent_new", "")
        shell.run_line_magic("agent", "hello")
        footer = capsys.readouterr().out
        assert "context ~" in footer and "/4,096 (server)" in footer
        shell.run_line_magic("agent_usage", "")
        usage = capsys.readouterr().out
        assert "of 4,096 tokens; the window is reported by the server" in usage
        shell.run_line_magic("agent_new", "--context-window 6000")
        shell.run_line_magic("agent_usage", "")
        assert "of 6,000 tokens; the window is set by context_window" in capsys.readouterr().out


def test_a_hostile_server_cannot_choose_a_window_or_hold_the_probe() -> None:
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Hostile(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            if self.path.endswith("/models"):  # far more than a probe reads
                data = json.dumps({"data": [{"id": "m", "max_model_len": 4096,
                                             "pad": "x" * 2_000_000}]}).encode()
            elif self.path == "/props":
                data = b'{"default_generation_settings": {"n_ctx": "4096; rm -rf /"}}'
            else:
                data = b'{"model_info": {"llama.context_length": 1e300}}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        assert probe_window(url, "m") is None
        assert probe_window(url.replace("http://", "https://"), "m") is None  # no TLS there
    finally:
        server.shutdown()
        server.server_close()
