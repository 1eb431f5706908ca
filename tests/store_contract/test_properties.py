"""Contract, as properties: arbitrary message lists are saved and loaded back exactly
(lone surrogates replaced by U+FFFD), by this store object and by another one
(design §3, §19)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_agent.store import to_message_dict
from tests.store_contract.conftest import StoreFactory

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


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(message, max_size=12), st.integers(min_value=0, max_value=12))
def test_save_load_round_trip(store_factory: StoreFactory, messages: list[dict[str, Any]],
                              split: int) -> None:
    expected = without_surrogates(messages)
    while len(store_factory.made) < 2:  # two store objects, shared by every example
        store_factory()
    store, other = store_factory.made[:2]
    sid = store.create_session(messages[:split])
    store.save_messages(sid, messages)
    store.save_messages(sid, messages)  # saving the same context again is accepted
    for reader in (store, other):
        record = reader.load_session(sid)
        assert record.messages == expected
        assert record.transcript == expected
    assert [to_message_dict(m) for m in messages] == expected
