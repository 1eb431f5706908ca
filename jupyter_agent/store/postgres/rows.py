"""Session rows of the team store: the head kept in memory, the SQL on sessions, figures
and leases, the plans of each change, and rows read back, validated as completely as the
files are: ``CorruptSessionError`` names the session and the column or transcript row
(``jupyter_agent.messages seq 4: role must be ...``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import isfinite
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from jupyter_agent.errors import CorruptSessionError, TooLargeError
from jupyter_agent.store.journal import first_prompt_of
from jupyter_agent.store.messages import (
    JOURNAL_CAP,
    MAX_DEPTH,
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
    Compaction,
    LeaseHolder,
    SessionListing,
    SessionRecord,
    SessionState,
    check_not_future,
    utc_now,
    validate_session_id,
    validation_reason,
)

SESSIONS = f"{SCHEMA}.sessions"
MESSAGES = f"{SCHEMA}.messages"
FIGURES = f"{SCHEMA}.figures"
# the record's fields kept in columns of their own (its keys this version does not know:
# ``extra``; its messages: ``context_head`` and the ``messages`` rows)
_RECORD_COLUMNS = tuple(name for name in SessionRecord.model_fields
                        if name not in ("schema_version", "messages", "transcript"))
# the columns of ``sessions`` a Head is read from
HEAD_COLUMNS = ("sid", "revision", "schema_version", *_RECORD_COLUMNS, "extra",
                "context_head", "context_from", "transcript_len", "first_prompt")
_MODELS = ("compactions", "state", "parent")  # JSON columns holding pydantic models
_JSON_COLUMNS = ("context_head", "extra", *_MODELS)

# the advisory locks granted in this database, keys split as pg_locks shows a bigint
LIVE_LOCKS = """SELECT pid, classid::bigint AS hi, objid::bigint AS lo FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 1
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"""
# a lease row joined to the lock that backs it (when one does)
LOCK_OF_ROW = ("k.hi = ((l.lock_key >> 32) & 4294967295) "
               "AND k.lo = (l.lock_key & 4294967295)")

ACQUIRE = f"""WITH got AS (SELECT pg_try_advisory_lock(%(key)s) AS ok)
INSERT INTO {SCHEMA}.leases AS l
    (project, session_id, lock_key, backend_pid, pid, user_name, host, since, label)
SELECT %(project)s, %(sid)s, %(key)s, pg_backend_pid(), %(pid)s, %(user)s, %(host)s,
       %(since)s, %(label)s
FROM got WHERE got.ok
ON CONFLICT (project, session_id, owner_role) DO UPDATE SET
    lock_key = EXCLUDED.lock_key, backend_pid = EXCLUDED.backend_pid, pid = EXCLUDED.pid,
    user_name = EXCLUDED.user_name, host = EXCLUDED.host, since = EXCLUDED.since,
    label = EXCLUDED.label
RETURNING true"""
RELEASE = f"""WITH gone AS (DELETE FROM {SCHEMA}.leases
    WHERE project = %(project)s AND session_id = %(sid)s AND backend_pid = pg_backend_pid())
SELECT pg_advisory_unlock(%(key)s)"""
# who holds a lock (``lock_pid``) and what its lease row says (see row_holder)
LEASE_COLUMNS = "k.pid AS lock_pid, l.backend_pid, l.pid, l.user_name, l.host, l.since, l.label"
HOLDER = f"""SELECT {LEASE_COLUMNS}
FROM ({LIVE_LOCKS}) k
LEFT JOIN {SCHEMA}.leases l ON l.project = %(project)s AND l.session_id = %(sid)s
WHERE k.hi = ((%(key)s::bigint >> 32) & 4294967295) AND k.lo = (%(key)s::bigint & 4294967295)"""
STALE = (f"DELETE FROM {SCHEMA}.leases l WHERE project = %s AND NOT EXISTS ("
         f"SELECT 1 FROM ({LIVE_LOCKS}) k WHERE k.pid = l.backend_pid AND {LOCK_OF_ROW}) "
         "RETURNING session_id")


@dataclass(frozen=True)
class Head:
    """A session's row kept in memory while its lease is held: ``record.messages`` is the
    working context, the transcript only its length; a write needs the row at ``revision``."""

    sid: int
    revision: int
    record: SessionRecord
    context_head: list[dict[str, Any]]
    context_from: int
    transcript_len: int
    first_prompt: str | None


_OWN = "project = %(project)s AND id = %(id)s"
# a head's columns and ``tail``, its transcript rows (those that match ``{}``)
_WITH_TAIL = (f"SELECT {', '.join(HEAD_COLUMNS)}, (SELECT json_agg(m.body ORDER BY m.seq) "
              f"FROM {MESSAGES} m WHERE m.sid = s.sid{{}}) AS tail FROM {SESSIONS} s WHERE ")
HEAD = _WITH_TAIL.format(" AND m.seq >= s.context_from") + _OWN
# which session an ID names for a read: the project's, else one shared with this role
# (row-level security shows another role's session only when it is shared with it)
_READABLE = ("id = %(id)s AND (project = %(project)s OR owner_role <> current_user) "
             "ORDER BY project = %(project)s DESC, updated_at DESC LIMIT 1")
OWNER = (f"SELECT sid, owner_role, owner_role = current_user AS mine FROM {SESSIONS} "
         f"WHERE {_READABLE}")
RECORD = _WITH_TAIL.format("") + _READABLE
SHARES = f"SELECT grantee FROM {SCHEMA}.shares WHERE sid = %s ORDER BY grantee"
SHARE = (f"INSERT INTO {SCHEMA}.shares (sid, grantee) SELECT %s, rolname FROM pg_roles "
         "WHERE rolname = %s ON CONFLICT DO NOTHING")
UNSHARE = f"DELETE FROM {SCHEMA}.shares WHERE sid = %s AND grantee = %s"
ROLE = "SELECT 1 FROM pg_roles WHERE rolname = %s"
# messages (JSON texts) from a seq on, in one statement (COPY does not take row-level security)
APPEND = (f"INSERT INTO {MESSAGES} (sid, seq, body) SELECT %s, %s + n - 1, b::json "
          "FROM unnest(%s::text[]) WITH ORDINALITY AS t(b, n)")
# a save point's few messages: one prepared row at a time is faster than the array
APPEND_ROW = f"INSERT INTO {MESSAGES} (sid, seq, body) VALUES (%s, %s, %s)"
DELETE = f"DELETE FROM {SESSIONS} WHERE {_OWN} RETURNING sid"

SAVE_FIGURE = (f"INSERT INTO {FIGURES} (sid, figure_id, media_type, data) "
               f"SELECT sid, %(figure)s, %(type)s, %(data)s FROM {SESSIONS} WHERE {_OWN} "
               "ON CONFLICT (sid, figure_id) DO UPDATE SET media_type = EXCLUDED.media_type, "
               "data = EXCLUDED.data, saved_at = now() RETURNING 1")
# the bytes of a figure over the cap are not even sent by the server
_OF = f"f.sid = (SELECT sid FROM {SESSIONS} WHERE {_READABLE})"
READ_FIGURE = (f"SELECT f.media_type, octet_length(f.data) AS size, CASE WHEN "
               f"octet_length(f.data) <= %(cap)s THEN f.data END AS data FROM {FIGURES} f "
               f"WHERE {_OF} AND f.figure_id = %(figure)s")
FIGURE_IDS = f"SELECT f.figure_id FROM {FIGURES} f WHERE {_OF} ORDER BY f.figure_id"
DELETE_FIGURE = (f"DELETE FROM {FIGURES} f USING {SESSIONS} s WHERE s.sid = f.sid AND "
                 "s.project = %(project)s AND s.id = %(id)s AND f.figure_id = %(figure)s "
                 "RETURNING 1")

# Python's datetimes cover years 1-9999; a row outside them (``infinity``) cannot be listed
_REPRESENTABLE = "BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00'"
# named as the fields of a SessionListing
_PAGE_COLUMNS = (
    "sid, project, id, created_at, updated_at, summary, title, archived, "
    "transcript_len AS message_count, cost_usd, tool_calls, "
    "coalesce(first_prompt, '') AS first_prompt, owner_user, owner_host, parent, state, "
    "compactions, owner_role")


def listing_query(*, include_archived: bool, limit: int | None, after: bool,
                  session_id: bool = False) -> str:
    """One listing page: the project's sessions, then those other roles share with this one;
    ``session_id=True``: the one session ``id``, archived or not, whatever its date.
    Parameters: ``project``, ``horizon`` (the latest ``updated_at`` believed), and
    ``after_at``, ``after_id``, ``limit`` and ``id`` when used."""
    where = [f"schema_version <= {SCHEMA_VERSION}",
             f"updated_at {_REPRESENTABLE}", f"created_at {_REPRESENTABLE}"]
    if session_id:
        where.append(_READABLE)
        page = f"SELECT {_PAGE_COLUMNS} FROM {SESSIONS} WHERE {' AND '.join(where)}"
    else:
        where.append("updated_at <= %(horizon)s")
        if not include_archived:
            where.append("NOT archived")
        if after:
            where.append("(updated_at, id) < (%(after_at)s, %(after_id)s)")
        order = "ORDER BY updated_at DESC, id DESC" + (
            " LIMIT %(limit)s" if limit is not None else "")
        own = " AND ".join(["project = %(project)s", *where])
        # read from the shares, so the page never scans the sessions
        shared = " AND ".join([
            f"sid = ANY (ARRAY(SELECT h.sid FROM {SCHEMA}.shares h))",
            "owner_role <> current_user", "project <> %(project)s", *where])
        page = (f"(SELECT {_PAGE_COLUMNS} FROM {SESSIONS} WHERE {own} {order}) "
                f"UNION ALL (SELECT {_PAGE_COLUMNS} FROM {SESSIONS} WHERE {shared} "
                f"{order}) {order}")
    return f"""SELECT s.*,
    ARRAY(SELECT h.grantee::text FROM {SCHEMA}.shares h WHERE h.sid = s.sid ORDER BY 1)
        AS shared_with, {LEASE_COLUMNS}
FROM ({page}) s
LEFT JOIN {SCHEMA}.leases l ON l.project = s.project AND l.session_id = s.id
LEFT JOIN ({LIVE_LOCKS}) k ON {LOCK_OF_ROW}
ORDER BY s.updated_at DESC, s.id DESC"""


@dataclass(frozen=True)
class Plan:
    """One change of a session: the new head, the changed columns, appended messages."""

    head: Head
    columns: frozenset[str]
    appended: list[dict[str, Any]] = field(default_factory=list)


def dumps(value: Any) -> str:
    """``value`` as the file store's JSON text (``TypeError`` for what JSON cannot hold)."""
    return encode_json(value).decode("utf-8")


def _first_prompt(current: str | None, appended: list[dict[str, Any]]) -> str | None:
    if current is None and any(m.get("role") == "user" for m in appended):
        return first_prompt_of(appended)
    return current


def row_values(record: SessionRecord) -> dict[str, Any]:
    """Column values of a new ``sessions`` row for ``record`` (owner and project excluded)."""
    same = record.messages == record.transcript
    head = Head(0, 0, record, [] if same else record.messages,
                0 if same else len(record.transcript), len(record.transcript),
                _first_prompt(None, record.transcript))
    return column_values(head, HEAD_COLUMNS[2:])


def column_values(head: Head, columns: Iterable[str]) -> dict[str, Any]:
    """The values to write for ``columns`` of ``head``: JSON columns as text, NUL in text as
    U+FFFD (``text`` cannot hold it, as lone surrogates are); ``state`` brings its totals
    ``cost_usd`` and ``tool_calls`` along."""
    out: dict[str, Any] = {}
    for name in columns:
        if name == "schema_version":
            value: Any = SCHEMA_VERSION
        elif name == "extra":
            value = head.record.model_extra or None
        else:
            value = getattr(head.record if name in _RECORD_COLUMNS else head, name)
        if name == "state":
            out.update(cost_usd=value.usage.cost_usd, tool_calls=value.tool_calls)
        if name in _MODELS:
            value = to_jsonable_python(value)
        if name in _JSON_COLUMNS and value is not None:
            value = dumps(value)
        elif isinstance(value, str):
            value = value.replace("\0", "\ufffd")
        out[name] = value
    return out


def plan_save(head: Head, incoming: Sequence[Any] | None,
              state: SessionState | None) -> Plan | None:
    """``None`` if nothing is new; raises as :func:`~jupyter_agent.store.messages.new_messages`."""
    record = head.record
    new = [] if incoming is None else new_messages(record.id, record.messages, incoming)[0]
    changed_state = state is not None and state != record.state
    if not new and not changed_state:
        return None
    update: dict[str, Any] = {"updated_at": utc_now()}
    columns = {"updated_at"}
    if new:
        update["messages"] = [*record.messages, *new]
        columns |= {"transcript_len", "first_prompt"}
    if changed_state:
        update["state"] = state
        columns.add("state")
    return Plan(replace(head, record=record.model_copy(update=update),
                        transcript_len=head.transcript_len + len(new),
                        first_prompt=_first_prompt(head.first_prompt, new)),
                frozenset(columns), new)


def plan_compact(head: Head, messages: list[dict[str, Any]], summary: str,
                 replaced: int | None) -> Plan:
    now, record = utc_now(), head.record
    event = Compaction(
        at=now, summary=summary,
        replaced=count_replaced(record.messages, messages) if replaced is None else replaced,
        transcript_length=head.transcript_len,
    )
    new = replace(head, context_head=list(messages), context_from=head.transcript_len,
                  record=record.model_copy(update={
                      "messages": list(messages), "compactions": [*record.compactions, event],
                      "updated_at": now}))
    return Plan(new, frozenset({"context_head", "context_from", "compactions", "updated_at"}))


def plan_update(head: Head, values: dict[str, Any], touch: bool) -> Plan | None:
    if not touch and all(getattr(head.record, k) == v for k, v in values.items()):
        return None
    if touch:
        values = {**values, "updated_at": utc_now()}
    return Plan(replace(head, record=head.record.model_copy(update=values)), frozenset(values))


# ------------------------------------------------------------------ decoding
def _json(raw: bytes | None, where: str, column: str, cap: int = RECORD_CAP, *,
          messages: bool = False) -> Any:
    # refused over ``cap`` bytes before decoding; messages are depth-checked by check_messages,
    # other values when they have brackets enough to nest too deeply
    if raw is None:
        return None
    if len(raw) > cap:
        raise TooLargeError(where, len(raw), cap, column)
    try:
        value = decode_json(raw, where)
    except CorruptSessionError as err:
        raise CorruptSessionError(where, f"{column}: {err.reason}") from None
    deep = not messages and raw.count(b"[") + raw.count(b"{") > MAX_DEPTH
    problem = depth_problem(value) if deep else None
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


def _model(model: Any, value: Any, where: str) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as err:
        raise CorruptSessionError(where, f"{SESSIONS}: {validation_reason(err)}") from None


def head_from_row(row: Mapping[str, Any], where: str, *, whole: bool = False) -> Head:
    """A validated head from a row of :data:`HEAD_COLUMNS` and ``tail``: the raw JSON list of
    transcript rows from ``context_from`` on (all of them, kept as ``transcript``, when
    ``whole``), ``None`` for none. ``CorruptSessionError`` for a newer or invalid row."""
    version, context_from, transcript_len = (
        row["schema_version"], row["context_from"], row["transcript_len"])
    first_seq = 0 if whole else context_from
    transcript = _messages(row["tail"], where, MESSAGES if whole else
                           f"{MESSAGES} from seq {first_seq}", first_seq, JOURNAL_CAP)
    tail = transcript[max(context_from, 0):] if whole else transcript
    if version > SCHEMA_VERSION:
        raise CorruptSessionError(
            where, f"it has schema_version {version}, but this jupyter-agent reads only up "
                   f"to {SCHEMA_VERSION}; upgrade jupyter-agent to open it")
    if not 0 <= context_from <= transcript_len:
        raise CorruptSessionError(
            where, f"{SESSIONS}: context_from {context_from} is not within the transcript "
                   f"of {transcript_len} messages")
    if len(tail) != transcript_len - context_from:
        raise CorruptSessionError(
            where, f"{MESSAGES}: {context_from + len(tail)} transcript rows where "
                   f"{transcript_len} were saved")
    head_messages = _messages(row["context_head"], where, f"{SESSIONS}.context_head", None)
    extra = _json(row["extra"], where, f"{SESSIONS}.extra") or {}
    if type(extra) is not dict or extra.keys() & SessionRecord.model_fields.keys():
        raise CorruptSessionError(where, f"{SESSIONS}.extra: not a JSON object of keys the "
                                         "record does not have")
    data = {name: row[name] for name in _RECORD_COLUMNS} | {
        name: _json(row[name], where, f"{SESSIONS}.{name}") for name in _MODELS}
    record: SessionRecord = _model(SessionRecord, {**extra, **data}, where)
    # validated already: assigned, not copied by pydantic
    record.messages = [*head_messages, *tail]
    if whole:
        record.transcript = transcript
    return Head(row["sid"], row["revision"], record, head_messages, context_from,
                transcript_len, row["first_prompt"])


class _Unlisted(BaseModel):
    """The columns of a listing row its entry does not show or check, checked as a load does."""

    id: Annotated[str, AfterValidator(validate_session_id)]
    state: SessionState
    compactions: list[Compaction]


def listing_entry(row: Mapping[str, Any], status: Literal["active", "in use", "idle"],
                  holder: LeaseHolder | None, where: str) -> SessionListing:
    """A listing entry from a row of :func:`listing_query`, each column checked as a load
    checks it (messages are not read); ``CorruptSessionError`` naming the column."""
    try:
        check_not_future(f"{SESSIONS}.updated_at", row["updated_at"])
    except ValueError as err:
        raise CorruptSessionError(where, str(err)) from None
    cost = row["cost_usd"]
    if not (min(row["message_count"], row["tool_calls"], cost) >= 0 and isfinite(cost)):
        raise CorruptSessionError(where, f"{SESSIONS}: transcript_len, tool_calls and "
                                         "cost_usd must be finite and non-negative")
    json = {name: _json(row[name], where, f"{SESSIONS}.{name}") for name in _MODELS}
    _model(_Unlisted, {**json, "id": row["id"]}, where)
    # the row's other columns are not the entry's fields: validation leaves them out
    values = {**row, "parent": json["parent"], "status": status, "holder": holder,
              "shared_with": tuple(row["shared_with"] or ())}
    entry: SessionListing = _model(SessionListing, values, where)
    return entry
