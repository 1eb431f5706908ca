"""Rows read from the team store, validated as completely as the JSON files.

Whatever the database returns is checked before anything is built from it: someone may
have edited a row by hand, or a bug elsewhere may have written one. The rules are the
JSON store's, applied to columns instead of files:

* ``json`` columns arrive as raw bytes (:func:`raw_json` is the connection's ``json``
  loader) and are decoded by :func:`~jupyter_agent.store.jsonio.decode_json`, as the
  files are: no ``NaN`` or infinities, integers within 64 bits, lone surrogates of an
  older writer replaced by U+FFFD;
* every message (working context and transcript) has the shape of a Chat Completions
  message (:func:`~jupyter_agent.store.validation.check_messages`); the checkpoint,
  compaction events and fork origin go through the same pydantic models as a file's;
* the bookkeeping columns agree with each other: ``0 <= context_from <= transcript_len``
  and as many transcript rows as ``transcript_len`` says; a row from a newer
  jupyter-agent (``schema_version``) is refused; the ``extra`` column (keys of a record
  this version does not know) is an object of unknown keys only.

Anything else raises :class:`~jupyter_agent.errors.CorruptSessionError` naming the
session (database without password, project, ID) and, in the reason, the table and
column or transcript row (``jupyter_agent.messages seq 4: role must be a non-empty
string``). Nothing is written back; listing leaves such a row out (:func:`listing_entry`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from math import isfinite
from typing import Any, Literal

from pydantic import ValidationError

from jupyter_agent.errors import CorruptSessionError, TooLargeError
from jupyter_agent.store.ids import SESSION_ID_PATTERN
from jupyter_agent.store.jsonio import (
    JOURNAL_CAP,
    LINE_CAP,
    RECORD_CAP,
    decode_json,
    depth_problem,
)
from jupyter_agent.store.postgres.rows import Head
from jupyter_agent.store.postgres.schema import SCHEMA
from jupyter_agent.store.records import (
    SCHEMA_VERSION,
    Compaction,
    ForkOrigin,
    LeaseHolder,
    SessionListing,
    SessionRecord,
    SessionState,
    check_not_future,
    validation_reason,
)
from jupyter_agent.store.validation import check_messages, message_problem

__all__ = ["head_from_row", "listing_entry", "raw_json", "record_from", "record_from_row",
           "transcript_message"]

_SESSIONS = f"{SCHEMA}.sessions"
_MESSAGES = f"{SCHEMA}.messages"
_KNOWN_KEYS = frozenset(SessionRecord.model_fields)


def raw_json(data: str | bytes) -> str | bytes:
    """The ``json`` loader of the store's connection: the text as it is, decoded later."""
    return data


def _json(raw: Any, where: str, column: str, cap: int = RECORD_CAP, *,
          messages: bool = False) -> Any:
    """Decode one ``json`` value; over ``cap`` bytes it is refused before decoding, and
    other than messages (checked by :func:`check_messages`) it must nest at most
    ``MAX_DEPTH`` levels (:func:`depth_problem`)."""
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
    """Decoded and checked messages; ``first_seq`` numbers transcript rows in errors."""
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
                        where, f"{_MESSAGES} seq {first_seq + k}: {problem}") from None
        raise


def transcript_message(raw: Any, where: str, seq: int) -> dict[str, Any]:
    """One transcript row's message, decoded and checked.

    Raises
    ------
    CorruptSessionError
        Naming ``where`` and the row (``jupyter_agent.messages seq 12: ...``).
    """
    column = f"{_MESSAGES} seq {seq}"
    message = _json(raw, where, column, LINE_CAP)
    problem = message_problem(message)
    if problem:
        raise CorruptSessionError(where, f"{column}: {problem}")
    return message


def _model(model: Any, value: Any, where: str, column: str) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as err:
        raise CorruptSessionError(where, f"{column}: {validation_reason(err)}") from None


def _extra(raw: Any, where: str) -> dict[str, Any]:
    data = _json(raw, where, f"{_SESSIONS}.extra")
    if data is None:
        return {}
    if type(data) is not dict:
        raise CorruptSessionError(where, f"{_SESSIONS}.extra: must be a JSON object")
    known = sorted(_KNOWN_KEYS.intersection(data))
    if known:
        raise CorruptSessionError(where, f"{_SESSIONS}.extra: holds the record's own "
                                         f"key {known[0]!r}")
    return data


def head_from_row(row: Sequence[Any], tail: Any, where: str) -> Head:
    """A validated :class:`Head` from a ``sessions`` row (:data:`~jupyter_agent.store.
    postgres.rows.HEAD_COLUMNS`) and the raw JSON list of the transcript rows from
    ``context_from`` on (``None`` when there are none).

    Raises
    ------
    CorruptSessionError
        Naming ``where``, for a row from a newer jupyter-agent or anything that does
        not validate (nothing is changed).
    """
    context_from = row[11]
    first_seq = context_from if type(context_from) is int else 0
    return _head(row, _messages(tail, where, f"{_MESSAGES} from seq {first_seq}", first_seq,
                                JOURNAL_CAP), where)


def _head(row: Sequence[Any], tail: list[dict[str, Any]], where: str) -> Head:
    """:func:`head_from_row` with the transcript rows from ``context_from`` on decoded
    and checked already."""
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
            where, f"{_SESSIONS}: context_from {context_from} is not within the transcript "
                   f"of {transcript_len} messages")
    if len(tail) != transcript_len - context_from:
        raise CorruptSessionError(
            where, f"{_MESSAGES}: {context_from + len(tail)} transcript rows where "
                   f"{transcript_len} were saved")
    head_messages = _messages(context_head, where, f"{_SESSIONS}.context_head", None)
    events = _json(compactions, where, f"{_SESSIONS}.compactions")
    if type(events) is not list:
        raise CorruptSessionError(where, f"{_SESSIONS}.compactions: must be a list")
    origin = _json(parent, where, f"{_SESSIONS}.parent")
    return Head(
        sid=sid, revision=revision, id=sid_text, created_at=created_at,
        updated_at=updated_at, summary=summary, title=title, archived=archived,
        project_root=project_root, context_head=head_messages, context_from=context_from,
        transcript_len=transcript_len,
        compactions=[_model(Compaction, e, where, f"{_SESSIONS}.compactions[{k}]")
                     for k, e in enumerate(events)],
        state=_model(SessionState, _json(state, where, f"{_SESSIONS}.state") or {}, where,
                     f"{_SESSIONS}.state"),
        parent=None if origin is None else _model(ForkOrigin, origin, where,
                                                  f"{_SESSIONS}.parent"),
        first_prompt=first, extra=_extra(extra, where),
        working=[*head_messages, *tail],
    )


def record_from(head: Head, transcript: list[dict[str, Any]], where: str) -> SessionRecord:
    """The whole record of a session from its head and its checked transcript.

    Raises
    ------
    CorruptSessionError
        Naming ``where``, when the transcript does not match the row or a field of the
        row does not validate (a timestamp that cannot be converted to UTC, say).
    """
    if len(transcript) != head.transcript_len:
        raise CorruptSessionError(where, f"{_MESSAGES}: {len(transcript)} transcript rows "
                                         f"where {head.transcript_len} were saved")
    data = {
        **head.extra, "id": head.id, "created_at": head.created_at,
        "updated_at": head.updated_at, "summary": head.summary, "title": head.title,
        "archived": head.archived, "project_root": head.project_root,
    }
    record = _model(SessionRecord, data, where, _SESSIONS)
    # validated already: assigned, not copied by pydantic
    record.messages, record.transcript = head.working, transcript
    record.compactions, record.state, record.parent = head.compactions, head.state, head.parent
    return record


def record_from_row(row: Sequence[Any], where: str) -> SessionRecord:
    """The record of a session from a ``sessions`` row followed by its whole transcript
    (the raw JSON list of every transcript row, ``None`` when there is none).

    Raises
    ------
    CorruptSessionError
        Naming ``where`` (see :func:`head_from_row` and :func:`record_from`).
    """
    transcript = _messages(row[-1], where, _MESSAGES, 0, JOURNAL_CAP)
    context_from = row[11]
    start = context_from if type(context_from) is int and context_from >= 0 else 0
    return record_from(_head(row[:-1], transcript[start:], where), transcript, where)


def listing_entry(row: Sequence[Any], status: Literal["active", "in use", "idle"],
                  holder: LeaseHolder | None, where: str) -> SessionListing:
    """A listing entry from a row of the listing query: the columns listing shows, the
    fork origin, the checkpoint and the compaction events are checked as a load checks
    them; messages are not read.

    Raises
    ------
    CorruptSessionError
        Naming ``where`` and the column, for a row that does not validate (listing
        leaves it out).
    """
    (sid, created_at, updated_at, summary, title, archived, count, cost, tool_calls,
     first, owner_user, owner_host, parent, state, compactions, owner_role, shared_with) = row
    if not isinstance(sid, str) or SESSION_ID_PATTERN.fullmatch(sid) is None:
        raise CorruptSessionError(where, f"{_SESSIONS}.id: not a valid session ID")
    if isinstance(updated_at, datetime) and updated_at.tzinfo is not None:
        try:
            check_not_future(f"{_SESSIONS}.updated_at", updated_at)
        except ValueError as err:
            raise CorruptSessionError(where, str(err)) from None
    if not (type(count) is int and count >= 0 and type(tool_calls) is int and tool_calls >= 0
            and isinstance(cost, float) and isfinite(cost) and cost >= 0):
        raise CorruptSessionError(where, f"{_SESSIONS}: transcript_len, tool_calls and "
                                         "cost_usd must be finite and non-negative")
    origin = _json(parent, where, f"{_SESSIONS}.parent")
    _model(SessionState, _json(state, where, f"{_SESSIONS}.state") or {}, where,
           f"{_SESSIONS}.state")
    events = _json(compactions, where, f"{_SESSIONS}.compactions")
    if type(events) is not list:
        raise CorruptSessionError(where, f"{_SESSIONS}.compactions: must be a list")
    for k, event in enumerate(events):
        _model(Compaction, event, where, f"{_SESSIONS}.compactions[{k}]")
    fields = {
        "id": sid, "updated_at": updated_at, "summary": summary, "title": title,
        "archived": archived, "status": status, "created_at": created_at,
        "message_count": count, "cost_usd": cost, "tool_calls": tool_calls,
        "first_prompt": first or "", "holder": holder, "owner_user": owner_user,
        "owner_host": owner_host, "owner_role": owner_role or "",
        "shared_with": tuple(shared_with or ()),
        "parent": None if origin is None else _model(ForkOrigin, origin, where,
                                                     f"{_SESSIONS}.parent"),
    }
    entry: SessionListing = _model(SessionListing, fields, where, _SESSIONS)
    return entry
