"""The Responses API model: the session keeps its Chat Completions format; tool calls,
results, streaming, usage and encrypted reasoning round-trip over real HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jupyter_agent.agent.adapters import PartialReply, ResponsesModel, to_input
from jupyter_agent.agent.config import AgentConfig
from jupyter_agent.agent.events import TextDelta
from jupyter_agent.agent.loop import Agent
from jupyter_agent.errors import ModelError
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer
from tests.agent.helpers import (
    SESSION,
    TOOLS,
    Recorder,
    interrupt_on_second_delta,
    make_client,
    read_record,
    roles,
    tool_step,
)


def responses_agent(server: ScriptedModelServer, store: FileStore | None, *,
                    name: str = "gpt-4.1", stream: bool = True, **kwargs: Any) -> Agent:
    model = ResponsesModel(make_client(server), name)
    return Agent(model, store=store, config=AgentConfig(approve="auto", stream=stream), **kwargs)


@pytest.mark.parametrize("stream", [True, False])
def test_a_tool_turn_round_trips_and_the_session_stays_chat_shaped(
    model_server: ScriptedModelServer, store: FileStore, stream: bool
) -> None:
    model_server.add_steps([
        tool_step(("add_todo", {"text": "plot bills"}), ("write_scratchpad", {"text": "n=3"}),
                  text="Planning."),
        {"text": "All set: one todo.", "usage": {"prompt_tokens": 300, "completion_tokens": 7}},
    ])
    rec = Recorder()
    agent = responses_agent(model_server, store, stream=stream)
    assert agent.run("plan it", on_event=rec).reply == "All set: one todo."
    first, second = model_server.requests
    assert [e.path for e in model_server.exchanges] == ["/v1/responses"] * 2
    assert first["store"] is False and "include" not in first  # not a reasoning model
    assert {t["name"] for t in first["tools"]} >= {"add_todo", "run_python"}
    assert all(t["type"] == "function" and t["strict"] is False for t in first["tools"])
    calls = [i for i in second["input"] if i.get("type") == "function_call"]
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    assert [c["name"] for c in calls] == ["add_todo", "write_scratchpad"]
    assert [o["call_id"] for o in outputs] == [c["call_id"] for c in calls]
    assert outputs[0]["output"] == "added todo #1"
    assert second["input"][2] == {"role": "assistant", "content": "Planning."}

    saved = read_record(store, agent.conversation.session_id or "")
    assert roles(saved["messages"]) == ["system", "user", "assistant", "tool", "tool",
                                        "assistant"]
    assistant = saved["messages"][2]
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["add_todo",
                                                                         "write_scratchpad"]
    assert saved["messages"][3]["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert (saved["state"]["api"], saved["state"]["model"]) == ("responses", "gpt-4.1")
    state = agent.conversation.state
    assert (state.todos[0].text, state.scratchpad) == ("plot bills", "n=3")
    assert state.usage.calls == 2 and state.usage.input_tokens > 300
    assert agent.conversation.state.usage.output_tokens >= 7
    text = "".join(e.text for e in rec.events if isinstance(e, TextDelta))
    assert text == "Planning.All set: one todo."
    if stream:
        assert len(rec.of("text_delta")) > 2  # word by word


def test_encrypted_reasoning_is_carried_to_the_next_request(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    model_server.add_steps([
        {**tool_step(("list_todos", {})), "reasoning": "Look at the todos first."},
        {"text": "Nothing to do.", "reasoning": "The list is empty."},
        {"text": "Still nothing."},
    ])
    agent = responses_agent(model_server, store, name="o4-mini")
    agent.run("what is left?")
    first, second = model_server.requests[:2]
    assert first["include"] == ["reasoning.encrypted_content"] and first["store"] is False
    issued = model_server.exchanges[0].response[-1]["response"]["output"][0]  # streamed: last event
    kinds = [i.get("type", "message") for i in second["input"]]
    assert kinds == ["message", "message", "reasoning", "function_call",
                     "function_call_output"]
    carried = second["input"][2]
    assert carried["encrypted_content"] == issued["encrypted_content"]
    assert carried["id"] == issued["id"] and carried["summary"] == issued["summary"]
    agent.run("and now?")  # the text reply's reasoning comes along too (and is verified)
    third = model_server.requests[2]
    assert [i.get("type", "message") for i in third["input"]][-3:] == [
        "reasoning", "message", "message"]
    # the session file keeps the Chat Completions shape: no reasoning items in it
    saved = json.dumps(read_record(store, agent.conversation.session_id or ""))
    assert "encrypted_content" not in saved and "reasoning" not in saved


def test_a_resumed_session_reasons_afresh_and_keeps_working(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    model_server.add_steps([{**tool_step(("list_todos", {})), "reasoning": "r"}])
    first = responses_agent(model_server, store, name="o4-mini")
    model_server.add_steps([{"text": "later"}])
    first.run("go")
    sid = first.conversation.session_id
    first.conversation.close()
    model_server.add_steps(["resumed"])
    again = responses_agent(model_server, store, name="o4-mini", session_id=sid)
    assert again.run("continue").reply == "resumed"
    assert not any(i.get("type") == "reasoning" for i in model_server.requests[-1]["input"])


@pytest.mark.parametrize("stream", [False, True])
def test_the_body_is_the_one_the_clients_typed_create_sends(
    model_server: ScriptedModelServer, stream: bool
) -> None:
    model_server.add_steps(["one", "one"])
    client = make_client(model_server)
    model = ResponsesModel(client, "o4-mini", params={"temperature": 0.5})
    request = model.body(SESSION, TOOLS, stream=stream)
    typed = client.responses.create(**request)
    for _ in typed if stream else ():  # read to its end
        pass
    assert model.respond(SESSION, TOOLS, stream=stream, partial=PartialReply()).text == "one"
    typed_body, body = (json.loads(x.raw) for x in model_server.exchanges)
    assert body == typed_body
    image = next(p for i in body["input"] for p in (i.get("content") or [])
                 if isinstance(p, dict) and p.get("type") == "input_image")
    assert image["image_url"].startswith("data:image/png;base64,") and image["detail"] == "low"


def test_messages_convert_once_while_they_stay_in_the_context(
    model_server: ScriptedModelServer,
) -> None:
    model = ResponsesModel(make_client(model_server), "m")
    messages = [dict(m) for m in SESSION]
    first = model.input(messages)
    assert model.input(messages) == first
    assert model.input(messages)[0] is first[0]  # reused, not rebuilt
    messages[1] = {"role": "user", "content": "changed"}
    assert model.input(messages)[1] == {"role": "user", "content": "changed"}
    assert to_input({"role": "tool", "tool_call_id": "c", "content": "r"}) == [
        {"type": "function_call_output", "call_id": "c", "output": "r"}]


def test_cut_off_and_errors(model_server: ScriptedModelServer, store: FileStore) -> None:
    model_server.add_steps([
        {**tool_step(("list_todos", {})), "finish_reason": "length"},
        {"error": {"status": 404, "message": "Invalid URL (POST /v1/responses)"}},
    ])
    agent = responses_agent(model_server, store)
    outcome = agent.run("go")
    assert outcome.reply.startswith("[jupyter-agent] Stopped: the model's reply was cut off")
    assert outcome.stop_reason == "length" and agent.conversation.state.tool_calls == 0
    with pytest.raises(ModelError) as info:
        agent.run("again")
    assert "check the model name (--model) and the base URL (--base-url), or the model API " \
           "(--api)" in str(info.value)


def test_api_is_a_per_session_option_the_checkpoint_remembers(
    agent_shell: Any, model_server: ScriptedModelServer, memory_dir: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.shells import magics_of

    model_server.add_steps(["via responses", "still responses", "chat again"])
    agent_shell.run_line_magic("agent_new", "--api responses")
    agent_shell.run_line_magic("agent", "hi")
    sid = magics_of(agent_shell).controller.active_session_id
    assert model_server.exchanges[-1].path == "/v1/responses"
    assert FileStore(memory_dir).load_session(sid).state.api == "responses"
    agent_shell.run_line_magic("reload_ext", "jupyter_agent")  # forgets this kernel's options
    agent_shell.run_line_magic("agent_resume", sid)
    agent_shell.run_line_magic("agent", "more")
    assert model_server.exchanges[-1].path == "/v1/responses"
    agent_shell.run_line_magic("agent_resume", f"{sid} --api chat")
    agent_shell.run_line_magic("agent", "back to chat")
    assert model_server.exchanges[-1].path == "/v1/chat/completions"
    assert [m["content"] for m in model_server.requests[-1]["messages"][1:]] == [
        "hi", "via responses", "more", "still responses", "back to chat"]
    assert "chat again" in capsys.readouterr().out


def test_an_interrupt_mid_stream_keeps_the_partial_reply(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    model_server.add_steps([{"text": "one two three four five six", "chunk_delay": 0.01},
                            "after"])
    agent = responses_agent(model_server, store)
    with pytest.raises(KeyboardInterrupt):
        agent.run("count", on_event=interrupt_on_second_delta())
    saved = read_record(store, agent.conversation.session_id or "")["messages"]
    assert saved[-1]["content"].startswith("one two")
    assert "interrupted by the user" in saved[-1]["content"]
    assert agent.conversation.state.usage.calls == 1
    assert agent.run("go on").reply == "after"
