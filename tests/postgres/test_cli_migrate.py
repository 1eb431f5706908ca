"""``jupyter agent migrate`` as a user runs it: files into PostgreSQL and back (design notes
"The team store (PostgreSQL)")."""

from __future__ import annotations

import json
import os
from pathlib import Path

from jupyter_agent.paths import project_key
from jupyter_agent.project import find_project_root
from jupyter_agent.store import FileStore
from jupyter_agent.store.postgres import PostgresStore
from tests.cli.helpers import run_cli
from tests.postgres.server import PgCluster

SYSTEM = {"role": "system", "content": "You help with data."}


def test_migrate_to_and_from_a_database(pg: PgCluster, tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    (work / "pyproject.toml").write_text("")
    files = FileStore(tmp_path / "files")
    ids = []
    for prompt in ("penguins", "rainfall"):
        sid = files.create_session([SYSTEM])
        files.save(sid, [SYSTEM, {"role": "user", "content": prompt},
                         {"role": "assistant", "content": "done"}])
        ids.append(sid)
    files.update(ids[1], archived=True)
    env = {**os.environ, "JUPYTER_AGENT_MEMORY_DIR": str(tmp_path / "files")}
    env.pop("JUPYTER_AGENT_STORE_URL", None)

    first = run_cli("migrate", "--to", pg.url(), "--json", env=env, cwd=work)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert sorted(report["copied"]) == sorted(ids) and report["ok"] and report["verified"] == 2
    assert pg.password not in first.stdout + first.stderr

    again = run_cli("migrate", "--to", pg.url(), env=env, cwd=work)
    assert (again.returncode, again.stdout.strip()) == (0, "copied 0, skipped 2, verified 2 of 2")

    team = PostgresStore(pg.url(), tmp_path / "files", project=project_key(find_project_root(work)))
    try:
        for sid in ids:
            assert team.load_session(sid) == files.load_session(sid)
        listed = run_cli("list", "--all", "--json", cwd=work,
                         env={**env, "JUPYTER_AGENT_STORE_URL": pg.url()})
        assert sorted(e["id"] for e in json.loads(listed.stdout)) == sorted(ids)
    finally:
        team.close()

    back_env = {**env, "JUPYTER_AGENT_MEMORY_DIR": str(tmp_path / "back")}
    back = run_cli("migrate", "--from", pg.url(), env=back_env, cwd=work)
    assert back.returncode == 0 and back.stdout.startswith("copied 2,"), back.stderr
    restored = FileStore(tmp_path / "back")
    assert {s.id for s in restored.list_sessions(include_archived=True)} == set(ids)


def test_migrate_needs_one_direction_and_a_postgres_url(tmp_path: Path) -> None:
    neither = run_cli("migrate", cwd=tmp_path)  # a usage error
    assert neither.returncode == 2 and "one of the arguments --to --from is required" in \
        neither.stderr
    wrong = run_cli("migrate", "--to", "mysql://me:hunter22@db/x", cwd=tmp_path)
    assert wrong.returncode == 1 and "hunter22" not in wrong.stderr
    assert "PostgreSQL URL" in wrong.stderr


def test_migrate_with_no_sessions_still_reaches_the_database(pg: PgCluster,
                                                              tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    env = dict(os.environ, JUPYTER_AGENT_MEMORY_DIR=str(tmp_path / "memory"))
    empty = run_cli("migrate", "--to", pg.url(), env=env, cwd=work)
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.startswith("Nothing to migrate: no sessions in ")
    assert "answers" in empty.stdout
    dead = pg.url(port=9)  # nothing listens there
    unreachable = run_cli("migrate", "--to", dead, env=env, cwd=work)
    assert unreachable.returncode == 1 and "Nothing to migrate" not in unreachable.stdout
    assert unreachable.stderr.count("\n") == 1
