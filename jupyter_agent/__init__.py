"""jupyter-agent: an AI agent for Jupyter whose conversations are resumable sessions.

``%load_ext jupyter_agent`` registers the magics. The names of ``__all__`` are the
Python API; each is imported when first used, so importing the package reads no file,
parses no environment and loads neither ``openai`` nor ``IPython``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers; at run time, __getattr__ imports on first use
    from jupyter_agent.agent.adapters import ChatModel as ChatModel
    from jupyter_agent.agent.adapters import ResponsesModel as ResponsesModel
    from jupyter_agent.agent.config import AgentConfig as AgentConfig
    from jupyter_agent.agent.config import Limits as Limits
    from jupyter_agent.agent.loop import Agent as Agent
    from jupyter_agent.agent.loop import TurnOutcome as TurnOutcome
    from jupyter_agent.controller import AgentController as AgentController
    from jupyter_agent.errors import JupyterAgentError as JupyterAgentError
    from jupyter_agent.project import open_store as open_store
    from jupyter_agent.settings import SessionOptions as SessionOptions
    from jupyter_agent.settings import Settings as Settings
    from jupyter_agent.settings import build_client as build_client
    from jupyter_agent.settings import build_model as build_model
    from jupyter_agent.store import Store as Store
    from jupyter_agent.testing import ScriptedModel as ScriptedModel
    from jupyter_agent.testing import ScriptedModelServer as ScriptedModelServer

__version__ = "0.1.0"

# public name -> the module it lives in
_API = {
    "Agent": "jupyter_agent.agent.loop",
    "TurnOutcome": "jupyter_agent.agent.loop",
    "AgentConfig": "jupyter_agent.agent.config",
    "Limits": "jupyter_agent.agent.config",
    "ChatModel": "jupyter_agent.agent.adapters",
    "ResponsesModel": "jupyter_agent.agent.adapters",
    "build_client": "jupyter_agent.settings",
    "build_model": "jupyter_agent.settings",
    "AgentController": "jupyter_agent.controller",
    "JupyterAgentError": "jupyter_agent.errors",
    "open_store": "jupyter_agent.project",
    "Settings": "jupyter_agent.settings",
    "SessionOptions": "jupyter_agent.settings",
    "Store": "jupyter_agent.store",
    "ScriptedModel": "jupyter_agent.testing",
    "ScriptedModelServer": "jupyter_agent.testing",
}

__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension", *_API]


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'jupyter_agent' has no attribute {name!r}")
    value = getattr(import_module(_API[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})


def load_ipython_extension(ipython: Any) -> None:
    """Register the agent magics on an IPython shell (``%load_ext jupyter_agent``)."""
    import_module("jupyter_agent.magics").load_ipython_extension(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Release the active session's lease and remove the magics (``%unload_ext``)."""
    import_module("jupyter_agent.magics").unload_ipython_extension(ipython)
