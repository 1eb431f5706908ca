"""project_key: the same key for everyone working on one project, from the git remote."""

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
    key = project_key(tmp_path / "clone")
    assert key == "github.com/acme/analyses"
    assert "token123" not in key
    (tmp_path / "clone" / "penguins").mkdir()
    assert project_key(tmp_path / "clone" / "penguins") == "github.com/acme/analyses/penguins"


def test_clones_in_different_places_share_the_key(tmp_path: Path) -> None:
    write_repo(tmp_path / "alice" / "work", '[remote "origin"]\n url = git@github.com:acme/a.git\n')
    write_repo(tmp_path / "bob" / "x", '[remote "origin"]\n\turl = https://github.com/acme/a\n')
    assert project_key(tmp_path / "alice" / "work") == project_key(tmp_path / "bob" / "x")


def test_first_remote_when_there_is_no_origin(tmp_path: Path) -> None:
    write_repo(tmp_path, '[remote "team"]\n\turl = https://example.org/t/r.git\n'
                         '[remote "other"]\n\turl = https://example.org/o/r.git\n')
    assert project_key(tmp_path) == "example.org/t/r"


def test_linked_work_tree_reads_the_main_config(tmp_path: Path) -> None:
    write_repo(tmp_path / "main", '[remote "origin"]\n\turl = https://example.org/t/r.git\n')
    linked = tmp_path / "main" / ".git" / "worktrees" / "feature"
    linked.mkdir(parents=True)
    (linked / "commondir").write_text("../..\n")
    (tmp_path / "feature").mkdir()
    (tmp_path / "feature" / ".git").write_text(f"gitdir: {linked}\n")
    assert project_key(tmp_path / "feature") == "example.org/t/r"


def test_without_a_remote_the_path_is_the_key(tmp_path: Path) -> None:
    assert project_key(tmp_path) == tmp_path.resolve().as_posix()
    write_repo(tmp_path / "local", "[core]\n\tbare = false\n")
    assert project_key(tmp_path / "local") == (tmp_path / "local").resolve().as_posix()


def test_a_fifo_config_does_not_block(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    os.mkfifo(tmp_path / ".git" / "config")
    assert project_key(tmp_path) == tmp_path.resolve().as_posix()
