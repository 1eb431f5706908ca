"""Session rows of the team store: the head kept in memory, pure plans of each change
(the file store's rules, from :mod:`jupyter_agent.store.messages`), and rows read back,
validated as completely as the files: ``CorruptSessionError`` names the session and the
column or transcript row (``jupyter_agent.messages seq 4: role must be ...``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from math import isfinite
from typing import Any, Literal

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from jupyter_agent.errors import CorruptSessionError, TooLargeError
from jupyter_agent.store.journal import first_prompt_of
from jupyter_agent.store.messages import (
    JOURNAL_CAP,
    RECORD_CAP,
    check_messages,
    count_replaced,
    decode_json,
    depth_problem,
    encode_json,
    message_problem,
    new_messages,
)
from jupyter_agent.store.postgres.schema import SCHEMA
from jupyter_agent.store.records import (
    SCHEMA_VERSION,
    SESSION_ID_PATTERN,
    Compaction,
    ForkOrigin,
    LeaseHolder,
    SessionListing,
    SessionRecord,
    SessionState,
    check_not_future,
    utc_now,
    validation_reason,
)

SESSIONS = f"{SCHEMA}.sessions"
MESSAGES = f"{SCHEMA}.messages"
_KNOWN_KEYS = frozenset(SessionRecord.model_fields)
_MODELS = ("compactions", "state", "parent")  # JSON columns holding pydantic models
_JSON_COLUMNS = ("context_head", "extra", *_MODELS)


@dataclass(frozen=True)
class Head:
    """A session's row as kept in memory while its lease is held (a field per column).

    ``working`` is the whole working context; the transcript itself is not kept, only its
    length. A write applies only if the row still has ``revision``. ``extra`` holds the
    keys of an imported record that this version does not know.
    """

    sid: int
    revision: int
    id: str
    schema_version: int
    created_at: datetime
    updated_at: datetime
    summary: str
    title: str
    archived: bool
    project_root: str | None
    context_head: list[dict[str, Any]]
    context_from: int
    transcript_len: int
    compactions: list[Compaction]
    state: SessionState
    parent: ForkOrigin | None
    first_prompt: str | None
    extra: dict[str, Any]
    working: list[dict[str, Any]] = field(repr=False)


# the columns of ``sessions`` a Head is read from: its fields but ``working``
HEAD_COLUMNS = tuple(f.name for f in fields(Head))[:-1]
# those that are the record's fields as they are
_RECORD_COLUMNS = [n for n in HEAD_COLUMNS if n in _KNOWN_KEYS and n != "schema_version"]
# the listing query's columns that are the entry's fields as they are
LISTING_FIELDS = ("id", "created_at", "updated_at", "summary", "title", "archived",
                  "message_count", "cost_usd", "tool_calls", "first_prompt", "owner_user",
                  "owner_host", "owner_role")


@dataclass(frozen=True)
class Plan:
    """One change of a session: the new head, the changed columns, appended messages."""

    head: Head
    columns: frozenset[str]
    appended: list[dict[str, Any]] = field(default_factory=list)


def dumps(value: Any) -> str:
    return encode_json(value).decode("utf-8")


def pg_text(value: str | None) -> str | None:
    """PostgreSQL ``text`` cannot hold NUL: it becomes U+FFFD (as lone surrogates do)."""
    return None if value is None else value.replace("\0", "\ufffd")


def _first_prompt(current: str | None, appended: list[dict[str, Any]]) -> str | None:
    if current is None and any(m.get("role") == "user" for m in appended):
        return first_prompt_of(appended)
    return current


def row_values(record: SessionRecord) -> dict[str, Any]:
    """Column values of a new ``sessions`` row for ``record`` (owner and project excluded)."""
    same = record.messages == record.transcript
    values = {name: getattr(record, name) for name in _RECORD_COLUMNS}
    values.update(schema_version=SCHEMA_VERSION, context_head=[] if same else record.messages,
                  context_from=0 if same else len(record.transcript),
                  transcript_len=len(record.transcript),
                  first_prompt=_first_prompt(None, record.transcript),
                  extra=record.model_extra or None)
    return _encoded(values)


def column_values(head: Head, columns: frozenset[str]) -> dict[str, Any]:
    """The values to write for ``columns`` of ``head``."""
    return _encoded({name: getattr(head, name) for name in columns})


def _encoded(values: dict[str, Any]) -> dict[str, Any]:
    # JSON columns as text, text without NUL; ``state`` brings its totals along
    out: dict[str, Any] = {}
    for name, value in values.items():
        if name == "state":
            out.update(cost_usd=value.usage.cost_usd, tool_calls=value.tool_calls)
        if name in _MODELS:
            value = to_jsonable_python(value)
        if name in _JSON_COLUMNS and value is not None:
            value = dumps(value)
        elif isinstance(value, str):
            value = pg_text(value)
        out[name] = value
    return out


def plan_save(head: Head, incoming: Sequence[Any] | None,
              state: SessionState | None) -> Plan | None:
    """New messages (``incoming`` ``None``: none) and a changed checkpoint; ``None`` when
    nothing is new. Raises as :func:`~jupyter_agent.store.messages.new_messages`."""
    new = [] if incoming is None else new_messages(head.id, head.working, incoming)[0]
    changed_state = state is not None and state != head.state
    if not new and not changed_state:
        return None
    updates: dict[str, Any] = {"updated_at": utc_now()}
    if new:
        updates.update(transcript_len=head.transcript_len + len(new),
                       first_prompt=_first_prompt(head.first_prompt, new),
                       working=[*head.working, *new])
    if changed_state:
        updates["state"] = state
    columns = frozenset(updates) - {"working"}
    return Plan(replace(head, **updates), columns, new)


def plan_compact(head: Head, messages: list[dict[str, Any]], summary: str,
                 replaced: int | None) -> Plan:
    now = utc_now()
    event = Compaction(
        at=now, summary=summary,
        replaced=count_replaced(head.working, messages) if replaced is None else replaced,
        transcript_length=head.transcript_len,
    )
    new = replace(head, context_head=list(messages), context_from=head.transcript_len,
                  working=list(messages), compactions=[*head.compactions, event], updated_at=now)
    return Plan(new, frozenset({"context_head", "context_from", "compactions", "updated_at"}))


def plan_update(head: Head, values: dict[str, Any], touch: bool) -> Plan | None:
    """Set ``summary``, ``title`` and ``archived``; ``touch`` sets ``updated_at``."""
    if not touch and all(getattr(head, k) == v for k, v in values.items()):
        return None
    if touch:
        values = {**values, "updated_at": utc_now()}
    return Plan(replace(head, **values), frozenset(values))


# ------------------------------------------------------------------ decoding
def raw_json(data: str | bytes) -> str | bytes:
    """The connection's ``json`` loader: the text as it is, decoded here later."""
    return data


def _json(raw: Any, where: str, column: str, cap: int = RECORD_CAP, *,
          messages: bool = False) -> Any:
    # refused over ``cap`` bytes before decoding; messages are depth-checked by check_messages
    if raw is None:
        return None
    if not isinstance(raw, bytes | bytearray | memoryview | str):
        raise CorruptSessionError(where, f"{column}: not JSON text")
    size = len(raw) if not isinstance(raw, memoryview) else raw.nbytes
    if size > cap:  # a str's length in characters is at most its size in UTF-8
        raise TooLargeError(where, size, cap, column)
    data = bytes(raw) if not isinstance(raw, str) else raw.encode("utf-8", "surrogatepass")
    if len(data) > cap:
        raise TooLargeError(where, len(data), cap, column)
    try:
        value = decode_json(data, where)
    except CorruptSessionError as err:
        raise CorruptSessionError(where, f"{column}: {err.reason}") from None
    problem = None if messages else depth_problem(value)
    if problem:
        raise CorruptSessionError(where, f"{column}: {problem}")
    return value


def _messages(raw: Any, where: str, column: str, first_seq: int | None,
              cap: int = RECORD_CAP) -> list[dict[str, Any]]:
    data = _json(raw, where, column, cap, messages=True)
    if data is None:
        return []
    try:
        return check_messages(data, where, column)
    except CorruptSessionError:
        if first_seq is not None and isinstance(data, list):
            for k, message in enumerate(data):
                problem = message_problem(message)
                if problem:
                    raise CorruptSessionError(
                        where, f"{MESSAGES} seq {first_seq + k}: {problem}") from None
        raise


def _model(model: Any, value: Any, where: str, column: str) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as err:
        raise CorruptSessionError(where, f"{column}: {validation_reason(err)}") from None


def _compactions(raw: Any, where: str) -> list[Compaction]:
    events = _json(raw, where, f"{SESSIONS}.compactions")
    if type(events) is not list:
        raise CorruptSessionError(where, f"{SESSIONS}.compactions: must be a list")
    return [_model(Compaction, e, where, f"{SESSIONS}.compactions[{k}]")
            for k, e in enumerate(events)]


def _state(raw: Any, where: str) -> SessionState:
    column = f"{SESSIONS}.state"
    return _model(SessionState, _json(raw, where, column) or {}, where, column)


def _parent(raw: Any, where: str) -> ForkOrigin | None:
    origin = _json(raw, where, f"{SESSIONS}.parent")
    return None if origin is None else _model(ForkOrigin, origin, where, f"{SESSIONS}.parent")


def _extra(raw: Any, where: str) -> dict[str, Any]:
    data = _json(raw, where, f"{SESSIONS}.extra")
    if data is None:
        return {}
    if type(data) is not dict:
        raise CorruptSessionError(where, f"{SESSIONS}.extra: must be a JSON object")
    known = sorted(_KNOWN_KEYS.intersection(data))
    if known:
        raise CorruptSessionError(where, f"{SESSIONS}.extra: holds the record's own "
                                         f"key {known[0]!r}")
    return data


def head_from_row(row: Mapping[str, Any], where: str) -> Head:
    """A validated head from a row of :data:`HEAD_COLUMNS` and ``tail``, the raw JSON list
    of the transcript rows from ``context_from`` on (``None`` when there are none);
    ``CorruptSessionError`` for a row of a newer jupyter-agent or one that does not validate."""
    context_from = row["context_from"]
    first_seq = context_from if type(context_from) is int else 0
    return _head(row, _messages(row["tail"], where, f"{MESSAGES} from seq {first_seq}",
                                first_seq, JOURNAL_CAP), where)


def _head(row: Mapping[str, Any], tail: list[dict[str, Any]], where: str) -> Head:
    version, context_from, transcript_len = (
        row["schema_version"], row["context_from"], row["transcript_len"])
    if type(version) is not int or version > SCHEMA_VERSION:
        raise CorruptSessionError(
            where, f"it has schema_version {version}, but this jupyter-agent reads only up "
                   f"to {SCHEMA_VERSION}; upgrade jupyter-agent to open it")
    if not (type(context_from) is int and type(transcript_len) is int
            and 0 <= context_from <= transcript_len):
        raise CorruptSessionError(
            where, f"{SESSIONS}: context_from {context_from} is not within the transcript "
                   f"of {transcript_len} messages")
    if len(tail) != transcript_len - context_from:
        raise CorruptSessionError(
            where, f"{MESSAGES}: {context_from + len(tail)} transcript rows where "
                   f"{transcript_len} were saved")
    head_messages = _messages(row["context_head"], where, f"{SESSIONS}.context_head", None)
    return Head(**{name: row[name] for name in HEAD_COLUMNS} | {
        "context_head": head_messages, "compactions": _compactions(row["compactions"], where),
        "state": _state(row["state"], where), "parent": _parent(row["parent"], where),
        "extra": _extra(row["extra"], where), "working": [*head_messages, *tail]})


def record_from_row(row: Mapping[str, Any], where: str) -> SessionRecord:
    """The record from a row of :data:`HEAD_COLUMNS` and ``tail``, the raw JSON list of its
    whole transcript (``None`` when empty); ``CorruptSessionError`` as :func:`head_from_row`."""
    transcript = _messages(row["tail"], where, MESSAGES, 0, JOURNAL_CAP)
    context_from = row["context_from"]
    start = context_from if type(context_from) is int and context_from >= 0 else 0
    head = _head(row, transcript[start:], where)
    data = {name: getattr(head, name) for name in _RECORD_COLUMNS}
    record = _model(SessionRecord, {**head.extra, **data}, where, SESSIONS)
    # validated already: assigned, not copied by pydantic
    record.messages, record.transcript = head.working, transcript
    return record


def listing_entry(row: Mapping[str, Any], status: Literal["active", "in use", "idle"],
                  holder: LeaseHolder | None, where: str) -> SessionListing:
    """A listing entry from a row of the listing query (columns named as the entry's
    fields), checked as a load checks the same columns (messages are not read);
    ``CorruptSessionError`` naming the column."""
    sid, updated_at, count, cost, tool_calls = (
        row["id"], row["updated_at"], row["message_count"], row["cost_usd"], row["tool_calls"])
    if not isinstance(sid, str) or SESSION_ID_PATTERN.fullmatch(sid) is None:
        raise CorruptSessionError(where, f"{SESSIONS}.id: not a valid session ID")
    if isinstance(updated_at, datetime) and updated_at.tzinfo is not None:
        try:
            check_not_future(f"{SESSIONS}.updated_at", updated_at)
        except ValueError as err:
            raise CorruptSessionError(where, str(err)) from None
    if not (type(count) is int and count >= 0 and type(tool_calls) is int and tool_calls >= 0
            and isinstance(cost, float) and isfinite(cost) and cost >= 0):
        raise CorruptSessionError(where, f"{SESSIONS}: transcript_len, tool_calls and "
                                         "cost_usd must be finite and non-negative")
    origin = _parent(row["parent"], where)
    _state(row["state"], where)
    _compactions(row["compactions"], where)
    values = {name: row[name] for name in LISTING_FIELDS} | {
        "parent": origin, "status": status, "holder": holder,
        "shared_with": tuple(row["shared_with"] or ())}
    entry: SessionListing = _model(SessionListing, values, where, SESSIONS)
    return entry
