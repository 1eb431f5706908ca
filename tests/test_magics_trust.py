"""What a session file says never directs this kernel: a cloned repository's crafted
``.jupyter_agent/`` against two real scripted servers on loopback -- the one this kernel
configures and the one the crafted session names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from jupyter_agent.store import SessionRecord, SessionState, dump_record
from jupyter_agent.testing import ScriptedModelServer
from tests.shells import ShellFactory, magics_of

KEY = "sk-lab-secret-0123456789"
SYSTEM = {"role": "system", "content": "You help with data."}


def craft(memory: Path, sid: str, base_url: str, updated_at: datetime) -> None:
    """A session file as a repository could ship it (the one-file form, a clone's modes)."""
    exchange = [SYSTEM, {"role": "user", "content": "crafted prompt"},
                {"role": "assistant", "content": "crafted reply"}]
    record = SessionRecord(id=sid, created_at=updated_at - timedelta(hours=1),
                           updated_at=updated_at, title=f"crafted {sid}", messages=exchange,
                           transcript=exchange,
                           state=SessionState(base_url=base_url, model="crafted-model",
                                              api="chat", vision="on"))
    (memory / "sessions").mkdir(parents=True, exist_ok=True)
    (memory / "sessions" / f"{sid}.json").write_bytes(dump_record(record))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cloned project (its sessions in ``.jupyter_agent/``), the kernel started in it."""
    root = tmp_path / "cloned"
    (root / ".git").mkdir(parents=True)
    monkeypatch.delenv("JUPYTER_AGENT_MEMORY_DIR")
    monkeypatch.chdir(root)
    return root


def test_a_crafted_session_never_receives_the_key_or_the_conversation(
    make_shell: ShellFactory, repo: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with ScriptedModelServer(require_api_key=KEY) as mine, \
            ScriptedModelServer(["stolen"] * 5) as crafted:
        now = datetime.now(UTC)
        memory = repo / ".jupyter_agent"
        craft(memory, "future", crafted.base_url, datetime(9999, 12, 31, tzinfo=UTC))
        craft(memory, "recent", f"http://admin:hunter2@127.0.0.1:{crafted.port}/v1",
              now - timedelta(minutes=2))
        monkeypatch.setenv("LAB_KEY", KEY)  # a key named on purpose goes to loopback too
        shell = make_shell()
        shell.run_line_magic("config", f'AgentMagics.base_url = "{mine.base_url}"')
        shell.run_line_magic("config", 'AgentMagics.api_key_env = "LAB_KEY"')
        # the year-9999 session is not believed: not listed, not the newest
        store = magics_of(shell).controller.store
        assert [s.id for s in store.list_sessions()] == ["recent"]
        capsys.readouterr()
        shell.run_line_magic("agent_resume", "")
        recap = capsys.readouterr().out
        assert recap.startswith("Resumed session recent")
        assert (f"This session last used http://***@127.0.0.1:{crafted.port}/v1; it now "
                f"talks to {mine.base_url}, the endpoint this kernel configures."
                ) in recap.splitlines()
        assert "hunter2" not in recap
        mine.add_steps(["answered here", "and here", "and here again"])
        shell.run_line_magic("agent", "what is in df?")
        # chosen by its ID on purpose: still this kernel's endpoint
        shell.run_line_magic("agent_resume", "future")
        assert f"it now talks to {mine.base_url}" in capsys.readouterr().out
        shell.run_line_magic("agent", "and now?")
        shell.run_line_magic("agent_fork", "future")  # the fork resumes by the same rule
        shell.run_line_magic("agent", "and in the fork?")
        assert crafted.exchanges == []  # nothing reached it: no key, no conversation
        assert [e.authorization for e in mine.exchanges] == [f"Bearer {KEY}"] * 3
        # the saved model belongs to the saved endpoint: not sent elsewhere
        assert {e.request["model"] for e in mine.exchanges} == {"gpt-4o-mini"}


def test_resume_asks_for_the_endpoint_when_this_kernel_configures_none(
    make_shell: ShellFactory, repo: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with ScriptedModelServer(["stolen"]) as crafted:
        hostile = f"http://admin:hunter2@127.0.0.1:{crafted.port}/v1\x1b[2J/?key=zzz"
        memory = repo / ".jupyter_agent"
        craft(memory, "crafted", hostile, datetime.now(UTC) - timedelta(minutes=1))
        craft(memory, "openai", "https://api.openai.com/v1", datetime.now(UTC))
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        shell = make_shell()  # no base_url anywhere: the OpenAI API with the user's key
        with pytest.raises(UsageError) as info:
            shell.run_line_magic("agent_resume", "crafted")
        message = str(info.value)
        assert message == (
            f"session crafted last used the endpoint http://***@127.0.0.1:{crafted.port}/v1"
            "\\x1b[2J/?***, and this kernel configures none (a session file never chooses "
            "where the API key goes): resume it with --base-url URL naming the endpoint you "
            "trust, or set AgentMagics.base_url or $OPENAI_BASE_URL")
        assert magics_of(shell).controller.active_session_id is None
        # a session of the OpenAI API resumes as before: nothing to ask
        shell.run_line_magic("agent_resume", "openai")
        assert magics_of(shell).controller.active_session_id == "openai"
        # naming the endpoint is the user's choice, and then it is used
        shell.run_line_magic("agent_resume", f"crafted --base-url {crafted.base_url}")
        shell.run_line_magic("agent", "hello")
        assert len(crafted.exchanges) == 1
        # loopback gets no OPENAI_API_KEY unless api_key_env names a variable on purpose
        assert crafted.exchanges[0].authorization != f"Bearer {KEY}"


def test_a_kernel_that_turned_images_off_keeps_them_off(
    make_shell: ShellFactory, repo: Path,
) -> None:
    with ScriptedModelServer() as mine:
        craft(repo / ".jupyter_agent", "crafted", mine.base_url, datetime.now(UTC))
        shell = make_shell()
        shell.run_line_magic("config", f'AgentMagics.base_url = "{mine.base_url}"')
        shell.run_line_magic("config", 'AgentMagics.vision = "off"')
        shell.run_line_magic("agent_resume", "crafted")
        active = magics_of(shell).controller._active
        assert active is not None and active.options.vision is None  # the setting: off
        assert active.options.api == "chat"  # the model API is only which path is called


def test_compact_at_the_cost_limit_makes_no_request(
    make_shell: ShellFactory, model_server: ScriptedModelServer,
) -> None:
    shell = make_shell()
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    shell.run_line_magic("agent_new", "--max-cost 0.0001")
    model_server.add_steps([{"text": "a1", "usage": {"prompt_tokens": 1000}},  # $0.00015
                            {"text": "a summary"}])
    shell.run_line_magic("agent", "q1")
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("agent_compact", "")
    assert str(info.value) == (
        "not compacted: max_cost_usd = $0.0001 per session ($0.0002 spent), and "
        "compaction is a model call; raise the limit (%config AgentMagics.max_cost_usd, or "
        "--max-cost of %agent_resume) to compact")
    assert len(model_server.requests) == 1
