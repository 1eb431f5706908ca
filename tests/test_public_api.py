"""``from jupyter_agent import ...``: the curated API, imported lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import jupyter_agent
from jupyter_agent import (
    Agent,
    JupyterAgentError,
    ScriptedModelServer,
    Settings,
    Store,
    build_model,
    open_store,
)


def test_importing_the_package_loads_neither_openai_nor_ipython() -> None:
    code = ("import sys, jupyter_agent; "
            "print(sorted(m for m in ('openai', 'IPython', 'jupyter_agent.agent') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_every_public_name_resolves() -> None:
    for name in jupyter_agent.__all__:
        assert getattr(jupyter_agent, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        jupyter_agent.Nope  # noqa: B018


def test_an_agent_over_the_scripted_server_saves_its_session(tmp_path: Path) -> None:
    with ScriptedModelServer(["Hello from the script."]) as server:
        store = open_store(tmp_path / "memory")
        assert isinstance(store, Store)
        model = build_model(Settings(base_url=server.base_url, model="scripted"), environ={})
        with Agent(model, store=store) as agent:
            assert agent.run("Say hello.").reply == "Hello from the script."
            sid = agent.conversation.session_id
    again = open_store(tmp_path / "memory")
    assert [s.id for s in again.list_sessions()] == [sid]
    assert again.load_session(sid).transcript[-1]["content"] == "Hello from the script."


def test_open_store_refuses_a_url_that_is_not_postgresql(tmp_path: Path) -> None:
    with pytest.raises(JupyterAgentError, match="postgresql"):
        open_store(tmp_path, "http://evil.example/db")
    with pytest.raises(JupyterAgentError, match="JUPYTER_AGENT_STORE_URL"):
        open_store(tmp_path, environ={"JUPYTER_AGENT_STORE_URL": "file:///etc/passwd"})
