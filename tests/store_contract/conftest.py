"""The backends the contract suite runs against.

``store_factory`` is parametrized by backend: ``make()`` returns a new store object on the
backend's storage for this test, ``make(label="...")`` one with a holder label. Two store
objects made by one factory share the storage (two kernels on one memory directory, or two
connections to one database). A new backend is one more entry in ``BACKENDS``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import pytest

from jupyter_agent.store import SessionStore, Store

StoreFactory = Callable[..., Store]


def _json_backend(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    def make(label: str = "") -> Store:
        return SessionStore(tmp_path / "memory", holder_label=label)

    return make


def _postgres_backend(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Stores of a project of this test's own on the run's PostgreSQL cluster (``pg``)."""
    from jupyter_agent.store.postgres import PostgresStore

    pg = request.getfixturevalue("pg")
    project = f"contract/{request.node.name}/{secrets.token_hex(4)}"
    made: list[PostgresStore] = []

    def make(label: str = "") -> Store:
        store = PostgresStore(pg.url(), tmp_path / "memory", project=project,
                              holder_label=label)
        made.append(store)
        return store

    def close() -> None:
        for store in made:
            store.close()

    request.addfinalizer(close)
    return make


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], StoreFactory]] = {
    "json": _json_backend,
    "postgres": _postgres_backend,
}


@pytest.fixture(params=sorted(BACKENDS))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Makes store objects of one backend, all on the same storage."""
    factory: StoreFactory = BACKENDS[request.param](request, tmp_path)
    return factory


@pytest.fixture
def store(store_factory: StoreFactory) -> Store:
    """One store object of the backend under test."""
    return store_factory()
