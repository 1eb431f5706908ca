"""Helpers for tests that drive a real ``InteractiveShell`` (the fixtures are in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

__all__ = ["ShellFactory", "magics_of", "run_cell"]

ShellFactory = Callable[..., InteractiveShell]
"""The ``make_shell`` fixture: ``make_shell(config=None, *, cls=..., load=True)``."""


def run_cell(shell: InteractiveShell, code: str) -> Any:
    """Run ``code`` as a cell; raise the cell's error if it failed; return its result."""
    result = shell.run_cell(code, store_history=False)
    result.raise_error()
    return result.result


def magics_of(shell: InteractiveShell) -> Any:
    """The shell's ``AgentMagics`` instance."""
    return dict.get(shell.magics_manager.registry, "AgentMagics")
