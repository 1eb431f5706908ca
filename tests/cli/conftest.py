"""Fixtures of the command-line tests: ``jupyter agent`` run in a real subprocess.

``cli(*args)`` runs the installed ``jupyter-agent`` script (``python -m jupyter_agent.cli``
where no script is installed) in the test's working directory and environment (its
memory directory comes from ``JUPYTER_AGENT_MEMORY_DIR``, set for every test).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jupyter_agent.store import SessionStore
from tests.cli.helpers import CLI, run_cli

HOLDER = """
import sys
from jupyter_agent.store import SessionStore
SessionStore(sys.argv[1]).acquire_lease(sys.argv[2])
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def cli() -> CLI:
    """Runs ``jupyter agent`` as a user does (see :func:`tests.cli.helpers.run_cli`)."""
    return run_cli


@pytest.fixture(name="store")
def store_fixture(memory_dir: Path) -> SessionStore:
    return SessionStore(memory_dir)


@pytest.fixture
def hold(memory_dir: Path) -> Iterator[Callable[[str], int]]:
    """``hold(session_id)`` makes another process take the session's lease; returns its pid."""
    procs: list[subprocess.Popen[str]] = []

    def take(session_id: str) -> int:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(memory_dir), session_id],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc.pid

    yield take
    for proc in procs:
        proc.communicate("")
