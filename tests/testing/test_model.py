"""ScriptedModel: the in-process model answers from the same scripts as the server."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_agent.agent.adapters import ChatModel, Model, PartialReply
from jupyter_agent.errors import ModelError
from jupyter_agent.testing import ScriptedModel, ScriptedModelServer, ScriptError
from tests.agent.helpers import make_client

MESSAGES = [{"role": "system", "content": "s"}, {"role": "user", "content": "count to three"}]
TOOLS = [{"type": "function", "function": {"name": "f", "description": "d",
                                           "parameters": {"type": "object", "properties": {}}}}]
STEPS: list[Any] = [
    {"text": "one two three"},
    {"tool_calls": [{"name": "f", "arguments": {"x": 1}, "id": "call_a"}], "text": "calling"},
    {"text": "cut", "finish_reason": "length", "usage": {"prompt_tokens": 7,
                                                          "completion_tokens": 3,
                                                          "cached_tokens": 2}},
]


def _replies(model: Model, stream: bool) -> list[tuple[Any, ...]]:
    out = []
    for _ in STEPS:
        pieces: list[str] = []
        reply = model.respond(MESSAGES, TOOLS, stream=stream, partial=PartialReply(),
                              on_text=pieces.append)
        calls = [(c["id"], c["function"]["name"], c["function"]["arguments"])
                 for c in reply.tool_calls]
        out.append((reply.text, "".join(pieces), calls, reply.finish_reason, reply.usage))
    return out


@pytest.mark.parametrize("stream", [False, True])
def test_same_replies_as_the_http_server(stream: bool) -> None:
    local = ScriptedModel(STEPS)
    assert isinstance(local, Model)
    with ScriptedModelServer(STEPS) as server:
        remote = _replies(ChatModel(make_client(server), "scripted"), stream)
    assert _replies(local, stream) == remote
    assert local.requests[0] == {"model": "scripted", "messages": MESSAGES, "tools": TOOLS,
                                 **({"stream": True} if stream else {})}
    assert local.remaining == 0


def test_streamed_text_arrives_in_pieces() -> None:
    pieces: list[str] = []
    ScriptedModel(["a few words of text"]).respond(MESSAGES, [], stream=True,
                                                   partial=PartialReply(), on_text=pieces.append)
    assert pieces == ["a ", "few ", "words ", "of ", "text"]


def test_error_steps_raise_the_model_error_of_that_status() -> None:
    step = {"error": {"status": 429, "message": "slow down"}}
    with pytest.raises(ModelError) as local:
        ScriptedModel([step]).respond(MESSAGES, [], stream=False, partial=PartialReply())
    with ScriptedModelServer([step]) as server, pytest.raises(ModelError) as remote:
        ChatModel(make_client(server), "scripted").respond(MESSAGES, [], stream=False,
                                                           partial=PartialReply())
    assert local.value.status_code == remote.value.status_code == 429
    assert str(local.value) == str(remote.value).replace(f" at {server.base_url}/", "")


def test_callable_steps_see_the_request_and_an_exhausted_script_says_so() -> None:
    model = ScriptedModel([lambda body: f"{len(body['messages'])} messages"])
    assert model.respond(MESSAGES, [], stream=False, partial=PartialReply()).text == "2 messages"
    with pytest.raises(ScriptError, match="exhausted after 1 steps"):
        model.respond(MESSAGES, [], stream=False, partial=PartialReply())
    model.add_steps(["more"])
    assert model.respond(MESSAGES, [], stream=False, partial=PartialReply()).text == "more"
