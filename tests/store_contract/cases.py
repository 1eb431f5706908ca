"""Shared tables of the store contract: every change a store makes under a lease, and
hypothesis strategies for arbitrary Chat Completions messages (design notes "Working context
and transcript", "Leases", "Validation of what is loaded")."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from jupyter_agent.store import ensure_summary

SYSTEM = {"role": "system", "content": "s"}

#: Each change a store makes, as ``(store, session ID) -> None``; each takes the lease.
MUTATIONS: dict[str, Any] = {
    "save_messages": lambda s, sid: s.save(
        sid, [SYSTEM, {"role": "user", "content": "u"}]),
    "save": lambda s, sid: s.save(sid, [SYSTEM, {"role": "user", "content": "u"},  # extends
                                        {"role": "user", "content": "v"}], {"tool_calls": 2}),
    "compact": lambda s, sid: s.compact(sid, [{"role": "system", "content": "c"}], summary="x"),
    "save_state": lambda s, sid: s.save(sid, state={"scratchpad": "new"}),
    "write_summary": lambda s, sid: s.update(sid, summary="summary"),
    "ensure_summary": lambda s, sid: ensure_summary(s, sid),
    "set_title": lambda s, sid: s.update(sid, title="title"),
    "set_archived": lambda s, sid: s.update(sid, archived=True),
    "delete_session": lambda s, sid: s.delete_session(sid),
}


# Any code point, lone surrogates included (hypothesis leaves them out by default).
any_text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=30)


def without_surrogates(value: Any) -> Any:
    """Independent reference: replace each lone surrogate by U+FFFD, recursively."""
    if isinstance(value, str):
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    if isinstance(value, dict):
        return {without_surrogates(k): without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_surrogates(v) for v in value]
    return value


tool_call = st.fixed_dictionaries(
    {
        "id": any_text,
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": any_text, "arguments": any_text}),
    }
)
json_scalar = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | any_text
)
message = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "system"]), "content": any_text | st.none()}
    ),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": any_text | st.none()},
        optional={"tool_calls": st.lists(tool_call, max_size=3)},
    ),
    st.fixed_dictionaries({"role": st.just("tool"), "tool_call_id": any_text, "content": any_text}),
    st.fixed_dictionaries(
        {
            "role": st.just("user"),
            "content": st.lists(
                st.fixed_dictionaries({"type": st.just("text"), "text": any_text}), max_size=3
            ),
        },
        optional={"extra": st.dictionaries(any_text, json_scalar, max_size=3)},
    ),
)
