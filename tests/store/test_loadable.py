"""Whatever loads can be saved again and shown (design notes "Validation of what is loaded"):
property tests.

Records of the one-file form are generated from a mix of valid values and arbitrary JSON
(non-finite numbers, huge integers, odd timestamps and offsets, messages of every shape),
written as a file, and loaded. A record that is refused must be reported by path and left
untouched; a record that loads must survive every change, an export and re-import, and
every display path of the front end.
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jupyter_agent.errors import CorruptSessionError
from jupyter_agent.store import FileStore, SessionState, dump_record, parse_record
from jupyter_agent.store.records import CLOCK_SKEW, utc_now
from jupyter_agent.ui.display import format_transcript
from jupyter_agent.ui.panel_details import detail_html
from jupyter_agent.ui.render import recap_text

text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)
scalars = st.none() | st.booleans() | st.integers() | st.floats() | text
any_json = st.recursive(scalars, lambda c: st.lists(c, max_size=3)
                        | st.dictionaries(text, c, max_size=3), max_leaves=8)
offsets = st.builds(lambda m: timezone(timedelta(minutes=m)), st.integers(-1439, 1439))
stamps = st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31),
                      timezones=st.none() | st.just(UTC) | offsets).map(datetime.isoformat)
counts = st.integers(-3, 2**64 + 5) | any_json


def messages() -> st.SearchStrategy[Any]:
    tool_call = st.fixed_dictionaries(
        {"id": text | any_json, "type": st.just("function") | any_json,
         "function": st.fixed_dictionaries({"name": text | any_json,
                                            "arguments": text | any_json})})
    part = st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url"]) | any_json},
                                 optional={"text": text | any_json,
                                           "image_url": any_json})
    message = st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant", "tool"]) | any_json},
        optional={"content": text | st.none() | st.lists(part, max_size=2) | any_json,
                  "tool_calls": st.lists(tool_call, max_size=2) | any_json,
                  "tool_call_id": text | any_json, "name": text, "extra": any_json})
    return st.lists(message | any_json, max_size=4)


todo = st.fixed_dictionaries({"text": text | any_json}, optional={
    "id": counts, "status": st.sampled_from(["pending", "done", "failed", "bogus"]),
    "retries": counts})
records = st.fixed_dictionaries(
    {"id": st.just("rec"), "created_at": stamps, "updated_at": stamps | any_json},
    optional={
        "schema_version": st.just(1), "summary": text | any_json, "title": text,
        "archived": st.booleans() | any_json, "messages": messages(),
        "transcript": messages(), "unknown_key": any_json,
        "compactions": st.lists(st.fixed_dictionaries(
            {"at": stamps, "summary": text, "replaced": counts,
             "transcript_length": counts}), max_size=2),
        "state": st.fixed_dictionaries({}, optional={
            "scratchpad": text | any_json, "tool_calls": counts,
            "todos": st.lists(todo, max_size=3),
            "usage": st.fixed_dictionaries({}, optional={
                "input_tokens": counts, "output_tokens": counts, "calls": counts,
                "cost_usd": st.floats() | counts})}),
    })


def show(record: Any) -> None:
    """Every display path of a session (they must not raise)."""
    format_transcript(record.messages)
    format_transcript(record.transcript, record.compactions)
    recap_text(record, unarchived=True)
    detail_html(record)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records)
def test_what_loads_can_be_saved_exported_and_shown(data: dict[str, Any]) -> None:
    raw = json.dumps(data, allow_nan=True).encode("utf-8", errors="surrogatepass")
    with tempfile.TemporaryDirectory() as tmp:
        store = FileStore(Path(tmp) / "mem")
        path = store.session_path("rec")
        path.parent.mkdir(parents=True)
        path.write_bytes(raw)
        try:
            record = store.load_session("rec")
        except CorruptSessionError as err:
            assert err.path == path
            assert path.read_bytes() == raw
            assert store.list_sessions() == []
            event("refused")
            return
        event("loaded")
        show(record)
        future = record.updated_at - utc_now() > CLOCK_SKEW  # loads; not believed in a listing
        assert [s.id for s in store.list_sessions(include_archived=True)] == (
            [] if future else ["rec"])
        # every change goes through, starting with the conversion of the one-file form
        store.save("rec", [*record.messages, {"role": "user", "content": "more"}],
                   SessionState(scratchpad="after"))
        store.compact("rec", record.messages[:1], summary="short")
        store.update("rec", summary="s")
        store.update("rec", title="t")
        again = FileStore(Path(tmp) / "mem").load_session("rec")
        assert again.transcript == [*record.transcript, {"role": "user", "content": "more"}]
        assert again.messages == record.messages[:1]
        assert again.model_extra == record.model_extra
        show(again)
        # the one-file form round-trips and imports
        exported = dump_record(again)
        assert parse_record(exported, path) == again
        other = FileStore(Path(tmp) / "other")
        other.create_session(record=again)
        assert other.load_session("rec") == again
