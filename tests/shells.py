"""Helpers for tests that drive a real ``InteractiveShell`` (the fixtures are in conftest.py)."""

from __future__ import annotations

import atexit
import contextlib
import shutil
from collections.abc import Callable
from typing import Any

from IPython.core.interactiveshell import InteractiveShell

__all__ = ["ShellFactory", "magics_of", "retire_shell", "run_cell"]

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


def retire_shell(shell: InteractiveShell) -> None:
    """Let a test's shell go now, not at interpreter exit.

    Every ``InteractiveShell`` registers ``atexit_operations`` (which resets its
    namespaces, with a garbage collection each time) and keeps itself alive through that
    registration: a test run that made a thousand shells spent minutes after its summary
    in that work. This ends the shell's history session, removes its temporary files,
    unregisters the handler and clears the class's singleton.
    """
    atexit.unregister(shell.atexit_operations)
    history = shell.history_manager
    if history is not None:
        with contextlib.suppress(Exception):  # best effort: the test is over
            history.end_session()
        history.close()
        shell.history_manager = None
    for path in list(shell.tempfiles):
        path.unlink(missing_ok=True)
    for folder in list(shell.tempdirs):
        shutil.rmtree(folder, ignore_errors=True)
    shell.tempfiles, shell.tempdirs = [], []
    type(shell).clear_instance()
