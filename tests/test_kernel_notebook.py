"""A real kernel (``jupyter_client``): the user's cells, one raising, then ``%%agent`` with
``@df @error``; the scripted model's request holds the schema and the traceback, not the
values (``schema``), or the rows (``preview``); ``%agent_cell`` hands the agent's code
back as a new cell that re-runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from jupyter_agent.testing import ScriptedModelServer
from tests.kernels import RealKernel, kernel_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

SECRET = "t3rc3s-enola"
CELLS = [
    "import pandas as pd\nsecret_name = ''.join(reversed('alone-s3cr3t'))",
    "df = pd.DataFrame({'name': [secret_name, 'b'], 'score': [1.5, 2.5]})",
    "df['missing']",
]


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[RealKernel]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    started = RealKernel(project, kernel_env({"IPYTHONDIR": str(tmp_path / "ipython")}))
    try:
        started.run("%load_ext jupyter_agent").ok()
        yield started
    finally:
        started.shutdown()


def user_content(request: dict) -> str:
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


@pytest.mark.parametrize("privacy", ["schema", "preview"])
def test_df_and_error_reach_the_model_as_the_setting_allows(
    kernel: RealKernel, privacy: str,
) -> None:
    with ScriptedModelServer() as server:
        kernel.run(f'%config AgentMagics.base_url = "{server.base_url}"').ok()
        kernel.run(f'%config AgentMagics.context_privacy = "{privacy}"').ok()
        for code in CELLS[:2]:
            kernel.run(code).ok()
        assert kernel.run(CELLS[2]).error is not None
        server.add_steps([{"text": "The column 'missing' does not exist."}])
        out = kernel.run("%%agent\nwhy does @df fail? @error").ok()
        sent = user_content(server.requests[0])
    assert f"(context_privacy: {privacy})" in sent
    assert "df: pandas.DataFrame\n  2 rows × 2 columns" in sent
    assert "Error in [6]:\nTraceback (most recent call last):" in sent  # after 3 magics
    assert 'File "In [6]", line 1, in <module>' in sent  # the kernel's file named as a cell
    assert "KeyError: 'missing'" in sent
    assert (SECRET in sent) == (privacy == "preview")
    assert "attached @df" in out.text and "attached @error" in out.text


def test_agent_cell_hands_the_code_back_as_a_cell_that_reruns(kernel: RealKernel) -> None:
    code = "total = sum(range(10))\nprint('total', total)"
    with ScriptedModelServer() as server:
        kernel.run(f'%config AgentMagics.base_url = "{server.base_url}"').ok()
        server.add_steps([{"tool_calls": [{"name": "run_python",
                                           "arguments": {"code": code}}]},
                          {"text": "45"}])
        sid = kernel.run("%agent_new --approve auto").ok().stdout.split()[2]
        kernel.run("%agent add the numbers").ok()
        handed = kernel.run("%agent_cell").ok()
    (payload,) = handed.payloads
    assert payload["source"] == "set_next_input" and payload["replace"] is False
    assert payload["text"] == f"# from jupyter-agent session {sid}, turn 1, call 1\n{code}"
    assert "copy it into a cell to keep it" in handed.text  # allow_stdin=False: headless
    kernel.run("del total").ok()
    assert kernel.run(payload["text"]).ok().stdout == "total 45\n"
    history = kernel.run("%agent_history").ok().stdout
    assert "handed out as a cell (%agent_cell)" in history
    assert json.dumps(payload)  # a plain JSON payload the front end reads
