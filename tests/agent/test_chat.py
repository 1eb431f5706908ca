"""The Chat Completions model over real HTTP: the request body, model errors, usage."""

from __future__ import annotations

import http.server
import json
import re
import socket
import threading
from typing import Any

import openai
import pytest

from jupyter_agent.agent.adapters import ChatModel, PartialReply
from jupyter_agent.agent.config import price_call
from jupyter_agent.agent.endpoint import DEFAULT_CONTEXT_WINDOW, known_context_window
from jupyter_agent.errors import ModelError
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer
from tests.agent.helpers import (
    SESSION,
    TOOLS,
    make_agent,
    make_client,
    read_record,
    roles,
    tool_step,
)

CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b")
"""A Python exception class name: never part of a user-facing model error."""


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _dead_model() -> ChatModel:
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{_unused_port()}/v1", api_key="test",
                           max_retries=0)
    return ChatModel(client, "scripted")


# -- the request -----------------------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("tools", [TOOLS, []])
def test_the_body_is_the_one_the_clients_typed_create_sends(
    model_server: ScriptedModelServer, stream: bool, tools: list[dict[str, Any]]
) -> None:
    model_server.add_steps([{"text": "one"}, {"text": "one"}])
    client = make_client(model_server)
    model = ChatModel(client, "gpt-4o-mini", params={"temperature": 0.25})
    typed = client.chat.completions.create(**model.body(SESSION, tools, stream=stream))
    for _ in typed if stream else ():  # read to its end
        pass
    assert model.respond(SESSION, tools, stream=stream, partial=PartialReply()).text == "one"
    typed_body, body = (json.loads(x.raw) for x in model_server.exchanges)
    assert body == typed_body
    assert body["messages"] == SESSION and body.get("tools", []) == tools
    assert body["temperature"] == 0.25 and body.get("stream", False) is stream


def test_text_with_a_lone_surrogate_is_sent_escaped_not_refused(
    model_server: ScriptedModelServer,
) -> None:
    # e.g. a file name decoded with surrogateescape, shown to the model as context
    model_server.add_steps([{"text": "seen"}])
    model = ChatModel(make_client(model_server), "scripted")
    messages = [{"role": "user", "content": "open caf\udce9.csv"}]
    assert model.respond(messages, [], stream=True, partial=PartialReply()).text == "seen"
    assert b"caf\\udce9.csv" in model_server.exchanges[-1].raw


def test_the_request_keeps_plain_values_as_they_are() -> None:
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k")
    body = ChatModel(client, "m").body(SESSION, TOOLS, stream=True)
    assert body["messages"] is SESSION and body["tools"] is TOOLS  # no copy, no transform
    assert body["stream_options"] == {"include_usage": True}
    assert ChatModel(client, "m").body(SESSION, [], stream=False) == {
        "model": "m", "messages": SESSION}


# -- errors a user can act on ---------------------------------------------------------------

def test_unreachable_endpoint_names_the_url_and_what_to_check(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    agent = make_agent(model_server, store)
    dead = _dead_model()
    agent.reconfigure(model=dead)
    with pytest.raises(ModelError) as info:
        agent.run("are you there?")
    message = str(info.value)
    assert info.value.status_code is None
    assert message.startswith(f"cannot reach the model endpoint at {dead.base_url}")
    assert "check that the server is running and that the URL and port are right" in message
    assert not CLASS_NAME.search(message)
    saved = read_record(store, agent.conversation.session_id or "")
    assert roles(saved["messages"]) == ["system", "user"]
    assert saved["messages"][1]["content"] == "are you there?"

    agent.reconfigure(model=ChatModel(make_client(model_server), "scripted"))
    model_server.add_steps([{"text": "back"}])
    assert agent.run("again").reply == "back"
    assert [m["content"] for m in model_server.requests[0]["messages"][1:]] == [
        "are you there?", "again"]


def test_the_openai_api_unreachable_says_to_check_the_network() -> None:
    from jupyter_agent.agent.endpoint import Endpoint, model_error

    err = model_error(openai.APIConnectionError(request=None),  # type: ignore[arg-type]
                      Endpoint("https://api.openai.com/v1/", "gpt-4o"))
    assert str(err) == ("cannot reach the OpenAI API at https://api.openai.com/v1/: check your "
                        "network connection (and proxy), then send the prompt again")


def test_wrong_api_key_names_the_variable_to_set(store: FileStore) -> None:
    with ScriptedModelServer([{"text": "never"}], require_api_key="right-key") as server:
        model = ChatModel(make_client(server), "scripted", key_env="LAB_LLM_KEY")
        with pytest.raises(ModelError) as info:
            model.respond([{"role": "user", "content": "hi"}], [], stream=True,
                          partial=PartialReply())
    assert info.value.status_code == 401
    assert str(info.value) == (
        f"the model endpoint at {model.base_url} rejected the API key from LAB_LLM_KEY (401: "
        "Incorrect API key provided. You can find your API key at "
        "https://platform.openai.com/account/api-keys.): set LAB_LLM_KEY to a valid key in the "
        "environment Jupyter starts from, then send the prompt again")


@pytest.mark.parametrize(("status", "code", "words"), [
    (429, None, "is rate limiting or the quota is used up (429: boom 429): wait a minute and "
                "send the prompt again, or check your plan and billing quota"),
    (500, None, "failed (500: boom 500): try again in a moment"),
    (503, None, "failed (503: boom 503): try again in a moment"),
    (403, None, "may not use model scripted at"),
    (404, None, "check the model name (--model) and the base URL (--base-url)"),
    (400, None, "refused the request (400: boom 400): your prompt is saved; check the model "
                "name and this session's options, then send a prompt again"),
    (400, "context_length_exceeded", "is too long for the context window of model scripted at"),
])
def test_error_statuses_say_what_to_do_next(
    model_server: ScriptedModelServer, store: FileStore, status: int, code: str | None,
    words: str,
) -> None:
    error: dict[str, Any] = {"status": status, "message": f"boom {status}"}
    if code:
        error["code"] = code
    model_server.add_steps([{"error": error}, {"text": "recovered"}])
    agent = make_agent(model_server, store)
    with pytest.raises(ModelError) as info:
        agent.run("first")
    assert info.value.status_code == status
    assert words in str(info.value)
    assert not CLASS_NAME.search(str(info.value))
    assert agent.run("second").reply == "recovered"
    assert roles(agent.conversation.messages) == ["system", "user", "user", "assistant"]


def test_rate_limit_after_the_clients_own_retries(store: FileStore) -> None:
    retry_fast = {"retry-after-ms": "1"}
    steps = [{"error": {"status": 429, "message": "slow down", "headers": retry_fast}}] * 2
    with ScriptedModelServer([*steps, {"text": "finally"}]) as server:
        agent = make_agent(server, store)
        agent.reconfigure(model=ChatModel(make_client(server, max_retries=1), "scripted"))
        with pytest.raises(ModelError) as info:
            agent.run("hi")
        assert info.value.status_code == 429
        assert "(429, after 1 retry: slow down): wait a minute" in str(info.value)
        assert len(server.requests) == 2  # the client retried once before giving up
        assert agent.run("hi again").reply == "finally"


def test_a_server_error_claims_only_the_retries_the_client_made(store: FileStore) -> None:
    busy = {"error": {"status": 503, "message": "busy", "headers": {"retry-after-ms": "1"}}}
    with ScriptedModelServer([busy] * 3) as server:
        agent = make_agent(server, store)
        with pytest.raises(ModelError) as info:  # the client is made with max_retries=0
            agent.run("hi")
        assert "(503: busy): try again in a moment" in str(info.value)
        agent.reconfigure(model=ChatModel(make_client(server, max_retries=1), "scripted"))
        with pytest.raises(ModelError) as info:
            agent.run("hi")
        assert "(503, after 1 retry: busy): try again in a moment" in str(info.value)
        assert len(server.requests) == 3


def test_an_exhausted_script_is_not_retried_and_not_called_transient(
    store: FileStore,
) -> None:
    with ScriptedModelServer([]) as server:
        agent = make_agent(server, store)
        agent.reconfigure(model=ChatModel(make_client(server, max_retries=2), "scripted"))
        with pytest.raises(ModelError) as info:
            agent.run("hi")
    text = str(info.value)
    assert len(server.requests) == 1
    assert "after 2 retries" not in text and "(500: " in text
    assert "try again in a moment" not in text
    assert ("script exhausted after 0 steps; add steps to the script (add_steps() in Python, "
            "or more entries in the script file)") in text


def test_connection_dropped_mid_stream_is_a_model_error_and_the_prompt_stays_saved(
    store: FileStore,
) -> None:
    server = ScriptedModelServer([{"text": "word " * 60, "chunk_delay": 0.05}]).start()
    try:
        agent = make_agent(server, store)
        threading.Timer(0.3, server.stop).start()  # the server goes away while streaming
        with pytest.raises(ModelError) as info:
            agent.run("a long answer, please")
        assert info.value.status_code is None
        assert "dropped mid-reply" in str(info.value)
        assert ": send the prompt again" in str(info.value)
        assert not CLASS_NAME.search(str(info.value))
    finally:
        server.stop()
    saved = read_record(store, agent.conversation.session_id or "")
    assert saved["messages"][1] == {"role": "user", "content": "a long answer, please"}
    server.start()
    server.add_steps([{"text": "short this time"}])
    assert agent.run("again").reply == "short this time"


class _WebPage(http.server.BaseHTTPRequestHandler):
    """Answers every POST with 200 and an HTML page: a base URL that is no model API."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = b"<html>" + b"a web page, not a model API " * 200 + b"</html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_whole_reply_that_is_not_json_is_named_with_its_start_and_where_it_came_from() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _WebPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
                               api_key="k", max_retries=0)
        model = ChatModel(client, "m")
        partial = PartialReply()
        with pytest.raises(ModelError) as info:
            model.respond([{"role": "user", "content": "hi"}], [], stream=False,
                          partial=partial)
    finally:
        server.shutdown()
        server.server_close()
    message = str(info.value)
    assert message.startswith(f"the model endpoint at {model.base_url} sent a reply that is "
                              "not understood ('<html>a web page, not a model API")
    assert message.endswith("): check that --base-url points at an OpenAI-compatible "
                            "endpoint, then send the prompt again")
    assert len(message) < 400  # the page is cut, not pasted whole
    assert not CLASS_NAME.search(message) and partial.text == ""


# -- usage and cost ---------------------------------------------------------------------------

def test_known_model_is_priced_from_genai_prices(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    model_server.add_steps(
        [{"text": "hi", "usage": {"prompt_tokens": 2000, "completion_tokens": 500}}]
    )
    agent = make_agent(model_server, store, model="gpt-4o-mini")
    agent.run("price me")
    usage = agent.conversation.state.usage
    assert (usage.input_tokens, usage.output_tokens, usage.calls) == (2000, 500, 1)
    # gpt-4o-mini: $0.15 per million input tokens, $0.60 per million output tokens
    assert usage.cost_usd == pytest.approx((2000 * 0.15 + 500 * 0.60) / 1e6)
    assert not usage.price_unknown
    saved = read_record(store, agent.conversation.session_id or "")["state"]
    assert saved["usage"]["cost_usd"] == pytest.approx(usage.cost_usd)
    assert (saved["model"], saved["api"]) == ("gpt-4o-mini", "chat")
    assert saved["base_url"] == model_server.base_url + "/"


def test_price_override_and_unknown_price(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    step = {"text": "x", "usage": {"prompt_tokens": 1_000_000, "completion_tokens": 2_000_000}}
    model_server.add_steps([step, step])
    priced = make_agent(model_server, store, model="in-house", prices={"in-house": (1.5, 2.0)})
    priced.run("a")
    assert priced.conversation.state.usage.cost_usd == pytest.approx(1.5 + 4.0)
    unknown = make_agent(model_server, store, model="in-house")
    unknown.run("b")
    assert unknown.conversation.state.usage.cost_usd == 0.0
    assert unknown.conversation.state.usage.price_unknown
    saved = read_record(store, unknown.conversation.session_id or "")
    assert saved["state"]["usage"]["price_unknown"]


def test_tool_calls_stream_in_and_come_back_whole(model_server: ScriptedModelServer) -> None:
    args = {"code": "x = 1\nprint('é' * 40)"}
    model_server.add_steps([tool_step(("run_python", args), ("list_variables", {}))])
    pieces: list[str] = []
    reply = ChatModel(make_client(model_server), "m").respond(
        [{"role": "user", "content": "go"}], TOOLS, stream=True, partial=PartialReply(),
        on_text=pieces.append)
    assert reply.finish_reason == "tool_calls" and pieces == []
    assert [json.loads(c["function"]["arguments"]) for c in reply.tool_calls] == [args, {}]
    assert reply.usage is not None and reply.usage.input_tokens > 0


def test_price_call_and_context_windows() -> None:
    assert price_call("gpt-4o-mini", 1_000_000, 0) == (pytest.approx(0.15), True)
    assert price_call("gpt-4o-mini", 10, 10, {"gpt-4o-mini": (0.0, 0.0)}) == (0.0, True)
    assert price_call("no-such-model-xyz", 10, 10) == (0.0, False)
    assert known_context_window("gpt-4o-mini") == 128_000
    assert known_context_window("no-such-model-xyz") is None and DEFAULT_CONTEXT_WINDOW == 128_000
    assert known_context_window("gpt-3.5-turbo") == 16_385


def test_a_remote_endpoint_without_a_key_says_which_variable_to_set() -> None:
    from jupyter_agent.agent.endpoint import Endpoint, status_error

    remote = Endpoint("https://llm.example.com/v1", "m", "OPENAI_API_KEY", key_sent=False)
    assert str(status_error(401, "no key", remote)) == (
        "the model endpoint at https://llm.example.com/v1 requires an API key and none was "
        "sent (401: no key): set OPENAI_API_KEY in the environment Jupyter starts from")
