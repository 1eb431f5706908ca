"""The backends the contract suite runs against.

``store_factory`` is parametrized by backend: a :class:`Backend`, whose ``make()`` (or
calling it) returns a new store object on the backend's storage for this test, and
``make(label="...")`` one with a holder label. Two store objects made by one factory
share the storage (two kernels on one memory directory, or two connections to one
database). ``backend.child_env()`` describes the storage to a second process
(:mod:`tests.processes`). A new backend is one more entry in ``BACKENDS``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jupyter_agent.store import FileStore, Store
from tests.processes import store_env


@dataclass
class Backend:
    """One backend's storage for a test (see the module docstring).

    Attributes
    ----------
    name : {"json", "postgres"}
    memory : pathlib.Path
        The memory directory (the notes, and the JSON backend's sessions).
    url : str
        The database URL (PostgreSQL; "" for the files).
    project : str
        The project key (PostgreSQL; a test has one of its own).
    """

    name: str
    memory: Path
    url: str = ""
    project: str = ""
    made: list[Any] = field(default_factory=list, repr=False)

    def make(self, label: str = "") -> Store:
        """A new store object on this storage."""
        store: Store
        if self.name == "json":
            store = FileStore(self.memory, holder_label=label)
        else:
            from jupyter_agent.store.postgres import PostgresStore

            store = PostgresStore(self.url, self.memory, project=self.project,
                                  holder_label=label)
        self.made.append(store)
        return store

    __call__ = make

    def child_env(self) -> dict[str, str]:
        """The environment of a child process opening this storage
        (:func:`tests.processes.store_env`)."""
        return store_env(self.memory, url=self.url, project=self.project)

    def close(self) -> None:
        for store in self.made:
            close = getattr(store, "close", None)
            if close is not None:
                close()
            else:
                store.release_all()


def _json_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return Backend("json", tmp_path / "memory")


def _postgres_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Stores of a project of this test's own on the run's PostgreSQL cluster (``pg``)."""
    pg = request.getfixturevalue("pg")
    project = f"contract/{request.node.name}/{secrets.token_hex(4)}"
    return Backend("postgres", tmp_path / "memory", url=pg.url(), project=project)


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Backend]] = {
    "json": _json_backend,
    "postgres": _postgres_backend,
}

StoreFactory = Backend


@pytest.fixture(params=sorted(BACKENDS))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Makes store objects of one backend, all on the same storage."""
    backend = BACKENDS[request.param](request, tmp_path)
    request.addfinalizer(backend.close)
    return backend


@pytest.fixture
def store(store_factory: Backend) -> Store:
    """One store object of the backend under test."""
    return store_factory()
