"""What the kernel the magics run in is: Jupyter or a terminal, whether a person watches
the running cell, and the label its session leases carry."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def is_jupyter(shell: Any) -> bool:
    """True for a Jupyter kernel's shell (rich output), False for terminal/plain IPython."""
    return shell is not None and (type(shell).__name__ == "ZMQInteractiveShell"
                                  or bool(getattr(shell, "has_trait", lambda _: False)("kernel")))


def can_update_live(shell: Any) -> bool:
    """True where a front end answers the running cell's input requests (JupyterLab,
    Notebook, VS Code); headless runners (nbclient, papermill) get only final outputs."""
    return bool(getattr(getattr(shell, "kernel", None), "_allow_stdin", False))


def kernel_label(shell: Any = None, environ: Mapping[str, str] | None = None,
                 project_root: Path | None = None) -> str:
    """For people who find its session in use: the notebook's path (relative to
    ``project_root`` when under it), else what kind of kernel; never anything secret."""
    env = os.environ if environ is None else environ
    ns = getattr(shell, "user_ns", None) or {}
    name = str(ns.get("__session__") or env.get("JPY_SESSION_NAME") or "")
    if name:
        path = Path(name)
        if project_root is not None and path.is_absolute():
            try:
                return str(path.relative_to(project_root))
            except ValueError:
                return str(path)
        return name
    if is_jupyter(shell):
        return "a Jupyter kernel"
    return "IPython (terminal)" if shell is not None else "Python"
