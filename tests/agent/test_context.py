"""The working context helpers: checking only what was appended repairs like a full check."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_agent.agent.working_context import repair_tool_pairs

IDS = ["a", "b", "c", "d"]


@st.composite
def contexts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Random working contexts: text, tool batches (some incomplete), stray results."""
    out: list[dict[str, Any]] = [{"role": "system", "content": "s"}]
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "assistant", "batch", "tool"]))
        if kind == "batch":
            ids = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True))
            calls = [{"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                     for i in ids]
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
            answered = draw(st.lists(st.sampled_from(ids), max_size=len(ids) + 1))
            out.extend({"role": "tool", "tool_call_id": i, "content": "r"} for i in answered)
        elif kind == "tool":
            out.append({"role": "tool", "tool_call_id": draw(st.sampled_from(IDS)),
                        "content": "stray"})
        else:
            out.append({"role": kind, "content": "x"})
    return out


@given(contexts(), contexts())
@settings(max_examples=300, deadline=None)
def test_checking_from_where_the_last_check_ended_equals_a_full_check(
    first: list[dict[str, Any]], more: list[dict[str, Any]]
) -> None:
    checked, _ = repair_tool_pairs(first, "r")
    whole = [*checked, *more[1:]]
    full, full_report = repair_tool_pairs(whole, "r")
    part, part_report = repair_tool_pairs(whole, "r", start=len(checked))
    assert part == full
    assert (part_report.added, part_report.dropped) == (full_report.added, full_report.dropped)
    assert part_report.appended_only == full_report.appended_only
