"""The plain-Python API (AgentController, Settings, build_client) and the pure formatters."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jupyter_agent.agent.config import Limits
from jupyter_agent.agent.events import TextDelta
from jupyter_agent.controller import AgentController, UsageReport
from jupyter_agent.errors import (
    JupyterAgentError,
    LimitExceededError,
    ModelError,
    ModelNotConfiguredError,
    SessionLockedError,
)
from jupyter_agent.settings import PLACEHOLDER_API_KEY, SessionOptions, Settings, build_client
from jupyter_agent.store import Compaction, FileStore, Usage
from jupyter_agent.testing import ScriptedModelServer
from jupyter_agent.text import format_cost, relative_time, shorten
from jupyter_agent.ui.display import format_footer, format_transcript, limits_left


def test_options_override_only_what_is_given() -> None:
    base = Settings(model="a", max_tool_calls=5, approve="ask")
    merged = base.with_options(SessionOptions(title="T", model="b", approve="auto"))
    assert (merged.model, merged.approve, merged.max_tool_calls) == ("b", "auto", 5)
    assert base.with_options(SessionOptions()) == base
    assert merged.limits() == Limits(max_tool_calls=5)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"approve": "x"}, "approve must be one of auto, ask, deny"),
    ({"base_url": "file:///x"}, "^--base-url must be an http:// or https:// URL"),
    ({"max_cost_usd": -0.01}, r"^--max-cost must be zero or more \(got -0.01\)$"),
    ({"max_cost_usd": float("nan")}, r"^--max-cost must be a finite number \(got nan\)$"),
    ({"max_cost_usd": float("inf")}, r"^--max-cost must be a finite number \(got inf\)$"),
    ({"max_tool_calls": -1}, "--max-tool-calls must be zero or more"),
    ({"max_iterations": 0}, r"^--max-iterations must be a positive number \(got 0\)$"),
    ({"model": ""}, "^--model must not be empty$"),
    ({"model": "  "}, "^--model must not be empty$"),
])
def test_options_are_validated(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SessionOptions(**kwargs)  # type: ignore[arg-type]


def test_options_layer_over_each_other() -> None:
    remembered = SessionOptions(base_url="http://h:1/v1", max_tool_calls=3, approve="auto")
    explicit = SessionOptions(title="T", max_tool_calls=5)
    merged = explicit.over(remembered)
    assert merged == SessionOptions(title="T", base_url="http://h:1/v1", max_tool_calls=5,
                                    approve="auto")
    assert explicit.given() == {"title", "max_tool_calls"}


def test_build_client_reads_the_named_variable_or_uses_a_placeholder() -> None:
    with pytest.raises(ModelNotConfiguredError, match=r"^no model configured: OPENAI_API_KEY is "
                                                       r"not set; set it in the environment"):
        build_client(Settings(), environ={})
    with pytest.raises(ModelNotConfiguredError, match="K2 is not set"):
        build_client(Settings(api_key_env="K2"), environ={"OPENAI_API_KEY": "sk-other"})
    client = build_client(Settings(api_key_env="K2"), environ={"K2": "sk-mine"})
    assert client.api_key == "sk-mine" and "api.openai.com" in str(client.base_url)
    local = build_client(Settings(base_url="http://127.0.0.1:1/v1"), environ={})
    assert local.api_key == PLACEHOLDER_API_KEY and str(local.base_url).startswith(
        "http://127.0.0.1:1/v1")


@pytest.mark.parametrize("url", ["http://localhost:11434/v1", "http://127.0.0.1:8000/v1",
                                 "http://127.8.9.10/v1", "http://[::1]:8080/v1"])
def test_loopback_servers_do_not_get_the_default_key(url: str) -> None:
    env = {"OPENAI_API_KEY": "sk-openai-secret", "LOCAL_KEY": "local-secret"}
    assert build_client(Settings(base_url=url), environ=env).api_key == PLACEHOLDER_API_KEY
    # ... unless api_key_env names another variable on purpose
    named = build_client(Settings(base_url=url, api_key_env="LOCAL_KEY"), environ=env)
    assert named.api_key == "local-secret"


def test_remote_servers_and_openai_get_the_key_and_openai_base_url_counts() -> None:
    env = {"OPENAI_API_KEY": "sk-openai-secret"}
    remote = build_client(Settings(base_url="https://llm.example.com/v1"), environ=env)
    assert remote.api_key == "sk-openai-secret"
    assert build_client(Settings(), environ=env).api_key == "sk-openai-secret"
    # OPENAI_BASE_URL is a configured base_url: no key needed for a local one ...
    from_env = build_client(Settings(), environ={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert str(from_env.base_url) == "http://127.0.0.1:9/v1/"
    assert from_env.api_key == PLACEHOLDER_API_KEY
    # ... and the setting beats it
    both = build_client(Settings(base_url="http://127.0.0.1:7/v1"),
                        environ={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert str(both.base_url) == "http://127.0.0.1:7/v1/"
    # the OpenAI API's own URL is no base_url: it still needs the key
    with pytest.raises(ModelNotConfiguredError):
        build_client(Settings(base_url="https://api.openai.com/v1"), environ={})


def test_controller_without_a_shell(tmp_path: Path) -> None:
    env = {"JUPYTER_AGENT_MEMORY_DIR": str(tmp_path / "mem")}
    with ScriptedModelServer([{"text": "one"}, {"text": "two"}]) as server:
        settings = Settings(base_url=server.base_url, model="scripted")
        ctl = AgentController(lambda: settings, environ=env)
        assert ctl.memory_dir == tmp_path / "mem" and ctl.active_session_id is None
        with pytest.raises(JupyterAgentError, match="no active session"):
            ctl.ask("x")
        created = ctl.ensure_session()
        assert created is not None and ctl.ensure_session() is None
        events: list[object] = []
        result = ctl.ask("hello", on_event=events.append)
        assert result.reply == "one" and result.session_id == created
        assert any(isinstance(e, TextDelta) for e in events)
        assert result.session_usage.calls == 1 and result.turn_tool_calls == 0
        store = ctl.store
        assert store.holds_lease(created)
        first_client = ctl._require_active().agent.model.client  # type: ignore[attr-defined]

        other = ctl.new_session(SessionOptions(title="second"))
        # one client per endpoint and key: its connections are kept
        assert ctl._require_active().agent.model.client is first_client  # type: ignore[attr-defined]
        assert not store.holds_lease(created) and store.holds_lease(other)
        # a failed resume leaves the active session as it was
        blocker = FileStore(tmp_path / "mem")
        blocker.acquire_lease(created)
        with pytest.raises(SessionLockedError):
            ctl.resume(created)
        assert ctl.active_session_id == other and store.holds_lease(other)
        blocker.release_all()
        resumed = ctl.resume(created)
        record = resumed.record
        assert not resumed.unarchived
        assert record.id == created and [m["content"] for m in record.messages[-2:]] == [
            "hello", "one"]
        assert ctl.ask("again").reply == "two"
        ctl.close()
        assert ctl.active_session_id is None and not store.holds_lease(created)


def test_relative_time_and_truncate() -> None:
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert relative_time(now - timedelta(seconds=30), now) == "just now"
    assert relative_time(now - timedelta(minutes=59), now) == "59 min ago"
    assert relative_time(now - timedelta(days=1, hours=2), now) == "yesterday"
    assert relative_time(now - timedelta(days=45), now) == "2026-01-15"
    assert relative_time((now - timedelta(hours=2)).replace(tzinfo=None), now) == "2 h ago"
    assert shorten("héllo wörld", 5) == "héll…" and shorten("abc", 3) == "abc"
    assert shorten("😀😀😀", 2) == "😀…"


def test_cost_and_limits_text() -> None:
    assert format_cost(Usage(cost_usd=0.01)) == "$0.0100"
    assert format_cost(Usage(price_unknown=True)) == "price unknown"
    assert format_cost(Usage(cost_usd=0.5, price_unknown=True)) == "$0.5000 + price unknown"
    lim = Limits(max_tool_calls=5, max_cost_usd=1.0, max_iterations=3)
    assert limits_left(lim, Usage(cost_usd=0.25), 7) == (
        "0 tool calls, $0.7500 left; 3 model calls per turn")
    assert limits_left(Limits(), Usage(), 0) == "no limits"
    result = UsageReport("s", Usage(input_tokens=100, output_tokens=50, cost_usd=0.2), 3,
                         Limits(max_tool_calls=4), reply="r",
                         turn_usage=Usage(input_tokens=10, output_tokens=5), turn_tool_calls=1)
    assert format_footer(result) == (
        "── 15 tokens (10 in / 5 out) · $0.0000 · 1 tool call │ session: 150 tokens · "
        "$0.2000 · 3 tool calls │ 1 tool call left")


def test_transcript_markers_sit_at_the_recorded_lengths() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    transcript = [{"role": "user", "content": f"m{i}"} for i in range(5)]
    comps = [Compaction(at=at, summary="S1", replaced=2, transcript_length=2),
             Compaction(at=at, summary="S2", replaced=3, transcript_length=5)]
    text = format_transcript(transcript, comps)
    order = [text.index(k) for k in ("m0", "m1", "S1", "m2", "m4", "S2")]
    assert order == sorted(order)
    assert "═══ compaction at 2026-01-02T03:04:05+00:00: 2 messages replaced" in text


def test_a_limit_reaches_the_front_end_as_the_agents_error_object(tmp_path: Path) -> None:
    env = {"JUPYTER_AGENT_MEMORY_DIR": str(tmp_path / "mem")}
    step = {"tool_calls": [{"name": "list_todos", "arguments": {}}]}
    with ScriptedModelServer([step, step]) as server:
        settings = Settings(base_url=server.base_url, model="scripted", max_iterations=1)
        ctl = AgentController(lambda: settings, environ=env)
        ctl.new_session()
        result = ctl.ask("loop")
        assert result.stop_reason == "max_iterations"
        err = result.limit_error
        assert isinstance(err, LimitExceededError)
        assert result.reply.startswith("[jupyter-agent] Stopped: this turn reached max_iterat")
        assert (err.limit, err.value, err.maximum) == ("max_iterations", 1, 1)
        assert ctl.ask("again").limit_error is not err
        ctl.close()


def test_settings_and_the_key_apply_at_the_next_prompt_on_the_same_lease(tmp_path: Path) -> None:
    env = {"JUPYTER_AGENT_MEMORY_DIR": str(tmp_path / "mem"), "LAB_KEY": "first"}
    with ScriptedModelServer(["one", "two", "three"], require_api_key="second") as server:
        current = [Settings(base_url=server.base_url, api_key_env="LAB_KEY", model="m1")]
        ctl = AgentController(lambda: current[0], environ=env)
        sid = ctl.new_session()
        with pytest.raises(ModelError, match="rejected the API key from LAB_KEY"):
            ctl.ask("hello")
        rejected = ctl._require_active().agent.model.client  # type: ignore[attr-defined]
        env["LAB_KEY"] = "second"  # e.g. %dotenv: no restart, no new session
        assert ctl.ask("hello again").reply == "one"
        assert ctl._require_active().agent.model.client is not rejected  # type: ignore[attr-defined]
        agent = ctl._require_active().agent
        current[0] = replace(current[0], model="m2", approve="deny", max_tool_calls=4)
        assert ctl.ask("and now?").reply == "two"
        assert ctl._require_active().agent is agent  # same agent, same session, same lease
        assert (agent.model.name, agent.config.approve, agent.config.limits.max_tool_calls) == (
            "m2", "deny", 4)
        assert [r["model"] for r in server.requests[-2:]] == ["m1", "m2"]
        assert ctl.store.holds_lease(sid)
        ctl.close()
        assert not ctl.store.holds_lease(sid)


def test_a_resume_reads_the_record_once_and_the_agent_owns_the_only_lease(
    tmp_path: Path,
) -> None:
    from typing import cast

    from jupyter_agent.store import Store
    from tests.agent.helpers import CountingStore

    env = {"JUPYTER_AGENT_MEMORY_DIR": str(tmp_path / "mem")}
    with ScriptedModelServer(["one", "two"]) as server:
        settings = Settings(base_url=server.base_url, model="scripted")
        ctl = AgentController(lambda: settings, environ=env)
        counter = CountingStore(FileStore(tmp_path / "mem"))
        ctl._stores[("", ctl.memory_dir)] = cast(Store, counter)
        first = ctl.new_session(SessionOptions(title="T"))
        ctl.ask("hello")
        ctl.new_session()  # the first session is let go
        counter.calls.clear()
        resumed = ctl.resume(first)
        assert counter.count("load_session") == 1
        assert counter.count("acquire_lease") == 1 and counter.count("release_lease") == 1
        assert resumed.record.title == "T" and len(resumed.record.messages) == 3
        assert ctl.ask("again").reply == "two"
        ctl.close()
        other = FileStore(tmp_path / "mem")
        other.acquire_lease(first)  # nothing else kept a count of it
        other.release_all()


def test_the_plain_api_imports_nothing_of_the_front_end() -> None:
    import subprocess
    import sys

    code = ("import sys, jupyter_agent.controller, jupyter_agent.project; "
            "print(sorted(m for m in sys.modules if m.startswith('jupyter_agent.ui')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_resuming_a_json_file_session_loads_no_team_store_module(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from jupyter_agent.controller import AgentController\n"
        "from jupyter_agent.settings import Settings\n"
        "from jupyter_agent.testing import ScriptedModelServer\n"
        "with ScriptedModelServer(['hi']) as server:\n"
        f"    s = Settings(base_url=server.base_url, memory_dir={str(tmp_path)!r})\n"
        "    env = {'PATH': ''}\n"
        "    first = AgentController(lambda: s, environ=env)\n"
        "    sid = first.new_session()\n"
        "    first.close()\n"
        "    second = AgentController(lambda: s, environ=env)\n"
        "    assert second.resume(sid).record.id == sid\n"
        "    second.close()\n"
        "print(sorted(m for m in sys.modules if m.startswith('jupyter_agent.store.postgres')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
