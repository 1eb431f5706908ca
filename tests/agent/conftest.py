"""Fixtures of the agent tests: a store on ``tmp_path``, a bare ``InteractiveShell`` and an
in-process scripted model (the HTTP ``model_server`` is in the top-level conftest)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModel
from tests.shells import retire_shell


@pytest.fixture(name="store")
def store_fixture(tmp_path: Path) -> FileStore:
    """A session store on ``tmp_path``."""
    return FileStore(tmp_path / "store")


@pytest.fixture(name="ishell")
def ishell_fixture() -> Iterator[InteractiveShell]:
    """A real, bare ``InteractiveShell`` (history off, no extension), cleared after."""
    InteractiveShell.clear_instance()
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    yield shell
    retire_shell(shell)


@pytest.fixture(name="scripted")
def scripted_fixture() -> ScriptedModel:
    """An in-process scripted model with an empty script (tests add steps)."""
    return ScriptedModel()
