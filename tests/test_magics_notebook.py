"""The agent knows the notebook: cells, outputs, errors and variables, as ``context_privacy``
allows, through the notebook tools and ``@`` references in a prompt (real shells, the
scripted model over HTTP)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModelServer
from tests.shells import magics_of

#: A value that appears in no cell's code: only a value-sending path can reveal it.
SECRET = "t3rc3s-enola"
USER_CELLS = [
    "import pandas as pd\nsecret_name = ''.join(reversed('alone-s3cr3t'))",
    "df = pd.DataFrame({'name': [secret_name, 'b'], 'score': [1.5, 2.5]})",
    "df",
    "def f():\n    return df['missing']\nf()",
]


def run(shell: InteractiveShell, code: str) -> Any:
    """Run ``code`` as a notebook cell (counted, kept in the history)."""
    return shell.run_cell(code, store_history=True)


def run_user_cells(shell: InteractiveShell) -> None:
    results = [run(shell, code) for code in USER_CELLS]
    assert [r.success for r in results] == [True, True, True, False]


def user_content(request: dict[str, Any]) -> str:
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


def tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args} for name, args in pairs]}


def test_df_and_error_references_send_the_schema_and_traceback_not_the_values(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, memory_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_user_cells(agent_shell)
    model_server.add_steps([{"text": "The column is missing."}])
    result = run(agent_shell, "%%agent\nwhy does @df fail? see @error and @In[2], @Out[3]")
    assert result.success
    sent = user_content(model_server.requests[0])
    assert sent.startswith("why does @df fail? see @error and @In[2], @Out[3]\n\n"
                           "--- attached by jupyter-agent (context_privacy: schema) ---")
    assert "df: pandas.DataFrame\n  2 rows × 2 columns" in sent
    assert "columns: name (" in sent and "score (float64)" in sent
    assert "Error in [4]:\nTraceback (most recent call last):" in sent
    assert 'File "In [4]", line 2, in f' in sent and "KeyError: 'missing'" in sent
    assert "interactiveshell.py" not in sent  # IPython's own frames are left out
    assert 'File "…/site-packages/pandas/core/' in sent and "/work/" not in sent
    assert "In [2]:\ndf = pd.DataFrame(" in sent  # the code the user wrote
    assert "Out [3]: pandas.DataFrame (2 rows × 2 columns" in sent
    assert SECRET not in sent  # no value under "schema" (only what the code itself says)
    out = capsys.readouterr().out
    assert "attached @df: df: pandas.DataFrame · 2 rows × 2 columns" in out
    assert "attached @error: Error in [4]:" in out
    # saved with the user message: a resume and the history see what was sent
    sid = magics_of(agent_shell).controller.active_session_id
    saved = [m for m in FileStore(memory_dir).load_session(sid).messages
             if m["role"] == "user"]
    # saved as sent, but for the "notebook so far" section, which goes with one turn only
    attached, section = sent.split("\n\n--- the notebook since the last prompt")
    assert saved[-1]["content"] == attached and "In [4]: def f():" in section
    agent_shell.run_line_magic("agent_history", "")
    assert "--- attached by jupyter-agent (context_privacy: schema) ---" in \
        capsys.readouterr().out


def test_preview_sends_a_few_rows(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
) -> None:
    agent_shell.run_line_magic("config", 'AgentMagics.context_privacy = "preview"')
    run_user_cells(agent_shell)
    model_server.add_steps([calls(("notebook_cell", {"n": 3}), ("list_variables", {})),
                            {"text": "ok"}])
    run(agent_shell, "%%agent\nlook at @df")
    sent = user_content(model_server.requests[0])
    assert "context_privacy: preview" in sent and "preview:" in sent
    assert SECRET in sent and "2.5" in sent
    cell, listing = tool_results(model_server.requests[1])
    assert cell.startswith("In [3]:\ndf\nOut [3]: pandas.DataFrame") and SECRET in cell
    assert "df: DataFrame, shape=(2, 2)" in listing and f"secret_name: str = '{SECRET}'" \
        in listing


def test_notebook_tools_list_cells_mark_agent_cells_and_keep_values_back(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_user_cells(agent_shell)
    model_server.add_steps([{"text": "first"}])
    run(agent_shell, "%%agent\nhello")
    model_server.add_steps([
        calls(("notebook_cells", {"last": 10}), ("notebook_cell", {"n": 99}),
              ("last_error", {}), ("describe_variable", {"name": "df"}),
              ("list_variables", {})),
        {"text": "done"}])
    run(agent_shell, "%%agent\nwhat did I run?")
    cells, missing, error, described, listing = tool_results(model_server.requests[2])
    assert cells.startswith("In [1]:\nimport pandas as pd\n")
    assert "In [3]:\ndf\nOut [3]: pandas.DataFrame (2 rows × 2 columns" in cells
    assert "In [4]:\ndef f():" in cells and "Error in [4]:\nTraceback" in cells
    assert "In [5]: (a jupyter-agent magic: a prompt is in the conversation)\n\nIn [6]: (a " \
        "jupyter-agent magic" in cells  # the cell asking now is In [6]
    assert missing == "error: no cell In [99] in this kernel"
    assert error.startswith("Error in [4]:\nTraceback") and error.endswith("KeyError: 'missing'")
    assert described.startswith("df: pandas.DataFrame\n  2 rows × 2 columns")
    assert "secret_name: str, length: 12" in listing
    for text in (cells, error, described, listing):
        assert SECRET not in text


def test_values_beyond_the_setting_need_approval(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
) -> None:
    run_user_cells(agent_shell)
    ask_values = calls(("describe_variable", {"name": "df", "values": True}))
    model_server.add_steps([ask_values, {"text": "denied"}])
    run(agent_shell, "%agent_new --approve deny")
    run(agent_shell, "%agent show me df")
    refused = tool_results(model_server.requests[1])[-1]
    assert refused.startswith("error: refused: context_privacy is 'schema' and the approval")
    # headless: "ask" with no stdin to ask on refuses, never hangs
    model_server.add_steps([ask_values, {"text": "headless"}])
    run(agent_shell, "%agent_new --approve ask")
    run(agent_shell, "%agent show me df")
    refused = tool_results(model_server.requests[3])[-1]
    assert refused.startswith("error: refused: the approval policy is 'ask' but there is no")
    assert SECRET not in json.dumps(model_server.requests)
    # "auto" (the user trusts the agent with code, and so with values)
    model_server.add_steps([ask_values, {"text": "sent"}])
    run(agent_shell, "%agent_new --approve auto")
    run(agent_shell, "%agent show me df")
    assert SECRET in tool_results(model_server.requests[5])[-1]


def test_none_sends_nothing_from_the_kernel(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    agent_shell.run_line_magic("config", 'AgentMagics.context_privacy = "none"')
    run_user_cells(agent_shell)
    model_server.add_steps([
        calls(("notebook_cells", {}), ("describe_variable", {"name": "df"}),
              ("last_error", {}), ("list_variables", {})),
        {"text": "ok"}])
    run(agent_shell, "%%agent\nexplain @df and @error")
    assert user_content(model_server.requests[0]) == "explain @df and @error"
    assert "not attached: @df, @error (context_privacy is 'none')" in capsys.readouterr().out
    results = tool_results(model_server.requests[1])
    assert len(results) == 4 and all(r.startswith("error: refused: context_privacy is 'none'")
                                     for r in results)
    agent_shell.run_line_magic("agent_usage", "")
    assert "kernel data: none — nothing from the kernel" in capsys.readouterr().out


def test_only_real_references_are_attached(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_user_cells(agent_shell)
    prompt = ("mail bob@df.com about `@df`, @nope and @In[77]:\n"
              "```python\n@df\ndef g(): ...\n```\n@df.")
    model_server.add_steps([{"text": "ok"}])
    agent_shell.run_cell_magic("agent", "", prompt)
    sent = user_content(model_server.requests[0])
    assert sent.count("@df\ndf: pandas.DataFrame") == 1  # the last line's, once
    out = capsys.readouterr().out
    assert "@nope: no such variable; sent as typed" in out
    assert "@In[77]: no such cell or output in this kernel; sent as typed" in out


def test_hostile_and_huge_values_are_bounded(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run(agent_shell, "import pandas as pd\n"
                     "wide = pd.DataFrame({f'c{i}\\x1b[2J': [i] for i in range(3000)})\n"
                     "class Bad:\n    def __len__(self): raise RuntimeError('no')\n"
                     "    def __repr__(self): raise RuntimeError('no')\nbad = Bad()")
    model_server.add_steps([{"text": "ok"}])
    agent_shell.run_cell_magic("agent", "", "@wide @bad")
    sent = user_content(model_server.requests[0])
    assert "… 2,940 more" in sent and len(sent) < 12_000
    assert "@bad\nbad: " in sent and "Bad" in sent
    assert "\x1b" not in capsys.readouterr().out  # notices are shown inert


def test_unloading_removes_the_cell_hook(shell: InteractiveShell) -> None:
    def ours() -> list[Any]:
        return [cb for cb in shell.events.callbacks["post_run_cell"]
                if "CellLog" in getattr(cb, "__qualname__", "")]

    assert len(ours()) == 1
    shell.run_line_magic("reload_ext", "jupyter_agent")
    assert len(ours()) == 1
    shell.run_line_magic("unload_ext", "jupyter_agent")
    assert ours() == []


class ZMQInteractiveShell(InteractiveShell):  # the name is how Jupyter is detected
    pass


def code_step(code: str) -> dict[str, Any]:
    return calls(("run_python", {"code": code}))


def test_agent_cell_prints_the_tagged_code_and_history_marks_it(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, memory_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model_server.add_steps([code_step("a = 1"), code_step("b = a + 1"), {"text": "one"},
                            calls(("list_variables", {})), code_step("c = b * 2\x1b[2J"),
                            {"text": "two"}])
    run(agent_shell, "%agent_new --approve auto")
    sid = magics_of(agent_shell).controller.active_session_id
    run(agent_shell, "%agent first")
    run(agent_shell, "%agent second")
    capsys.readouterr()
    run(agent_shell, "%agent_cell")
    out = capsys.readouterr().out
    assert out.startswith(f"# from jupyter-agent session {sid}, turn 2, call 3\nc = b * 2")
    assert "\x1b" not in out and "copy it into a cell" in out
    run(agent_shell, "%agent_cell 1")
    assert capsys.readouterr().out.startswith(
        f"# from jupyter-agent session {sid}, turn 1, call 1\na = 1\n")
    result = run(agent_shell, "%agent_cell 9")
    assert "no run_python call 9 in session" in str(result.error_in_exec)
    assert "its calls are 1 to 3" in str(result.error_in_exec)
    state = FileStore(memory_dir).load_session(str(sid)).state
    assert len(state.handed_out) == 2
    run(agent_shell, "%agent_history")
    history = capsys.readouterr().out
    assert history.count("handed out as a cell (%agent_cell)") == 2
    assert history.index("a = 1") < history.index("handed out") < history.index("b = a + 1")


def test_agent_cell_without_calls_is_one_line(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
) -> None:
    model_server.add_steps([{"text": "no code"}])
    run(agent_shell, "%agent hi")
    result = run(agent_shell, "%agent_cell")
    assert str(result.error_in_exec).endswith("has no run_python call yet")


def test_agent_cell_in_jupyter_puts_a_new_cell_below(
    make_shell: Any, model_server: ScriptedModelServer, capsys: pytest.CaptureFixture[str],
) -> None:
    ZMQInteractiveShell.clear_instance()  # the class keeps its own instance
    shell = make_shell(cls=ZMQInteractiveShell)
    shell.kernel = SimpleNamespace(_allow_stdin=True)  # a front end someone watches
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    model_server.add_steps([code_step("total = 40 + 2\ntotal"), {"text": "42"}])
    run(shell, "%agent_new --approve auto")
    run(shell, "%agent add")
    capsys.readouterr()
    run(shell, "%agent_cell")
    sid = magics_of(shell).controller.active_session_id
    assert shell.rl_next_input == (f"# from jupyter-agent session {sid}, turn 1, call 1\n"
                                   "total = 40 + 2\ntotal")
    assert "is in a new cell below" in capsys.readouterr().out
    shell.kernel = SimpleNamespace(_allow_stdin=False)  # nbclient: no new cell is made
    run(shell, "%agent_cell")
    out = capsys.readouterr().out
    assert out.startswith(f"# from jupyter-agent session {sid}, turn 1, call 1\n")
    assert "copy it into a cell to keep it" in out


def test_the_notebook_so_far_goes_with_one_turn_only(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_user_cells(agent_shell)
    model_server.add_steps([{"text": "one"}, {"text": "two"}, {"text": "three"}])
    run(agent_shell, "%agent hello")
    first = user_content(model_server.requests[0])
    assert first.startswith("hello\n\n--- the notebook since the last prompt (jupyter-agent, "
                            "context_privacy: schema) ---\nIn [1]: import pandas as pd … "
                            "(+1 line)\nIn [2]: df = pd.DataFrame(")
    assert "In [3]: df → pandas.DataFrame (2 rows × 2 columns" in first
    assert "In [4]: def f(): … (+2 lines) → KeyError: 'missing'" in first
    assert "variables changed: secret_name (new): str; length: 12 | df (new): " \
        "pandas.DataFrame; 2 rows × 2 columns" in first
    assert SECRET not in first
    assert "sent the notebook since the last prompt: 4 cell(s)" in capsys.readouterr().out
    run(agent_shell, "total = df.score.sum()")
    run(agent_shell, "%agent and now?")
    users = [m["content"] for m in model_server.requests[1]["messages"] if m["role"] == "user"]
    assert users[0] == "hello"  # the earlier section is not sent again
    assert users[1].startswith("and now?\n\n--- the notebook since the last prompt")
    assert "In [6]: total = df.score.sum()\nvariables changed: total (new): numpy.float64" \
        in users[1] and "In [4]" not in users[1]
    run(agent_shell, "%agent nothing ran since")
    assert user_content(model_server.requests[2]) == "nothing ran since"


@pytest.mark.parametrize("setting", ['context_privacy = "none"', "notebook_context_tokens = 0"])
def test_no_notebook_section_when_turned_off(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer, setting: str,
) -> None:
    agent_shell.run_line_magic("config", f"AgentMagics.{setting}")
    run_user_cells(agent_shell)
    model_server.add_steps([{"text": "one"}])
    run(agent_shell, "%agent hello")
    assert user_content(model_server.requests[0]) == "hello"


def test_the_notebook_section_keeps_the_newest_cells_within_its_budget(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
) -> None:
    agent_shell.run_line_magic("config", "AgentMagics.notebook_context_tokens = 50")
    for i in range(30):
        run(agent_shell, f"value_{i} = {i}")
    model_server.add_steps([{"text": "one"}])
    run(agent_shell, "%agent hello")
    section = user_content(model_server.requests[0]).split("\n\n", 1)[1]
    body = section.splitlines()[1:-1]
    assert body[0].startswith("(… ") and body[0].endswith(" earlier lines left out)")
    assert sum(len(line) + 1 for line in body[1:]) <= 201  # 50 tokens at 4 characters
    assert body[-1].startswith("variables changed: value_0 (new): int | ")
    assert len(body[-1]) == 100  # half of the budget, so that the newest cells fit too
    assert body[-2] == "In [30]: value_29 = 29"


def test_hostile_exceptions_are_kept_bounded(
    agent_shell: InteractiveShell, model_server: ScriptedModelServer,
) -> None:
    run(agent_shell, "class Odd(Exception):\n    def __str__(self): raise RuntimeError('no')")
    run(agent_shell, "raise Odd()")  # IPython itself fails to show it: nothing is kept
    assert not run(agent_shell, "raise ValueError('x' * 1_000_000)").success
    log = magics_of(agent_shell).controller.cells
    assert list(log.errors) == [3] and len(log.errors[3]) < 8_200
    for i in range(60):
        run(agent_shell, f"raise KeyError({i})")
    assert len(log.errors) == 50 and 2 not in log.errors  # the oldest are forgotten
    model_server.add_steps([calls(("last_error", {})), {"text": "ok"}])
    run(agent_shell, "%agent what failed?")
    assert tool_results(model_server.requests[1])[0].endswith("KeyError: 59")


@pytest.mark.parametrize("answer", ["y", "n"])
def test_asking_for_values_shows_them_first_and_sends_them_only_on_yes(
    make_shell: Any, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch,
    answer: str,
) -> None:
    import builtins

    from IPython.utils.capture import capture_output

    ZMQInteractiveShell.clear_instance()  # the class keeps its own instance
    shell = make_shell(cls=ZMQInteractiveShell)
    shell.kernel = SimpleNamespace(_allow_stdin=True)  # a front end that answers input()
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    run_user_cells(shell)
    model_server.add_steps([calls(("describe_variable", {"name": "df", "values": True})),
                            {"text": "done"}])
    run(shell, "%agent_new --approve ask")
    prompts: list[str] = []
    with capture_output() as captured:
        def ask(prompt: str = "") -> str:
            prompts.append(prompt)
            return answer
        monkeypatch.setattr(builtins, "input", ask)
        shell.run_line_magic("agent", "show me the rows")
    assert prompts == ["Send them? [y/N] "]
    question = "".join(o.data.get("text/html", "") for o in captured.outputs)
    assert "send these values to the model" in question and SECRET in question
    result = tool_results(model_server.requests[1])[-1]
    assert (SECRET in result) == (answer == "y")
    if answer == "n":
        assert result == "error: refused: the user declined to send these values."
