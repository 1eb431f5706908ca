"""The record format: message conversion, timestamps, schema versions, legacy records."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from openai.types.chat import ChatCompletionMessage
from openai.types.chat.chat_completion_message_tool_call import ChatCompletionMessageToolCall

from jupyter_agent.errors import CorruptSessionError
from jupyter_agent.store import (
    SCHEMA_VERSION,
    FileStore,
    SessionState,
    dump_record,
    to_message_dict,
)
from jupyter_agent.store.records import SessionRecord, upgrade_record

TOOL_CALL = {
    "id": "call_abc",
    "type": "function",
    "function": {"name": "run_python", "arguments": '{"code": "1+1"}'},
}


def openai_message() -> ChatCompletionMessage:
    return ChatCompletionMessage(
        role="assistant", content=None, tool_calls=[ChatCompletionMessageToolCall(**TOOL_CALL)]
    )


def test_pydantic_message_keeps_tool_calls_and_drops_nones() -> None:
    out = to_message_dict(openai_message())
    assert out == {"role": "assistant", "tool_calls": [TOOL_CALL]}
    assert type(out) is dict


def test_dicts_are_deep_copied() -> None:
    original: dict[str, Any] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [dict(TOOL_CALL)],
    }
    out = to_message_dict(original)
    assert out == original
    original["tool_calls"][0]["id"] = "changed"
    assert out["tool_calls"][0]["id"] == "call_abc"


def test_nested_pydantic_objects_and_tuples_become_json() -> None:
    out = to_message_dict(
        {"role": "assistant", "tool_calls": (ChatCompletionMessageToolCall(**TOOL_CALL),)}
    )
    assert out == {"role": "assistant", "tool_calls": [TOOL_CALL]}


def test_lone_surrogates_are_replaced_in_values_and_keys() -> None:
    out = to_message_dict({"role": "user", "content": "cut \ud83d", "k\udc00": ["\ud800x"]})
    assert out == {"role": "user", "content": "cut \ufffd", "k\ufffd": ["\ufffdx"]}
    assert to_message_dict({"content": "whole 😀"})["content"] == "whole 😀"


@pytest.mark.parametrize("bad", ["text", 5, None, ["role", "user"]])
def test_non_messages_are_refused(bad: object) -> None:
    with pytest.raises(TypeError):
        to_message_dict(bad)


def test_unserializable_values_are_refused() -> None:
    with pytest.raises(TypeError):
        to_message_dict({"role": "user", "content": {1, 2}})
    with pytest.raises(ValueError):
        to_message_dict({"role": "user", "content": float("nan")})


def test_timestamps_are_aware_utc_with_offset(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    sid = store.create_session([])
    data = json.loads(store.session_path(sid).read_text())
    for key in ("created_at", "updated_at"):
        parsed = datetime.fromisoformat(data[key])
        assert data[key].endswith("+00:00")
        assert parsed.utcoffset() == timedelta(0)
    record = store.load_session(sid)
    assert record.created_at.tzinfo is not None


def test_one_file_form_has_the_fixed_top_level_keys_in_order(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    sid = store.create_session(
        [{"role": "system", "content": "s"}], title="T", project_root=tmp_path
    )
    data = json.loads(dump_record(store.load_session(sid)))
    assert list(data) == [
        "schema_version",
        "id",
        "created_at",
        "updated_at",
        "summary",
        "title",
        "archived",
        "project_root",
        "messages",
        "transcript",
        "compactions",
        "state",
    ]
    assert data["schema_version"] == SCHEMA_VERSION == 1
    assert data["project_root"] == str(tmp_path)
    assert list(data["state"]) == [
        "scratchpad", "todos", "tool_calls", "usage", "model", "base_url", "api", "vision",
        "images_refused", "figures", "context_window", "context_window_of",
        "context_window_source", "handed_out",
    ]
    assert set(data["state"]["usage"]) >= {"input_tokens", "output_tokens", "cost_usd", "calls"}
    snapshot = json.loads(store.session_path(sid).read_text())
    assert list(snapshot) == [
        "schema_version", "id", "created_at", "updated_at", "summary", "title", "archived",
        "project_root", "context", "compactions", "state", "parent", "journal",
    ]
    assert snapshot["schema_version"] == 2 and snapshot["context"] == [[0, 1]]
    lines = store.journal_path(sid).read_text().splitlines()
    assert json.loads(lines[0])["jupyter_agent_journal"] == 3
    assert json.loads(lines[1]) == {"n": 2, "add": [{"role": "system", "content": "s"}],
                                    "c": lines[1][-10:-2]}


def write_legacy(tmp_path: Path, sid: str, **extra: Any) -> Path:
    path = tmp_path / "sessions" / f"{sid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "id": sid,
        "created_at": "2025-03-01T10:00:00+00:00",
        "updated_at": "2025-03-01T11:00:00",  # naive: the older writer's UTC
        "summary": "old work",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        **extra,
    }
    path.write_text(json.dumps(record))
    return path


def test_legacy_record_loads_with_defaults(tmp_path: Path) -> None:
    write_legacy(tmp_path, "old1")
    record = FileStore(tmp_path).load_session("old1")
    assert record.schema_version == SCHEMA_VERSION
    assert (
        record.transcript
        == record.messages
        == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    )
    assert record.compactions == []
    assert record.state == SessionState()
    assert record.archived is False and record.title == "" and record.project_root is None
    assert record.updated_at == datetime(2025, 3, 1, 11, tzinfo=UTC)


def test_legacy_record_is_converted_on_the_next_write_keeping_unknown_keys(
    tmp_path: Path,
) -> None:
    path = write_legacy(tmp_path, "old2", favourite={"colour": "blue"})
    store = FileStore(tmp_path)
    loaded = store.load_session("old2")
    assert loaded.model_extra == {"favourite": {"colour": "blue"}}
    assert json.loads(dump_record(loaded))["favourite"] == {"colour": "blue"}
    assert not store.journal_path("old2").exists()  # loading changed nothing
    store.save("old2", [*loaded.messages, {"role": "user", "content": "more"}])
    data = json.loads(path.read_text())
    assert data["schema_version"] == 2 and "journal" in data
    assert data["favourite"] == {"colour": "blue"}
    record = FileStore(tmp_path).load_session("old2")
    assert len(record.messages) == len(record.transcript) == 3
    assert record.model_extra == {"favourite": {"colour": "blue"}}
    assert record.summary == "old work"


def test_legacy_lone_surrogate_escapes_are_cleaned(tmp_path: Path) -> None:
    path = tmp_path / "sessions" / "old3.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"id": "old3", "created_at": "2025-01-01T00:00:00+00:00", "updated_at": '
        '"2025-01-01T00:00:00+00:00", "summary": "", "messages": [{"role": "user", '
        '"content": "cut \\ud83d and whole \\ud83d\\ude00"}]}'
    )
    record = FileStore(tmp_path).load_session("old3")
    assert record.messages[0]["content"] == "cut \ufffd and whole 😀"


def test_newer_schema_version_is_refused_and_untouched(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    sid = store.create_session([])
    path = store.session_path(sid)
    data = json.loads(path.read_text())
    data["schema_version"] = 3
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    with pytest.raises(CorruptSessionError) as info:
        store.load_session(sid)
    assert str(path) in str(info.value)
    assert "schema_version 3" in str(info.value) and "upgrade" in str(info.value)
    one_file = tmp_path / "sessions" / "newer.json"  # the one-file form, from the future
    one_file.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1, "id": "newer"}))
    with pytest.raises(CorruptSessionError, match="upgrade jupyter-agent"):
        store.load_session("newer")
    with pytest.raises(CorruptSessionError):
        store.update(sid, title="x")
    assert path.read_bytes() == before


def test_upgrades_cover_every_older_version() -> None:
    for version in range(SCHEMA_VERSION):
        upgraded = upgrade_record(
            {
                "schema_version": version,
                "id": "x",
                "created_at": "2025-01-01T00:00:00Z",
                "updated_at": "2025-01-01T00:00:00Z",
                "summary": None,
                "messages": [],
            },
            Path("x.json"),
        )
        assert upgraded["schema_version"] == SCHEMA_VERSION
        SessionRecord.model_validate(upgraded)
