"""Shared fixtures.

- ``_isolated_memory_dir`` (autouse): every test gets its own memory directory under
  ``tmp_path`` through ``JUPYTER_AGENT_MEMORY_DIR`` (and its own record of the notes
  the user was shown, ``XDG_STATE_HOME``), runs in its own working directory,
  and has no API key in the environment.
- ``shell``: a fresh ``InteractiveShell`` per test (history off) with the extension
  loaded through ``%load_ext jupyter_agent``; ``make_shell(config)`` builds one from a
  ``traitlets.config.Config`` (the equivalent of ``ipython_config.py``). Each is retired
  at the end of its test (:func:`~tests.shells.retire_shell`), so that pytest exits
  within seconds of its summary.
- ``model_server``: a started ``ScriptedModelServer`` (empty script; tests add steps).
- ``hold``: ``hold(session_id)`` makes another process take a session's lease in the
  test's memory directory and returns it (a :class:`~tests.processes.Holder`: ``.pid``,
  ``.exit()`` to let go); whatever is still held is let go at the end of the test.
- ``pytest -m "not slow"`` is the fast inner loop (see :data:`SLOW_PATHS`).
- ``pg`` (session): a throwaway PostgreSQL cluster (:class:`~tests.postgres.server.PgCluster`)
  started on first use and removed at the end of the run. Without server binaries the
  tests that use it skip, saying so -- except in CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from jupyter_agent.testing import ScriptedModelServer
from tests.postgres.server import PgCluster, find_server_bin
from tests.processes import Hold, Holder, store_env
from tests.shells import ShellFactory, retire_shell

#: Where every test is ``slow`` (``pytest -m "not slow"`` leaves them out): real kernels
#: (the notebooks under nbval too), a browser, a PostgreSQL cluster, fault processes,
#: benchmarks. A test elsewhere that takes over ~2 s says so itself (``@pytest.mark.slow``);
#: every test on the ``pg`` cluster (the store contract's ``postgres`` backend too) is slow.
SLOW_PATHS = ("tests/browser", "tests/postgres", "tests/faults", "tests/test_kernel_restart.py",
              "tests/test_benchmarks.py", "notebooks")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`SLOW_PATHS`, and those using ``pg``, as ``slow``."""
    for item in items:
        try:
            where = item.path.relative_to(config.rootpath).as_posix()
        except ValueError:
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        if ("pg" in getattr(item, "fixturenames", ())
                or params.get("store_factory") == "postgres"  # the contract on PostgreSQL
                or any(where == slow or where.startswith(f"{slow}/") for slow in SLOW_PATHS)):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _isolated_memory_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    memory = tmp_path / "memory"
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("JUPYTER_AGENT_MEMORY_DIR", str(memory))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # which notes were seen
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(work)
    return memory


@pytest.fixture
def memory_dir(_isolated_memory_dir: Path) -> Path:
    """The memory directory the extension uses in this test."""
    return _isolated_memory_dir


@pytest.fixture
def hold(memory_dir: Path) -> Iterator[Hold]:
    """``hold(session_id, label="")``: another process holds the session's lease."""
    holders: list[Holder] = []

    def take(session_id: str, label: str = "") -> Holder:
        holders.append(Holder(store_env(memory_dir), session_id, label))
        return holders[-1]

    yield take
    for holder in holders:
        if holder.proc.poll() is None:
            holder.exit()
        holder.stop()


def _new_shell(cls: type[InteractiveShell], config: Config | None) -> InteractiveShell:
    cfg = Config()
    cfg.HistoryManager.enabled = False
    if config is not None:
        cfg.merge(config)
    InteractiveShell.clear_instance()
    return cls.instance(config=cfg)


@pytest.fixture
def make_shell() -> Iterator[ShellFactory]:
    """Build shells (one at a time) with the extension loaded; cleaned up after the test."""
    shells: list[InteractiveShell] = []

    def make(config: Config | None = None, *, cls: type[InteractiveShell] = InteractiveShell,
             load: bool = True) -> InteractiveShell:
        shell = _new_shell(cls, config)
        shells.append(shell)
        if load:
            shell.run_line_magic("load_ext", "jupyter_agent")
        return shell

    yield make
    for shell in shells:
        if "jupyter_agent" in shell.extension_manager.loaded:
            shell.run_line_magic("unload_ext", "jupyter_agent")
        retire_shell(shell)
    InteractiveShell.clear_instance()


@pytest.fixture
def shell(make_shell: ShellFactory) -> InteractiveShell:
    """A fresh shell with ``%load_ext jupyter_agent`` done."""
    return make_shell()


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    """A running ``ScriptedModelServer`` with an empty script."""
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture
def agent_shell(shell: InteractiveShell, model_server: ScriptedModelServer) -> InteractiveShell:
    """``shell`` with ``AgentMagics.base_url`` pointing at ``model_server``."""
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    return shell


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
