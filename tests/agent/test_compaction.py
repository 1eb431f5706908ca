"""Compaction: one summarizing call, recent turns verbatim, tool batches kept whole
(on the in-process scripted model)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_agent.agent.config import Limits
from jupyter_agent.agent.working_context import (
    SUMMARY_MARKER,
    choose_cut,
    estimate_tokens,
    render_for_summary,
    repair_tool_pairs,
    short_system_prompt,
)
from jupyter_agent.errors import LimitExceededError
from jupyter_agent.store import FileStore
from jupyter_agent.testing import ScriptedModel
from tests.agent.helpers import Recorder, make_agent, read_record, roles, tool_step

# context_window=4000, compact_at=0.5: compaction above ~2000 estimated tokens; the
# verbatim tail may use ~1000 tokens.
SMALL = {"context_window": 4000, "compact_at": 0.5}


def _scenario(server: ScriptedModel, *, summary_step: dict[str, Any]) -> None:
    server.add_steps(
        [
            {"text": "an earlier answer"},  # the turn before: what compaction may summarize
            # a big tool result (~1250 tokens); the estimate stays under the threshold
            tool_step(
                ("run_python", {"code": "print('x' * 5000)"}),
                usage={"prompt_tokens": 100, "completion_tokens": 10},
            ),
            # the endpoint now reports 2000 prompt tokens: past the threshold
            tool_step(
                ("list_todos", {}),
                ("read_scratchpad", {}),
                usage={"prompt_tokens": 2000, "completion_tokens": 10},
            ),
            summary_step,
            {"text": "done"},
        ]
    )


def test_compaction_keeps_the_system_message_the_request_and_its_tool_batches(
    scripted: ScriptedModel, store: FileStore, ishell: InteractiveShell
) -> None:
    _scenario(scripted, summary_step={"text": "- asked an earlier question"})
    rec = Recorder()
    agent = make_agent(scripted, store, shell=ishell, **SMALL)
    agent.run("earlier question")
    assert agent.run("do work", on_event=rec).reply == "done"

    summarize, after = scripted.requests[3], scripted.requests[4]
    assert "tools" not in summarize and not summarize.get("stream")
    assert "an earlier answer" in summarize["messages"][1]["content"]
    assert "x" * 100 not in summarize["messages"][1]["content"]  # the turn's own output stays
    sent = after["messages"]
    # system (with notes) first, one summary, then the request and its batches kept whole
    assert roles(sent) == ["system", "user", "user", "assistant", "tool", "assistant", "tool",
                           "tool"]
    # a small window gets the short system prompt; the session keeps the full one
    assert sent[0]["role"] == agent.conversation.messages[0]["role"] == "system"
    assert sent[0]["content"] == short_system_prompt(agent.conversation.messages[0]["content"])
    assert sent[1]["content"].startswith(SUMMARY_MARKER)
    assert "- asked an earlier question" in sent[1]["content"]
    assert sent[2] == {"role": "user", "content": "do work"}
    assert sent[4]["content"] == "x" * 5000
    assert [c["function"]["name"] for c in sent[5]["tool_calls"]] == [
        "list_todos",
        "read_scratchpad",
    ]
    assert {m["tool_call_id"] for m in sent[6:]} == {c["id"] for c in sent[5]["tool_calls"]}

    record = read_record(store, agent.conversation.session_id or "")
    assert record["messages"] == agent.conversation.messages
    assert len(record["transcript"]) == 10  # nothing lost on disk
    assert record["compactions"][0]["summary"] == "- asked an earlier question"
    assert record["state"]["usage"]["calls"] == 5  # the summarizing call is counted
    assert any("compacted 2 earlier messages" in e.text for e in rec.of("notice"))

    # the next turn may now summarize "do work" and its output
    scripted.add_steps([{"text": "- did the work"}, {"text": "still fine"}])
    assert agent.run("more").reply == "still fine"
    assert "x" * 100 in scripted.requests[5]["messages"][1]["content"]


def test_failed_summarizing_call_leaves_the_context_unchanged(
    scripted: ScriptedModel, store: FileStore, ishell: InteractiveShell
) -> None:
    _scenario(scripted, summary_step={"error": {"status": 500, "message": "overloaded"}})
    rec = Recorder()
    agent = make_agent(scripted, store, shell=ishell, **SMALL)
    agent.run("earlier question")
    assert agent.run("do work", on_event=rec).reply == "done"
    assert roles(scripted.requests[4]["messages"]) == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "tool",
    ]
    assert any("compaction failed" in e.text and "overloaded" in e.text for e in rec.of("notice"))
    assert read_record(store, agent.conversation.session_id or "")["compactions"] == []


def test_compact_on_demand(scripted: ScriptedModel, store: FileStore) -> None:
    agent = make_agent(scripted, store, keep_turns=1)
    assert agent.compact() is False  # nothing to compact yet, no model call
    assert scripted.requests == []
    scripted.add_steps([{"text": "a1"}, {"text": "a2"}, {"text": "the summary"}])
    agent.run("q1")
    agent.run("q2")
    assert agent.compact() is True
    assert roles(agent.conversation.messages) == ["system", "user", "user", "assistant"]
    assert agent.conversation.messages[1]["content"].startswith(SUMMARY_MARKER)
    assert [m["content"] for m in agent.conversation.messages[2:]] == ["q2", "a2"]
    saved = store.load_session(agent.conversation.session_id or "")
    assert saved.compactions[0].summary == "the summary"
    assert agent.compact() is False  # only the summary and the kept turn are left


def test_compact_on_demand_failure_is_a_notice(
    scripted: ScriptedModel, store: FileStore
) -> None:
    scripted.add_steps(
        [{"text": "a1"}, {"text": "a2"}, {"error": {"status": 503, "message": "busy"}}]
    )
    agent = make_agent(scripted, store, keep_turns=1)
    agent.run("q1")
    agent.run("q2")
    before = list(agent.conversation.messages)
    rec = Recorder()
    assert agent.compact(on_event=rec) is False
    assert agent.conversation.messages == before
    assert store.load_session(agent.conversation.session_id or "").messages == before
    assert "compaction failed" in rec.of("notice")[0].text


def test_choose_cut_never_splits_a_batch() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u" * 400},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "r" * 4000},
        {"role": "assistant", "content": "a" * 40},
    ]
    for budget in range(0, 2000, 25):
        cut = choose_cut(messages, keep_tokens=budget, keep_turns=2)
        if cut is not None:
            assert messages[cut]["role"] != "tool"
            assert cut >= 2
    assert choose_cut(messages, keep_tokens=10_000) is None  # nothing before the last turn
    assert choose_cut(messages[:2], keep_tokens=0) is None


def test_estimate_uses_the_last_report_plus_four_chars_per_token() -> None:
    messages = [{"role": "user", "content": "x" * 400}] * 3
    assert estimate_tokens(messages, base_tokens=1000, base_len=2) == 1000 + 100 + 4
    assert estimate_tokens(messages) == 3 * 104


def test_repair_report() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    broken = [
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "tool_calls": [call, {**call, "id": "c2"}]},
        {"role": "tool", "tool_call_id": "c2", "content": "r2"},
        {"role": "tool", "tool_call_id": "c2", "content": "duplicate"},
        {"role": "user", "content": "next"},
    ]
    fixed, report = repair_tool_pairs(broken)
    assert [m.get("tool_call_id") for m in fixed] == [None, None, "c2", "c1", None]
    assert report.added == ("c1",) and report.dropped == 1 and not report.appended_only
    assert repair_tool_pairs(fixed)[1].changed is False
    text = render_for_summary(fixed, max_chars=60)
    assert text.startswith("[... earliest part omitted ...]") and len(text) < 120


def test_no_compaction_call_once_the_cost_limit_is_reached(
    scripted: ScriptedModel, store: FileStore, ishell: InteractiveShell
) -> None:
    """Automatic compaction is a model call like any other: it is not made at the
    limit, and when the summary itself reaches it, the turn stops before the next call."""
    prices = {"scripted": (100.0, 0.0)}  # USD per million tokens: 100 tokens = $0.01
    few = {"prompt_tokens": 100, "completion_tokens": 0}
    scripted.add_steps([
        {"text": "an earlier answer", "usage": few},  # $0.01
        tool_step(("run_python", {"code": "print('x' * 5000)"}), usage=few),  # $0.01
        tool_step(("list_todos", {}), usage={"prompt_tokens": 2000}),  # $0.20: compact now
        {"text": "- a summary", "usage": {"prompt_tokens": 1000}},  # $0.10: the limit
        {"text": "done"},  # never asked for
    ])
    rec = Recorder()
    agent = make_agent(scripted, store, shell=ishell, prices=prices,
                       limits=Limits(max_cost_usd=0.25), **SMALL)
    agent.run("earlier question")
    outcome = agent.run("do work", on_event=rec)
    assert len(scripted.requests) == 4  # the summary was the last call: no "done"
    assert outcome.stop_reason == "max_cost_usd"
    spent = agent.conversation.state.usage.cost_usd
    with pytest.raises(LimitExceededError, match="max_cost_usd"):
        agent.compact()
    assert len(scripted.requests) == 4 and agent.conversation.state.usage.cost_usd == spent


def test_a_kill_after_any_line_of_a_compaction_keeps_the_summarizing_calls_usage(
        scripted: ScriptedModel, store: FileStore, tmp_path: Path) -> None:
    """Every journal line from the compaction on counts the summarizing call: a process
    killed after any of them (each prefix of the journal is what a kill can leave)
    undercounts nothing."""
    agent = make_agent(scripted, store, keep_turns=1)
    scripted.add_steps([{"text": "a1"}, {"text": "a2"}, {"text": "the summary"}])
    agent.run("q1")
    agent.run("q2")
    sid = agent.conversation.session_id or ""
    before = store.load_session(sid).state.usage.calls
    assert agent.compact() is True
    agent.conversation.close()
    journal = store.journal_path(sid).read_bytes().split(b"\n")[:-1]
    compact_line = next(k for k, line in enumerate(journal) if b'"compact":' in line)
    for end in range(compact_line + 1, len(journal) + 1):  # killed right after line `end`
        root = tmp_path / f"killed-after-{end}"
        shutil.copytree(store.root, root)
        (root / "index.jsonl").unlink()  # the index would have recorded the later lines
        (root / "sessions" / f"{sid}.jsonl").write_bytes(
            b"".join(line + b"\n" for line in journal[:end]))
        usage = FileStore(root).load_session(sid).state.usage
        assert usage.calls == before + 1, end
