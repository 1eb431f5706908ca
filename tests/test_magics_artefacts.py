"""%agent_fork, %agent_export and %agent_sessions --search on a real shell, with the
scripted model server and real session files (design notes "Forks, exports and search")."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_agent.store import FileStore, ForkOrigin
from jupyter_agent.testing import ScriptedModelServer
from tests.processes import Hold
from tests.shells import magics_of


@pytest.fixture
def two_turns(agent_shell: InteractiveShell, model_server: ScriptedModelServer) -> str:
    """An active session 'Penguins' with two turns: a question, then code that ran."""
    agent_shell.run_line_magic("agent_new", "--title Penguins --approve auto")
    model_server.add_steps([{"text": "Flipper length is in millimetres."}])
    agent_shell.run_line_magic("agent", "what unit is flipper length in?")
    model_server.add_steps([
        {"tool_calls": [{"name": "run_python", "arguments": {"code": "print(6 * 7)"}}]},
        {"text": "The answer is 42."},
    ])
    agent_shell.run_line_magic("agent", "compute six times seven")
    return str(magics_of(agent_shell).controller.active_session_id)


def test_fork_at_a_turn_becomes_the_active_session(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, two_turns: str,
    memory_dir: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    capsys.readouterr()
    agent_shell.run_line_magic("agent_fork", "--at 1 --title 'try again'")
    out = capsys.readouterr().out
    controller = magics_of(agent_shell).controller
    fork = controller.active_session_id
    assert fork != two_turns
    assert out.startswith(f"Forked session {two_turns} after turn 1 of 2 into session {fork} "
                          "— try again.\n")
    assert f"active session now; {two_turns} is unchanged" in out
    store = FileStore(memory_dir)
    record = store.load_session(fork)
    assert record.parent == ForkOrigin(session_id=two_turns, turn=1)
    assert record.title == "try again"
    assert store.describe_session(two_turns).holder is None  # the parent's lease was let go
    model_server.add_steps([{"text": "In a fork."}])
    agent_shell.run_line_magic("agent", "and in centimetres?")
    sent = [m.get("content") for m in model_server.requests[-1]["messages"]]
    assert "what unit is flipper length in?" in sent and sent[-1] == "and in centimetres?"
    assert "compute six times seven" not in sent
    assert len(store.load_session(two_turns).transcript) == 7  # the parent is untouched


def test_fork_of_a_session_another_process_holds(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, two_turns: str,
    memory_dir: Path, capsys: pytest.CaptureFixture[str], hold: Hold,
) -> None:
    agent_shell.run_line_magic("agent_new", "")  # let the session go ...
    holder = hold(two_turns)  # ... to another process
    with pytest.raises(UsageError, match="in use by process"):
        agent_shell.run_line_magic("agent_resume", two_turns)
    agent_shell.run_line_magic("agent_fork", two_turns)
    holder.exit()
    fork = magics_of(agent_shell).controller.active_session_id
    record = FileStore(memory_dir).load_session(str(fork))
    assert record.title == "Penguins (fork)" and record.parent == ForkOrigin(session_id=two_turns)
    assert "(2 turns) into session" in capsys.readouterr().out


def test_fork_errors_are_one_line(agent_shell: InteractiveShell, two_turns: str) -> None:
    with pytest.raises(UsageError, match=r"^cannot fork session '\w+' at turn 3: use 1 to 2$"):
        agent_shell.run_line_magic("agent_fork", "--at 3")
    with pytest.raises(UsageError, match="no saved session 'nosuch'"):
        agent_shell.run_line_magic("agent_fork", "nosuch")
    assert magics_of(agent_shell).controller.active_session_id == two_turns


def test_export_writes_files_and_never_overwrites(
    agent_shell: InteractiveShell, two_turns: str, capsys: pytest.CaptureFixture[str],
) -> None:
    capsys.readouterr()
    agent_shell.run_line_magic("agent_export", "")
    out = capsys.readouterr().out
    path = Path.cwd() / f"session-{two_turns}.ipynb"
    assert out.startswith(f"Exported session {two_turns} as a notebook to {path} (")
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert [c.source for c in code] == ["print(6 * 7)"]
    assert code[0].outputs[0].text == "42\n"
    agent_shell.run_line_magic("agent_export", f"{two_turns} -o transcript.md")
    assert Path("transcript.md").read_text("utf-8").startswith("# Penguins\n")
    with pytest.raises(UsageError, match=r"transcript.md: the file exists \(use --force"):
        agent_shell.run_line_magic("agent_export", "-o transcript.md --format md")
    assert Path("transcript.md").read_text("utf-8").startswith("# Penguins\n")
    # a format the file name contradicts is refused, even with --force
    with pytest.raises(UsageError, match=r"transcript.md: the format is json but the file name "
                                         r"ends in .md: name it transcript.json or use "
                                         r"--format md$"):
        agent_shell.run_line_magic("agent_export", "-o transcript.md --format json --force")
    with pytest.raises(UsageError, match=r"the format is ipynb but the file name ends in .md"):
        agent_shell.run_line_magic("agent_export", "--format ipynb -o out.md")
    assert not Path("out.md").exists()
    assert Path("transcript.md").read_text("utf-8").startswith("# Penguins\n")
    agent_shell.run_line_magic("agent_export", "-o transcript.json --format json --force")
    assert Path("transcript.json").read_text("utf-8").startswith('{"schema_version":1')
    with pytest.raises(UsageError, match="argument --format: invalid choice: 'pdf'"):
        agent_shell.run_line_magic("agent_export", "--format pdf")


def test_sessions_search_in_a_terminal(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, two_turns: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent_shell.run_line_magic("agent_new", "--title Weather")
    model_server.add_steps([{"text": "It rains."}])
    agent_shell.run_line_magic("agent", "rain in Bergen?")
    capsys.readouterr()
    agent_shell.run_line_magic("agent_sessions", "--search FLIPPER length")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == '1 session matches "FLIPPER length":'
    assert two_turns in out[2] and "Penguins" in out[2]
    assert "summary: user: what unit is flipper length in? assistant: Flipper" in out[2]
    assert out[2].endswith(" (+1 more)")  # the first prompt matches too
    agent_shell.run_line_magic("agent_sessions", "--search six times")
    assert capsys.readouterr().out.strip() == 'no sessions match "six times"'
    agent_shell.run_line_magic("agent_sessions", "--search 42 --deep")
    deep = capsys.readouterr().out.splitlines()
    assert deep[2].split()[0] == two_turns
    assert deep[2].endswith("message 6 (tool): 42 (+1 more)")  # and the reply
    with pytest.raises(UsageError, match="--deep searches the transcripts"):
        agent_shell.run_line_magic("agent_sessions", "--deep")
