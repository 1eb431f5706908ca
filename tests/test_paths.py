"""The memory-directory rule: setting > $JUPYTER_AGENT_MEMORY_DIR > project root markers > cwd."""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_agent.paths import MEMORY_DIR_ENV, find_project_root, resolve_memory_dir


@pytest.mark.parametrize("marker", [".jupyter_agent", ".git", "pyproject.toml"])
def test_project_root_is_nearest_ancestor_with_a_marker(tmp_path: Path, marker: str) -> None:
    project = tmp_path / "project"
    deep = project / "analysis" / "notebooks"
    deep.mkdir(parents=True)
    target = project / marker
    if marker == "pyproject.toml":
        target.write_text("[project]\n")
    else:
        target.mkdir()
    assert find_project_root(deep) == project.resolve()
    assert resolve_memory_dir(None, environ={}, cwd=deep) == project.resolve() / ".jupyter_agent"


def test_nearest_marker_wins(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "inner"
    (inner / "sub").mkdir(parents=True)
    (outer / ".git").mkdir()
    (inner / "pyproject.toml").write_text("")
    assert find_project_root(inner / "sub") == inner.resolve()


def test_no_marker_means_the_working_directory(tmp_path: Path) -> None:
    here = tmp_path / "plain" / "dir"
    here.mkdir(parents=True)
    # tmp_path itself has no marker above it that we control; guard the assumption
    if any((p / m).exists() for p in here.parents for m in (".git", "pyproject.toml",
                                                           ".jupyter_agent")):
        pytest.skip("a marker exists above tmp_path on this machine")
    assert find_project_root(here) == here.resolve()
    assert resolve_memory_dir("", environ={}, cwd=here) == here.resolve() / ".jupyter_agent"


def test_env_beats_project_root_and_setting_beats_env(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    env = {MEMORY_DIR_ENV: str(tmp_path / "from-env")}
    assert resolve_memory_dir(None, environ=env, cwd=tmp_path) == tmp_path / "from-env"
    assert resolve_memory_dir(str(tmp_path / "set"), environ=env, cwd=tmp_path) == tmp_path / "set"
    # an empty variable counts as unset
    assert resolve_memory_dir(None, environ={MEMORY_DIR_ENV: ""}, cwd=tmp_path) == (
        tmp_path.resolve() / ".jupyter_agent"
    )


def test_relative_and_home_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_memory_dir("rel/mem", environ={}, cwd=tmp_path) == tmp_path.resolve() / "rel/mem"
    assert resolve_memory_dir("~/mem", environ={}, cwd=tmp_path) == tmp_path / "home" / "mem"
    env = {MEMORY_DIR_ENV: "envrel"}
    assert resolve_memory_dir(None, environ=env, cwd=tmp_path) == tmp_path.resolve() / "envrel"


def test_shell_follows_the_rule(shell: InteractiveShell, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the magics: trait > env > project root (kernel cwd) > cwd."""
    magics = shell.magics_manager.registry["AgentMagics"]
    controller = magics.controller
    assert controller.memory_dir == tmp_path / "memory"  # from the env (autouse fixture)

    shell.run_line_magic("config", f'AgentMagics.memory_dir = "{tmp_path / "trait"}"')
    assert controller.memory_dir == tmp_path / "trait"

    shell.run_line_magic("config", 'AgentMagics.memory_dir = ""')
    monkeypatch.delenv(MEMORY_DIR_ENV)
    project = tmp_path / "proj"
    (project / "nb").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    monkeypatch.chdir(project / "nb")
    assert controller.memory_dir == project.resolve() / ".jupyter_agent"
    assert controller.store.root == project.resolve() / ".jupyter_agent"
