"""Fixtures of the team-store tests: a throwaway PostgreSQL cluster and stores on it.

- ``pg`` (session, in ``tests/conftest.py``, shared with the store contract suite): a
  :class:`~tests.postgres.server.PgCluster` started once for the run.
- ``project``: a project key of the test's own, so tests never see each other's
  sessions in the shared database.
- ``make_store``: builds :class:`PostgresStore` objects on ``pg`` (closed after the test);
  ``store``: one of them.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jupyter_agent.store.postgres import PostgresStore
from tests.postgres.server import PgCluster

StoreFactory = Callable[..., PostgresStore]


@pytest.fixture
def project(request: pytest.FixtureRequest) -> str:
    """A project key no other test uses."""
    return f"tests/{request.node.name}/{secrets.token_hex(4)}"


@pytest.fixture
def make_store(pg: PgCluster, project: str, tmp_path: Path) -> Iterator[StoreFactory]:
    """``make(project=None, *, memory=None, url=None, label="")`` -> a PostgresStore."""
    made: list[PostgresStore] = []

    def make(project_key: str | None = None, *, memory: Path | None = None,
             url: str | None = None, label: str = "") -> PostgresStore:
        store = PostgresStore(url or pg.url(), memory or tmp_path / "mem",
                              project=project_key or project, holder_label=label)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> PostgresStore:
    """A team store of this test's project."""
    return make_store()
