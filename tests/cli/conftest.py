"""Fixtures of the command-line tests: ``jupyter agent`` run in a real subprocess.

``cli(*args)`` runs the installed ``jupyter-agent`` script (``python -m jupyter_agent.cli``
where no script is installed) in the test's working directory and environment (its
memory directory comes from ``JUPYTER_AGENT_MEMORY_DIR``, set for every test).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_agent.store import FileStore
from tests.cli.helpers import CLI, run_cli


@pytest.fixture
def cli() -> CLI:
    """Runs ``jupyter agent`` as a user does (see :func:`tests.cli.helpers.run_cli`)."""
    return run_cli


@pytest.fixture(name="store")
def store_fixture(memory_dir: Path) -> FileStore:
    return FileStore(memory_dir)


