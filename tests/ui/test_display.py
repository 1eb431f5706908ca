"""The pure formatters of display.py and the live renderers of render.py."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from jupyter_agent.agent.config import Limits
from jupyter_agent.agent.events import Notice, TextDelta, ToolCallEnd, ToolCallStart
from jupyter_agent.artefacts.steps import format_call
from jupyter_agent.controller import UsageReport
from jupyter_agent.store import SessionRecord, SessionState, TodoItem, Usage
from jupyter_agent.ui.display import limit_message, tool_result_sections
from jupyter_agent.ui.render import MarkdownTurnRenderer, PlainTurnRenderer, recap_text


def test_plain_renderer(capsys: pytest.CaptureFixture[str]) -> None:
    r = PlainTurnRenderer()
    r(TextDelta("Let me look"))
    r(ToolCallStart("c1", "describe_variable", '{"name": "df"}'))
    r(ToolCallEnd("c1", "describe_variable", "DataFrame\n344 rows", True))
    r(ToolCallStart("c2", "run_python", "not json"))
    r(ToolCallEnd("c2", "run_python", "", False))
    r(Notice("context compacted"))
    r(Notice("[jupyter-agent] Stopped: a limit."))
    r(TextDelta("Done."))
    r.finish()
    assert capsys.readouterr().out == (
        'Let me look\n▸ describe_variable(name="df") → DataFrame 344 rows\n'
        "▸ run_python(not json) ✗ (no output)\n[context compacted]\n"
        "[jupyter-agent] Stopped: a limit.\nDone.\n")


def test_live_markdown_renderer_updates_one_area_that_ends_with_the_turn(
    shell: InteractiveShell,
) -> None:
    r = MarkdownTurnRenderer(live=True, min_interval=0)  # every event updates
    with capture_output() as captured:
        r(TextDelta("Mean body"))
        r(TextDelta(" mass: $4,201"))
        r(ToolCallStart("c1", "run_python", '{"code": "df.mean()"}'))
        r(ToolCallEnd("c1", "run_python", "[result]\n4201.75", True))
        r(TextDelta("4.2 kg"))
        r.finish()
    outputs = [(o.update, o.data.get("text/markdown"), o.transient.get("display_id"))
               for o in captured.outputs]
    handle = outputs[0][2]
    assert handle and outputs[0][:2] == (False, "Mean body")
    assert all(did == handle for _, _, did in outputs)  # one area, updated in place
    updates = [text for update, text, _ in outputs if update]
    assert updates[0] == "Mean body mass: \\\\$4,201"  # the page shows "$4,201", no maths
    assert updates[1].endswith("**▶ run\\_python**\n```python\ndf.mean()\n```")
    assert updates[2].endswith("→ result `4201.75`")  # one label: no "[result]" marker
    assert updates[-1].endswith("\n\n4.2 kg") and updates[-1] == updates[-2]
    assert captured.outputs[-1].data["text/plain"] == (
        "Mean body mass: $4,201\n▶ run_python\n    df.mean()\n  → result 4201.75\n4.2 kg")


def test_headless_markdown_renderer_displays_the_turn_once(shell: InteractiveShell) -> None:
    r = MarkdownTurnRenderer(live=False, min_interval=0)
    with capture_output() as captured:
        r(TextDelta("It costs $5 and $10."))
        r(ToolCallStart("c1", "add_todo", '{"text": "a"}'))
        r(ToolCallEnd("c1", "add_todo", "added todo #1", True))
        r.finish()
    assert len(captured.outputs) == 1 and not captured.outputs[0].update
    markdown = captured.outputs[0].data["text/markdown"]
    assert markdown == ("It costs \\\\$5 and \\\\$10.\n\n"
                        '▸ add\\_todo(text="a") → added todo \\#1')
    assert "<" not in markdown and "\n\n\n" not in markdown  # no HTML, no blank-line runs


def test_multi_line_results_keep_their_rows(shell: InteractiveShell) -> None:
    table = "species\nAdelie       3700.7\nGentoo       5076.0\n" + "".join(
        f"row {i}\n" for i in range(20))
    r = MarkdownTurnRenderer(live=False)
    with capture_output() as captured:
        r(ToolCallEnd("c1", "run_python", table, True))
        r(ToolCallEnd("c2", "run_python", "error: [error]\nhas ``` fences\nline 2", False))
        r.finish()
    final = captured.outputs[-1].data["text/markdown"]
    assert ("*→*\n```text\nspecies\nAdelie       3700.7\nGentoo       5076.0\nrow 0\n"
            in final)
    assert "row 6\n… (13 more lines)\n```" in final and "row 7" not in final
    assert "*✗ error*\n````text\nhas ``` fences\nline 2\n````" in final  # a longer fence
    assert "[error]" not in final and "error: " not in final  # one label, not three


def test_run_python_sections_get_one_label_each() -> None:
    result = "printed\n[stderr]\nwarned\n[result]\n42\n[error]\nTraceback ...\nKeyError: 'x'"
    assert tool_result_sections("error: " + result, False) == [
        ("output", "printed"), ("stderr", "warned"), ("result", "42"),
        ("error", "Traceback ...\nKeyError: 'x'")]
    assert tool_result_sections("(no output)", True) == [("output", "(no output)")]
    assert tool_result_sections("error: refused: no stdin", False) == [("refused", "no stdin")]
    assert tool_result_sections("not executed: limit reached", False) == [
        ("message", "not executed: limit reached")]
    interrupted = "interrupted by the user while this tool call was running\nrow 1\nrow 2"
    assert tool_result_sections(interrupted, False) == [
        ("message", "interrupted by the user while this tool call was running"),
        ("output", "row 1\nrow 2")]


def test_a_refused_call_is_shown_once_with_its_whole_reason(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str],
) -> None:
    reason = ("refused: the approval policy is 'ask' but there is no stdin to ask the user on "
              "(headless run). The user can allow code with "
              '`%config AgentMagics.approve = "auto"` or `--approve auto`.')
    events = [ToolCallStart("c", "run_python", '{"code": "x = 1"}'),
              Notice(f"run_python {reason}"),  # raised by the tool while it runs
              ToolCallEnd("c", "run_python", f"error: {reason}", False)]
    plain = PlainTurnRenderer()
    for event in events:
        plain(event)
    plain.finish()
    out = capsys.readouterr().out
    assert out.count("no stdin") == 1 and out.endswith('or `--approve auto`.\n')
    r = MarkdownTurnRenderer(live=False)
    with capture_output() as captured:
        for event in events:
            r(event)
        r.finish()
    final = captured.outputs[-1].data["text/markdown"]
    assert final.count("no stdin") == 1 and "approve = \"auto\"" in final
    assert final.endswith("or `--approve auto`.")


def test_a_tool_notice_that_adds_something_is_kept(shell: InteractiveShell) -> None:
    r = MarkdownTurnRenderer(live=False)
    with capture_output() as captured:
        r(ToolCallStart("c", "run_python", '{"code": "x"}'))
        r(Notice("the kernel is busy"))
        r(ToolCallEnd("c", "run_python", "1", True))
        r.finish()
    assert captured.outputs[-1].data["text/markdown"].endswith("*the kernel is busy*")


def test_markdown_renderer_throttles_text_but_not_tool_calls(shell: InteractiveShell) -> None:
    r = MarkdownTurnRenderer(min_interval=3600)
    with capture_output() as captured:
        for piece in ("a", "b", "c"):
            r(TextDelta(piece))
        r(Notice("compacted"))
        r.finish()
    texts = [o.data["text/markdown"] for o in captured.outputs]
    assert texts == ["a", "abc\n\n*compacted*", "abc\n\n*compacted*"]


def test_markdown_renderer_without_events_shows_nothing(shell: InteractiveShell) -> None:
    with capture_output() as captured:
        MarkdownTurnRenderer().finish()
        MarkdownTurnRenderer(live=False).finish()
    assert captured.outputs == []


def test_a_long_wait_shows_a_status_line_that_goes_when_the_reply_starts(
    shell: InteractiveShell,
) -> None:
    r = MarkdownTurnRenderer(live=True, min_interval=0, wait_after=0.2)
    with capture_output() as captured:
        deadline = time.monotonic() + 10
        while not captured.outputs and time.monotonic() < deadline:
            time.sleep(0.05)
        r(TextDelta("Here it is."))
        r.finish()
    texts = [o.data["text/markdown"] for o in captured.outputs]
    assert texts[0].startswith("*waiting for the model — ") and texts[0].endswith(" s …*")
    assert texts[-1] == "Here it is." and "waiting" not in texts[-2]


def test_a_status_line_never_stays_when_nothing_else_came(shell: InteractiveShell) -> None:
    r = MarkdownTurnRenderer(live=True, wait_after=0.1)
    with capture_output() as captured:
        deadline = time.monotonic() + 10
        while not captured.outputs and time.monotonic() < deadline:
            time.sleep(0.05)
        r.finish()  # e.g. the model call failed
    assert captured.outputs[-1].data["text/markdown"] == ""


def test_headless_renderer_shows_no_status_line(shell: InteractiveShell) -> None:
    r = MarkdownTurnRenderer(live=False, wait_after=0.05)
    with capture_output() as captured:
        time.sleep(0.8)
        r(TextDelta("x"))
        r.finish()
    assert [o.data["text/markdown"] for o in captured.outputs] == ["x"]


def _result(stop: str, *, from_options: frozenset[str] = frozenset()) -> UsageReport:
    return UsageReport("s", Usage(cost_usd=0.5), 4,
                       Limits(max_tool_calls=4, max_cost_usd=0.25, max_iterations=1),
                       reply="r", stop_reason=stop, turn_tool_calls=1,
                       limits_from_options=from_options)


def test_limit_messages_say_how_to_go_on() -> None:
    assert limit_message(_result("max_iterations")) == (
        "limit reached: max_iterations = 1 model call per prompt; send another prompt to "
        "continue, or raise it with %agent_resume --max-iterations N or %config "
        "AgentMagics.max_iterations = N")
    assert limit_message(_result("max_tool_calls", from_options=frozenset({"max_tool_calls"}))) == (
        "limit reached: max_tool_calls = 4 tool calls per session (4 made); raise it with "
        "%agent_resume --max-tool-calls N, then send another prompt")
    assert limit_message(_result("max_cost_usd")) == (
        "limit reached: max_cost_usd = $0.2500 per session ($0.5000 spent); raise it with "
        "%agent_resume --max-cost N or %config AgentMagics.max_cost_usd = N, then send "
        "another prompt")


def test_recap_counts_are_pluralized() -> None:
    now = datetime.now(UTC)
    record = SessionRecord(
        schema_version=1, id="abc", created_at=now, updated_at=now, title="T",
        messages=[{"role": "system", "content": "s"}],
        transcript=[{"role": "user", "content": "q"}], compactions=[],
        state=SessionState(tool_calls=1, usage=Usage(input_tokens=1)),
    )
    lines = recap_text(record).plain.splitlines()
    assert lines[0] == "Resumed session abc — T"
    assert lines[1].startswith("updated just now · 1 message · 1 token (1 in / 0 out)")
    assert lines[1].endswith("· 1 tool call")
    assert "unarchived" not in recap_text(record).plain
    assert recap_text(record, unarchived=True).plain.splitlines()[2].startswith("unarchived: ")


def test_format_call_is_one_compact_line() -> None:
    assert format_call("update_todo", '{"id": 1, "status": "in_progress"}') == (
        'update_todo(id=1, status="in_progress")')
    assert format_call("read_scratchpad", "{}") == "read_scratchpad()"
    assert format_call("read_scratchpad", "") == "read_scratchpad()"
    long = format_call("write_scratchpad", '{"text": "' + "x" * 300 + '"}')
    assert long.startswith('write_scratchpad(text="xxx') and long.endswith('…")')
    assert len(long) == len("write_scratchpad(text=)") + 80
    assert format_call("f", "not\n json") == "f(not json)"


def test_non_code_tool_calls_are_one_line_in_both_renderers(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str],
) -> None:
    events = [
        TextDelta("Plan:"),
        ToolCallStart("a", "update_todo", '{"id": 1, "status": "in_progress"}'),
        ToolCallEnd("a", "update_todo", "todo #1 is now in_progress", True),
        ToolCallStart("b", "read_scratchpad", "{}"),
        ToolCallEnd("b", "read_scratchpad", "line one\nline two", True),
        ToolCallStart("c", "run_python", '{"code": "x = 1"}'),
        ToolCallEnd("c", "run_python", "1", True),
        ToolCallStart("d", "write_summary", '{"goal": "costs $5 and $6"}'),
        ToolCallEnd("d", "write_summary", "error: not allowed", False),
        TextDelta("Done."),
    ]
    plain = PlainTurnRenderer()
    for event in events:
        plain(event)
    plain.finish()
    assert capsys.readouterr().out == (
        "Plan:\n"
        '▸ update_todo(id=1, status="in_progress") → todo #1 is now in_progress\n'
        "▸ read_scratchpad() → line one line two\n"
        "▶ run_python\n    x = 1\n  → 1\n"
        '▸ write_summary(goal="costs $5 and $6") ✗ not allowed\n'
        "Done.\n")
    r = MarkdownTurnRenderer(live=False)
    with capture_output() as captured:
        for event in events:
            r(event)
        r.finish()
    final = captured.outputs[-1].data["text/markdown"]
    assert final == (
        "Plan:\n\n"
        '▸ update\\_todo(id=1, status="in\\_progress") → todo \\#1 is now in\\_progress  \n'
        "▸ read\\_scratchpad() → line one line two"
        "\n\n**▶ run\\_python**\n```python\nx = 1\n```\n\n→ `1`\n\n"
        '▸ write\\_summary(goal="costs \\\\$5 and \\\\$6") ✗ not allowed'
        "\n\nDone.")
    assert "**▸" not in final and "<" not in final  # not bold, no HTML


def test_the_footer_ends_the_turn_output_with_the_exact_text(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str],
) -> None:
    footer = "── 3 tokens (2 in / 1 out) · $0.0001 · 1 tool call │ session: no limits"
    r = MarkdownTurnRenderer(live=False)
    with capture_output() as captured:
        r(TextDelta("Hi."))
        r.finish(footer=footer)
    (shown,) = captured.outputs  # one output per turn, footer included
    assert shown.data["text/plain"] == f"Hi.\n{footer}"
    assert shown.data["text/markdown"] == (
        "Hi.\n\n*── 3 tokens (2 in / 1 out) · \\\\$0.0001 · 1 tool call │ session: no limits*")
    plain = PlainTurnRenderer()
    plain(TextDelta("Hi."))
    plain.finish(footer=footer)
    assert capsys.readouterr().out == f"Hi.\n{footer}\n"


def test_recap_markdown() -> None:
    now = datetime.now(UTC)
    record = SessionRecord(
        schema_version=1, id="abc", created_at=now, updated_at=now, title="Palmer penguins",
        summary="Goal: the `body_mass`, **$5**\nRemaining: plots",
        messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "q?"},
                  {"role": "assistant", "content": "a *b*"}],
        transcript=[{"role": "user", "content": "q?"}], compactions=[],
        state=SessionState(todos=[TodoItem(id=1, text="done one", status="done"),
                                  TodoItem(id=2, text="open one")]),
    )
    text = recap_text(record, unarchived=True).markdown
    assert text.startswith("#### Resumed: Palmer penguins\n\nabc · updated just now · ")
    assert "<" not in text and "\n\n\n" not in text
    assert "**Summary**\n\nGoal: the `body_mass`, **\\\\$5**  \nRemaining: plots" in text
    assert "**Open todos**\n\n- 2\\. open one — *pending*" in text and "done one" not in text
    assert "**Last prompt:** q?  \n**Last reply:** a \\*b\\*" in text
    assert "*The session was archived; resuming took it out of the archive.*" in text


def test_dates_older_than_a_month_are_local_dates(monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_agent.text import relative_time

    monkeypatch.setenv("TZ", "Pacific/Auckland")
    time.tzset()
    try:
        now = datetime(2026, 3, 1, 12, tzinfo=UTC)
        assert relative_time(datetime(2026, 1, 1, 13, 0, tzinfo=UTC), now) == "2026-01-02"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_terminal_shows_the_status_line_in_place_and_wipes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr("sys.stdout", screen)
    r = PlainTurnRenderer(wait_after=0.1)
    deadline = time.monotonic() + 10
    while "waiting" not in screen.getvalue() and time.monotonic() < deadline:
        time.sleep(0.05)
    r(TextDelta("Reply."))
    r.finish()
    out = screen.getvalue()
    assert out.startswith("\rwaiting for the model — ")
    shown = out.split("\r")[-1]  # what is left on the line after the last carriage return
    assert shown.strip() == "Reply." and out.endswith("Reply.\n")


def test_a_time_ahead_of_the_clock_is_never_just_now() -> None:
    from jupyter_agent.text import relative_time

    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    assert relative_time(datetime(2026, 3, 1, 12, 4, tzinfo=UTC), now) == "just now"  # skew
    assert relative_time(datetime(2026, 3, 1, 12, 6, tzinfo=UTC), now) == (
        "2026-03-01 (in the future)")
    assert relative_time(datetime(9999, 12, 31, tzinfo=UTC), now) == "9999-12-31 (in the future)"


def test_the_recap_names_another_endpoint_in_one_line() -> None:
    from jupyter_agent.controller import Resumed
    from jupyter_agent.ui.display import format_resumed_line

    record = SessionRecord(id="abc", created_at=datetime(2026, 1, 1, tzinfo=UTC),
                           updated_at=datetime(2026, 1, 1, tzinfo=UTC))
    note = "This session last used http://a/v1; it now talks to http://b/v1, the endpoint …"
    resumed = Resumed(record, endpoint_note=note)
    shown = recap_text(record, endpoint_note=note)
    assert shown.plain.splitlines()[2] == note
    assert f"**Endpoint:** {note}" in shown.markdown
    assert format_resumed_line(resumed).endswith(f"continue with %%agent. {note}")
    assert "last used" not in recap_text(record).plain
