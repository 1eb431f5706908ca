"""The fallback summary excerpt (design notes "Summaries"): what it quotes and that its
Markdown holds."""

from __future__ import annotations

from markdown_it import MarkdownIt

from jupyter_agent.store.messages import fallback_summary


def test_harness_notices_are_not_quoted() -> None:
    messages = [{"role": "user", "content": "go on"},
                {"role": "assistant", "content": "[jupyter-agent] Stopped: the session "
                                                 "reached max_tool_calls=1. Raise the limit."},
                {"role": "user", "content": "and now?"}]
    assert fallback_summary(messages) == "user: go on\nuser: and now?"


def test_tables_and_code_in_replies_stay_whole() -> None:
    messages = [{"role": "user", "content": "how many?"},
                {"role": "assistant", "content": "| a | b |\n|---|---|\n| 1 | 2 |"},
                {"role": "user", "content": "code?"},
                {"role": "assistant", "content": "Sure:\n```python\nx = 1\n```"},
                {"role": "user", "content": "ok"}]
    summary = fallback_summary(messages)
    assert summary.startswith("user: how many?\n\nassistant:\n| a | b |")
    tokens = MarkdownIt("commonmark").enable("table").parse(summary)
    cells = [t.content for t in tokens if t.type == "inline" and t.level >= 4]
    assert cells == ["a", "b", "1", "2"]  # the next entry is not swallowed by the table
    assert [t.content for t in tokens if t.type == "fence"] == ["x = 1\n"]
    assert summary.endswith("```\n\nuser: ok")
