"""The session record on disk (``sessions/<id>.json``) as pydantic v2 models.

Top-level keys, in this order (fixed, so other tools can read them): ``schema_version``,
``id``, ``created_at``, ``updated_at``, ``summary``, ``title``, ``archived``,
``project_root``, ``messages`` (the working context sent to the model), ``transcript``
(every message ever saved, never shortened by compaction), ``compactions`` and
``state`` (the checkpoint: ``scratchpad``, ``todos``, ``tool_calls``, ``usage``).
Datetimes are timezone-aware UTC and serialized as ISO 8601 with offset
(``"2026-11-30T01:38:27.123456+00:00"``).

Versioning: :data:`SCHEMA_VERSION` is the format this code writes. A file is read by
applying :data:`UPGRADES` (``{from_version: function}``, each returning the next
version's dict) *before* validation. A file without ``schema_version`` is version 0:
the older implementation's record with only ``id``, ``created_at``, ``updated_at``,
``summary`` and ``messages``; it loads with ``transcript = messages``, no
compactions, an empty state and not archived (spec: "Working Context and Full
Transcripts"). A file from a *newer* version is refused with
:class:`~jupyter_agent.errors.CorruptSessionError` and never rewritten.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, ValidationError

from jupyter_agent.errors import CorruptSessionError
from jupyter_agent.store.ids import validate_session_id
from jupyter_agent.store.messages import clean_json, clean_text

__all__ = [
    "SCHEMA_VERSION",
    "UPGRADES",
    "Compaction",
    "ForkOrigin",
    "LeaseHolder",
    "SessionInfo",
    "SessionListing",
    "SessionRecord",
    "SessionState",
    "TodoItem",
    "Usage",
    "dump_record",
    "parse_record",
    "upgrade_record",
    "utc_now",
]

#: The record format this code writes.
SCHEMA_VERSION = 1


def utc_now() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(UTC)


def _to_utc(value: datetime) -> datetime:
    # Naive datetimes come only from older files; they were written in UTC.
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


UtcDatetime = Annotated[
    datetime,
    AfterValidator(_to_utc),
    PlainSerializer(
        lambda d: d.isoformat(timespec="microseconds"), return_type=str, when_used="json"
    ),
]
"""An aware UTC datetime, written as ISO 8601 with ``+00:00``."""

CleanStr = Annotated[str, AfterValidator(clean_text)]
"""A string with lone surrogates replaced by U+FFFD."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Usage(_Model):
    """Cumulative model usage of a session.

    Attributes
    ----------
    input_tokens, output_tokens : int
        Tokens sent to / received from the model.
    cost_usd : float
        Spend in US dollars.
    calls : int
        Number of model requests.
    price_unknown : bool
        True when any call's cost could not be priced (so ``cost_usd`` is a lower bound).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    price_unknown: bool = False


class TodoItem(_Model):
    """One to-do item with its retry count (spec: "Saving Other Conversation State")."""

    id: int
    text: CleanStr
    status: Literal["pending", "in_progress", "done", "failed"] = "pending"
    retries: int = 0


class SessionState(_Model):
    """The checkpoint saved alongside the messages.

    Attributes
    ----------
    scratchpad : str
    todos : list of TodoItem
    tool_calls : int
        Tool calls made in the whole session.
    usage : Usage
        Cumulative tokens, cost (USD) and calls.
    model : str
        The model the session last talked to ("" if unknown).
    base_url : str
        The endpoint it last talked to ("" if unknown). Never an API key: a resume
        reads the key from the environment again.
    api : str
        The model API it last talked through ("chat", ...; "" if unknown).
    """

    scratchpad: CleanStr = ""
    todos: list[TodoItem] = Field(default_factory=list)
    tool_calls: int = 0
    usage: Usage = Field(default_factory=Usage)
    model: CleanStr = ""
    base_url: CleanStr = ""
    api: CleanStr = ""


class Compaction(_Model):
    """A compaction event: the working context was shortened, the transcript was not.

    Attributes
    ----------
    at : datetime
        When (aware UTC).
    summary : str
        The summary that replaced the older turns.
    replaced : int
        How many working-context messages were replaced.
    transcript_length : int
        Length of the transcript at that moment.
    """

    at: UtcDatetime
    summary: CleanStr
    replaced: int
    transcript_length: int


class ForkOrigin(_Model):
    """Where a forked session came from.

    Attributes
    ----------
    session_id : str
        The parent session.
    turn : int or None
        The parent's user turn the fork was cut after (1-based), or ``None`` when the
        fork copied the whole parent.
    """

    session_id: Annotated[str, AfterValidator(validate_session_id)]
    turn: int | None = None


class SessionRecord(_Model):
    """The whole content of ``sessions/<id>.json`` (see the module docstring)."""

    schema_version: int = SCHEMA_VERSION
    id: Annotated[str, AfterValidator(validate_session_id)]
    created_at: UtcDatetime
    updated_at: UtcDatetime
    summary: CleanStr = ""
    title: CleanStr = ""
    archived: bool = False
    project_root: CleanStr | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    transcript: list[dict[str, Any]] = Field(default_factory=list)
    compactions: list[Compaction] = Field(default_factory=list)
    state: SessionState = Field(default_factory=SessionState)
    parent: ForkOrigin | None = None


class SessionInfo(_Model):
    """One entry of :meth:`MemoryStore.list_sessions`: ID, last update, summary."""

    id: str
    updated_at: UtcDatetime
    summary: str


class LeaseHolder(_Model):
    """Who holds a session's lease, as the holder recorded it when it took the lease.

    Never holds secrets: no API key, no environment, no command line.

    Attributes
    ----------
    pid : int or None
        The holding process (``None`` when the holder did not say).
    host : str
        The machine it runs on (``socket.gethostname()``; "" if unknown).
    user : str
        The OS user it runs as ("" if unknown).
    since : datetime or None
        When the lease was taken (aware UTC).
    label : str
        What the holder is, for people: a notebook path, a kernel name or a command
        (e.g. ``"analysis.ipynb"``, ``"jupyter agent rm"``); "" if unknown.
    """

    pid: int | None = None
    host: CleanStr = ""
    user: CleanStr = ""
    since: UtcDatetime | None = None
    label: CleanStr = ""


class SessionListing(SessionInfo):
    """One entry of :meth:`SessionStore.list_sessions`.

    Attributes
    ----------
    title : str
    archived : bool
    status : {"active", "in use", "idle"}
        ``"active"``: this store holds the lease; ``"in use"``: another holder
        (another process, or another store in this process); ``"idle"``: nobody.
    created_at : datetime
    message_count : int
        ``len(transcript)``.
    cost_usd : float
        Cumulative spend in USD.
    tool_calls : int
        Session tool-call count.
    first_prompt : str
        Text of the first user message, at most 200 characters ("" if none).
    holder : LeaseHolder or None
        Who holds the lease when ``status`` is ``"in use"`` (as far as the store can
        tell), else ``None``.
    owner_user, owner_host : str
        Who created the session (user name and machine), for stores shared by a team;
        "" when the store does not record it (the JSON files of one user do not).
    """

    title: str
    archived: bool
    status: Literal["active", "in use", "idle"]
    created_at: UtcDatetime
    message_count: int
    cost_usd: float
    tool_calls: int
    first_prompt: str
    holder: LeaseHolder | None = None
    owner_user: str = ""
    owner_host: str = ""


# --------------------------------------------------------------------------- upgrades


def _upgrade_0_to_1(data: dict[str, Any]) -> dict[str, Any]:
    """Version 0 (no ``schema_version``): add the fields the older implementation lacked."""
    out = dict(data)
    messages = out.get("messages", [])
    out.setdefault("transcript", list(messages) if isinstance(messages, list) else messages)
    if out.get("summary") is None:
        out["summary"] = ""
    out.setdefault("title", "")
    out.setdefault("archived", False)
    out.setdefault("project_root", None)
    out.setdefault("compactions", [])
    out.setdefault("state", {})
    out["schema_version"] = 1
    try:  # the older writer did not guard against lone surrogates
        cleaned = clean_json(out)
    except (TypeError, ValueError):
        return out  # not JSON-clean: validation reports it
    return cleaned if isinstance(cleaned, dict) else out


#: ``{version: function}``; each function takes a record dict of that version and
#: returns a dict of the next version (with ``schema_version`` set accordingly).
UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {0: _upgrade_0_to_1}


def upgrade_record(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """Bring a decoded record dict up to :data:`SCHEMA_VERSION`.

    Raises
    ------
    CorruptSessionError
        If ``schema_version`` is not a non-negative integer, is newer than this code
        knows (the file is from a newer jupyter-agent), or has no upgrade function.
    """
    version = data.get("schema_version", 0)
    if type(version) is not int or version < 0:
        raise CorruptSessionError(
            path, f"schema_version must be a non-negative integer, not {version!r}"
        )
    if version > SCHEMA_VERSION:
        raise CorruptSessionError(
            path,
            f"it has schema_version {version}, but this jupyter-agent reads only up to "
            f"{SCHEMA_VERSION}; upgrade jupyter-agent to open it",
        )
    while version < SCHEMA_VERSION:
        step = UPGRADES.get(version)
        if step is None:
            raise CorruptSessionError(path, f"no upgrade from schema_version {version}")
        data = step(data)
        version = data["schema_version"]
    return data


# --------------------------------------------------------------------------- (de)serialization

def parse_record(raw: bytes, path: Path, *, expected_id: str | None = None) -> SessionRecord:
    """Decode, upgrade and validate the bytes of a session file.

    Parameters
    ----------
    raw : bytes
        The file content (UTF-8 JSON).
    path : pathlib.Path
        The file, for error messages.
    expected_id : str, optional
        The ID the file name implies; a record with another ``id`` is refused.

    Returns
    -------
    SessionRecord
        Lone surrogates in a version-0 (legacy) file are replaced by U+FFFD during
        the upgrade; this code never writes any (see :func:`dump_record`).

    Raises
    ------
    CorruptSessionError
        Naming ``path``, for anything that is not a valid record.
    """
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
        reason = "empty file" if not raw.strip() else f"not valid JSON ({err})"
        raise CorruptSessionError(path, reason) from None
    if not isinstance(data, dict):
        raise CorruptSessionError(path, f"expected a JSON object, found {type(data).__name__}")
    data = upgrade_record(data, path)
    try:
        record = SessionRecord.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}"
            for e in err.errors(include_input=False, include_url=False)[:3]
        )
        raise CorruptSessionError(path, f"not a valid session record ({problems})") from None
    if expected_id is not None and record.id != expected_id:
        raise CorruptSessionError(path, f"it holds session {record.id!r}, not {expected_id!r}")
    return record


# Keys before "messages", in file order (the rest are appended by dump_record).
_KEY_ORDER = (
    "schema_version", "id", "created_at", "updated_at", "summary", "title", "archived",
    "project_root",
)


def _encode(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _same_messages(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    return a is b or (len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True)))


def dump_record(record: SessionRecord) -> bytes:
    """Serialize a record to compact UTF-8 JSON with the fixed key order.

    ``messages`` and ``transcript`` are encoded as they are (they hold plain dicts
    already normalized by :func:`~jupyter_agent.store.messages.to_message_dict`), and
    only once when they are equal (no compaction yet), which keeps saving a long
    session cheap. A lone surrogate that slipped in is replaced, never written.
    """
    head = record.model_dump(mode="json", exclude={"messages", "transcript"})
    messages = _encode(record.messages)
    same = _same_messages(record.messages, record.transcript)
    transcript = messages if same else _encode(record.transcript)
    text = "".join(
        [
            _encode({key: head[key] for key in _KEY_ORDER})[:-1],
            ',"messages":',
            messages,
            ',"transcript":',
            transcript,
            ',"compactions":',
            _encode(head["compactions"]),
            ',"state":',
            _encode(head["state"]),
            "" if head["parent"] is None else ',"parent":' + _encode(head["parent"]),
            "}",
        ]
    )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return clean_text(text).encode("utf-8")
