"""The root of every error jupyter-agent raises on purpose (see :mod:`jupyter_agent.errors`)."""

from __future__ import annotations

__all__ = ["JupyterAgentError"]


class JupyterAgentError(Exception):
    """Base class of every error jupyter-agent raises deliberately."""
