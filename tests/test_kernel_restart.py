"""A real kernel restart in the middle of a conversation (design notes, "Sessions and session
IDs", "Leases").

Each test starts real ``python3`` kernels (``jupyter_client``) whose working directory is
a temporary project (it has a ``pyproject.toml``, so the memory directory is
``<project>/.jupyter_agent``), loads the extension there and drives the magics against a
``ScriptedModelServer`` running in the test process. Every step of the script carries an
explicit ``usage``, so token counts are exact.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent.store import FileStore, dump_record
from jupyter_agent.testing import ScriptedModelServer
from tests.kernels import RealKernel, kernel_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

USAGE = {"prompt_tokens": 100, "completion_tokens": 10}
SCRATCHPAD = "answer = 6 * 7 lives in the kernel"


def step(*calls: tuple[str, dict[str, Any]], text: str | None = None) -> dict[str, Any]:
    """A script step: tool calls (name, arguments) and/or text, with a fixed usage."""
    result: dict[str, Any] = {"usage": USAGE}
    if calls:
        result["tool_calls"] = [{"name": n, "arguments": a} for n, a in calls]
    if text is not None:
        result["text"] = text
    return result


FIRST_TURN = [
    step(("add_todo", {"text": "compute the answer"}),
         ("add_todo", {"text": "double-check it"}),
         ("run_python", {"code": "answer = 6 * 7\nprint('answer is', answer)"})),
    step(("update_todo", {"id": 1, "status": "failed"}),
         ("update_todo", {"id": 2, "status": "in_progress"}),
         ("write_scratchpad", {"text": SCRATCHPAD})),
    step(text="first turn done"),
]
SECOND_TURN = [
    step(("read_scratchpad", {}),
         ("run_python", {"code": "restored = 'yes'"}),
         ("update_todo", {"id": 2, "status": "done"})),
    step(text="second turn done"),
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A temporary project: the project-root rule picks it for the memory directory."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    return root


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


@pytest.fixture
def kernels(project: Path) -> Iterator[list[RealKernel]]:
    """The kernels a test started (see :func:`start_kernel`); all shut down afterwards."""
    started: list[RealKernel] = []
    yield started
    for kernel in started:
        kernel.shutdown()


def start_kernel(kernels: list[RealKernel], project: Path) -> RealKernel:
    """A kernel in ``project`` (no user IPython profile) with the extension loaded."""
    kernel = RealKernel(project, kernel_env({"IPYTHONDIR": str(project.parent / "ipython")}))
    kernels.append(kernel)
    kernel.run("%load_ext jupyter_agent").ok()
    return kernel


def session_file(project: Path, session_id: str) -> dict[str, Any]:
    """The session as saved on disk, in its one-file JSON form."""
    stored = FileStore(project / ".jupyter_agent").load_session(session_id)
    record: dict[str, Any] = json.loads(dump_record(stored))
    return record


def new_session_id(output: str) -> str:
    match = re.search(r"New session ([A-Za-z0-9]+)", output)
    assert match, output
    return match.group(1)


def shown(kernel: RealKernel) -> dict[str, str]:
    """What the magics show about the active session (but the context estimate, which
    starts from the endpoint's last count before a restart and from the text after)."""
    return {
        magic: "".join(line for line in kernel.run(f"%{magic}").ok().stdout.splitlines(True)
                       if not line.startswith("context:"))
        for magic in ("agent_todo", "agent_usage", "agent_history", "agent_history --full")
    }


def tool_result(messages: list[dict[str, Any]], name: str) -> str:
    """The result the model was sent for the (last) call of tool ``name``."""
    ids = [call["id"] for m in messages if m["role"] == "assistant"
           for call in m.get("tool_calls") or [] if call["function"]["name"] == name]
    assert ids, f"no {name} call"
    results = [m["content"] for m in messages
               if m["role"] == "tool" and m["tool_call_id"] == ids[-1]]
    assert len(results) == 1
    return str(results[0])


def test_resume_after_kernel_restart(project: Path, server: ScriptedModelServer,
                                     kernels: list[RealKernel]) -> None:
    kernel = start_kernel(kernels, project)
    created = kernel.run(f"%agent_new --base-url {server.base_url} --approve auto").ok()
    session_id = new_session_id(created.stdout)
    server.add_steps(FIRST_TURN)
    turn = kernel.run("%%agent\nCompute the answer and keep notes.").ok()
    assert "first turn done" in turn.text
    assert kernel.run("print(answer)").ok().stdout == "42\n"  # the tool ran in the kernel
    pid_before = kernel.pid()

    before = session_file(project, session_id)
    state = before["state"]
    assert state["todos"] == [
        {"id": 1, "text": "compute the answer", "status": "failed", "retries": 1},
        {"id": 2, "text": "double-check it", "status": "in_progress", "retries": 0},
    ]
    assert state["scratchpad"] == SCRATCHPAD
    assert state["tool_calls"] == 6
    assert state["usage"]["calls"] == 3
    assert (state["usage"]["input_tokens"], state["usage"]["output_tokens"]) == (300, 30)
    assert Path(before["project_root"]).resolve() == project.resolve()
    shown_before = shown(kernel)
    assert "retries: 1" in shown_before["agent_todo"]
    # The last request of the turn plus the final reply is the saved working context.
    assert server.requests[-1]["messages"] == before["messages"][:-1]

    kernel.restart()
    # A reply queued before the cell's own (as wait_for_ready's extra kernel_info_request
    # leaves under load) must not be taken for the cell's reply.
    kernel.client.kernel_info()
    unknown = kernel.run("%load_ext jupyter_agent\n%agent_resume NoSuchSession")
    assert unknown.error is not None and "NoSuchSession" in unknown.error["evalue"]
    assert kernel.pid() != pid_before
    assert kernel.run("answer").error["ename"] == "NameError"  # a fresh process
    kernel.run("%load_ext jupyter_agent").ok()
    recap = kernel.run(f"%agent_resume --base-url {server.base_url} --approve auto").ok()
    plain = recap.displays[-1]["text/plain"]  # Markdown in Jupyter, the plain recap as text
    assert f"Resumed session {session_id}" in plain
    assert "double-check it" in plain and "double-check it" in recap.text  # the open todo
    assert "first turn done" in plain  # the last exchange

    after = session_file(project, session_id)
    for key in ("id", "created_at", "messages", "transcript", "compactions", "state",
                "summary", "project_root"):
        assert after[key] == before[key], key
    assert shown(kernel) == shown_before

    # The next turn sends the model the earlier context, and the counts continue.
    sent_before = len(server.requests)
    server.add_steps(SECOND_TURN)
    kernel.run("%%agent\nCarry on.").ok()
    first_request = server.requests[sent_before]["messages"]
    assert first_request[:-1] == before["messages"]
    # the request carries the cells run since the restart; the saved message is the prompt
    assert first_request[-1]["role"] == "user"
    prompt, _, section = first_request[-1]["content"].partition("\n\n")
    assert prompt == "Carry on." and section.startswith("--- the notebook since the last prompt")
    assert "NameError" in section  # the cell above, run after the restart
    assert tool_result(server.requests[-1]["messages"], "read_scratchpad") == SCRATCHPAD

    final = session_file(project, session_id)
    state = final["state"]
    assert state["tool_calls"] == 6 + 3
    assert state["usage"]["calls"] == 3 + 2
    assert (state["usage"]["input_tokens"], state["usage"]["output_tokens"]) == (500, 50)
    assert [(t["status"], t["retries"]) for t in state["todos"]] == [("failed", 1), ("done", 0)]
    assert final["transcript"][: len(before["transcript"])] == before["transcript"]
    assert {"role": "user", "content": "Carry on."} in final["transcript"]
    assert kernel.run("print(restored)").ok().stdout == "yes\n"
    usage = kernel.run("%agent_usage").ok().stdout
    assert "tool calls:  9" in usage and "model calls: 5" in usage


def wait_dead(kernel: RealKernel, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while kernel.is_alive():
        assert time.monotonic() < deadline, "the killed kernel is still alive"
        time.sleep(0.05)


def test_second_kernel_is_refused_until_the_first_dies(
        project: Path, server: ScriptedModelServer, kernels: list[RealKernel]) -> None:
    first = start_kernel(kernels, project)
    created = first.run(f"%agent_new --base-url {server.base_url} --approve auto").ok()
    session_id = new_session_id(created.stdout)
    server.add_steps([step(text="hello from the first kernel")])
    first.run("%agent hello").ok()
    first_pid = first.pid()

    second = start_kernel(kernels, project)
    for line in (f"%agent_resume {session_id} --base-url {server.base_url}",
                 f"%agent_resume --base-url {server.base_url}"):
        refused = second.run(line)
        assert refused.error is not None, line
        assert refused.error["ename"] == "AgentUsageError"  # a UsageError
        message = refused.error["evalue"]
        assert "\n" not in message
        assert "in use" in message and f"pid {first_pid}" in message, message
        assert session_id in message
        # one line, no traceback, no class name: what happened and what to do
        assert refused.stderr == f"{message}\n"
        assert "stop that kernel" in message

    os.kill(first_pid, signal.SIGKILL)
    wait_dead(first)

    recap = second.run(f"%agent_resume --base-url {server.base_url} --approve auto").ok()
    assert f"Resumed session {session_id}" in recap.displays[-1]["text/plain"]
    assert "hello from the first kernel" in recap.text
    server.add_steps([step(text="hello from the second kernel")])
    assert "hello from the second kernel" in second.run("%agent again").ok().text
    record = session_file(project, session_id)
    assert record["state"]["usage"]["calls"] == 2
    assert [m["content"] for m in record["transcript"] if m["role"] == "user"] == [
        "hello", "again"]
