"""What the kernel the magics run in is: a Jupyter kernel or a terminal, whether a person
watches the running cell, and the label its session leases carry."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["can_update_live", "is_jupyter", "kernel_label"]


def is_jupyter(shell: Any) -> bool:
    """True for a Jupyter kernel's shell (rich output), False for terminal/plain IPython."""
    return shell is not None and (
        type(shell).__name__ == "ZMQInteractiveShell" or bool(shell.has_trait("kernel"))
    )


def can_update_live(shell: Any) -> bool:
    """True where a person watches the cell run: a kernel whose running cell's front end
    answers input requests (JupyterLab, Notebook, VS Code). Headless runners (nbclient,
    nbconvert, papermill, nbval) do not, and get no live updates: only final outputs."""
    kernel = getattr(shell, "kernel", None)
    return bool(getattr(kernel, "_allow_stdin", False))


def kernel_label(shell: Any = None, environ: Mapping[str, str] | None = None,
                 project_root: Path | None = None) -> str:
    """What this kernel is, for people who find its session in use elsewhere.

    The notebook's path when the kernel knows it (``__session__`` in the user namespace,
    set by ipykernel, else ``$JPY_SESSION_NAME``, set by Jupyter Server), relative to the
    project root when it lies under it; else ``"IPython (terminal)"`` or ``"a Jupyter
    kernel"``. Never anything secret (no token, no connection file, no environment).
    """
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
    if shell is not None and (type(shell).__name__ == "ZMQInteractiveShell"
                              or bool(getattr(shell, "has_trait", lambda _: False)("kernel"))):
        return "a Jupyter kernel"
    return "IPython (terminal)" if shell is not None else "Python"
