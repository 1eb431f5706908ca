"""The one error boundary: library errors become one-line UsageErrors; the key never leaks."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from jupyter_agent.errors import JupyterAgentError, ModelError
from jupyter_agent.store import FileStore, SessionState
from jupyter_agent.testing import ScriptedModelServer
from tests.shells import ShellFactory, magics_of


def usage_error(shell: InteractiveShell, magic: str, line: str = "",
                cell: str | None = None) -> str:
    with pytest.raises(UsageError) as info:
        if cell is None:
            shell.run_line_magic(magic, line)
        else:
            shell.run_cell_magic(magic, line, cell)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_no_model_configured(shell: InteractiveShell, memory_dir: Path) -> None:
    message = usage_error(shell, "agent_new")
    assert message == (
        "no model configured: OPENAI_API_KEY is not set; set it in the environment Jupyter "
        "starts from to use gpt-4o-mini on the OpenAI API (pick the model with --model or "
        "%config AgentMagics.model), or point --base-url / %config AgentMagics.base_url at a "
        "local OpenAI-compatible server (Ollama, vLLM, LM Studio), e.g. http://localhost:11434/v1")
    assert usage_error(shell, "agent", "hello") == message
    assert not (memory_dir / "sessions").exists() or not list((memory_dir / "sessions").iterdir())
    shell.run_line_magic("config", 'AgentMagics.api_key_env = "MY_PROVIDER_KEY"')
    assert usage_error(shell, "agent_new", "--model gpt-4.1").startswith(
        "no model configured: MY_PROVIDER_KEY is not set; set it in the environment Jupyter "
        "starts from to use gpt-4.1 on the OpenAI API")


def test_a_refused_memory_directory_stays_the_named_cause(
    shell: InteractiveShell, memory_dir: Path, model_server: ScriptedModelServer
) -> None:
    memory_dir.mkdir()
    memory_dir.chmod(0o775)
    first = usage_error(shell, "agent_new", f"--base-url {model_server.base_url} --approve auto")
    assert first.startswith(f"refusing to use {memory_dir} (owner ")
    again = usage_error(shell, "agent", "hi")  # no model configured either: not the cause
    assert again.startswith(f"refusing to use {memory_dir} (owner ")
    memory_dir.chmod(0o700)
    assert "no model configured" in usage_error(shell, "agent", "hi")


def test_no_model_for_a_resumed_session_names_what_it_last_used(
    shell: InteractiveShell, memory_dir: Path,
) -> None:
    store = FileStore(memory_dir)
    sid = store.create_session([{"role": "system", "content": "s"}])
    store.save(sid, state=SessionState(model="gpt-4.1", base_url="https://api.openai.com/v1/"))
    assert usage_error(shell, "agent_resume", sid) == (
        f"no model configured for session {sid} (it last used model gpt-4.1 on the OpenAI "
        "API): OPENAI_API_KEY is not set; set it, or pass --base-url URL --model gpt-4.1 for "
        "another OpenAI-compatible endpoint")
    fresh = store.create_session([{"role": "system", "content": "s"}])
    assert usage_error(shell, "agent_resume", fresh).startswith(
        f"no model configured for session {fresh}: OPENAI_API_KEY is not set; set it, or point "
        "--base-url")
    assert magics_of(shell).controller.active_session_id is None


def test_key_from_the_named_variable_reaches_the_server_and_nothing_else(
    shell: InteractiveShell, memory_dir: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    secret = "sk-test-DO-NOT-LEAK-4242"
    monkeypatch.setenv("MY_PROVIDER_KEY", secret)
    with ScriptedModelServer(require_api_key=secret) as server:
        shell.run_line_magic("config", 'AgentMagics.api_key_env = "MY_PROVIDER_KEY"')
        shell.run_line_magic("config", f'AgentMagics.base_url = "{server.base_url}"')
        server.add_steps([
            {"tool_calls": [{"name": "run_python", "arguments": {"code": "y = 1"}}]},
            {"text": "done"},
        ])
        with capture_output() as captured:
            shell.run_line_magic("agent_new", "--approve auto --title t")
            shell.run_line_magic("agent", "go")
            for magic in ("agent_usage", "agent_history", "agent_sessions", "agent_todo"):
                shell.run_line_magic(magic, "")
            shell.run_line_magic("agent_history", "--full")
            shell.run_line_magic("config", "AgentMagics")
        assert "done" in captured.stdout and not server.errors
    outputs = captured.stdout + captured.stderr + str([o.data for o in captured.outputs])
    outputs += capsys.readouterr().out
    assert secret not in outputs
    files = [p for p in memory_dir.rglob("*") if p.is_file()]
    assert any(p.suffix == ".json" for p in files)
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
    settings = magics_of(shell).settings()
    assert secret not in repr(settings) and secret not in str(vars(magics_of(shell)))
    assert secret not in str(server.requests)


def test_placeholder_key_for_a_local_server(shell: InteractiveShell) -> None:
    with ScriptedModelServer([{"text": "hi"}], require_api_key="not-needed") as server:
        shell.run_line_magic("config", f'AgentMagics.base_url = "{server.base_url}"')
        shell.run_line_magic("agent", "hello")
        assert not server.errors and server.remaining == 0


def test_the_openai_key_is_not_sent_to_a_local_server(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-DO-NOT-SEND")
    with ScriptedModelServer([{"text": "hi"}], require_api_key="not-needed") as server:
        shell.run_line_magic("agent_new", f"--base-url {server.base_url}")
        shell.run_line_magic("agent", "hello")
        assert not server.errors and server.remaining == 0
    # a variable named on purpose is sent, even to a local server
    monkeypatch.setenv("LOCAL_LLM_KEY", "local-key")
    shell.run_line_magic("config", 'AgentMagics.api_key_env = "LOCAL_LLM_KEY"')
    with ScriptedModelServer([{"text": "hi"}], require_api_key="local-key") as server:
        shell.run_line_magic("agent_new", f"--base-url {server.base_url}")
        shell.run_line_magic("agent", "hello")
        assert not server.errors and server.remaining == 0


def test_openai_base_url_from_the_environment_is_a_configured_endpoint(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with ScriptedModelServer([{"text": "from env"}], require_api_key="not-needed") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        shell.run_line_magic("agent", "hello")
        assert not server.errors and server.remaining == 0


def test_invalid_unknown_and_corrupt_sessions(shell: InteractiveShell, memory_dir: Path,
                                              model_server: ScriptedModelServer) -> None:
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    assert usage_error(shell, "agent_resume") == (
        f"no saved sessions in {memory_dir}: start one with %agent_new")
    assert usage_error(shell, "agent_resume", "../etc/passwd") == (
        "invalid session ID '../etc/passwd': use 1-128 letters, digits, '_' or '-'")
    sessions = memory_dir / "sessions"
    assert usage_error(shell, "agent_resume", "nope") == (
        f"no saved session 'nope' (looked for {sessions / 'nope.json'}); %agent_sessions "
        "--all lists the saved sessions")
    assert usage_error(shell, "agent_delete", "bad/id --yes").startswith("invalid session ID")
    assert usage_error(shell, "agent_archive", "nope").startswith("no saved session 'nope'")
    sessions.mkdir(parents=True, exist_ok=True)
    (sessions / "broken.json").write_text('{"id": "broken", "messages": [')
    message = usage_error(shell, "agent_resume", "broken")
    assert message.startswith(f"session file {sessions / 'broken.json'} is unreadable and was "
                              "left untouched: ")
    assert (sessions / "broken.json").read_text() == '{"id": "broken", "messages": ['
    assert usage_error(shell, "agent_delete", "broken").startswith("session file ")


def test_option_errors(shell: InteractiveShell) -> None:
    assert usage_error(shell, "agent_new", "--max-cost -1") == (
        "--max-cost must be zero or more (got -1.0)")
    assert usage_error(shell, "agent_new", "--max-cost nan") == (
        "--max-cost must be a finite number (got nan)")
    assert usage_error(shell, "agent_new", "--max-cost inf") == (
        "--max-cost must be a finite number (got inf)")
    assert usage_error(shell, "agent_new", "--max-iterations 0") == (
        "--max-iterations must be a positive number (got 0)")
    assert usage_error(shell, "agent_new", '--model ""') == "--model must not be empty"
    assert usage_error(shell, "agent_new", "--base-url ftp://x").startswith(
        "--base-url must be an http:// or https:// URL")
    assert "invalid choice: 'maybe'" in usage_error(shell, "agent_new", "--approve maybe")
    assert "argument --max-tool-calls: invalid int value" in usage_error(
        shell, "agent_new", "--max-tool-calls lots")
    assert usage_error(shell, "agent_new", '--title "unclosed').startswith(
        "cannot parse the arguments")
    assert usage_error(shell, "agent_title", "") == "usage: %agent_title TEXT"
    for magic in ("agent_usage", "agent_todo", "agent_history", "agent_compact", "agent_title x",
                  "agent_archive"):
        name, _, line = magic.partition(" ")
        assert usage_error(shell, name, line).startswith("no active session: start one with")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_model_unreachable_and_model_errors(shell: InteractiveShell) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    shell.run_line_magic("config", f'AgentMagics.base_url = "{url}"')
    message = usage_error(shell, "agent", "hello?")
    assert message == (
        f"cannot reach the model endpoint at {url}/ ([Errno 111] Connection refused): check "
        "that the server is running and that the URL and port are right (--base-url or "
        "%config AgentMagics.base_url), then send the prompt again")
    with ScriptedModelServer([{"error": {"status": 401, "message": "bad key"}}]) as server:
        shell.run_line_magic("config", f'AgentMagics.base_url = "{server.base_url}"')
        message = usage_error(shell, "agent", "again?")
        assert message == (
            f"the model endpoint at {server.base_url}/ requires an API key and none was sent "
            "(401: bad key): set OPENAI_API_KEY in the environment Jupyter starts from (a "
            "server on this machine is only sent a key from a variable you name: %config "
            'AgentMagics.api_key_env = "NAME")')
        sid = magics_of(shell).controller.active_session_id
        # the prompts stayed saved, and the error was the library's ModelError
        with pytest.raises(UsageError) as info:
            shell.run_line_magic("agent", "third")
        assert isinstance(info.value.__cause__, ModelError)
        assert magics_of(shell).controller.active_session_id == sid


def test_unexpected_errors_keep_their_traceback(shell: InteractiveShell, tmp_path: Path,
                                                model_server: ScriptedModelServer) -> None:
    shell.run_line_magic("config", 'AgentMagics.memory_dir = "mem\\x00ory"')  # a NUL byte
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    with pytest.raises(ValueError, match="null byte") as info:
        shell.run_line_magic("agent_new", "")
    assert not isinstance(info.value, (UsageError, JupyterAgentError))
    assert info.value.__traceback__ is not None


def test_in_use_by_another_store_in_this_process(shell: InteractiveShell, memory_dir: Path,
                                                 model_server: ScriptedModelServer) -> None:
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    other = FileStore(memory_dir)
    sid = other.create_session([{"role": "system", "content": "s"}])
    other.acquire_lease(sid)
    try:
        message = usage_error(shell, "agent_resume", sid)
        assert message.startswith(f"session {sid} is in use by process ")
    finally:
        other.release_all()
    shell.run_line_magic("agent_resume", sid)


def test_errors_show_as_one_line_without_a_class_name(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str],
) -> None:
    result = shell.run_cell("%agent_resume nope")
    assert isinstance(result.error_in_exec, UsageError)
    err = capsys.readouterr().err
    assert err.startswith("no saved session 'nope' (looked for ") and err.count("\n") == 1
    assert err.rstrip().endswith("%agent_sessions --all lists the saved sessions")
    shell.run_cell("%agent_new --bogus")
    assert capsys.readouterr().err == (
        "unrecognized arguments: --bogus; %agent_new? shows the usage\n")
    shell.run_cell("1/0")  # other errors keep their traceback
    assert "ZeroDivisionError" in capsys.readouterr().out + capsys.readouterr().err


def test_an_earlier_custom_exception_handler_keeps_working(
    make_shell: ShellFactory, capsys: pytest.CaptureFixture[str],
) -> None:
    shell = make_shell(load=False)
    seen: list[str] = []
    shell.set_custom_exc((KeyError,), lambda self, etype, value, tb, tb_offset=None:
                         seen.append(str(value)) or [])
    shell.run_line_magic("load_ext", "jupyter_agent")
    shell.run_cell("{}['x']")
    shell.run_cell("%agent_resume nope")
    assert seen == ["'x'"] and capsys.readouterr().err.startswith("no saved session 'nope'")
    shell.run_line_magic("unload_ext", "jupyter_agent")
    assert shell.custom_exceptions == (KeyError,)
    shell.run_cell("{}['y']")
    assert seen == ["'x'", "'y'"]


def test_a_mistyped_option_gets_a_suggestion(shell: InteractiveShell) -> None:
    message = usage_error(shell, "agent_new", "--aprove auto")
    assert message.startswith("unrecognized arguments: --aprove auto (did you mean --approve?)")
    assert message.endswith("%agent_new? shows the usage")
    assert "(did you mean --max-cost?)" in usage_error(shell, "agent_resume", "--max-cots=1")
    assert "did you mean" not in usage_error(shell, "agent_new", "--frobnicate")


def test_a_failed_new_session_says_which_session_stays_active(
        shell: InteractiveShell, model_server: ScriptedModelServer) -> None:
    shell.run_line_magic("agent_new", f"--base-url {model_server.base_url}")
    sid = magics_of(shell).controller.active_session_id
    message = usage_error(shell, "agent_new", "--max-cost -1")
    assert message == (f"--max-cost must be zero or more (got -1.0); no new session: "
                       f"session {sid} stays active")
    assert usage_error(shell, "agent_new", "--aprove auto").endswith(
        f"no new session: session {sid} stays active")
    assert magics_of(shell).controller.active_session_id == sid


def test_a_turn_without_a_model_call_prints_no_footer(
        shell: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    shell.run_line_magic("config", f'AgentMagics.base_url = "{url}"')
    usage_error(shell, "agent", "hello?")
    out = capsys.readouterr().out
    assert "── " not in out and "0 tokens" not in out and "$0.0000" not in out


def test_a_base_url_without_v1_gets_told_so(shell: InteractiveShell) -> None:
    with ScriptedModelServer() as server:
        bare = server.base_url.removesuffix("/v1")
        shell.run_line_magic("config", f'AgentMagics.base_url = "{bare}"')
        message = usage_error(shell, "agent", "hello?")
    assert "(404" in message
    assert message.endswith(f"the base URL probably needs /v1 at its end (--base-url "
                            f"{bare}/v1)"), message


def test_a_dropped_connection_is_said_in_plain_words_and_the_turn_shows_the_cut(
        agent_shell: InteractiveShell, model_server: ScriptedModelServer,
        capsys: pytest.CaptureFixture[str]) -> None:
    agent_shell.run_line_magic("agent_new", "")
    model_server.add_steps([{"text": "The answer is forty-two", "drop_after": 3}])
    message = usage_error(agent_shell, "agent", "", "what is the answer?")
    assert "dropped mid-reply (the server closed it before the reply was complete)" in message
    assert "chunked" not in message and "peer" not in message
    out = capsys.readouterr().out
    assert "[jupyter-agent] (reply cut off: the connection dropped mid-reply)" in out
