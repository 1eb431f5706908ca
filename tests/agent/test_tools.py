"""Tools: generated schemas, kernel Python, variables, todos, approval policy
(on the in-process scripted model)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Literal

import pytest
from IPython.core.error import StdinNotImplementedError
from IPython.core.interactiveshell import InteractiveShell

from jupyter_agent.agent.pyexec import run_code
from jupyter_agent.agent.tools import BuiltinTools, tool_from_function
from jupyter_agent.store import FileStore, SessionState
from jupyter_agent.testing import ScriptedModel
from jupyter_agent.text import truncate
from tests.agent.helpers import Recorder, make_agent, tool_step


def convert(amount: float, currency: Literal["EUR", "USD"] = "EUR", rounded: bool = True) -> str:
    """Convert an amount of money.

    Parameters
    ----------
    amount : float
        How much, in the source currency.
    currency : str
        Target currency.
    rounded : bool
        Round to cents.
    """
    return f"{amount:.2f} {currency}" if rounded else f"{amount} {currency}"


def google_style(path: str, count: int) -> int:
    """Count things.

    Args:
        path (str): Where to look.
        count: How many at most.
    """
    return count


def test_schema_is_generated_from_the_signature_and_docstring() -> None:
    schema = tool_from_function(convert).schema()
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == "convert"
    assert function["description"] == "Convert an amount of money."
    params = function["parameters"]
    assert params["type"] == "object"
    assert params["required"] == ["amount"]
    assert params["additionalProperties"] is False
    assert params["properties"]["amount"] == {
        "type": "number",
        "description": "How much, in the source currency.",
    }
    assert params["properties"]["currency"]["enum"] == ["EUR", "USD"]
    assert params["properties"]["currency"]["default"] == "EUR"
    assert params["properties"]["rounded"]["type"] == "boolean"
    google = tool_from_function(google_style).schema()["function"]["parameters"]["properties"]
    assert google["path"]["description"] == "Where to look."
    assert google["count"] == {"type": "integer", "description": "How many at most."}


def test_tool_invocation_validates_arguments() -> None:
    tool = tool_from_function(convert)
    assert tool.invoke('{"amount": 3}').text == "3.00 EUR"
    bad = tool.invoke('{"amount": "lots"}')
    assert not bad.ok and "invalid arguments for convert" in bad.text
    assert not tool.invoke('{"amount": 1, "extra": 2}').ok
    assert not tool.invoke("{not json").ok
    assert not tool.invoke("[1]").ok


def test_functions_without_annotations_or_duplicates_are_refused() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        """No annotation."""
        return x

    with pytest.raises(TypeError, match="annotation"):
        tool_from_function(untyped)
    with pytest.raises(ValueError, match="already registered"):
        make_agent(ScriptedModel([]), None, tools=[convert, convert])


def test_user_tools_are_offered_and_run_without_asking(
    scripted: ScriptedModel, store: FileStore
) -> None:
    def refuse(code: str) -> bool:
        raise AssertionError("user tools must not ask")

    scripted.add_steps(
        [tool_step(("convert", {"amount": 2.5, "currency": "USD"})), {"text": "ok"}]
    )
    rec = Recorder()
    agent = make_agent(scripted, store, tools=[convert], approve="ask", ask=refuse)
    agent.run("convert", on_event=rec)
    names = [t["function"]["name"] for t in scripted.requests[0]["tools"]]
    assert names[-1] == "convert" and "run_python" in names
    assert rec.of("tool_call_end")[0].result == "2.50 USD"
    with pytest.raises(ValueError, match="already registered"):
        make_agent(scripted, store, tools=[BuiltinTools(SessionState).tools()[0]])


def test_run_python_uses_the_shell_namespace_like_a_cell(ishell: InteractiveShell) -> None:
    ishell.user_ns["base"] = 40
    tools = BuiltinTools(SessionState, shell=ishell, approval="auto")
    out = tools.run_python(
        "import sys\nx = base + 2\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nx"
    ).text
    assert out == "to stdout\n[stderr]\nto stderr\n[result]\n42"
    assert ishell.user_ns["x"] == 42
    assert tools.run_python("y = 1").text == "(no output)"
    assert tools.run_python("None").text == "(no output)"
    assert ishell.execution_count == 1  # run_cell was not re-entered


def test_run_python_errors_are_results_with_a_traceback(
    scripted: ScriptedModel, store: FileStore, ishell: InteractiveShell
) -> None:
    code = "def f():\n    return 1 / 0\nprint('before')\nf()"
    scripted.add_steps(
        [
            tool_step(
                ("run_python", {"code": code}),
                ("run_python", {"code": "def ("}),
                ("run_python", {"code": "raise SystemExit(3)"}),
            ),
            {"text": "ok"},
        ]
    )
    rec = Recorder()
    agent = make_agent(scripted, store, shell=ishell)
    agent.run("break things", on_event=rec)
    zero, syntax, exit_ = rec.of("tool_call_end")
    assert not zero.ok and zero.result.startswith("error: before\n[error]\nTraceback")
    assert "return 1 / 0" in zero.result and "ZeroDivisionError: division by zero" in zero.result
    assert "pyexec.py" not in zero.result
    assert not syntax.ok and "SyntaxError" in syntax.result
    assert not exit_.ok and "SystemExit: 3" in exit_.result


def test_run_python_without_shell_uses_a_private_namespace() -> None:
    InteractiveShell.clear_instance()
    tools = BuiltinTools(SessionState, approval="auto")
    tools.run_python("secret = 5")
    assert tools.run_python("secret * 2").text.endswith("10")
    assert tools.list_variables() == "secret: int"  # context_privacy "schema": no value
    tools.privacy = "preview"
    assert "secret: int = 5" in tools.list_variables()


def test_output_is_cut_by_code_points_with_a_marker_keeping_both_ends() -> None:
    emoji = "😀" * 30  # outside the BMP: 2 UTF-16 units each
    cut = truncate(emoji, 7)
    assert cut == "😀" * 4 + "\n... [output truncated: 23 characters cut] ...\n" + "😀" * 3
    assert truncate("short", 10) == "short"
    cut = truncate("x" * 12_345 + "y" * 10, 10)
    assert cut == "xxxxx\n... [output truncated: 12,345 characters cut] ...\nyyyyy"
    tools = BuiltinTools(SessionState, approval="auto")
    out = truncate(tools.run_python("print('👍🏽' * 10)").text, 5)
    assert out.startswith("👍🏽👍\n")
    assert out.endswith("[output truncated: 15 characters cut] ...\n👍🏽")
    out.encode("utf-8")  # no lone surrogate anywhere


def test_a_trailing_exception_stays_visible_in_cut_output(
    scripted: ScriptedModel, store: FileStore, ishell: InteractiveShell
) -> None:
    code = "for i in range(2000):\n    print('line', i)\nraise ValueError('the real problem')"
    scripted.add_steps([tool_step(("run_python", {"code": code})), {"text": "ok"}])
    agent = make_agent(scripted, store, shell=ishell, max_output_chars=400)
    agent.run("long then fail")
    content = agent.conversation.messages[3]["content"]
    assert content.startswith("error: line 0\nline 1\n")
    assert content.rstrip().endswith("ValueError: the real problem")
    assert "characters cut] ..." in content
    kept = content.replace(content[content.index("\n... [output"):content.index("] ...\n") + 6], "")
    assert len(kept) == 400


def test_long_tool_results_are_cut_in_the_saved_session(
    scripted: ScriptedModel, store: FileStore, ishell: InteractiveShell
) -> None:
    scripted.add_steps(
        [tool_step(("run_python", {"code": "print('é' * 500)"})), {"text": "ok"}]
    )
    agent = make_agent(scripted, store, shell=ishell, max_output_chars=100)
    agent.run("long")
    content = agent.conversation.messages[3]["content"]
    assert content == "é" * 50 + "\n... [output truncated: 400 characters cut] ...\n" + "é" * 50
    assert store.load_session(agent.conversation.session_id or "").messages[3]["content"] == content


def test_variables_and_dataframes(ishell: InteractiveShell) -> None:
    import pandas as pd

    ishell.user_ns.update(
        df=pd.DataFrame({"species": ["Adelie", "Gentoo"], "mass": [3750.0, 5000.0]}),
        n=3,
        _private=1,
    )
    ishell.user_ns_hidden["hidden_thing"] = 1
    ishell.user_ns["hidden_thing"] = 1
    tools = BuiltinTools(SessionState, shell=ishell, approval="auto", privacy="preview")
    listing = tools.list_variables()
    assert "df: DataFrame, shape=(2, 2)" in listing
    assert "n: int = 3" in listing
    assert "_private" not in listing and "hidden_thing" not in listing
    described = tools.describe_variable("df")
    assert "2 rows × 2 columns" in described
    assert "species" in described and "float64" in described and "Gentoo" in described
    assert "3" in tools.describe_variable("n").split("preview:")[1]
    with pytest.raises(Exception, match="no variable named 'missing'"):
        tools.describe_variable("missing")


def test_scratchpad_and_todos() -> None:
    state = SessionState()
    tools = BuiltinTools(lambda: state, approval="auto")
    assert tools.read_scratchpad() == "(the scratchpad is empty)"
    tools.write_scratchpad("line 1")
    tools.write_scratchpad("line 2", append=True)
    assert state.scratchpad == "line 1\nline 2"
    assert tools.add_todo("load data") == "added todo #1"
    tools.add_todo("plot")
    tools.update_todo(1, "failed")
    tools.update_todo(1, "in_progress")
    tools.update_todo(1, "failed")
    tools.update_todo(2, "done")
    assert [(t.status, t.retries) for t in state.todos] == [("failed", 2), ("done", 0)]
    assert tools.list_todos() == "#1 [failed] load data (retries: 2)\n#2 [done] plot (retries: 0)"


# -- approval policy -------------------------------------------------------------------------


def _code_step() -> list[object]:
    return [tool_step(("run_python", {"code": "ran = True"})), {"text": "ok"}]


@pytest.mark.parametrize(
    ("approval", "answer", "runs", "refusal"),
    [
        ("auto", None, True, None),
        ("ask", "y", True, None),
        ("ask", "n", False, "the user declined"),
        ("deny", None, False, "disabled by the approval policy"),
    ],
)
def test_approval_policy(
    scripted: ScriptedModel,
    store: FileStore,
    ishell: InteractiveShell,
    approval: str,
    answer: str | None,
    runs: bool,
    refusal: str | None,
) -> None:
    asked: list[str] = []

    def ask(code: str) -> bool:
        asked.append(code)
        return answer == "y"

    scripted.add_steps(_code_step())
    rec = Recorder()
    agent = make_agent(scripted, store, shell=ishell, approve=approval, ask=ask)
    assert agent.run("run it", on_event=rec).reply == "ok"
    assert ("ran" in ishell.user_ns) is runs
    assert asked == (["ran = True"] if approval == "ask" else [])
    end = rec.of("tool_call_end")[0]
    assert end.ok is runs
    if refusal:
        assert refusal in end.result
        assert any(refusal in n.text for n in rec.of("notice"))
        # the model saw the refusal as the tool result
        assert refusal in scripted.requests[1]["messages"][-1]["content"]


@pytest.mark.parametrize(
    "error", [EOFError, StdinNotImplementedError, OSError, RuntimeError, ValueError]
)
def test_ask_without_stdin_refuses_with_instructions(
    scripted: ScriptedModel, store: FileStore, ishell: InteractiveShell, error: type
) -> None:
    def headless(code: str) -> bool:
        raise error("no stdin")

    scripted.add_steps(_code_step())
    rec = Recorder()
    agent = make_agent(scripted, store, shell=ishell, approve="ask", ask=headless)
    agent.run("run it", on_event=rec)
    result = rec.of("tool_call_end")[0].result
    assert "ran" not in ishell.user_ns
    assert "no stdin" in result and 'AgentMagics.approve = "auto"' in result
    assert "--approve auto" in result


def test_default_ask_reads_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    state = SessionState()
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    tools = BuiltinTools(lambda: state, approval="ask")
    assert tools.run_python("1 + 1").text.endswith("2")
    assert "1 + 1" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", Terminal(""))  # EOF: a headless run
    with pytest.raises(Exception, match="no stdin"):
        tools.run_python("1 + 1")


def test_approval_is_validated_and_settable(
    scripted: ScriptedModel, store: FileStore
) -> None:
    with pytest.raises(ValueError, match="approve"):
        make_agent(scripted, store, approve="sometimes")
    agent = make_agent(scripted, store, approve="deny")
    agent.reconfigure(config=replace(agent.config, approve="auto"))
    assert agent.config.approve == "auto" and agent._builtins.approval == "auto"


def test_run_code_reports_keyboard_interrupt_by_raising() -> None:
    with pytest.raises(KeyboardInterrupt):
        run_code("raise KeyboardInterrupt", {})
    assert json.loads(json.dumps(run_code("1", {}).result)) == "1"


def test_lone_surrogates_in_tool_output_are_saved_as_replacement_characters(
    scripted: ScriptedModel, store: FileStore, ishell: InteractiveShell
) -> None:
    scripted.add_steps(
        [tool_step(("run_python", {"code": "print('ok \\ud83d')"})), {"text": "a"}, {"text": "b"}]
    )
    agent = make_agent(scripted, store, shell=ishell)
    agent.run("emit a broken emoji")
    assert agent.conversation.messages[3]["content"] == "ok \ufffd"
    saved = store.load_session(agent.conversation.session_id or "")
    assert saved.messages == agent.conversation.messages
    assert agent.run("next").reply == "b"  # the saved context still extends and is accepted
