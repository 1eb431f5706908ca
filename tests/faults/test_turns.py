"""Failures during a turn (design notes "Failures during a turn"), driven through the real
loop: the scripted model
server on loopback, the ``openai`` client, a ``FileStore`` on real files.

Each failure is asserted by type and message, and by what the session holds afterwards.
The OS faults of saving (a full disk, a read-only file system) are in
``test_turn_saves.py``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_agent.agent.config import Limits
from jupyter_agent.agent.working_context import SUMMARY_MARKER, estimate_tokens
from jupyter_agent.errors import ModelError, PromptTooLongError
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer
from jupyter_agent.testing.wire import split_text
from tests.agent.helpers import make_agent, read_record, roles, tool_step
from tests.test_magics_errors import usage_error

pytestmark = pytest.mark.faults

CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b")
REPO = Path(__file__).resolve().parents[2]
PRICES = {"scripted": (1_000_000.0, 0.0)}  # one USD per prompt token: costs are visible


@pytest.fixture(name="store")
def store_fixture(tmp_path: Path) -> FileStore:
    """A session store on ``tmp_path``."""
    return FileStore(tmp_path / "store")


# -- a connection that drops mid-reply ----------------------------------------------------
def test_a_connection_that_drops_mid_reply_keeps_the_text_marked_and_counts_the_call(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    reply = "The answer is forty-two, and here is why: " + "because " * 20
    # the role chunk and three text pieces arrive, then the connection drops
    model_server.add_steps([{"text": reply, "drop_after": 4}, "never sent"])
    agent = make_agent(model_server, store, prices=PRICES,
                       limits=Limits(max_cost_usd=1.0))
    with pytest.raises(ModelError) as info:
        agent.run("what is the answer?")
    err = info.value
    assert err.mid_reply and err.status_code is None
    assert "the connection to the model endpoint at " in str(err)
    assert "dropped mid-reply" in str(err) and "send the prompt again" in str(err)
    assert "reach" not in str(err) and not CLASS_NAME.search(str(err))
    kept = ("".join(split_text(reply)[:3])
            + "\n\n[jupyter-agent] (reply cut off: the connection dropped mid-reply)")
    saved = read_record(store, agent.conversation.session_id or "")
    assert roles(saved["messages"]) == ["system", "user", "assistant"]
    assert saved["messages"][-1] == {"role": "assistant", "content": kept}
    assert saved["transcript"][-1] == saved["messages"][-1]
    assert agent.conversation.messages == saved["messages"]  # the working context holds it too
    usage = saved["state"]["usage"]
    assert usage["calls"] == 1 and usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["cost_usd"] >= 1.0  # estimated tokens, priced
    # the call counts against the limits: the next turn is refused before any request
    requests = len(model_server.requests)
    outcome = agent.run("go on")
    assert outcome.stop_reason == "max_cost_usd"
    assert len(model_server.requests) == requests


# -- usage that cannot be true ----------------------------------------------------------
@pytest.mark.parametrize("usage", [
    {"prompt_tokens": 0, "completion_tokens": 0},
    {"prompt_tokens": -40, "completion_tokens": -3},
    {"omit": ["prompt_tokens"]},
    {"omit": ["completion_tokens", "prompt_tokens_details"]},
    {"prompt_tokens": 0, "completion_tokens": 5, "cached_tokens": 9},
], ids=["zero", "negative", "no-prompt", "no-completion", "cached-beyond-prompt"])
def test_usage_that_cannot_be_true_is_estimated_so_the_cost_limit_holds(
    model_server: ScriptedModelServer, store: FileStore, usage: dict[str, object]
) -> None:
    model_server.add_steps([{"text": "an answer of some length", "usage": usage}, "never sent"])
    agent = make_agent(model_server, store, prices=PRICES, limits=Limits(max_cost_usd=1.0))
    assert agent.run("a question " * 10).reply == "an answer of some length"
    sent = model_server.requests[0]["messages"]
    counted = agent.conversation.state.usage
    assert counted.calls == 1 and counted.input_tokens == estimate_tokens(sent)
    assert counted.output_tokens > 0 and counted.cost_usd >= 1.0
    outcome = agent.run("and another")
    assert outcome.stop_reason == "max_cost_usd" and len(model_server.requests) == 1


def test_automatic_compaction_still_starts_when_the_endpoint_reports_zero_tokens(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    zero = {"prompt_tokens": 0, "completion_tokens": 0}
    model_server.add_steps([{"text": "word " * 600, "usage": zero},
                            {"text": "they talked about words", "usage": zero},
                            {"text": "done", "usage": zero}])
    agent = make_agent(model_server, store, context_window=1_000)
    agent.run("say many words")
    assert agent.run("next").reply == "done"
    summarizing = model_server.requests[1]
    assert "tools" not in summarizing and len(model_server.requests) == 3
    assert agent.conversation.messages[1]["content"].startswith(SUMMARY_MARKER)
    assert agent.conversation.messages[-2:] == [{"role": "user", "content": "next"},
                                   {"role": "assistant", "content": "done"}]


# -- the newest request is never compacted away -------------------------------------------
def dump() -> str:
    """Print a long table."""
    return "row of data\n" * 500  # 6,000 characters: about 1,500 tokens


def test_compaction_inside_a_turn_keeps_the_request_verbatim_however_long(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    request = "Please analyse this long description: " + "detail " * 560  # ~1,000 tokens
    model_server.add_steps(["hi", tool_step(("dump", {})), "they greeted each other",
                            "the analysis"])
    agent = make_agent(model_server, store, context_window=4_000, tools=[dump])
    agent.run("hello")
    assert agent.run(request).reply == "the analysis"
    summarizing, answered = model_server.requests[2], model_server.requests[3]
    assert "tools" not in summarizing and "detail detail" not in str(summarizing)
    assert {"role": "user", "content": request} in answered["messages"]
    assert roles(agent.conversation.messages) == [
        "system", "user", "user", "assistant", "tool", "assistant"]
    assert agent.conversation.messages[1]["content"].startswith(SUMMARY_MARKER)
    assert agent.conversation.messages[2] == {"role": "user", "content": request}


def test_a_prompt_that_cannot_fit_the_window_is_refused_before_anything_is_sent(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    model_server.add_steps(["never sent"])
    agent = make_agent(model_server, store, context_window=1_000)
    before = read_record(store, agent.conversation.session_id or "")
    with pytest.raises(PromptTooLongError) as info:
        agent.run("x" * 5_000)
    err = info.value
    assert err.window == 1_000 and err.tokens > 1_000 and err.model == "scripted"
    assert str(err).startswith(f"this prompt is about {err.tokens:,} tokens with the system "
                               "message, tools and room for the reply, more than the "
                               "1,000-token context window of model scripted: nothing was "
                               "sent or saved; shorten the prompt")
    assert "--context-window N" in str(err) and "check the model name" not in str(err)
    assert "\n" not in str(err)
    assert model_server.requests == []
    assert read_record(store, agent.conversation.session_id or "")["messages"] == before["messages"]
    assert agent.run("short").reply == "never sent"  # the session goes on
    assert roles(agent.conversation.messages) == ["system", "user", "assistant"]


# -- resume after a kill mid-batch --------------------------------------------------------
def test_resume_after_a_kill_mid_batch_counts_the_tool_calls_the_checkpoint_missed(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    model_server.add_steps([tool_step(("step", {"n": 1}), ("step", {"n": 2}),
                                      ("step", {"n": 3}))])
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    child = subprocess.Popen([sys.executable, "-m", "tests.faults.turn_child", str(store.root),
                              model_server.base_url], stdout=subprocess.PIPE, text=True,
                             env=env, cwd=REPO)
    try:
        assert child.stdout is not None
        sid = child.stdout.readline().split()[1]
        assert child.stdout.readline() == "ran 1\n"
        assert child.stdout.readline() == "ran 2\n"  # step 1 done, step 2 running
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(60)
    left = FileStore(store.root).load_session(sid)
    assert left.state.tool_calls == 0  # the checkpoint saved before the batch
    assert roles(left.transcript) == ["system", "user", "assistant"]

    model_server.add_steps([tool_step(("add_todo", {"text": "a"}), ("add_todo", {"text": "b"})),
                            "never sent"])
    agent = make_agent(model_server, store, session_id=sid, limits=Limits(max_tool_calls=4))
    # step 1 ran, step 2 ran, step 3 may have: counted
    assert agent.conversation.state.tool_calls == 3
    assert read_record(store, sid)["state"]["tool_calls"] == 3  # and saved
    outcome = agent.run("carry on")
    assert outcome.stop_reason == "max_tool_calls"  # 3 + 2 > 4: the batch is refused
    assert agent.conversation.state.todos == [] and agent.conversation.state.tool_calls == 3


def test_in_the_notebook_a_prompt_too_long_is_one_line_and_a_dropped_reply_too(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer
) -> None:
    agent_shell.run_line_magic("config", "AgentMagics.context_window = 1000")
    agent_shell.run_line_magic("agent_new", "")
    message = usage_error(agent_shell, "agent", "", "x" * 5_000)
    assert message.startswith("this prompt is about ") and not CLASS_NAME.search(message)
    assert model_server.requests == []
    model_server.add_steps([{"text": "The answer is forty-two", "drop_after": 3}])
    message = usage_error(agent_shell, "agent", "", "what is the answer?")
    assert "dropped mid-reply" in message and not CLASS_NAME.search(message)
