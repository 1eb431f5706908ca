"""Fixtures of the team-store tests: a throwaway PostgreSQL cluster and stores on it.

- ``pg`` (session): a :class:`~tests.postgres.server.PgCluster` started once for the
  run and removed at the end. Without server binaries the tests skip, saying so --
  except in CI (``CI=true``), where they fail: CI must run them.
- ``project``: a project key of the test's own, so tests never see each other's
  sessions in the shared database.
- ``make_store``: builds :class:`PostgresStore` objects on ``pg`` (closed after the test);
  ``store``: one of them.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jupyter_agent.store.postgres import PostgresStore
from tests.postgres.server import PgCluster, find_server_bin

StoreFactory = Callable[..., PostgresStore]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the PostgreSQL tests must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg() -> Iterator[PgCluster]:
    """A running PostgreSQL cluster for the whole test run."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install 'jupyter-agent[postgres]')")
    bindir = find_server_bin()
    if bindir is None:
        _unavailable("no PostgreSQL server binaries (initdb, pg_ctl) on this machine; "
                     "install postgresql-15 to run the team-store tests")
        raise AssertionError("unreachable")
    cluster = PgCluster(bindir)
    try:
        cluster.init()
    except BaseException:
        cluster.destroy()
        raise
    yield cluster
    cluster.destroy()


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
