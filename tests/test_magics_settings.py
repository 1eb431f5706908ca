"""Settings (traits), %config, ipython_config equivalents, load/unload/reload, usage help."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from traitlets import TraitError
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from jupyter_agent.magics import AgentMagics
from jupyter_agent.settings import DEFAULT_MODEL
from tests.shells import ShellFactory, run_cell

MAGIC_NAMES = {
    "line": {"agent", "agent_new", "agent_resume", "agent_sessions", "agent_summary",
             "agent_title", "agent_archive", "agent_delete", "agent_compact", "agent_usage",
             "agent_history", "agent_todo"},
    "cell": {"agent"},
}


def magics_of(shell: InteractiveShell) -> AgentMagics:
    found = dict.get(shell.magics_manager.registry, "AgentMagics")
    assert isinstance(found, AgentMagics)
    return found


def test_defaults(shell: InteractiveShell) -> None:
    m = magics_of(shell)
    s = m.settings()
    assert (s.model, s.base_url, s.memory_dir, s.approve, s.stream, s.api_key_env) == (
        DEFAULT_MODEL, "", "", "ask", True, "OPENAI_API_KEY")
    assert (s.max_cost_usd, s.max_tool_calls, s.max_iterations, s.context_window) == (
        None, None, None, None)
    for name in ("model", "base_url", "memory_dir", "max_cost_usd", "max_tool_calls",
                 "max_iterations", "approve", "context_window", "stream", "api_key_env"):
        assert m.trait_metadata(name, "config") is True, name
    assert not any(n == "key" or n.endswith("api_key") for n in m.trait_names())


def test_config_magic_sets_every_setting(shell: InteractiveShell) -> None:
    for line in ['AgentMagics.model = "gpt-test"', 'AgentMagics.base_url = "http://h:1/v1"',
                 'AgentMagics.memory_dir = "/tmp/x"', "AgentMagics.max_cost_usd = 0.5",
                 "AgentMagics.max_tool_calls = 3", "AgentMagics.max_iterations = 4",
                 'AgentMagics.approve = "deny"', "AgentMagics.context_window = 9000",
                 "AgentMagics.stream = False", 'AgentMagics.api_key_env = "MY_KEY"']:
        shell.run_line_magic("config", line)
    s = magics_of(shell).settings()
    assert (s.model, s.base_url, s.memory_dir, s.max_cost_usd, s.max_tool_calls,
            s.max_iterations, s.approve, s.context_window, s.stream, s.api_key_env) == (
        "gpt-test", "http://h:1/v1", "/tmp/x", 0.5, 3, 4, "deny", 9000, False, "MY_KEY")
    assert shell.run_line_magic("config", "AgentMagics.model") == "gpt-test"


def test_config_object_like_ipython_config(make_shell: ShellFactory) -> None:
    c = Config()
    c.AgentMagics.model = "from-config"
    c.AgentMagics.approve = "auto"
    c.AgentMagics.max_tool_calls = 7
    s = magics_of(make_shell(c)).settings()
    assert (s.model, s.approve, s.max_tool_calls) == ("from-config", "auto", 7)


BAD_VALUES = [
    ("approve", "sometimes", "approve must be one of auto, ask, deny"),
    ("base_url", "ftp://host/v1", "base_url must be an http:// or https:// URL"),
    ("base_url", "localhost:11434", "base_url must be an http:// or https:// URL"),
    ("max_cost_usd", -1.0, "max_cost_usd must be zero or more, or None for no limit"),
    ("max_cost_usd", "abc", "not the str 'abc'"),
    ("max_cost_usd", float("nan"), "max_cost_usd must be a finite number, or None for no limit"),
    ("max_cost_usd", float("inf"), "max_cost_usd must be a finite number"),
    ("max_tool_calls", -2, "max_tool_calls must be zero or more"),
    ("max_iterations", 0, "max_iterations must be a positive number"),
    ("context_window", -5, "context_window must be a positive number, or None for what"),
    ("api_key_env", "", "api_key_env must name an environment variable"),
    ("model", " ", "model must not be empty"),
]


@pytest.mark.parametrize(("name", "value", "message"), BAD_VALUES)
def test_bad_values_are_rejected(shell: InteractiveShell, name: str, value: object,
                                 message: str, caplog: pytest.LogCaptureFixture,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    m = magics_of(shell)
    before = getattr(m, name)
    with pytest.raises(TraitError, match=message):
        setattr(m, name, value)
    assert getattr(m, name) == before
    with caplog.at_level(logging.DEBUG):
        expr = f"float('{value}')" if value != value or value in (float("inf"),) else repr(value)
        shell.run_line_magic("config", f"AgentMagics.{name} = {expr}")
    assert getattr(m, name) == before
    # one line on stderr, saying what stays; nothing logged ("ERROR:root:...")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert err.endswith(f"; AgentMagics.{name} is unchanged\n") and ".;" not in err
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # the bad value stayed out of the shell's config: the extension reloads cleanly
    shell.run_line_magic("reload_ext", "jupyter_agent")
    assert getattr(magics_of(shell), name) == before


def test_config_sets_good_values_beside_a_bad_one(shell: InteractiveShell,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    shell.run_line_magic("config", "AgentMagics.max_iterations = 7")
    shell.run_line_magic("config", "AgentMagics.max_tool_calls = -3")
    assert magics_of(shell).max_iterations == 7 and magics_of(shell).max_tool_calls is None
    assert "max_tool_calls must be zero or more" in capsys.readouterr().err


def test_bad_value_in_shell_config_refuses_to_load(make_shell: ShellFactory) -> None:
    c = Config()
    c.AgentMagics.approve = "sometimes"
    shell = make_shell(c, load=False)
    with pytest.raises(UsageError, match=r"jupyter_agent not loaded, bad setting: .*approve must"):
        shell.run_line_magic("load_ext", "jupyter_agent")
    assert "agent_new" not in shell.magics_manager.magics["line"]
    assert not [c for c in shell.configurables if type(c).__name__ == "AgentMagics"]


def _ours(shell: InteractiveShell) -> dict[str, set[str]]:
    return {kind: set(shell.magics_manager.magics[kind]) & MAGIC_NAMES[kind]
            for kind in MAGIC_NAMES}


def test_load_unload_reload_leave_nothing_behind(shell: InteractiveShell) -> None:
    assert _ours(shell) == MAGIC_NAMES
    first = magics_of(shell)
    assert [c for c in shell.configurables if isinstance(c, AgentMagics)] == [first]

    shell.run_line_magic("unload_ext", "jupyter_agent")
    assert _ours(shell) == {"line": set(), "cell": set()}
    assert "AgentMagics" not in dict(shell.magics_manager.registry)
    assert not [c for c in shell.configurables if type(c).__name__ == "AgentMagics"]
    with pytest.raises(UsageError):
        shell.run_line_magic("agent_new", "")

    shell.run_line_magic("load_ext", "jupyter_agent")
    shell.run_line_magic("reload_ext", "jupyter_agent")
    assert _ours(shell) == MAGIC_NAMES
    mine = [c for c in shell.configurables if type(c).__name__ == "AgentMagics"]
    assert len(mine) == 1 and mine[0] is not first
    assert shell.magics_manager.magics["line"]["agent_new"].__self__ is mine[0]


@pytest.mark.parametrize(("magic", "expected"), [
    ("agent_new", ["--title", "--model", "--base-url", "--max-cost", "--max-tool-calls",
                   "--max-iterations", "--approve", "Start a new session"]),
    ("agent_resume", ["SESSION_ID", "--max-cost", "--approve",
                      "else the one this kernel last used for the session"]),
    ("agent", ["prompt", "with %%agent, the cell", "not expanded"]),
    ("agent_sessions", ["--all", "List the sessions"]),
    ("agent_summary", ["text", "Show the active session's summary"]),
    ("agent_title", ["text", "surrounding quotes"]),
    ("agent_archive", ["--undo", "ID"]),
    ("agent_delete", ["--yes", "ID"]),
    ("agent_compact", ["Summarise the older turns"]),
    ("agent_usage", ["tokens, cost, tool calls"]),
    ("agent_history", ["--full"]),
    ("agent_todo", ["todo list"]),
])
def test_question_mark_prints_usage(shell: InteractiveShell, magic: str, expected: list[str],
                                    capsys: pytest.CaptureFixture[str]) -> None:
    run_cell(shell, f"%{magic}?")
    out = capsys.readouterr().out
    assert f"%{magic}" in out
    for text in expected:
        assert text in " ".join(out.split()), text


def test_every_magic_has_help() -> None:
    covered = {p[0] for p in test_question_mark_prints_usage.pytestmark[0].args[1]}
    assert covered == MAGIC_NAMES["line"]


CONFIG_FILE = """
c = get_config()  # noqa: F821
c.AgentMagics.model = "model-from-file"
c.AgentMagics.approve = "deny"
c.AgentMagics.max_cost_usd = 2.5
c.AgentMagics.max_iterations = 4
c.AgentMagics.stream = False
c.AgentMagics.api_key_env = "FILE_KEY"
"""


def test_settings_from_a_real_ipython_config_file(make_shell: ShellFactory,
                                                  tmp_path: Path) -> None:
    profile = tmp_path / "profile_test"
    profile.mkdir()
    (profile / "ipython_config.py").write_text(CONFIG_FILE)
    config = PyFileConfigLoader("ipython_config.py", path=str(profile)).load_config()
    s = magics_of(make_shell(config)).settings()
    assert (s.model, s.approve, s.max_cost_usd, s.max_iterations, s.stream, s.api_key_env) == (
        "model-from-file", "deny", 2.5, 4, False, "FILE_KEY")


def test_ipython_with_a_profile_dir_reads_the_settings(tmp_path: Path) -> None:
    """A real ``ipython --profile-dir=...`` process: the file, %load_ext, the magics."""
    profile = tmp_path / "profile_test"
    profile.mkdir()
    (profile / "ipython_config.py").write_text(
        CONFIG_FILE + 'c.AgentMagics.max_cost_usd = float("nan")\n')
    code = ("%load_ext jupyter_agent\n"
            "print('loaded:', 'agent_new' in get_ipython().magics_manager.magics['line'])\n")
    env = {**os.environ, "IPYTHONDIR": str(tmp_path / "ipythondir")}

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "IPython", f"--profile-dir={profile}", "--no-banner",
             "--HistoryManager.enabled=False", "-c", code],
            capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)

    bad = run()
    assert "jupyter_agent not loaded, bad setting" in bad.stdout + bad.stderr
    assert "max_cost_usd must be a finite number" in bad.stdout + bad.stderr
    assert "loaded: True" not in bad.stdout
    (profile / "ipython_config.py").write_text(CONFIG_FILE)
    code += ("m = get_ipython().magics_manager.registry['AgentMagics']\n"
             "print('settings:', m.model, m.approve, m.max_cost_usd, m.stream)\n")
    good = run()
    assert "loaded: True" in good.stdout, good.stdout + good.stderr
    assert "settings: model-from-file deny 2.5 False" in good.stdout


def test_importing_does_nothing() -> None:
    import subprocess
    import sys

    code = ("import sys, jupyter_agent, jupyter_agent.magics, jupyter_agent.controller, "
            "jupyter_agent.ui.display, jupyter_agent.paths, jupyter_agent.settings; "
            "print('ipywidgets' in sys.modules, 'openai' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]


def test_reload_says_that_the_active_session_was_let_go(
        shell: InteractiveShell, model_server: object, capsys: pytest.CaptureFixture[str]
) -> None:
    url = model_server.base_url  # type: ignore[attr-defined]
    shell.run_line_magic("agent_new", f"--base-url {url}")
    sid = magics_of(shell).controller.active_session_id
    capsys.readouterr()
    shell.run_line_magic("reload_ext", "jupyter_agent")
    assert capsys.readouterr().out == (
        f"Session {sid} is no longer active (the extension was unloaded): "
        f"%agent_resume {sid} takes it back.\n")
    assert magics_of(shell).controller.active_session_id is None
    shell.run_line_magic("reload_ext", "jupyter_agent")  # nothing active: nothing said
    assert capsys.readouterr().out == ""


def test_new_session_help_gives_its_own_defaults(shell: InteractiveShell,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    run_cell(shell, "%agent_new?")
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: AgentMagics.api; %agent_resume: what the session last used)" in out
    assert "(default: AgentMagics.vision; %agent_resume: what the session last used)" in out
    assert "default: what the session last used" not in out


@pytest.mark.parametrize("magic", ["agent_new", "agent_resume"])
def test_the_help_of_every_option_reads_as_written(shell: InteractiveShell, magic: str) -> None:
    help_text = " ".join(getattr(magics_of(shell), magic).__doc__.split())
    assert "option_strings" not in help_text and "container" not in help_text
    api, vision = help_text.split("--api {chat,responses}")[-1], help_text.split("--vision")[-1]
    assert "(default: AgentMagics.api; %agent_resume: what the session last used)" in api
    assert "%agent_resume: what the session last used" in vision
