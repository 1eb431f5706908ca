"""The memory-directory rule: setting > $JUPYTER_AGENT_MEMORY_DIR > project root markers > cwd."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jupyter_agent.project import MEMORY_DIR_ENV, find_project_root, resolve_memory_dir
from jupyter_agent.testing import ScriptedModelServer
from tests.shells import ShellFactory


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


def test_a_known_project_root_is_used_as_is(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    root = tmp_path / "resolved-earlier"
    assert resolve_memory_dir(None, environ={}, cwd=tmp_path, project_root=root) == (
        root / ".jupyter_agent")


def test_shell_follows_the_rule(make_shell: ShellFactory, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the magics: trait > env > project root of the kernel's starting directory."""
    monkeypatch.delenv(MEMORY_DIR_ENV)
    project = tmp_path / "proj"
    (project / "nb").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    monkeypatch.chdir(project / "nb")  # where the kernel starts
    shell = make_shell()
    controller = shell.magics_manager.registry["AgentMagics"].controller
    assert controller.memory_dir == project.resolve() / ".jupyter_agent"
    assert controller.store.root == project.resolve() / ".jupyter_agent"

    # the trait and the environment variable apply as soon as they change
    monkeypatch.setenv(MEMORY_DIR_ENV, str(tmp_path / "from-env"))
    assert controller.memory_dir == tmp_path / "from-env"
    shell.run_line_magic("config", f'AgentMagics.memory_dir = "{tmp_path / "trait"}"')
    assert controller.memory_dir == tmp_path / "trait"
    # a relative setting is taken from the starting directory, not the current one
    shell.run_line_magic("config", 'AgentMagics.memory_dir = "rel"')
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".git").mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    assert controller.memory_dir == project.resolve() / "nb" / "rel"
    shell.run_line_magic("config", 'AgentMagics.memory_dir = ""')
    monkeypatch.delenv(MEMORY_DIR_ENV)
    # os.chdir in the kernel (the user's or the agent's code) does not switch the sessions
    shell.run_cell(f"import os; os.chdir({str(elsewhere)!r})")
    assert os.getcwd() == str(elsewhere)
    assert controller.memory_dir == project.resolve() / ".jupyter_agent"
    assert controller.root == project.resolve()


def test_new_sessions_record_the_starting_project_root(
    make_shell: ShellFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".git").mkdir()
    monkeypatch.chdir(project)
    shell = make_shell()
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)
    monkeypatch.chdir(other)
    with ScriptedModelServer() as server:
        shell.run_line_magic("agent_new", f"--base-url {server.base_url}")
    controller = shell.magics_manager.registry["AgentMagics"].controller
    record = controller.record()
    assert record.project_root == str(project.resolve())


FOREIGN_UID = 54321


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user's needs root")
@pytest.mark.parametrize("planted", ["owner", "parent owner", "symlink"])
def test_a_jupyter_agent_of_someone_else_is_never_adopted(tmp_path: Path, planted: str) -> None:
    shared = tmp_path / "shared"  # say /tmp or a shared drive
    mine = shared / "mine" / "notebooks"
    mine.mkdir(parents=True)
    (shared / ".git").mkdir()  # its other markers do not make it ours either
    planted_dir = shared / ".jupyter_agent"
    if planted == "symlink":
        (tmp_path / "elsewhere").mkdir()
        planted_dir.symlink_to(tmp_path / "elsewhere")
    else:
        planted_dir.mkdir()
        os.chown(planted_dir if planted == "owner" else shared, FOREIGN_UID, FOREIGN_UID)
    assert find_project_root(mine) == mine.resolve()
    assert resolve_memory_dir(None, environ={}, cwd=mine) == mine.resolve() / ".jupyter_agent"
    # the same layout, all of it the user's own, is adopted
    os.chown(shared, 0, 0)
    if planted == "symlink":
        planted_dir.unlink()
        planted_dir.mkdir()
    os.chown(planted_dir, 0, 0)
    assert find_project_root(mine) == shared.resolve()


def test_adoption_is_decided_for_the_given_user(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".jupyter_agent").mkdir(parents=True)
    (project / "nb").mkdir()
    assert find_project_root(project / "nb") == project.resolve()
    other = os.geteuid() + 1
    assert find_project_root(project / "nb", uid=other) == (project / "nb").resolve()
