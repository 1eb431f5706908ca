"""Property tests: save/load round trips of arbitrary message lists."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_agent.store import SessionStore, to_message_dict

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
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
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


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(message, max_size=12), st.integers(min_value=0, max_value=12))
def test_save_load_round_trip(messages: list[dict[str, Any]], split: int) -> None:
    expected = without_surrogates(messages)
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(tmp)
        sid = store.create_session(messages[:split])
        store.save_messages(sid, messages)
        store.save_messages(sid, messages)  # saving the same context again is accepted
        for reader in (store, SessionStore(tmp)):
            record = reader.load_session(sid)
            assert record.messages == expected
            assert record.transcript == expected
        raw = Path(store.journal_path(sid)).read_bytes()
        lines = [json.loads(line) for line in raw.decode("utf-8").split("\n")[:-1]]  # strict
        assert [m for line in lines[1:] for m in line.get("add", [])] == expected
    assert [to_message_dict(m) for m in messages] == expected
