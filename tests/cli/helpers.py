"""Helpers of the command-line tests: how a user starts ``jupyter agent`` here."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["CLI", "command", "run_cli"]

CLI = Callable[..., subprocess.CompletedProcess[str]]
"""The ``cli`` fixture: ``cli(*args, input=None, env=None, cwd=None)``."""


def command() -> list[str]:
    """How a user starts the command in this environment."""
    script = Path(sys.executable).with_name("jupyter-agent")
    return [str(script)] if script.exists() else [sys.executable, "-m", "jupyter_agent.cli"]


def run_cli(*args: str, input: str | None = None, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``jupyter agent ARGS`` in a subprocess; return what it printed and its exit code."""
    return subprocess.run([*command(), *args], capture_output=True, text=True,
                          input=input if input is not None else "", timeout=120,
                          env=env if env is not None else dict(os.environ), cwd=cwd)
