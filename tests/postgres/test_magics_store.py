"""The magics on a team store: selected by a URL, sessions in the database, one-line
errors without the password, and a turn that goes on after the database came back."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from jupyter_agent.paths import project_key
from jupyter_agent.project import find_project_root
from jupyter_agent.store.postgres import PostgresStore
from jupyter_agent.testing import ScriptedModelServer
from tests.postgres.server import PgCluster
from tests.shells import magics_of


def active_id(shell: InteractiveShell) -> str:
    sid = magics_of(shell).controller.active_session_id
    assert sid is not None
    return str(sid)


@pytest.fixture
def team_shell(agent_shell: InteractiveShell, pg: PgCluster) -> InteractiveShell:
    agent_shell.run_line_magic("config", f'AgentMagics.store_url = "{pg.url()}"')
    return agent_shell


def test_sessions_live_in_the_database(team_shell: InteractiveShell,
                                       model_server: ScriptedModelServer, pg: PgCluster,
                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    model_server.add_steps([{"text": "first answer"}, {"text": "second answer"}])
    team_shell.run_line_magic("agent", "first question")
    sid = active_id(team_shell)
    controller = magics_of(team_shell).controller
    store = controller.store
    assert isinstance(store, PostgresStore)
    assert store.project == project_key(find_project_root())
    assert store.holds_lease(sid)
    team_shell.run_line_magic("agent", "second question")
    other = PostgresStore(pg.url(), tmp_path_factory.mktemp("other"), project=store.project)
    try:
        (entry,) = other.list_sessions()
        assert (entry.id, entry.status, entry.message_count) == (sid, "in use", 5)
        assert entry.holder is not None and entry.holder.pid is not None
        assert entry.summary  # the fallback summary was written at the end of the turn
    finally:
        other.close()
    with capture_output() as out:
        team_shell.run_line_magic("agent_sessions", "")
    assert sid in out.stdout


def test_the_password_is_never_shown(team_shell: InteractiveShell, pg: PgCluster,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    with capture_output() as out:
        team_shell.run_line_magic("config", "AgentMagics")
        team_shell.run_cell("get_ipython().find_magic('agent_new').__self__.store_url")
    assert "store_url" in out.stdout and pg.password not in out.stdout
    wrong = "not-the-password-123"
    team_shell.run_line_magic("config", f'AgentMagics.store_url = "{pg.url(password=wrong)}"')
    with pytest.raises(UsageError) as info:
        team_shell.run_line_magic("agent_new", "")
    message = str(info.value)
    assert "password authentication failed" in message and "\n" not in message
    assert wrong not in message and pg.password not in message
    capsys.readouterr()
    team_shell.run_line_magic("config", 'AgentMagics.store_url = "mysql://u:hunter22@h/db"')
    refused = capsys.readouterr()
    assert "must be empty (the JSON files) or a PostgreSQL URL" in refused.err
    assert "hunter22" not in refused.err and "mysql://u:***@h/db" in refused.err
    assert wrong not in refused.err + refused.out and pg.password not in refused.err
    assert magics_of(team_shell).store_url == pg.url(password=wrong)  # refused: unchanged


def test_a_turn_after_the_database_restarted_goes_on(
    team_shell: InteractiveShell, model_server: ScriptedModelServer, pg: PgCluster
) -> None:
    model_server.add_steps([{"text": "one"}, {"text": "two"}, {"text": "three"}])
    team_shell.run_line_magic("agent", "first")
    sid = active_id(team_shell)
    pg.stop()
    try:
        with pytest.raises(UsageError) as info:
            team_shell.run_line_magic("agent", "while it is down")
        assert "session database" in str(info.value) and pg.password not in str(info.value)
    finally:
        pg.start()
    team_shell.run_line_magic("agent", "after")
    store = magics_of(team_shell).controller.store
    assert store.holds_lease(sid)
    texts = [m.get("content") for m in store.load_session(sid).transcript]
    assert texts[-2:] == ["after", "two"]
    assert "first" in texts and "one" in texts
