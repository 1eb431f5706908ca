"""Contract, as properties: arbitrary message lists are saved and loaded back exactly
(lone surrogates replaced by U+FFFD), by this store object and by another one
(design notes "Working context and transcript", "Validation of what is loaded")."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_agent.store import to_message_dict
from tests.store_contract.cases import message, without_surrogates
from tests.store_contract.conftest import StoreFactory


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
    store.save(sid, messages)
    store.save(sid, messages)  # saving the same context again is accepted
    for reader in (store, other):
        record = reader.load_session(sid)
        assert record.messages == expected
        assert record.transcript == expected
    assert [to_message_dict(m) for m in messages] == expected
