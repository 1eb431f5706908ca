"""Terminal IPython in a real pseudo-terminal: the approval question and the status line.

``ipython`` runs as a child process on a pty (``pexpect``, which IPython itself depends on
on POSIX) with the extension loaded, talking to the scripted server over loopback. What
the user sees is read from the terminal; what was saved, from the memory directory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from jupyter_agent.agent.batch import DECLINED_BY_INTERRUPT
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer

ROOT = Path(__file__).resolve().parents[1]
PROMPT = r"In \[\d+\]: "
QUESTION = "Run this code? [y/N] "


@pytest.fixture
def ipython(tmp_path: Path, memory_dir: Path, model_server: ScriptedModelServer
            ) -> Iterator[pexpect.spawn]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "IPYTHONDIR": str(tmp_path / "ipython"),
           "TERM": "xterm"}
    child = pexpect.spawn(sys.executable, ["-m", "IPython", "--simple-prompt", "--no-banner",
                                           "--colors=NoColor", "--HistoryManager.enabled=False"],
                          env=env, encoding="utf-8", timeout=30, dimensions=(40, 200))
    try:
        child.expect(PROMPT)
        for line in ("%load_ext jupyter_agent",
                     f'%config AgentMagics.base_url = "{model_server.base_url}"'):
            child.sendline(line)
            child.expect(PROMPT)
        yield child
    finally:
        child.terminate(force=True)


def tool_messages(memory_dir: Path, session_id: str) -> list[dict[str, Any]]:
    record = FileStore(memory_dir).load_session(session_id)
    return [m for m in record.messages if m.get("role") == "tool"]


def test_question_stays_visible_and_the_status_line_is_never_saved(
        ipython: pexpect.spawn, model_server: ScriptedModelServer, memory_dir: Path) -> None:
    code = "import time\nprint('hello')\ntime.sleep(4.5)\nprint('done')"
    model_server.add_steps([
        {"tool_calls": [{"name": "run_python", "arguments": {"code": code}}]},
        {"text": "finished"},
        {"tool_calls": [{"name": "run_python", "arguments": {"code": "ran_anyway = 1"}}]},
        {"text": "never requested"},
    ])
    ipython.sendline("%agent_new --approve ask")
    ipython.expect(r"New session (\w+)")
    session_id = ipython.match.group(1)
    ipython.expect(PROMPT)

    ipython.sendline("%agent run the slow code")
    ipython.expect_exact(f"The agent asks to run this code (4 lines, {len(code)} characters):")
    ipython.expect_exact(QUESTION)
    # Nothing runs while the question waits: no status line may cover it.
    waited = ipython.expect(["running —", "waiting for", pexpect.TIMEOUT], timeout=4)
    assert waited == 2, ipython.before
    ipython.sendline("y")
    ipython.expect_exact("run_python running — 3 s …")  # on the terminal, while it runs
    ipython.expect("finished")
    ipython.expect(PROMPT)
    (result,) = tool_messages(memory_dir, session_id)
    assert result["content"] == "hello\ndone"  # not one status line in the saved result
    assert model_server.requests[1]["messages"][-1]["content"] == "hello\ndone"

    # Ctrl-C at the question: declined, the code never ran, the turn ends cleanly.
    ipython.sendline("%agent once more")
    ipython.expect_exact(QUESTION)
    ipython.sendintr()
    ipython.expect_exact("interrupted — the session is saved")
    screen = ipython.before
    ipython.expect(PROMPT)
    assert "declined" in screen and "interrupted while running" not in screen
    results = tool_messages(memory_dir, session_id)
    assert results[-1]["content"] == DECLINED_BY_INTERRUPT
    record = FileStore(memory_dir).load_session(session_id)
    assert record.state.tool_calls == 1  # the declined call is not counted
    assert len(model_server.requests) == 3  # the turn ended there
    ipython.sendline("print('ran_anyway' in dir())")
    ipython.expect(r"(True|False)")
    assert ipython.match.group(1) == "False"
