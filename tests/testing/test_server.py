"""ScriptedModelServer over real HTTP on loopback, driven by the real openai client."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from jupyter_agent.testing import ScriptedModelServer, ScriptError, load_script

USER: list[Any] = [{"role": "user", "content": "Hello, model!"}]


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


def client_for(server: ScriptedModelServer, api_key: str = "test", **kw: Any) -> openai.OpenAI:
    kw.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=server.base_url, api_key=api_key, timeout=30, **kw)


def raw_request(url: str, data: bytes | None = None, method: str = "GET") -> tuple[int, Any]:
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


# -- plain replies ------------------------------------------------------------------

def test_text_reply_is_parsed_with_realistic_usage(server: ScriptedModelServer) -> None:
    server.add_steps([{"text": "Hi there, how can I help?"}])
    client = client_for(server)
    messages: list[Any] = [{"role": "system", "content": "x" * 40},
                           {"role": "user", "content": "y" * 21}]
    reply = client.chat.completions.create(model="gpt-test", messages=messages)
    assert reply.choices[0].message.content == "Hi there, how can I help?"
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "gpt-test"
    assert reply.id.startswith("chatcmpl-")
    assert isinstance(reply.created, int)
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == math.ceil(61 / 4)
    assert reply.usage.completion_tokens == math.ceil(len("Hi there, how can I help?") / 4)
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert server.remaining == 0


def test_tools_in_request_add_prompt_tokens(server: ScriptedModelServer) -> None:
    server.add_steps(["a", "b"])
    client = client_for(server)
    plain = client.chat.completions.create(model="m", messages=USER)
    tools: list[Any] = [{"type": "function", "function": {
        "name": "f", "description": "d" * 200, "parameters": {"type": "object"}}}]
    with_tools = client.chat.completions.create(
        model="m", messages=USER, tools=tools)
    assert plain.usage and with_tools.usage
    assert with_tools.usage.prompt_tokens > plain.usage.prompt_tokens + 50


def test_usage_override(server: ScriptedModelServer) -> None:
    server.add_steps([{"text": "x", "usage": {"prompt_tokens": 1000, "completion_tokens": 7,
                                              "cached_tokens": 200}}])
    reply = client_for(server).chat.completions.create(model="m", messages=USER)
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (1000, 7)
    assert reply.usage.total_tokens == 1007
    assert reply.usage.prompt_tokens_details is not None
    assert reply.usage.prompt_tokens_details.cached_tokens == 200


def test_tool_calls_are_parsed(server: ScriptedModelServer) -> None:
    server.add_steps([{
        "text": "Let me look.",
        "tool_calls": [
            {"name": "run_python", "arguments": {"code": "print('hé')\n"}},
            {"name": "list_variables", "arguments": '{"raw": true}'},
        ],
    }])
    reply = client_for(server).chat.completions.create(model="m", messages=USER)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me look."
    calls: list[Any] = choice.message.tool_calls or []
    assert len(calls) == 2
    assert [c.function.name for c in calls] == ["run_python", "list_variables"]
    assert json.loads(calls[0].function.arguments) == {"code": "print('hé')\n"}
    assert calls[1].function.arguments == '{"raw": true}'
    assert all(c.id.startswith("call_") for c in calls)
    assert calls[0].id != calls[1].id


def test_tool_call_ids_unique_across_responses(server: ScriptedModelServer) -> None:
    server.add_steps([{"tool_calls": [{"name": "f"}]} for _ in range(5)])
    client = client_for(server)
    ids = set()
    for _ in range(5):
        reply = client.chat.completions.create(model="m", messages=USER)
        assert reply.choices[0].message.content is None
        calls: list[Any] = reply.choices[0].message.tool_calls or []
        ids.add(calls[0].id)
    assert len(ids) == 5


# -- streaming ------------------------------------------------------------------------

def test_streaming_text_reassembles_with_usage_chunk(server: ScriptedModelServer) -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 3 + "Supercalifragilistic" * 3
    server.add_steps([{"text": text}])
    stream = client_for(server).chat.completions.create(
        model="gpt-test", messages=USER, stream=True,
        stream_options={"include_usage": True})
    chunks = list(stream)
    deltas = [c.choices[0].delta.content for c in chunks
              if c.choices and c.choices[0].delta.content]
    assert len(deltas) > 5
    assert "".join(deltas) == text
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and not any(finishes[:-1])
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert last.usage.completion_tokens == math.ceil(len(text) / 4)
    assert all(c.usage is None for c in chunks[:-1])
    assert {c.model for c in chunks} == {"gpt-test"}
    assert len({c.id for c in chunks}) == 1


def test_streaming_without_include_usage_has_no_usage(server: ScriptedModelServer) -> None:
    server.add_steps(["one two three"])
    chunks = list(client_for(server).chat.completions.create(
        model="m", messages=USER, stream=True))
    assert all(c.usage is None for c in chunks)
    assert all(c.choices for c in chunks)


def test_streaming_tool_call_deltas_reassemble(server: ScriptedModelServer) -> None:
    code = "import math\nprint(math.pi * 2)\n" * 4
    server.add_steps([{"tool_calls": [{"name": "run_python", "arguments": {"code": code}},
                                      {"name": "todo_add", "arguments": {"text": "plot"}}]}])
    stream = client_for(server).chat.completions.create(
        model="m", messages=USER, stream=True,
        stream_options={"include_usage": True})
    calls: dict[int, dict[str, str]] = {}
    fragments = 0
    finish = None
    usage = None
    for chunk in stream:
        usage = chunk.usage or usage
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        for tc in choice.delta.tool_calls or []:
            if tc.index not in calls:
                assert tc.id and tc.id.startswith("call_") and tc.type == "function"
                assert tc.function is not None and tc.function.name
                calls[tc.index] = {"id": tc.id, "name": tc.function.name,
                                   "arguments": tc.function.arguments or ""}
            else:
                assert tc.id is None and tc.function is not None
                calls[tc.index]["arguments"] += tc.function.arguments or ""
                fragments += 1
    assert finish == "tool_calls"
    assert fragments > 2
    assert [calls[i]["name"] for i in sorted(calls)] == ["run_python", "todo_add"]
    assert json.loads(calls[0]["arguments"]) == {"code": code}
    assert json.loads(calls[1]["arguments"]) == {"text": "plot"}
    assert calls[0]["id"] != calls[1]["id"]
    assert usage is not None and usage.total_tokens > 0


def test_client_leaving_mid_stream_does_not_break_server(server: ScriptedModelServer) -> None:
    server.add_steps([{"text": "word " * 200, "chunk_delay": 0.005}, "after"])
    client = client_for(server)
    stream = client.chat.completions.create(model="m", messages=USER, stream=True)
    for i, _ in enumerate(stream):
        if i == 3:
            break
    stream.close()
    reply = client.chat.completions.create(model="m", messages=USER)
    assert reply.choices[0].message.content == "after"
    assert server.errors == []


# -- models, 404 -------------------------------------------------------------------

def test_models_list_and_retrieve() -> None:
    with ScriptedModelServer(model_ids=["alpha", "beta"]) as srv:
        client = client_for(srv)
        assert [m.id for m in client.models.list()] == ["alpha", "beta"]
        assert client.models.retrieve("beta").id == "beta"
        with pytest.raises(openai.NotFoundError, match="does not exist"):
            client.models.retrieve("gamma")


def test_unknown_path_is_openai_shaped_404(server: ScriptedModelServer) -> None:
    status, body = raw_request(server.base_url + "/nope", b"{}", "POST")
    assert status == 404
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert "/v1/nope" in body["error"]["message"]


def test_unparseable_body_is_400_and_consumes_nothing(server: ScriptedModelServer) -> None:
    server.add_steps(["x"])
    status, body = raw_request(server.base_url + "/chat/completions", b"{not json", "POST")
    assert status == 400 and "JSON" in body["error"]["message"]
    assert server.remaining == 1 and server.requests == []


# -- rejections ----------------------------------------------------------------------

CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
ASSISTANT_CALL = {"role": "assistant", "content": None, "tool_calls": [CALL]}
TOOL_REPLY = {"role": "tool", "tool_call_id": "call_1", "content": "done"}

REJECTIONS = {
    "missing model": ({"messages": USER}, "you must provide a model parameter"),
    "missing messages": ({"model": "m"}, "Missing required parameter: 'messages'"),
    "empty messages": ({"model": "m", "messages": []}, "empty array"),
    "orphan tool message": ({"model": "m", "messages": [*USER, TOOL_REPLY]},
                            "messages with role 'tool' must be a response to a preceeding"
                            " message with 'tool_calls'"),
    "tool answers another id": (
        {"model": "m", "messages": [*USER, ASSISTANT_CALL,
                                    {**TOOL_REPLY, "tool_call_id": "call_X"}]},
        "must be a response to a preceeding message with 'tool_calls'"),
    "tool after user": ({"model": "m", "messages": [*USER, ASSISTANT_CALL, TOOL_REPLY, *USER,
                                                    TOOL_REPLY]}, "preceeding message"),
    "unanswered call at end": (
        {"model": "m", "messages": [*USER, ASSISTANT_CALL]},
        "An assistant message with 'tool_calls' must be followed by tool messages responding"
        " to each 'tool_call_id'. The following tool_call_ids did not have response messages:"
        " call_1"),
    "unanswered call before user": (
        {"model": "m", "messages": [*USER, {**ASSISTANT_CALL, "tool_calls": [
            CALL, {**CALL, "id": "call_2"}]}, TOOL_REPLY, *USER]},
        "did not have response messages: call_2"),
    "content not string/list": ({"model": "m", "messages": [{"role": "user", "content": 5}]},
                                "Invalid type for 'messages[0].content'"),
    "unknown role": ({"model": "m", "messages": [{"role": "robot", "content": "x"}]},
                     "Invalid value: 'robot'. Supported values are: 'system'"),
    "assistant content null without tool calls": (
        {"model": "m", "messages": [*USER, {"role": "assistant", "content": None}, *USER]},
        "Invalid value for 'content': expected a string, got null."),
    "assistant without content or tool calls": (
        {"model": "m", "messages": [*USER, {"role": "assistant", "tool_calls": None}, *USER]},
        "Invalid value for 'content': expected a string, got null."),
    "arguments not a string": (
        {"model": "m", "messages": [*USER, {**ASSISTANT_CALL, "tool_calls": [
            {**CALL, "function": {"name": "f", "arguments": {}}}]}, TOOL_REPLY]},
        "tool_calls[0].function.arguments': expected a string"),
}


@pytest.mark.parametrize("case", list(REJECTIONS))
def test_invalid_requests_are_rejected_like_the_real_api(
        server: ScriptedModelServer, case: str) -> None:
    body, message = REJECTIONS[case]
    server.add_steps(["unused"])
    client = client_for(server)
    with pytest.raises(openai.BadRequestError) as info:
        client.post("/chat/completions", body=body, cast_to=dict)
    assert message in str(info.value)
    assert info.value.status_code == 400
    assert isinstance(info.value.body, dict) and info.value.body["message"] == \
        server.exchanges[-1].response["error"]["message"]
    assert server.remaining == 1  # a rejected request does not consume a step
    assert server.requests == [body]
    assert server.exchanges[-1].status == 400


def test_valid_tool_round_trip_with_model_dump_extras(server: ScriptedModelServer) -> None:
    server.add_steps([{"tool_calls": [{"name": "f", "arguments": {"x": 1}},
                                      {"name": "g", "arguments": {}}]}, "done"])
    client = client_for(server)
    messages: list[Any] = [{"role": "system", "content": "sys"}, *USER]
    first = client.chat.completions.create(model="m", messages=messages)
    assistant = first.choices[0].message.model_dump()  # refusal/annotations/audio/... extras
    assert "refusal" in assistant and "function_call" in assistant
    messages.append(assistant)
    for call in first.choices[0].message.tool_calls or []:
        messages.append({"role": "tool", "tool_call_id": call.id,
                         "content": [{"type": "text", "text": "ok"}]})
    second = client.chat.completions.create(model="m", messages=messages, temperature=0.2,
                                            parallel_tool_calls=True, tool_choice="auto")
    assert second.choices[0].message.content == "done"
    assert server.requests[1]["messages"] == json.loads(json.dumps(messages))


def test_api_key_required() -> None:
    with ScriptedModelServer(["ok"], require_api_key="sk-right") as srv:
        with pytest.raises(openai.AuthenticationError) as info:
            client_for(srv, api_key="sk-wrong").chat.completions.create(
                model="m", messages=USER)
        assert "Incorrect API key" in str(info.value)
        assert "sk-wrong" not in str(info.value)
        assert srv.exchanges[-1].status == 401 and srv.requests[-1]["messages"] == USER
        assert isinstance(info.value.body, dict) and info.value.body["code"] == "invalid_api_key"
        status, body = raw_request(srv.base_url + "/models")
        assert status == 401 and "didn't provide an API key" in body["error"]["message"]
        assert srv.remaining == 1
        reply = client_for(srv, api_key="sk-right").chat.completions.create(
            model="m", messages=USER)
        assert reply.choices[0].message.content == "ok"


def test_exhausted_script_is_a_clear_500_not_retried(server: ScriptedModelServer) -> None:
    server.add_steps(["only"])
    client = client_for(server, max_retries=2)
    client.chat.completions.create(model="m", messages=USER)
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="m", messages=USER)
    assert "ScriptedModelServer: script exhausted after 1 steps; add steps" in str(info.value)
    assert len(server.requests) == 2  # x-should-retry: false -> no client retries
    server.add_steps(["more"])
    assert client.chat.completions.create(
        model="m", messages=USER).choices[0].message.content == "more"


def test_error_steps(server: ScriptedModelServer) -> None:
    server.add_steps([
        {"error": {"status": 429, "message": "Rate limit reached for requests"}},
        {"error": {"status": 503, "message": "overloaded", "type": "server_error"}},
        {"error": {"status": 500, "message": "boom", "headers": {"retry-after-ms": "1"}}},
        "recovered",
    ])
    client = client_for(server)
    with pytest.raises(openai.RateLimitError, match="Rate limit reached") as info:
        client.chat.completions.create(model="m", messages=USER)
    assert isinstance(info.value.body, dict) and info.value.body["code"] == "rate_limit_exceeded"
    with pytest.raises(openai.InternalServerError, match="overloaded"):
        client.chat.completions.create(model="m", messages=USER, stream=True)
    retrying = client_for(server, max_retries=1)  # 500 is retried by the client: next step answers
    reply = retrying.chat.completions.create(model="m", messages=USER)
    assert reply.choices[0].message.content == "recovered"
    assert [x.status for x in server.exchanges] == [429, 503, 500, 200]


# -- recording, callables, runtime steps ------------------------------------------------

def test_requests_are_recorded_exactly(server: ScriptedModelServer) -> None:
    server.add_steps(["a", "b"])
    client = client_for(server)
    tools: list[Any] = [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    client.chat.completions.create(model="m1", messages=USER, tools=tools)
    history = [*USER, {"role": "assistant", "content": "a"}, {"role": "user", "content": "more"}]
    client.chat.completions.create(model="m2", messages=history, stream=True,
                                   stream_options={"include_usage": True}).close()
    first, second = server.requests
    assert first["model"] == "m1" and first["messages"] == USER and first["tools"] == tools
    assert second["messages"] == history and second["stream"] is True
    assert second["stream_options"] == {"include_usage": True}
    assert server.exchanges[1].stream and isinstance(server.exchanges[1].response, list)
    server.clear_requests()
    assert server.requests == [] and server.remaining == 0


def test_callable_steps(server: ScriptedModelServer) -> None:
    seen: list[dict[str, Any]] = []

    def echo(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        return {"text": "echo: " + body["messages"][-1]["content"]}

    server.add_steps([echo, lambda body: "plain string", lambda body: {"bogus": 1},
                      lambda body: 1 / 0, "after"])
    client = client_for(server)
    reply = client.chat.completions.create(model="m", messages=USER)
    assert reply.choices[0].message.content == "echo: Hello, model!"
    assert seen[0]["messages"] == USER
    assert client.chat.completions.create(
        model="m", messages=USER).choices[0].message.content == "plain string"
    with pytest.raises(openai.InternalServerError, match=r"invalid step.*bogus"):
        client.chat.completions.create(model="m", messages=USER)
    with pytest.raises(openai.InternalServerError, match="ZeroDivisionError"):
        client.chat.completions.create(model="m", messages=USER)
    assert client.chat.completions.create(
        model="m", messages=USER).choices[0].message.content == "after"


def test_add_steps_validates_and_counts(server: ScriptedModelServer) -> None:
    assert server.remaining == 0
    server.add_steps(["a", {"text": "b"}])
    assert server.remaining == 2
    with pytest.raises(ScriptError, match="step 2"):
        server.add_steps([{"txt": "typo"}])
    with pytest.raises(ScriptError, match="list of steps"):
        server.add_steps("a string")
    assert server.remaining == 2


def test_concurrent_requests_each_get_one_step(server: ScriptedModelServer) -> None:
    n = 24
    server.add_steps([f"reply {i}" for i in range(n)])
    client = client_for(server)
    results: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(n // 6):
            text = client.chat.completions.create(
                model="m", messages=USER).choices[0].message.content
            with lock:
                results.append(text or "")

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == sorted(f"reply {i}" for i in range(n))
    assert server.remaining == 0 and server.errors == []


def test_stop_refuses_and_restart_keeps_base_url() -> None:
    srv = ScriptedModelServer(["one", "two"]).start()
    try:
        client = client_for(srv)
        url = srv.base_url
        assert client.chat.completions.create(
            model="m", messages=USER).choices[0].message.content == "one"
        srv.stop()
        srv.stop()  # idempotent
        assert not srv.running
        with pytest.raises(openai.APIConnectionError):  # pooled keep-alive connection is closed too
            client.chat.completions.create(model="m", messages=USER)
        srv.start()
        assert srv.base_url == url
        assert client.chat.completions.create(
            model="m", messages=USER).choices[0].message.content == "two"
    finally:
        srv.stop()


def test_request_recorded_on_arrival_and_stop_cuts_pending_answer() -> None:
    srv = ScriptedModelServer([{"text": "late", "delay": 5}]).start()
    client = client_for(srv)
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            client.chat.completions.create(model="m", messages=USER)
        except BaseException as err:
            outcome.append(err)

    thread = threading.Thread(target=call)
    thread.start()
    try:
        while srv.remaining:  # the step is taken after the request is recorded
            thread.join(0.01)
        assert srv.requests[0]["messages"] == USER
        assert srv.exchanges[0].status is None and srv.remaining == 0
    finally:
        srv.stop()
    thread.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], openai.APIConnectionError)


def test_base_url_before_start_raises() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        _ = ScriptedModelServer().base_url


# -- JSON scripts ----------------------------------------------------------------------

def test_from_file_loads_json_script(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps([
        {"tool_calls": [{"name": "run_python", "arguments": {"code": "1+1"}}]},
        {"text": "It is 2."},
    ]), encoding="utf-8")
    assert len(load_script(path)) == 2
    with ScriptedModelServer.from_file(path, model_ids=["x"]) as srv:
        assert srv.model_ids == ("x",) and srv.remaining == 2
        client = client_for(srv)
        first = client.chat.completions.create(model="m", messages=USER)
        calls: list[Any] = first.choices[0].message.tool_calls or []
        assert calls[0].function.name == "run_python"


@pytest.mark.parametrize(("content", "message"), [
    ("[{\"text\": \"a\"},", "not valid JSON"),
    ('{"text": "a"}', "expected a JSON list of steps, got dict"),
    ('[{"text": "a"}, {"txt": "b"}]', "step 1: txt: Extra inputs are not permitted"),
    ('[{"tool_calls": [{"arguments": {}}]}]', "step 0: tool_calls.0.name: Field required"),
    ('[{"tool_calls": []}]', "step 0: tool_calls: Value error, tool_calls must not be empty"),
    ('[{"usage": {"prompt_tokens": 3}}]', "needs 'text', 'tool_calls' or 'error'"),
    ('[{"error": {"status": 200, "message": "x"}}]', "error.status"),
    ('[{"error": {"status": 500, "message": "x"}, "text": "y"}]', "cannot also have"),
    ("[42]", "step 0: expected a step object"),
])
def test_script_validation_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ScriptError) as info:
        ScriptedModelServer.from_file(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_missing_script_file(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="cannot read"):
        load_script(tmp_path / "absent.json")


# -- CLI ---------------------------------------------------------------------------------

def _cli(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "jupyter_agent.testing", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow
def test_cli_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('[{"text": "from the CLI"}]', encoding="utf-8")
    proc = _cli("--script", str(path), "--require-api-key", "k")
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0, timeout=30)
        reply = client.chat.completions.create(model="m", messages=USER)
        assert reply.choices[0].message.content == "from the CLI"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_rejects_bad_script(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[{"txt": "typo"}]', encoding="utf-8")
    proc = _cli("--script", str(path))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "step 0" in err and "txt" in err


def test_cli_on_a_port_in_use_says_so_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text('["hi"]', encoding="utf-8")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _cli("--script", str(path), "--port", str(port))
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert err.strip().splitlines() == [err.strip()]  # one line, no traceback
    assert f"cannot serve on 127.0.0.1:{port}" in err and "in use" in err


def test_drop_after_closes_the_stream_mid_reply(
    server: ScriptedModelServer,
) -> None:
    server.add_steps([{"text": "one two three four five", "drop_after": 3}, "whole"])
    client = client_for(server, max_retries=0)
    received: list[str] = []
    with pytest.raises(openai.APIConnectionError) as info:
        for chunk in client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert "incomplete chunked read" in str(info.value.__cause__)
    assert received == ["one ", "two "]  # the role chunk and two text pieces
    reply = client.chat.completions.create(model="m",
                                           messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content == "whole"  # a request that does not stream
