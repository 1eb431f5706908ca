"""Sessions across magics: new/resume/recap, leases seen from another process, archive,
delete, the sessions table, and the panel driving the kernel's active session."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer
from tests.processes import Hold
from tests.shells import ShellFactory, magics_of

PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("locked")
"""

def lock_state(store: FileStore, sid: str) -> str:
    """'locked' or 'free', as a second process sees the session's lock with flock."""
    out = subprocess.run([sys.executable, "-c", PROBE, str(store.lock_path(sid))],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def new_session(shell: InteractiveShell, server: ScriptedModelServer, prompt: str,
                reply: str, *options: str) -> str:
    shell.run_line_magic("agent_new", " ".join(options))
    server.add_steps([{"text": reply}])
    shell.run_line_magic("agent", prompt)
    return str(magics_of(shell).controller.active_session_id)


def test_lease_is_held_while_active_and_released_on_switch_and_unload(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, memory_dir: Path,
) -> None:
    store = FileStore(memory_dir)
    a = new_session(agent_shell, model_server, "a?", "a!")
    assert lock_state(store, a) == "locked"
    b = new_session(agent_shell, model_server, "b?", "b!")
    assert (lock_state(store, a), lock_state(store, b)) == ("free", "locked")
    agent_shell.run_line_magic("agent_resume", a)
    assert (lock_state(store, a), lock_state(store, b)) == ("locked", "free")
    agent_shell.run_line_magic("agent_resume", a)  # resuming the active one keeps it held
    assert lock_state(store, a) == "locked"
    agent_shell.run_line_magic("unload_ext", "jupyter_agent")
    assert (lock_state(store, a), lock_state(store, b)) == ("free", "free")


def test_resume_default_recap_and_continuation_after_restart(
    make_shell: ShellFactory, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shell = make_shell()
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    old = new_session(shell, model_server, "old question", "old answer")
    sid = new_session(shell, model_server, "Analyse penguins", "Sure.", "--title Penguins")
    model_server.add_steps([
        {"tool_calls": [{"name": "add_todo", "arguments": {"text": "make a plot"}},
                        {"name": "add_todo", "arguments": {"text": "write it up"}}]},
        {"text": "Two todos added."},
    ])
    shell.run_line_magic("agent", "plan the work")
    shell.run_line_magic("agent_summary", "Goal: penguin analysis")
    new_session(shell, model_server, "archived one", "ok")
    shell.run_line_magic("agent_archive", "")
    shell.run_line_magic("unload_ext", "jupyter_agent")  # like a kernel restart
    shell.run_line_magic("load_ext", "jupyter_agent")
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    capsys.readouterr()

    shell.run_line_magic("agent_resume", "")  # most recent non-archived: the Penguins one
    recap = capsys.readouterr().out
    assert recap.startswith(f"Resumed session {sid} — Penguins\n")
    assert "summary: Goal: penguin analysis" in recap
    assert "open todos:\n[ ] 1. make a plot — pending\n[ ] 2. write it up — pending" in recap
    assert "last prompt: plan the work" in recap and "last reply:  Two todos added." in recap
    assert "2 tool calls" in recap and "tokens" in recap
    assert old not in recap

    model_server.add_steps([{"text": "continuing"}])
    shell.run_line_magic("agent", "go on")
    sent = [m.get("content") for m in model_server.requests[-1]["messages"]]
    assert "Analyse penguins" in sent and "plan the work" in sent and sent[-1] == "go on"
    assert "old question" not in sent
    footer = capsys.readouterr().out.splitlines()[-1]
    assert "session:" in footer and "2 tool calls │" in footer  # counts carried over


def test_resume_with_options_sets_title_and_limits(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, memory_dir: Path,
) -> None:
    sid = new_session(agent_shell, model_server, "q", "a")
    agent_shell.run_line_magic("agent_new", "")
    agent_shell.run_line_magic(
        "agent_resume", f"{sid} --title 'Renamed it' --model m9 --max-cost 3 "
                        "--max-tool-calls 2 --max-iterations 5 --approve auto")
    assert FileStore(memory_dir).load_session(sid).title == "Renamed it"
    model_server.add_steps([{"text": "ok"}])
    agent_shell.run_line_magic("agent", "more")
    agent = magics_of(agent_shell).controller._active.agent
    assert (agent.model.name, agent.config.approve) == ("m9", "auto")
    assert (agent.config.limits.max_cost_usd, agent.config.limits.max_tool_calls,
            agent.config.limits.max_iterations) == (3, 2, 5)
    assert model_server.requests[-1]["model"] == "m9"


def test_session_in_use_elsewhere_is_refused_naming_the_process(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, hold: Hold,
) -> None:
    sid = new_session(agent_shell, model_server, "q", "a")
    agent_shell.run_line_magic("agent_new", "")
    active = magics_of(agent_shell).controller.active_session_id
    pid = hold(sid).pid
    with pytest.raises(UsageError) as info:
        agent_shell.run_line_magic("agent_resume", sid)
    assert str(info.value).startswith(f"session {sid} is in use by process {pid} (since ")
    assert "; to use it here, stop that kernel" in str(info.value)
    assert str(info.value).endswith(f"then %agent_resume {sid}; the lease is freed as soon as "
                                    "that kernel exits, crashed or not")
    assert "Error" not in str(info.value)
    assert "\n" not in str(info.value)
    assert magics_of(agent_shell).controller.active_session_id == active  # unchanged
    with pytest.raises(UsageError, match=f"in use by process {pid}"):
        agent_shell.run_line_magic("agent_delete", f"{sid} --yes")
    with pytest.raises(UsageError, match=f"in use by process {pid}"):
        agent_shell.run_line_magic("agent_archive", sid)


def test_sessions_table_archive_and_undo(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a = new_session(agent_shell, model_server, "first prompt words", "a", "--title Alpha")
    b = new_session(agent_shell, model_server, "second prompt words", "b")
    capsys.readouterr()
    agent_shell.run_line_magic("agent_sessions", "")
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["ID", "UPDATED", "STATUS", "MESSAGES", "COST", "TITLE", "/",
                                "FIRST", "PROMPT"]
    assert table[1].split()[:3] == ["*", b, "just"] and "active" in table[1]
    assert table[1].endswith("second prompt words")
    assert table[2].split()[0] == a and "idle" in table[2] and table[2].endswith("Alpha")
    agent_shell.run_line_magic("agent_archive", a)
    assert capsys.readouterr().out == f"Archived session ‘Alpha’ ({a}).\n"
    agent_shell.run_line_magic("agent_sessions", "")
    assert a not in capsys.readouterr().out
    agent_shell.run_line_magic("agent_sessions", "--all")
    assert "idle, archived" in capsys.readouterr().out
    agent_shell.run_line_magic("agent_archive", f"{a} --undo")
    assert capsys.readouterr().out == f"Unarchived session ‘Alpha’ ({a}).\n"
    agent_shell.run_line_magic("agent_sessions", "")
    assert a in capsys.readouterr().out


def test_delete_confirms_and_refuses_without_stdin(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, memory_dir: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    store = FileStore(memory_dir)
    a = new_session(agent_shell, model_server, "q", "a", "--title Doomed")
    b = new_session(agent_shell, model_server, "q", "a")
    # pytest's stdin is no terminal, like a headless run: refused before anything is printed
    capsys.readouterr()
    with pytest.raises(UsageError, match=f"^cannot ask for confirmation \\(no input possible "
                                         f"here\\): use %agent_delete {a} --yes$"):
        agent_shell.run_line_magic("agent_delete", a)
    assert store.exists(a) and capsys.readouterr().out == ""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal())
    questions: list[str] = []
    answers = iter(["n", "y"])

    def fake_input(question: str = "") -> str:
        questions.append(question)
        return next(answers)

    monkeypatch.setattr("builtins.input", fake_input)
    capsys.readouterr()
    agent_shell.run_line_magic("agent_delete", a)
    assert store.exists(a) and capsys.readouterr().out == "Not deleted.\n"
    agent_shell.run_line_magic("agent_delete", a)
    assert not store.exists(a) and capsys.readouterr().out == f"Deleted session ‘Doomed’ ({a}).\n"
    assert questions == [f"Delete session {a} (Doomed) for good? [y/N] "] * 2
    # the active session: --yes, no question; it is no longer active and its lease is free
    agent_shell.run_line_magic("agent_delete", f"{b} --yes")
    assert not store.exists(b) and magics_of(agent_shell).controller.active_session_id is None
    assert len(questions) == 2
    with pytest.raises(UsageError, match=f"^no saved session '{b}'"):
        agent_shell.run_line_magic("agent_delete", f"{b} --yes")


def test_panel_resume_then_cell_continues_that_session(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
) -> None:
    a = new_session(agent_shell, model_server, "Remember: the secret word is plover", "Noted.")
    b = new_session(agent_shell, model_server, "unrelated", "ok")
    magics = magics_of(agent_shell)
    panel = magics.sessions_panel()
    statuses = {r.session_id: r.text.status for r in panel.rows}
    assert statuses == {a: "idle", b: "active"}
    next(r for r in panel.rows if r.session_id == a).resume.click()
    assert panel._errors.value == ""
    assert magics.controller.active_session_id == a
    assert f"Resumed session {a} — it is this kernel&#x27;s active session" in panel._message.value
    active = next(r for r in panel.rows if r.session_id == a)
    assert active.resume.disabled and "active in this kernel" in panel._slots[0].meta.value + (
        panel._slots[1].meta.value)
    panel.refresh()  # the next action clears the message
    assert panel._message.value == ""
    assert {r.session_id: r.text.status for r in panel.rows} == {a: "active", b: "idle"}
    model_server.add_steps([{"text": "The word was plover."}])
    agent_shell.run_cell_magic("agent", "", "What was the secret word?")
    sent = [m.get("content") for m in model_server.requests[-1]["messages"]]
    assert sent[-3:] == ["Remember: the secret word is plover", "Noted.",
                         "What was the secret word?"]
    assert "unrelated" not in sent
    # deleting the active session from the panel deactivates it first
    next(r for r in panel.rows if r.session_id == a).delete.click()
    panel._confirm.click()
    assert panel._errors.value == "" and magics.controller.active_session_id is None
    assert [r.session_id for r in panel.rows] == [b]


def test_panel_resume_error_is_shown_in_the_panel(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, hold: Hold,
) -> None:
    a = new_session(agent_shell, model_server, "q", "a")
    agent_shell.run_line_magic("agent_new", "")
    pid = hold(a).pid
    panel = magics_of(agent_shell).sessions_panel()
    row = next(r for r in panel.rows if r.session_id == a)
    assert row.text.status == "in use"
    row.resume.click()
    assert f"session {a} is in use by process {pid} (since " in panel._errors.value
    assert "; to use it here" in panel._errors.value
    assert "Error" not in panel._errors.value


def test_resume_keeps_the_connection_this_kernel_used(
    shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No base_url setting: only the options of %agent_new know the endpoint."""
    a = new_session(shell, model_server, "first", "one", f"--base-url {model_server.base_url}",
                    "--model m-a", "--max-tool-calls 7", "--approve auto")
    shell.run_line_magic("agent_resume", a)  # the active one, no options
    model_server.add_steps([{"text": "two"}])
    shell.run_line_magic("agent", "second")
    assert model_server.requests[-1]["model"] == "m-a"
    active = magics_of(shell).controller._active
    assert active.agent.config.limits.max_tool_calls == 7 and active.agent.config.approve == "auto"
    # another session, then the panel's Resume of the first one
    b = new_session(shell, model_server, "other", "ok", f"--base-url {model_server.base_url}")
    panel = magics_of(shell).sessions_panel()
    next(r for r in panel.rows if r.session_id == a).resume.click()
    assert panel._errors.value == "" and magics_of(shell).controller.active_session_id == a
    # explicit options beat the remembered ones, and are remembered in turn
    shell.run_line_magic("agent_resume", f"{a} --model m-explicit --max-tool-calls 9")
    shell.run_line_magic("agent_resume", b)
    shell.run_line_magic("agent_resume", a)
    model_server.add_steps([{"text": "three"}])
    shell.run_line_magic("agent", "third")
    assert model_server.requests[-1]["model"] == "m-explicit"
    assert magics_of(shell).controller._active.agent.config.limits.max_tool_calls == 9


def test_a_new_kernel_resumes_with_the_saved_model_at_the_endpoint_it_configures(
    make_shell: ShellFactory, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = make_shell()
    sid = new_session(first, model_server, "hello", "hi", f"--base-url {model_server.base_url}",
                      "--model m-saved", "--max-iterations 3")
    first.run_line_magic("unload_ext", "jupyter_agent")
    second = make_shell()  # a new controller that knows nothing of this session
    second.run_line_magic("config", "AgentMagics.max_iterations = 5")
    # the saved endpoint is not this kernel's choice: it must be named
    with pytest.raises(UsageError, match=rf"^session {sid} last used the endpoint "
                       rf"{re.escape(model_server.base_url)}, and this kernel configures none"):
        second.run_line_magic("agent_resume", sid)
    assert magics_of(second).controller.active_session_id is None
    second.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    capsys.readouterr()
    second.run_line_magic("agent_resume", sid)
    assert "last used" not in capsys.readouterr().out  # the same endpoint: nothing to say
    model_server.add_steps([{"text": "welcome back"}])
    second.run_line_magic("agent", "again")
    assert model_server.requests[-1]["model"] == "m-saved"  # the saved model, same endpoint
    # limits come from the current options: here, the settings
    assert magics_of(second).controller._active.agent.config.limits.max_iterations == 5
    # an explicit --base-url elsewhere drops the saved model (it belongs to the old endpoint)
    with ScriptedModelServer([{"text": "elsewhere"}]) as other:
        second.run_line_magic("agent_resume", f"{sid} --base-url {other.base_url}")
        assert (f"This session last used {model_server.base_url}; it now talks to "
                f"{other.base_url}, the endpoint this kernel configures.") in (
                    capsys.readouterr().out.splitlines())
        second.run_line_magic("agent", "there?")
        assert other.requests[-1]["model"] == "gpt-4o-mini"


def test_resuming_an_archived_session_unarchives_it(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, memory_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a = new_session(agent_shell, model_server, "old work", "done", "--title Old")
    agent_shell.run_line_magic("agent_archive", "")
    b = new_session(agent_shell, model_server, "other", "ok")
    store = FileStore(memory_dir)
    capsys.readouterr()
    agent_shell.run_line_magic("agent_resume", a)
    recap = capsys.readouterr().out.splitlines()
    assert recap[0] == f"Resumed session {a} — Old"
    assert recap[2] == "unarchived: the session was archived; resuming took it out of the archive"
    assert store.load_session(a).archived is False
    agent_shell.run_line_magic("agent_resume", a)  # not archived any more: no such line
    assert "unarchived" not in capsys.readouterr().out
    # from the panel
    agent_shell.run_line_magic("agent_archive", a)
    agent_shell.run_line_magic("agent_resume", b)
    panel = magics_of(agent_shell).sessions_panel(show_archived=True)
    next(r for r in panel.rows if r.session_id == a).resume.click()
    assert panel._errors.value == "" and panel._message.value.count("\n") == 0  # one line
    assert f"Resumed ‘Old’ ({a}) (taken out of the archive) — it is this kernel" in (
        panel._message.value)
    assert store.load_session(a).archived is False
    assert not next(r for r in panel.rows if r.session_id == a).text.status.endswith("archived")
