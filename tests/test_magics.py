"""%agent / %%agent turns and the magics that act on the active session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from jupyter_agent.agent.config import Limits
from jupyter_agent.errors import LimitExceededError
from jupyter_agent.project import find_project_root
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer
from tests.shells import ShellFactory, magics_of

CODE_STEP = {"tool_calls": [{"name": "run_python", "arguments": {"code": "x = 21 * 2\nprint(x)"}}]}


def active_id(shell: InteractiveShell) -> str:
    sid = magics_of(shell).controller.active_session_id
    assert sid is not None
    return str(sid)


def user_texts(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def test_cell_magic_starts_a_session_streams_and_prints_a_footer(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, memory_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model_server.add_steps([{"text": "Hello from the **model**",
                             "usage": {"prompt_tokens": 1000, "completion_tokens": 20}}])
    agent_shell.run_cell_magic("agent", "", "Say hello\nin two lines")
    out = capsys.readouterr().out.splitlines()
    sid = active_id(agent_shell)
    assert out[0] == (f"No active session: started session {sid} "
                      "(%agent_resume picks up an earlier one).")
    assert out[1] == "Hello from the **model**"
    assert out[2].startswith("── 1,020 tokens (1,000 in / 20 out) · ")
    assert "0 tool calls │ session: 1,020 tokens" in out[2] and out[2].endswith("no limits")
    assert len(out) == 3
    record = FileStore(memory_dir).load_session(sid)
    assert record.project_root == str(find_project_root(os.getcwd()))
    assert user_texts(model_server.requests[0]) == ["Say hello\nin two lines"]
    assert model_server.requests[0]["model"] == "gpt-4o-mini"
    assert model_server.requests[0]["stream"] is True


def test_line_magic_continues_the_active_session(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model_server.add_steps([{"text": "first answer"}, {"text": "second answer"}])
    agent_shell.run_line_magic("agent", "first question")
    sid = active_id(agent_shell)
    agent_shell.run_line_magic("agent", "second question")
    assert active_id(agent_shell) == sid
    second = model_server.requests[1]["messages"]
    assert [m.get("content") for m in second[-3:]] == [
        "first question", "first answer", "second question"]
    assert "started session" not in capsys.readouterr().out.split("first answer")[1]


def test_tool_calls_render_compactly_and_run_in_the_user_namespace(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model_server.add_steps([CODE_STEP, {"text": "x is 42"}])
    agent_shell.run_line_magic("agent_new", "--approve auto --max-tool-calls 3")
    capsys.readouterr()
    agent_shell.run_line_magic("agent", "compute x")
    out = capsys.readouterr().out
    assert "▶ run_python\n    x = 21 * 2\n    print(x)\n  → 42\nx is 42\n" in out
    assert agent_shell.user_ns["x"] == 42
    footer = out.splitlines()[-1]
    assert "1 tool call │" in footer and footer.endswith("2 tool calls left")
    assert "price unknown" not in footer  # gpt-4o-mini has a price


def test_agent_new_options_override_settings_for_that_session(
    shell: InteractiveShell, model_server: ScriptedModelServer, memory_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shell.run_line_magic("config", 'AgentMagics.model = "model-from-settings"')
    shell.run_line_magic("config", "AgentMagics.max_tool_calls = 10")
    model_server.add_steps([CODE_STEP, {"text": "refused, fine"}, {"text": "plain"}])
    shell.run_line_magic(
        "agent_new",
        f'--title "Penguin study" --model model-from-option --base-url {model_server.base_url} '
        "--max-cost 1.5 --max-tool-calls 3 --max-iterations 4 --approve deny",
    )
    sid = active_id(shell)
    assert capsys.readouterr().out == f"New session {sid} — Penguin study\n"
    controller = magics_of(shell).controller
    shell.run_line_magic("agent", "try to run code")
    agent = controller._active.agent
    assert agent.config.limits == Limits(max_tool_calls=3, max_cost_usd=1.5, max_iterations=4)
    assert agent.config.approve == "deny"
    assert model_server.requests[0]["model"] == "model-from-option"
    tool_result = model_server.requests[1]["messages"][-1]
    assert tool_result["role"] == "tool" and "x" not in shell.user_ns
    store = FileStore(memory_dir)
    assert store.load_session(sid).title == "Penguin study"
    out = capsys.readouterr().out
    assert "$1.5" in out.splitlines()[-1]  # what the cost limit leaves
    # a new session without options is back on the settings (and needs their base_url)
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    shell.run_line_magic("agent_new", "")
    shell.run_line_magic("agent", "again")
    assert model_server.requests[2]["model"] == "model-from-settings"
    assert controller._active.agent.config.limits == Limits(max_tool_calls=10)


def test_config_changes_apply_to_the_next_turn(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model_server.add_steps([{"text": "one"}, {"text": "two"}])
    agent_shell.run_line_magic("agent", "q1")
    agent_shell.run_line_magic("config", 'AgentMagics.model = "other-model"')
    agent_shell.run_line_magic("config", "AgentMagics.stream = False")
    agent_shell.run_line_magic("config", "AgentMagics.max_cost_usd = 2.0")
    agent_shell.run_line_magic("agent", "q2")
    assert model_server.requests[1]["model"] == "other-model"
    assert not model_server.requests[1].get("stream")
    assert user_texts(model_server.requests[1]) == ["q1", "q2"]
    out = capsys.readouterr().out
    assert "two\n" in out and "price unknown" in out.splitlines()[-1]
    assert "left" in out.splitlines()[-1]


def test_empty_prompt_is_a_usage_error(agent_shell: InteractiveShell) -> None:
    with pytest.raises(UsageError, match=r"^nothing to ask: use %agent PROMPT or a %%agent cell$"):
        agent_shell.run_cell_magic("agent", "  ", "\n\n")


def test_limit_reached_shows_footer_then_one_line_error(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model_server.add_steps([CODE_STEP, CODE_STEP, {"text": "never"}])
    agent_shell.run_line_magic("agent_new", "--approve auto --max-tool-calls 1")
    with pytest.raises(UsageError) as info:
        agent_shell.run_line_magic("agent", "loop forever")
    assert str(info.value) == (
        "limit reached: max_tool_calls = 1 tool call per session (1 made); raise it with "
        "%agent_resume --max-tool-calls N, then send another prompt")
    assert isinstance(info.value.__cause__, LimitExceededError)
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("── ") and "0 tool calls left" in out
    assert "Stopped" not in out  # one message, with the suggestion that applies
    assert model_server.remaining == 1


def test_cost_limit_through_the_magics(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # gpt-4o-mini: $0.15 per million input tokens, so this call costs $0.0015
    expensive = {"usage": {"prompt_tokens": 10_000, "completion_tokens": 1}}
    model_server.add_steps([{**CODE_STEP, **expensive}, {"text": "never"}])
    agent_shell.run_line_magic("config", "AgentMagics.max_cost_usd = 0.001")
    agent_shell.run_line_magic("agent_new", "--approve auto")
    capsys.readouterr()
    with pytest.raises(UsageError) as info:
        agent_shell.run_line_magic("agent", "spend")
    assert str(info.value) == (
        "limit reached: max_cost_usd = $0.0010 per session ($0.0015 spent); raise it with "
        "%agent_resume --max-cost N or %config AgentMagics.max_cost_usd = N, then send "
        "another prompt")
    footer = capsys.readouterr().out.splitlines()[-1]
    assert footer.startswith("── 10,001 tokens") and footer.endswith("$0.0000 left")
    assert model_server.remaining == 1 and "x" not in agent_shell.user_ns  # batch not run
    # raised with %config, the next prompt goes on
    agent_shell.run_line_magic("config", "AgentMagics.max_cost_usd = 1.0")
    agent_shell.run_line_magic("agent", "go on")
    assert model_server.remaining == 0


def test_iteration_limit_through_the_magics(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model_server.add_steps([CODE_STEP, CODE_STEP, {"text": "later"}])
    agent_shell.run_line_magic("agent_new", "--approve auto --max-iterations 2")
    capsys.readouterr()
    with pytest.raises(UsageError) as info:
        agent_shell.run_line_magic("agent", "keep going")
    assert str(info.value) == (
        "limit reached: max_iterations = 2 model calls per prompt; send another prompt to "
        "continue, or raise it with %agent_resume --max-iterations N")
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("── ") and "2 tool calls │ session:" in out
    assert out.splitlines()[-1].endswith("2 model calls per turn")
    agent_shell.run_line_magic("agent", "and now?")  # a new prompt: a new budget
    assert model_server.remaining == 0


def test_prompt_is_sent_as_typed_without_namespace_expansion(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
) -> None:
    agent_shell.user_ns.update(x=42, name="penguins")
    model_server.add_steps([{"text": "a"}, {"text": "b"}])
    agent_shell.run_line_magic("agent", "what is {x} and $name?")
    agent_shell.run_cell("%agent format with {x:>5} and $name")
    assert user_texts(model_server.requests[1]) == [
        "what is {x} and $name?", "format with {x:>5} and $name"]
    agent_shell.run_cell("%agent_summary Use {x} in $name")
    agent_shell.run_cell("%agent_title '{x} $name'")
    record = magics_of(agent_shell).controller.record()
    assert (record.summary, record.title) == ("Use {x} in $name", "{x} $name")
    # %agent_new options are still expanded (notebooks pass --base-url {server.base_url})
    agent_shell.user_ns["server"] = model_server
    agent_shell.run_cell("%agent_new --base-url {server.base_url} --title T")
    assert magics_of(agent_shell).controller._active.options.base_url == model_server.base_url


def test_a_trailing_question_mark_is_part_of_the_prompt(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model_server.add_steps([{"text": "4.2 kg"}, {"text": "yes"}])
    result = agent_shell.run_cell("%agent what is the mean?")
    result.raise_error()
    assert user_texts(model_server.requests[0]) == ["what is the mean?"]
    assert "4.2 kg" in capsys.readouterr().out
    result = agent_shell.run_cell("x = 1\nif x:\n    %agent   is it 'one'??  \n")
    result.raise_error()
    assert user_texts(model_server.requests[1])[-1] == "is it 'one'??"
    # %agent? alone, and the other magics, are still help
    agent_shell.run_cell("%agent?")
    agent_shell.run_cell("%agent_new?")
    assert "%%agent" in capsys.readouterr().out and model_server.remaining == 0
    # the transformer leaves with the extension
    transformers = agent_shell.input_transformers_cleanup
    assert sum(getattr(t, "__name__", "") == "rewrite_agent_lines" for t in transformers) == 1
    agent_shell.run_line_magic("reload_ext", "jupyter_agent")
    assert sum(getattr(t, "__name__", "") == "rewrite_agent_lines" for t in transformers) == 1
    agent_shell.run_line_magic("unload_ext", "jupyter_agent")
    assert not [t for t in transformers if getattr(t, "__name__", "") == "rewrite_agent_lines"]


def test_ctrl_c_during_a_turn_is_one_line_and_the_session_goes_on(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    interrupt = {"tool_calls": [{"name": "run_python",
                                 "arguments": {"code": "raise KeyboardInterrupt"}}]}
    model_server.add_steps([{"text": "Let me run it.", **interrupt}, {"text": "resumed fine"}])
    agent_shell.run_line_magic("agent_new", "--approve auto")
    capsys.readouterr()
    result = agent_shell.run_cell("%agent run the slow thing")
    assert result.error_in_exec is None and result.success
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[-1] == ("[jupyter-agent] interrupted — the session is saved; send another "
                         "prompt to go on.")
    assert "Traceback" not in captured.out + captured.err
    # the running call is marked, and the turn ends with its footer, as every turn does
    assert "  ✗ interrupted while running" in lines and lines[-2].startswith("── 1,")
    agent_shell.run_line_magic("agent", "go on")
    sent = model_server.requests[-1]["messages"]
    assert [m["role"] for m in sent[-4:]] == ["user", "assistant", "tool", "user"]
    assert "resumed fine" in capsys.readouterr().out


def test_title_quotes_and_plural_counts(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent_shell.run_line_magic("agent_new", "")
    agent_shell.run_line_magic("agent_title", '"Quoted title"')
    assert magics_of(agent_shell).controller.record().title == "Quoted title"
    agent_shell.run_line_magic("agent_title", "'it's' fine\"")
    assert magics_of(agent_shell).controller.record().title == "'it's' fine\""
    model_server.add_steps([CODE_STEP, {"text": "done"}])
    agent_shell.run_line_magic("agent_resume", "--approve auto")
    agent_shell.run_line_magic("agent", "one tool call")
    capsys.readouterr()
    agent_shell.run_line_magic("agent_resume", "")
    recap = capsys.readouterr().out.splitlines()[1]
    assert "· 1 tool call" in recap and " 1 tool calls" not in recap


def test_summary_title_todo_usage(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, memory_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(UsageError, match=r"^no active session: start one with %agent_new"):
        agent_shell.run_line_magic("agent_summary", "")
    model_server.add_steps([
        {"tool_calls": [{"name": "add_todo", "arguments": {"text": "plot the species"}}]},
        {"text": "added"},
    ])
    agent_shell.run_line_magic("agent", "plan it")
    sid = active_id(agent_shell)
    capsys.readouterr()
    agent_shell.run_line_magic("agent_todo", "")
    assert capsys.readouterr().out == "[ ] 1. plot the species — pending\n"
    agent_shell.run_line_magic("agent_summary", "Goal: penguins. Done: nothing yet.")
    agent_shell.run_line_magic("agent_title", "Penguins: a study")
    store = FileStore(memory_dir)
    assert store.load_session(sid).summary == "Goal: penguins. Done: nothing yet."
    assert store.load_session(sid).title == "Penguins: a study"
    capsys.readouterr()
    agent_shell.run_line_magic("agent_summary", "")
    assert capsys.readouterr().out == "Goal: penguins. Done: nothing yet.\n"
    agent_shell.run_line_magic("agent_usage", "")
    usage = capsys.readouterr().out
    assert f"session {sid}" in usage and "model calls: 2" in usage
    assert "tool calls:  1" in usage and "no limits" in usage


def test_history_and_compaction_markers(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent_shell.run_line_magic("agent_new", "")
    agent_shell.run_line_magic("agent_compact", "")
    assert capsys.readouterr().out.endswith("Nothing to compact.\n")
    for i in range(4):
        model_server.add_steps([{"text": f"answer {i}"}])
        agent_shell.run_line_magic("agent", f"question {i}")
    model_server.add_steps([{"text": "SUMMARY: questions 0 and 1 were asked"}])
    capsys.readouterr()
    agent_shell.run_line_magic("agent_compact", "")
    assert capsys.readouterr().out == "Compacted the working context.\n"
    agent_shell.run_line_magic("agent_history", "")
    working = capsys.readouterr().out
    assert "SUMMARY: questions 0 and 1" in working and "question 3" in working
    assert "question 0\n" not in working
    agent_shell.run_line_magic("agent_history", "--full")
    full = capsys.readouterr().out
    assert "question 0" in full and "question 3" in full
    marker = full.index("═══ compaction at ")
    assert full.index("answer 3") < marker  # recorded after the 4th turn
    assert "messages replaced by a summary ═══" in full


def test_markdown_streaming_and_panel_in_jupyter(
    make_shell: ShellFactory, model_server: ScriptedModelServer,
) -> None:
    class ZMQInteractiveShell(InteractiveShell):  # the name is how Jupyter is detected
        pass

    shell = make_shell(cls=ZMQInteractiveShell)
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    model_server.add_steps([{"text": "A *markdown* reply that streams in pieces"}])
    with capture_output() as captured:
        shell.run_line_magic("agent", "hi")
    # no front end answers input here (headless): the turn is one output, shown at the end,
    # the reply then the footer (a Markdown line that wraps at spaces)
    (turn,) = [o.data for o in captured.outputs if "text/markdown" in o.data]
    reply, footer = turn["text/markdown"].split("\n\n")
    assert reply == "A *markdown* reply that streams in pieces"
    assert footer.startswith("*── ") and turn["text/plain"].splitlines()[1].startswith("── ")
    assert "$" not in footer.replace("\\\\$", "")  # no $...$ math
    assert "── " not in captured.stdout and "A *markdown*" not in captured.stdout
    with capture_output() as captured:
        shell.run_line_magic("agent_sessions", "")
    views = [o for o in captured.outputs if "application/vnd.jupyter.widget-view+json" in o.data]
    assert len(views) == 1


def test_failed_compaction_is_a_one_line_error_and_keeps_the_context(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
) -> None:
    agent_shell.run_line_magic("agent_new", "")
    for i in range(4):
        model_server.add_steps([{"text": f"answer {i}"}])
        agent_shell.run_line_magic("agent", f"question {i}")
    before = magics_of(agent_shell).controller.record().messages
    model_server.add_steps([{"error": {"status": 400, "message": "summary refused"}}])
    with pytest.raises(UsageError, match=r"compaction failed.*summary refused"):
        agent_shell.run_line_magic("agent_compact", "")
    assert magics_of(agent_shell).controller.record().messages == before


def test_a_reply_cut_off_by_the_provider_is_a_notice_not_a_limit_error(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model_server.add_steps([{"text": "the answer is long and", "finish_reason": "length"}])
    agent_shell.run_line_magic("agent", "explain everything")  # no UsageError
    out = capsys.readouterr().out
    assert "the answer is long and" in out and "cut off" in out
    assert "limit reached" not in out


def test_approval_asks_once_without_repeating_the_code(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    import builtins

    from jupyter_agent import notebook

    prompts: list[str] = []
    monkeypatch.setattr(notebook, "can_ask", lambda shell: True)  # as at a terminal
    monkeypatch.setattr(builtins, "input", lambda prompt="": prompts.append(prompt) or "y")
    model_server.add_steps([CODE_STEP, {"text": "done"}])
    agent_shell.run_line_magic("agent_new", "--approve ask")
    agent_shell.run_line_magic("agent", "compute x")
    out = capsys.readouterr().out
    assert prompts == ["Run this code? [y/N] "]
    assert out.count("x = 21 * 2") == 1  # shown once, by the tool-call rendering
    assert agent_shell.user_ns["x"] == 42


def test_approval_without_stdin_refuses_without_showing_the_code_twice(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model_server.add_steps([CODE_STEP, {"text": "ok, I will not run it"}])
    agent_shell.run_line_magic("agent_new", "--approve ask")
    agent_shell.run_line_magic("agent", "compute x")  # pytest's stdin is not a terminal
    out = capsys.readouterr().out
    assert out.count("x = 21 * 2") == 1  # shown once, by the tool-call rendering
    assert "The agent wants to run this code" not in out
    refusal = model_server.requests[1]["messages"][-1]
    assert refusal["role"] == "tool" and "approve" in refusal["content"]
    assert "x" not in agent_shell.user_ns
