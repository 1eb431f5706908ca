"""Fixtures of the artefact tests: a session store in the test's memory directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_agent.store import FileStore


@pytest.fixture(name="store")
def store_fixture(memory_dir: Path) -> FileStore:
    """A store on the memory directory the magics and the CLI use in this test."""
    return FileStore(memory_dir)
