"""ScriptedModelServer's /v1/responses, read by the real openai client's typed objects."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from jupyter_agent.testing import ScriptedModelServer

INPUT: list[Any] = [{"role": "system", "content": "be brief"},
                    {"role": "user", "content": "What is in df?"}]
TOOLS: list[Any] = [{"type": "function", "name": "run_python", "description": "Run code.",
                     "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
                     "strict": False}]


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


def client_for(server: ScriptedModelServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=30)


def test_a_text_reply_parses_as_a_typed_response(server: ScriptedModelServer) -> None:
    server.add_steps([{"text": "Three columns.", "usage": {"prompt_tokens": 12,
                                                            "completion_tokens": 3,
                                                            "cached_tokens": 4}}])
    response = client_for(server).responses.create(model="gpt-4.1", input=INPUT)
    assert response.output_text == "Three columns."
    assert response.status == "completed" and response.model == "gpt-4.1"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert response.usage.input_tokens_details.cached_tokens == 4
    assert server.exchanges[0].path == "/v1/responses"


def test_a_streamed_function_call_parses_event_by_event(server: ScriptedModelServer) -> None:
    server.add_steps([{"text": "Looking.", "tool_calls": [
        {"name": "run_python", "arguments": {"code": "df.columns"}, "id": "call_x"}]}])
    stream = client_for(server).responses.create(model="m", input=INPUT, tools=TOOLS,
                                                 stream=True)
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert "response.function_call_arguments.delta" in kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    arguments = "".join(e.delta for e in events
                        if e.type == "response.function_call_arguments.delta")
    assert text == "Looking." and json.loads(arguments) == {"code": "df.columns"}
    final = events[-1].response  # type: ignore[union-attr]
    call = final.output[1]
    assert (call.type, call.call_id, call.name) == ("function_call", "call_x", "run_python")


def test_the_sdks_stream_helper_gets_the_final_response(server: ScriptedModelServer) -> None:
    server.add_steps([{"text": "Done and dusted."}])
    with client_for(server).responses.stream(model="m", input=INPUT) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Done and dusted."


def test_cut_off_replies_are_incomplete(server: ScriptedModelServer) -> None:
    server.add_steps([{"text": "partial", "finish_reason": "length"}])
    response = client_for(server).responses.create(model="m", input=INPUT)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"


def test_reasoning_items_are_issued_and_verified(server: ScriptedModelServer) -> None:
    step = {"reasoning": "Check the columns first.", "tool_calls": [
        {"name": "run_python", "arguments": {"code": "df.columns"}, "id": "call_r"}]}
    server.add_steps([step, step, "ok", "never"])
    client = client_for(server)
    plain = client.responses.create(model="m", input=INPUT, tools=TOOLS)
    assert [item.type for item in plain.output] == ["function_call"]  # not asked for
    first = client.responses.create(model="o4-mini", input=INPUT, tools=TOOLS, store=False,
                                    include=["reasoning.encrypted_content"])
    reasoning = first.output[0]
    assert reasoning.type == "reasoning" and reasoning.encrypted_content
    assert reasoning.summary[0].text == "Check the columns first."
    carried = reasoning.model_dump(include={"type", "id", "summary", "encrypted_content"})
    follow_up = [*INPUT, carried,
                 {"type": "function_call", "call_id": "call_r", "name": "run_python",
                  "arguments": "{}"},
                 {"type": "function_call_output", "call_id": "call_r", "output": "a, b"}]
    assert client.responses.create(model="o4-mini", input=follow_up).output_text == "ok"
    forged = [*INPUT, {**carried, "encrypted_content": "enc_forged"}, *follow_up[-2:]]
    with pytest.raises(openai.BadRequestError, match="could not be verified"):
        client.responses.create(model="o4-mini", input=forged)
    alone = [*INPUT, carried, {"role": "user", "content": "and?"}]
    with pytest.raises(openai.BadRequestError, match="without its required following item"):
        client.responses.create(model="o4-mini", input=alone)


@pytest.mark.parametrize(("items", "message"), [
    ([{"type": "function_call_output", "call_id": "nope", "output": "x"}],
     "No tool call found for function call output with call_id nope."),
    ([{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}],
     "No tool output found for function call c1."),
    ([{"type": "mystery"}], "Invalid value: 'mystery'"),
])
def test_invalid_input_is_rejected_like_the_real_api(server: ScriptedModelServer,
                                                     items: list[Any], message: str) -> None:
    server.add_steps(["never"])
    with pytest.raises(openai.BadRequestError, match=message):
        client_for(server).responses.create(model="m", input=[*INPUT, *items])
    assert server.remaining == 1
