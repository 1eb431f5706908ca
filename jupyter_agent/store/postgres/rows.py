"""Session rows of the team store and how a save changes them (pure: no I/O).

A session is a ``sessions`` row plus its transcript rows (see ``schema.py``). Here:
the in-memory :class:`Head` of a session (the row, plus its working context) and the
pure *plans* of every change -- what the new head is, which columns change and which
transcript rows are appended (how a row read back becomes a head or a record, validated,
is ``decode.py``). The rules are the JSON store's, from the same functions
(:mod:`jupyter_agent.store.changes`):

* a save must extend the saved working context (else ``ContextMismatchError`` and
  nothing is written), and a new message must be one that could be loaded back (else
  ``InvalidMessageError``); new messages are appended to the transcript only, since the
  working context is "compaction head + transcript from ``context_from``";
* a compaction writes a new head, sets ``context_from`` to the transcript's length
  and appends an event; transcript rows are never rewritten or deleted;
* new messages, a changed checkpoint, a compaction and a summary set ``updated_at``;
  title and archived flag do not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from jupyter_agent.store.changes import count_replaced, new_messages
from jupyter_agent.store.jsonio import encode_json
from jupyter_agent.store.messages import message_text
from jupyter_agent.store.records import (
    SCHEMA_VERSION,
    Compaction,
    ForkOrigin,
    SessionRecord,
    SessionState,
    utc_now,
)

__all__ = [
    "HEAD_COLUMNS",
    "Head",
    "Plan",
    "column_values",
    "dumps",
    "first_prompt",
    "pg_text",
    "plan_compact",
    "plan_extend",
    "plan_fields",
    "plan_state",
    "row_values",
]

#: Columns of ``sessions`` read into a :class:`Head`, in the order
#: :func:`~jupyter_agent.store.postgres.decode.head_from_row` reads them.
HEAD_COLUMNS = (
    "sid, revision, id, schema_version, created_at, updated_at, summary, title, archived, "
    "project_root, context_head, context_from, transcript_len, compactions, state, parent, "
    "first_prompt, extra"
)


#: Characters of the first user message that listing shows (as the JSON store's listing).
FIRST_PROMPT_CHARS = 200


def dumps(value: Any) -> str:
    """Compact JSON text as stored in the ``json`` columns (non-ASCII kept as is, key
    order kept), written as the JSON files are written (:func:`~jupyter_agent.store.
    jsonio.encode_json`, which handles any depth a valid message may have)."""
    return encode_json(value).decode("utf-8")


def pg_text(value: str | None) -> str | None:
    """PostgreSQL ``text`` cannot hold NUL: it becomes U+FFFD (as lone surrogates do)."""
    return None if value is None else value.replace("\0", "\ufffd")


@dataclass(frozen=True)
class Head:
    """A session's row as kept in memory while its lease is held.

    ``working`` is the whole working context; ``transcript_len`` counts the transcript
    rows (the transcript itself is not kept in memory). ``revision`` is the row's as
    last read or written: a write is applied only if the row still has it. ``extra``
    holds the keys of the record this version does not know (kept for a round trip).
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


def first_prompt(current: str | None, appended: Sequence[dict[str, Any]]) -> str | None:
    """Listing's first prompt: the first user message's text (200 characters), once known."""
    if current is not None:
        return current
    for message in appended:
        if message.get("role") == "user":
            return message_text(message)[:FIRST_PROMPT_CHARS]
    return None


def row_values(record: SessionRecord) -> dict[str, Any]:
    """Column values of a new ``sessions`` row for ``record`` (owner, project excluded)."""
    same = record.messages == record.transcript
    extra = record.model_extra or {}  # keys this version does not know, kept
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
        "first_prompt": pg_text(first_prompt(None, record.transcript)),
        "cost_usd": record.state.usage.cost_usd, "tool_calls": record.state.tool_calls,
        "extra": dumps(extra) if extra else None,
    }


def column_values(head: Head, columns: frozenset[str]) -> dict[str, Any]:
    """The values to write for ``columns`` of ``head`` (JSON columns as text)."""
    values: dict[str, Any] = {}
    for name in columns:
        if name == "state":
            values["state"] = dumps(head.state.model_dump(mode="json"))
            values["cost_usd"] = head.state.usage.cost_usd
            values["tool_calls"] = head.state.tool_calls
        elif name == "compactions":
            values[name] = dumps([c.model_dump(mode="json") for c in head.compactions])
        elif name == "context_head":
            values[name] = dumps(head.context_head)
        elif name in ("summary", "title", "first_prompt"):
            values[name] = pg_text(getattr(head, name))
        else:
            values[name] = getattr(head, name)
    return values


# --------------------------------------------------------------------------- plans
def plan_extend(head: Head, incoming: Sequence[Any],
                state: SessionState | None = None) -> Plan | None:
    """A save point: new messages (and a changed checkpoint); ``None`` when nothing is new.

    Raises
    ------
    ContextMismatchError
        ``incoming`` does not extend the saved working context.
    InvalidMessageError
        A new message could not be loaded back once saved.
    """
    new, _ = new_messages(head.id, head.working, incoming)
    changed_state = state is not None and state != head.state
    if not new and not changed_state:
        return None
    columns = {"updated_at"}
    updates: dict[str, Any] = {"updated_at": utc_now()}
    if new:
        columns |= {"transcript_len", "first_prompt"}
        updates.update(transcript_len=head.transcript_len + len(new),
                       first_prompt=first_prompt(head.first_prompt, new),
                       working=[*head.working, *new])
    if changed_state:
        columns.add("state")
        updates["state"] = state
    return Plan(replace(head, **updates), frozenset(columns), new)


def plan_state(head: Head, state: SessionState) -> Plan | None:
    """The checkpoint alone; ``None`` when it equals the saved one."""
    return plan_extend(head, head.working, state)


def plan_compact(head: Head, messages: list[dict[str, Any]], summary: str,
                 replaced: int | None) -> Plan:
    """A compaction to ``messages`` (normalized dicts), recorded as an event."""
    now = utc_now()
    event = Compaction(
        at=now, summary=summary,
        replaced=count_replaced(head.working, messages) if replaced is None else replaced,
        transcript_length=head.transcript_len,
    )
    new = replace(head, context_head=list(messages), context_from=head.transcript_len,
                  working=list(messages), compactions=[*head.compactions, event], updated_at=now)
    return Plan(new, frozenset({"context_head", "context_from", "compactions", "updated_at"}))


def plan_fields(head: Head, *, touch: bool = False, **values: Any) -> Plan | None:
    """Set plain fields (``summary``, ``title``, ``archived``); ``touch`` sets ``updated_at``."""
    if not touch and all(getattr(head, k) == v for k, v in values.items()):
        return None
    columns = set(values)
    if touch:
        values["updated_at"] = utc_now()
        columns.add("updated_at")
    return Plan(replace(head, **values), frozenset(columns))
