"""Fixtures of the artefact tests: a session store in the test's memory directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_agent.store import SessionStore


@pytest.fixture(name="store")
def store_fixture(memory_dir: Path) -> SessionStore:
    """A store on the memory directory the magics and the CLI use in this test."""
    return SessionStore(memory_dir)
