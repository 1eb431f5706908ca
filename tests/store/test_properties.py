"""Property test particular to the session files: what a save writes to the journal is
the messages themselves, in strict JSON (the round trip through any backend is in
tests/store_contract/test_properties.py, whose strategies this reuses)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_agent.store import FileStore
from tests.store_contract.cases import message, without_surrogates


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(message, max_size=12), st.integers(min_value=0, max_value=12))
def test_the_journal_holds_exactly_the_saved_messages(messages: list[dict[str, Any]],
                                                      split: int) -> None:
    expected = without_surrogates(messages)
    with tempfile.TemporaryDirectory() as tmp:
        store = FileStore(tmp)
        sid = store.create_session(messages[:split])
        store.save(sid, messages)
        store.save(sid, messages)  # the same context again adds nothing
        raw = Path(store.journal_path(sid)).read_bytes()
        lines = [json.loads(line) for line in raw.decode("utf-8").split("\n")[:-1]]  # strict
        assert [m for line in lines[1:] for m in line.get("add", [])] == expected
