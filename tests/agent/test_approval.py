"""approval="ask" without a usable stdin: a refusal with instructions, never an error or a hang.

The headless cases run in a real child process whose stdin is ``/dev/null`` or closed
(so ``sys.stdin`` is ``None``), talking to the scripted server over loopback.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from IPython import get_ipython

from jupyter_agent.agent.config import Limits
from jupyter_agent.agent.tools import NO_STDIN_REFUSAL
from jupyter_agent.notebook import can_ask
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer
from tests.agent.helpers import Recorder, make_agent, read_record, tool_step

_CHILD = """
import json, sys, openai
from jupyter_agent.agent.adapters import ChatModel
from jupyter_agent.agent.events import ToolCallEnd
from jupyter_agent.agent.loop import Agent
client = openai.OpenAI(base_url=sys.argv[1], api_key="k", max_retries=0)
agent = Agent(ChatModel(client, "scripted"))  # the default approve="ask": input() on stdin
ends = []
agent.run("run it", on_event=lambda e: ends.append(e) if isinstance(e, ToolCallEnd) else None)
sys.stdout.write("RESULT " + json.dumps({"ok": ends[0].ok, "result": ends[0].result,
                                         "ran": "ran" in agent._builtins.namespace()}) + "\\n")
"""


def _run_child(server: ScriptedModelServer, *, close_stdin: bool) -> tuple[dict[str, Any], str]:
    server.add_steps([tool_step(("run_python", {"code": "ran = True"})), {"text": "ok"}])
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, server.base_url],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,  # a hang fails here instead of blocking the suite
        preexec_fn=(lambda: os.close(0)) if close_stdin else None,
    )
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    return result, proc.stdout


@pytest.mark.parametrize("close_stdin", [False, True], ids=["devnull", "closed"])
def test_headless_process_refuses_with_the_documented_message(
    model_server: ScriptedModelServer, close_stdin: bool
) -> None:
    result, stdout = _run_child(model_server, close_stdin=close_stdin)
    assert (result["ok"], result["ran"]) == (False, False)
    assert result["result"].endswith(NO_STDIN_REFUSAL)
    # Nothing is asked (and the code is not printed) when nobody can answer.
    assert "The agent wants to run this code" not in stdout
    assert "Run this code?" not in stdout


@pytest.mark.parametrize(
    "stdin",
    [None, "closed", "pipe"],
)
def test_in_process_unusable_stdin_refuses(
    model_server: ScriptedModelServer,
    store: FileStore,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stdin: str | None,
) -> None:
    if stdin == "closed":
        closed = io.StringIO("y\n")
        closed.close()
        monkeypatch.setattr(sys, "stdin", closed)
    elif stdin == "pipe":
        monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # not a terminal: never read
    else:
        monkeypatch.setattr(sys, "stdin", None)
    assert not can_ask(get_ipython())
    model_server.add_steps([tool_step(("run_python", {"code": "ran = True"})), {"text": "ok"}])
    rec = Recorder()
    agent = make_agent(model_server, store, approve="ask")
    assert agent.run("run it", on_event=rec).reply == "ok"
    end = rec.of("tool_call_end")[0]
    assert not end.ok and end.result.endswith(NO_STDIN_REFUSAL)
    assert "ran" not in agent._builtins.namespace()
    assert "wants to run" not in capsys.readouterr().out
    if stdin == "pipe":
        assert sys.stdin.read() == "y\n"  # the answer was not consumed


@pytest.mark.slow
def test_in_a_kernel_whose_front_end_allows_no_stdin_ask_refuses_without_asking(
    model_server: ScriptedModelServer, tmp_path: Any
) -> None:
    """A real ipykernel executing with ``allow_stdin=False`` (as nbclient does)."""
    from tests.kernels import RealKernel, kernel_env

    model_server.add_steps([tool_step(("run_python", {"code": "ran = True"})), {"text": "ok"}])
    kernel = RealKernel(tmp_path, kernel_env())
    try:
        code = _CHILD.replace("sys.argv[1]", repr(model_server.base_url))
        out = kernel.run(code).ok()
    finally:
        kernel.shutdown()
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))
    result = json.loads(line.removeprefix("RESULT "))
    assert not result["ok"] and result["result"].endswith(NO_STDIN_REFUSAL)
    assert not result["ran"]
    assert "wants to run" not in out.stdout and "Run this code?" not in out.stdout


def test_a_refused_call_does_not_count_against_max_tool_calls(
    model_server: ScriptedModelServer, store: FileStore
) -> None:
    model_server.add_steps([
        tool_step(("run_python", {"code": "x = 1"}), ("add_todo", {"text": "a"})),
        tool_step(("add_todo", {"text": "b"})),
        "two todos",
    ])
    agent = make_agent(model_server, store, approve="deny", limits=Limits(max_tool_calls=2))
    outcome = agent.run("work")
    assert outcome.reply == "two todos"  # the refused call left room
    assert agent.conversation.state.tool_calls == 2 and outcome.stop_reason is None
    assert [t.text for t in agent.conversation.state.todos] == ["a", "b"]
    refused = model_server.requests[1]["messages"][3]
    assert refused["content"].startswith("error: refused: running code is disabled")
    assert read_record(store, agent.conversation.session_id or "")["state"]["tool_calls"] == 2
