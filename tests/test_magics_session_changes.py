"""What the magics say when the kernel's active session changes under it, and the magic
lines users actually type: archive / unarchive / delete of the active session, resuming
when everything is archived, a prompt after the active session is gone, comments."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_agent.project import kernel_label
from jupyter_agent.testing import ScriptedModelServer
from tests.shells import magics_of


def active(shell: InteractiveShell) -> str | None:
    return magics_of(shell).controller.active_session_id


def start(shell: InteractiveShell, server: ScriptedModelServer, *options: str) -> str:
    shell.run_line_magic("agent_new", " ".join(options))
    server.add_steps([{"text": "ok"}])
    shell.run_line_magic("agent", "hello")
    return str(active(shell))


def test_archiving_the_active_session_says_the_kernel_has_none_now(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sid = start(agent_shell, model_server)
    capsys.readouterr()
    agent_shell.run_line_magic("agent_archive", "")
    assert capsys.readouterr().out == (
        f"Archived session {sid}; it was this kernel's active session, so none is active now: "
        f"the next %agent starts a new one, %agent_resume {sid} takes it back.\n")
    assert active(agent_shell) is None  # never used while hidden from the list
    agent_shell.run_line_magic("agent_sessions", "--all")
    assert f"{sid} " in capsys.readouterr().out
    with pytest.raises(UsageError, match=f"^session {sid} is archived already: nothing to do "
                                         f"\\(%agent_archive {sid} --undo unarchives it\\)$"):
        agent_shell.run_line_magic("agent_archive", sid)
    agent_shell.run_line_magic("agent_archive", f"{sid} --undo")
    assert capsys.readouterr().out == f"Unarchived session {sid}.\n"
    with pytest.raises(UsageError, match=f"^session {sid} is not archived: nothing to do$"):
        agent_shell.run_line_magic("agent_archive", f"{sid} --undo")


def test_a_prompt_after_deleting_the_active_session_keeps_its_model(
    shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the endpoint is an option of the session, not a setting: there is no key either
    sid = start(shell, model_server, f"--base-url {model_server.base_url}")
    shell.run_line_magic("agent_delete", f"{sid} --yes")
    out = capsys.readouterr().out
    assert out.endswith(f"Deleted session {sid}; it was this kernel's active session, so none "
                        "is active now: the next %agent starts a new one.\n")
    model_server.add_steps([{"text": "still here"}])
    shell.run_line_magic("agent", "are you there?")
    out = capsys.readouterr().out
    new = active(shell)
    assert new not in (None, sid)
    assert out.startswith(f"Session {sid} was deleted: started session {new} with the same "
                          "options (%agent_resume picks up an earlier one).\n")
    assert "still here" in out


def test_with_no_model_the_message_says_no_session_is_active(
    shell: InteractiveShell, model_server: ScriptedModelServer,
) -> None:
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    sid = start(shell, model_server)
    shell.run_line_magic("agent_delete", f"{sid} --yes")
    shell.run_line_magic("config", 'AgentMagics.base_url = ""')
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("agent", "hello again")
    message = str(info.value)
    assert message.startswith(f"no active session (session {sid} was deleted), and a new one "
                              "cannot start: no model configured: OPENAI_API_KEY is not set")
    assert message.endswith("Or pick a saved session with %agent_resume ID (%agent_sessions "
                            "lists them)")


def test_resume_when_every_session_is_archived(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
) -> None:
    a = start(agent_shell, model_server)
    b = start(agent_shell, model_server)
    agent_shell.run_line_magic("agent_archive", a)
    agent_shell.run_line_magic("agent_archive", b)
    with pytest.raises(UsageError) as info:
        agent_shell.run_line_magic("agent_resume", "")
    assert "no session to resume in " in str(info.value)
    assert str(info.value).endswith(
        f": the 2 saved sessions are archived; %agent_resume ID takes one out of the archive "
        f"(%agent_sessions --all lists them, newest: {b}), or start one with %agent_new")


def test_a_comment_after_a_magic_line_is_a_comment(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sid = start(agent_shell, model_server)
    start(agent_shell, model_server)
    agent_shell.run_cell(f"%agent_resume {sid}  # yesterday's work").raise_error()
    assert active(agent_shell) == sid
    agent_shell.run_cell("%agent_title 'A # in a title' ").raise_error()
    assert magics_of(agent_shell).controller.record().title == "A # in a title"
    with pytest.raises(UsageError, match="put text with quotes or spaces in matching quotes"):
        agent_shell.run_line_magic("agent_new", "--title 'unclosed")


def test_kernel_label_names_the_notebook_and_never_secrets() -> None:
    from pathlib import Path
    from types import SimpleNamespace

    shell = SimpleNamespace(user_ns={"__session__": "/home/me/proj/analysis/penguins.ipynb"})
    assert kernel_label(shell, {}, Path("/home/me/proj")) == "analysis/penguins.ipynb"
    assert kernel_label(shell, {}, Path("/elsewhere")) == "/home/me/proj/analysis/penguins.ipynb"
    shell.user_ns = {}
    assert kernel_label(shell, {"JPY_SESSION_NAME": "b.ipynb", "TOKEN": "s3cret"}) == "b.ipynb"
    assert kernel_label(None, {}) == "Python"


def test_the_panel_says_when_it_archives_or_deletes_the_active_session(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
) -> None:
    a = start(agent_shell, model_server)
    b = start(agent_shell, model_server)
    panel = magics_of(agent_shell).sessions_panel()
    row = next(r for r in panel.rows if r.session_id == b)
    assert row.resume.disabled  # already active here
    row.archive.click()
    assert f"Archived session {b}; it was this kernel&#x27;s active session" in panel._message.value
    assert active(agent_shell) is None and panel._errors.value == ""
    agent_shell.run_line_magic("agent_resume", a)
    next(r for r in panel.rows if r.session_id == a).delete.click()
    panel._confirm.click()
    assert f"Deleted session {a}; it was this kernel&#x27;s active session" in panel._message.value
    assert active(agent_shell) is None
    panel.close()
