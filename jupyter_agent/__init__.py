"""jupyter-agent: an AI agent for Jupyter whose conversations are resumable sessions.

The names of ``__all__`` are the Python API, each imported when first used: importing the
package reads no file, parses no environment and loads neither ``openai`` nor ``IPython``.
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
_API = {name: module for module, names in {
    "jupyter_agent.agent.loop": ("Agent", "TurnOutcome"),
    "jupyter_agent.agent.config": ("AgentConfig", "Limits"),
    "jupyter_agent.agent.adapters": ("ChatModel", "ResponsesModel"),
    "jupyter_agent.settings": ("build_client", "build_model", "Settings", "SessionOptions"),
    "jupyter_agent.controller": ("AgentController",),
    "jupyter_agent.errors": ("JupyterAgentError",),
    "jupyter_agent.project": ("open_store",),
    "jupyter_agent.store": ("Store",),
    "jupyter_agent.testing": ("ScriptedModel", "ScriptedModelServer"),
}.items() for name in names}

__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension", *_API]


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'jupyter_agent' has no attribute {name!r}")
    value = getattr(import_module(_API[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})


def _is_ours(transformer: Any) -> bool:  # also a copy from before a module reload
    return (getattr(transformer, "__module__", "") == "jupyter_agent.magics"
            and getattr(transformer, "__name__", "") == "rewrite_agent_lines")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext jupyter_agent``: a bad setting in the shell's config raises ``UsageError``
    and registers nothing. ``AgentUsageError`` shows on stderr without the ``UsageError:``
    prefix; a custom handler someone else set keeps handling its own exceptions.
    """
    magics = import_module("jupyter_agent.magics")  # IPython: only when loaded
    before = list(ipython.configurables)
    try:
        agent_magics = magics.AgentMagics(shell=ipython)
    except magics.TraitError as err:
        ipython.configurables[:] = before
        message = magics.flatten_lines(str(err))
        raise magics.UsageError(f"jupyter_agent not loaded, bad setting: {message}") from err
    ipython.register_magics(agent_magics)
    transformers = ipython.input_transformers_cleanup
    if not any(_is_ours(t) for t in transformers):
        transformers.append(magics.rewrite_agent_lines)
    previous = tuple(ipython.custom_exceptions)
    if not any(getattr(e, "__name__", "") == "AgentUsageError" for e in previous):
        ipython._jupyter_agent_previous_tb = ipython.CustomTB if previous else None
        ipython._jupyter_agent_previous_exc = previous
        ipython.set_custom_exc((*previous, magics.AgentUsageError), magics.show_agent_error)


def unload_ipython_extension(ipython: Any) -> None:
    """Release the active session's lease (saying how to take it back)."""
    agent_magics = dict.get(ipython.magics_manager.registry, "AgentMagics")
    if agent_magics is None:
        return
    active = agent_magics.controller.active_session_id
    agent_magics.controller.close()
    manager = ipython.magics_manager
    for table in manager.magics.values():
        for name, func in list(table.items()):
            if getattr(func, "__self__", None) is agent_magics:
                del table[name]
    del manager.registry["AgentMagics"]
    ipython.configurables[:] = [c for c in ipython.configurables if c is not agent_magics]
    ipython.input_transformers_cleanup[:] = [
        t for t in ipython.input_transformers_cleanup if not _is_ours(t)]
    if any(getattr(e, "__name__", "") == "AgentUsageError" for e in ipython.custom_exceptions):
        ipython.custom_exceptions = ipython._jupyter_agent_previous_exc  # set with them
        if ipython._jupyter_agent_previous_tb is not None:
            ipython.CustomTB = ipython._jupyter_agent_previous_tb
        ipython._jupyter_agent_previous_tb = None
    if active is not None:
        print(f"Session {active} is no longer active (the extension was unloaded): "
              f"%agent_resume {active} takes it back.")
