"""jupyter-agent: an AI agent for Jupyter whose conversations are resumable sessions.

Load it in a notebook with ``%load_ext jupyter_agent``. Importing this package does
nothing else: no files are read, no environment is parsed, nothing is printed.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    """Register the agent magics on an IPython shell (``%load_ext jupyter_agent``)."""
    from jupyter_agent.magics import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """Release the active session's lease and remove the magics (``%unload_ext``)."""
    from jupyter_agent.magics import unload_ipython_extension as _unload

    _unload(ipython)
