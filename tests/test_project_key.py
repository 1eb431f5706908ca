"""project_key: the same key for a user in every clone of a project; never one for two users."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jupyter_agent.paths import normalize_remote_url, project_key


@pytest.mark.parametrize(("url", "expected"), [
    ("https://github.com/acme/analyses.git", "github.com/acme/analyses"),
    ("https://alice:ghp_s3cret@GitHub.com/acme/analyses", "github.com/acme/analyses"),
    ("git@github.com:acme/analyses.git", "github.com/acme/analyses"),
    ("ssh://git@github.com:22/acme/analyses/", "github.com/acme/analyses"),
    ("gitlab.example.org:group/sub/repo", "gitlab.example.org/group/sub/repo"),
    ("/srv/git/analyses.git", "/srv/git/analyses"),
    ("file:///srv/git/analyses.git", "/srv/git/analyses"),
])
def test_remote_urls_are_normalized(url: str, expected: str) -> None:
    assert normalize_remote_url(url) == expected


def write_repo(root: Path, config: str) -> None:
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(config)


def test_the_origin_remote_names_the_project(tmp_path: Path) -> None:
    write_repo(tmp_path / "clone", '[core]\n\tbare = false\n[remote "upstream"]\n'
               '\turl = https://github.com/other/fork.git\n[remote "origin"]\n'
               '\turl = https://bob:token123@github.com/acme/analyses.git\n'
               '\tfetch = +refs/heads/*:refs/remotes/origin/*\n')
    key = project_key(tmp_path / "clone", user="alice")
    assert key == "alice@github.com/acme/analyses"
    assert "token123" not in key
    (tmp_path / "clone" / "penguins").mkdir()
    assert (project_key(tmp_path / "clone" / "penguins", user="alice")
            == "alice@github.com/acme/analyses/penguins")


def test_clones_in_different_places_share_the_key(tmp_path: Path) -> None:
    write_repo(tmp_path / "alice" / "work", '[remote "origin"]\n url = git@github.com:acme/a.git\n')
    write_repo(tmp_path / "bob" / "x", '[remote "origin"]\n\turl = https://github.com/acme/a\n')
    assert (project_key(tmp_path / "alice" / "work", user="u", host="h1")
            == project_key(tmp_path / "bob" / "x", user="u", host="h2") == "u@github.com/acme/a")
    assert project_key(tmp_path / "bob" / "x", user="v") == "v@github.com/acme/a"


def test_first_remote_when_there_is_no_origin(tmp_path: Path) -> None:
    write_repo(tmp_path, '[remote "team"]\n\turl = https://example.org/t/r.git\n'
                         '[remote "other"]\n\turl = https://example.org/o/r.git\n')
    assert project_key(tmp_path, user="u") == "u@example.org/t/r"


def test_linked_work_tree_reads_the_main_config(tmp_path: Path) -> None:
    write_repo(tmp_path / "main", '[remote "origin"]\n\turl = https://example.org/t/r.git\n')
    linked = tmp_path / "main" / ".git" / "worktrees" / "feature"
    linked.mkdir(parents=True)
    (linked / "commondir").write_text("../..\n")
    (tmp_path / "feature").mkdir()
    (tmp_path / "feature" / ".git").write_text(f"gitdir: {linked}\n")
    assert project_key(tmp_path / "feature", user="u") == "u@example.org/t/r"


def test_without_a_remote_user_host_and_path_are_the_key(tmp_path: Path) -> None:
    assert project_key(tmp_path, user="u", host="h") == f"u@h:{tmp_path.resolve().as_posix()}"
    write_repo(tmp_path / "local", "[core]\n\tbare = false\n")
    assert (project_key(tmp_path / "local", user="u", host="h")
            == f"u@h:{(tmp_path / 'local').resolve().as_posix()}")


def test_two_hub_users_at_the_same_path_get_two_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = set()
    for user in ("alice", "bob"):
        monkeypatch.setenv("JUPYTERHUB_USER", user)
        keys.add(project_key("/home/jovyan/work", host="jupyter-server"))
    assert keys == {"alice@jupyter-server:/home/jovyan/work",
                    "bob@jupyter-server:/home/jovyan/work"}


def test_a_fifo_config_does_not_block(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    os.mkfifo(tmp_path / ".git" / "config")
    assert project_key(tmp_path, user="u", host="h") == f"u@h:{tmp_path.resolve().as_posix()}"
