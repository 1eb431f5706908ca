"""Session rows of the team store: the head kept in memory, pure plans of each change
(the file store's rules, from :mod:`jupyter_agent.store.messages`), and rows read back,
validated as completely as the files: ``CorruptSessionError`` names the session and the
column or transcript row (``jupyter_agent.messages seq 4: role must be ...``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from math import isfinite
from typing import Any, Literal

from pydantic import ValidationError

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
# the columns of ``sessions`` a Head is read from, in the order _head unpacks them
HEAD_COLUMNS = (
    "sid, revision, id, schema_version, created_at, updated_at, summary, title, archived, "
    "project_root, context_head, context_from, transcript_len, compactions, state, parent, "
    "first_prompt, extra"
)
_KNOWN_KEYS = frozenset(SessionRecord.model_fields)


@dataclass(frozen=True)
class Head:
    """A session's row as kept in memory while its lease is held.

    ``working`` is the whole working context; the transcript itself is not kept, only its
    length. A write applies only if the row still has ``revision``. ``extra`` holds the
    keys of an imported record that this version does not know.
    """

    sid: int
    revision: int
    id: str
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
    extra = record.model_extra or {}
    return {
        "schema_version": SCHEMA_VERSION, "created_at": record.created_at,
        "updated_at": record.updated_at, "summary": pg_text(record.summary),
        "title": pg_text(record.title), "archived": record.archived,
        "project_root": pg_text(record.project_root),
        "context_head": dumps([] if same else record.messages),
        "context_from": 0 if same else len(record.transcript),
        "transcript_len": len(record.transcript),
        "compactions": dumps([c.model_dump(mode="json") for c in record.compactions]),
        "state": dumps(record.state.model_dump(mode="json")),
        "parent": None if record.parent is None else dumps(record.parent.model_dump(mode="json")),
        "first_prompt": pg_text(_first_prompt(None, record.transcript)),
        "cost_usd": record.state.usage.cost_usd, "tool_calls": record.state.tool_calls,
        "extra": dumps(extra) if extra else None,
    }


def column_values(head: Head, columns: frozenset[str]) -> dict[str, Any]:
    """The values to write for ``columns`` of ``head`` (JSON columns as text)."""
    values: dict[str, Any] = {}
    for name in columns:
        if name == "state":
            values.update(state=dumps(head.state.model_dump(mode="json")),
                          cost_usd=head.state.usage.cost_usd, tool_calls=head.state.tool_calls)
        elif name == "compactions":
            values[name] = dumps([c.model_dump(mode="json") for c in head.compactions])
        elif name == "context_head":
            values[name] = dumps(head.context_head)
        elif name in ("summary", "title", "first_prompt"):
            values[name] = pg_text(getattr(head, name))
        else:
            values[name] = getattr(head, name)
    return values


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


def head_from_row(row: Sequence[Any], tail: Any, where: str) -> Head:
    """A validated head from a row of :data:`HEAD_COLUMNS` and the raw JSON list of the
    transcript rows from ``context_from`` on (``None`` when there are none);
    ``CorruptSessionError`` for a row of a newer jupyter-agent or one that does not validate."""
    context_from = row[11]
    first_seq = context_from if type(context_from) is int else 0
    return _head(row, _messages(tail, where, f"{MESSAGES} from seq {first_seq}", first_seq,
                                JOURNAL_CAP), where)


def _head(row: Sequence[Any], tail: list[dict[str, Any]], where: str) -> Head:
    (sid, revision, sid_text, version, created_at, updated_at, summary, title, archived,
     project_root, context_head, context_from, transcript_len, compactions, state, parent,
     first, extra) = row
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
    head_messages = _messages(context_head, where, f"{SESSIONS}.context_head", None)
    return Head(
        sid=sid, revision=revision, id=sid_text, created_at=created_at,
        updated_at=updated_at, summary=summary, title=title, archived=archived,
        project_root=project_root, context_head=head_messages, context_from=context_from,
        transcript_len=transcript_len, compactions=_compactions(compactions, where),
        state=_state(state, where), parent=_parent(parent, where),
        first_prompt=first, extra=_extra(extra, where), working=[*head_messages, *tail],
    )


def record_from_row(row: Sequence[Any], where: str) -> SessionRecord:
    """The record from a row of :data:`HEAD_COLUMNS` followed by the raw JSON list of its
    whole transcript (``None`` when empty); ``CorruptSessionError`` as :func:`head_from_row`."""
    transcript = _messages(row[-1], where, MESSAGES, 0, JOURNAL_CAP)
    context_from = row[11]
    start = context_from if type(context_from) is int and context_from >= 0 else 0
    head = _head(row[:-1], transcript[start:], where)
    data = {
        **head.extra, "id": head.id, "created_at": head.created_at,
        "updated_at": head.updated_at, "summary": head.summary, "title": head.title,
        "archived": head.archived, "project_root": head.project_root,
    }
    record = _model(SessionRecord, data, where, SESSIONS)
    # validated already: assigned, not copied by pydantic
    record.messages, record.transcript = head.working, transcript
    record.compactions, record.state, record.parent = head.compactions, head.state, head.parent
    return record


def listing_entry(row: Sequence[Any], status: Literal["active", "in use", "idle"],
                  holder: LeaseHolder | None, where: str) -> SessionListing:
    """A listing entry from a row of the listing query, checked as a load checks the same
    columns (messages are not read); ``CorruptSessionError`` naming the column."""
    (sid, created_at, updated_at, summary, title, archived, count, cost, tool_calls,
     first, owner_user, owner_host, parent, state, compactions, owner_role, shared_with) = row
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
    origin = _parent(parent, where)
    _state(state, where)
    _compactions(compactions, where)
    fields = {
        "id": sid, "updated_at": updated_at, "summary": summary, "title": title,
        "archived": archived, "status": status, "created_at": created_at,
        "message_count": count, "cost_usd": cost, "tool_calls": tool_calls,
        "first_prompt": first or "", "holder": holder, "owner_user": owner_user,
        "owner_host": owner_host, "owner_role": owner_role or "",
        "shared_with": tuple(shared_with or ()), "parent": origin,
    }
    entry: SessionListing = _model(SessionListing, fields, where, SESSIONS)
    return entry
