"""Session records: IDs, figure checks, the pydantic models, and the one-file JSON form.

A record is the working context, the transcript (every message ever, never rewritten),
compactions, the checkpoint (``state``), summary, title and archived flag. Its one-file form
(``dump_record``/``parse_record``) is what jupyter-agent 0.1 saved and what exports hold;
older ``schema_version`` values are upgraded on reading (:func:`upgrade_record`).
"""

from __future__ import annotations

import re
import secrets
import string
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    field_validator,
)

from jupyter_agent.errors import (
    CorruptSessionError,
    InvalidFigureError,
    InvalidMessageError,
    InvalidSessionIdError,
)
from jupyter_agent.images import MEDIA_TYPES, pixel_problem, sniff_media_type
from jupyter_agent.store.messages import (
    check_messages,
    clean_text,
    decode_json,
    depth_problem,
    encode_json,
    json_problem,
    message_problem,
)

#: The full pattern a session ID must match (ASCII only; no ``.``, ``/`` or spaces).
SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,128}")


def validate_session_id(session_id: object) -> str:
    """``session_id`` if it matches :data:`SESSION_ID_PATTERN`, else ``InvalidSessionIdError``."""
    if not isinstance(session_id, str) or SESSION_ID_PATTERN.fullmatch(session_id) is None:
        raise InvalidSessionIdError(session_id)
    return session_id


#: The largest figure a store keeps, in bytes.
MAX_FIGURE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class FigureData:
    """A saved figure's file."""

    data: bytes
    media_type: str


def validate_figure_id(figure_id: object) -> str:
    """``figure_id`` if it matches :data:`SESSION_ID_PATTERN`, else ``InvalidFigureError``."""
    if not isinstance(figure_id, str) or not SESSION_ID_PATTERN.fullmatch(figure_id):
        raise InvalidFigureError(figure_id, "its ID must be 1-128 letters, digits, '_' or '-'")
    return figure_id


def check_figure(figure_id: object, data: object, media_type: object) -> None:
    """Check a figure before it is saved: ``InvalidFigureError`` for a bad
    ID, a type not PNG, JPEG or SVG, bytes not of that type, more than
    :data:`MAX_FIGURE_BYTES` or :data:`~jupyter_agent.images.MAX_IMAGE_PIXELS`."""
    validate_figure_id(figure_id)
    if media_type not in MEDIA_TYPES:
        raise InvalidFigureError(figure_id, f"media type {media_type!r} is not one of "
                                            f"{', '.join(MEDIA_TYPES)}")
    if not isinstance(data, bytes):
        raise InvalidFigureError(figure_id, "its data must be bytes")
    if len(data) > MAX_FIGURE_BYTES:
        raise InvalidFigureError(figure_id, f"it has {len(data):,} bytes, more than the "
                                            f"{MAX_FIGURE_BYTES:,} a session keeps")
    if sniff_media_type(data) != media_type:
        raise InvalidFigureError(figure_id, f"its bytes are not {media_type}")
    problem = pixel_problem(data, str(media_type))
    if problem:
        raise InvalidFigureError(figure_id, problem)


def new_session_id() -> str:
    """Return a fresh random session ID (10 letters and digits)."""
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(10))


#: The record format this code writes.
SCHEMA_VERSION = 1


def utc_now() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(UTC)


#: How far a stored time may be ahead of this machine's clock (the clocks of a team's
#: machines differ a little) before it is not believed (:func:`check_not_future`).
CLOCK_SKEW = timedelta(minutes=5)


def check_not_future(what: str, when: datetime, now: datetime | None = None) -> None:
    """``ValueError`` when ``when`` (aware) is more than :data:`CLOCK_SKEW` after ``now``.
    A listing leaves out a session whose ``updated_at`` fails this, so a record dated in the
    future is never the newest session to resume."""
    now = now or utc_now()
    if when - now > CLOCK_SKEW:
        raise ValueError(f"{what} {when.isoformat()} is in the future (more than "
                         f"{CLOCK_SKEW.seconds // 60} minutes after this machine's clock, "
                         f"{now:%Y-%m-%d %H:%M} UTC): a time ahead of the clock is not believed")


def to_utc(value: datetime) -> datetime:
    """``value`` as an aware UTC datetime (naive ones, from older files, were UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the time cannot be converted to UTC") from None


UtcDatetime = Annotated[
    datetime,
    AfterValidator(to_utc),
    PlainSerializer(
        lambda d: d.isoformat(timespec="microseconds"), return_type=str, when_used="json"
    ),
]
"""An aware UTC datetime, written as ISO 8601 with ``+00:00``."""

CleanStr = Annotated[str, AfterValidator(clean_text)]
"""A string with lone surrogates replaced by U+FFFD."""

Count = Annotated[int, Field(ge=0, le=2**63 - 1)]
"""A non-negative integer that fits 64 bits (counts, tokens, IDs)."""

Dollars = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""A finite, non-negative amount of US dollars."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Usage(_Model):
    """Cumulative model usage of a session (``cost_usd`` in US dollars, a lower bound when
    ``price_unknown``)."""

    input_tokens: Count = 0
    output_tokens: Count = 0
    cost_usd: Dollars = 0.0
    calls: Count = 0
    price_unknown: bool = False


TodoStatus = Literal["pending", "in_progress", "done", "failed"]


class TodoItem(_Model):
    """One to-do item; ``retries`` counts its moves to ``failed``."""

    id: Count
    text: CleanStr
    status: TodoStatus = "pending"
    retries: Count = 0


class SessionState(_Model):
    """The checkpoint saved alongside the messages.

    ``model``, ``base_url``, ``api`` and ``vision``: what the session last used (never an
    API key). ``images_refused``: the ``"model at URL"`` that refused images (vision
    "auto"). ``figures``: how many the session's code made. ``context_window`` (tokens, 0:
    none): what ``context_window_of`` (``"model at URL"``) reported (source "server") or
    named in a refusal ("refusal"). ``handed_out``: the ``run_python`` call IDs whose code
    ``%agent_cell`` put into a cell, oldest first.
    """

    scratchpad: CleanStr = ""
    todos: list[TodoItem] = Field(default_factory=list)
    tool_calls: Count = 0
    usage: Usage = Field(default_factory=Usage)
    model: CleanStr = ""
    base_url: CleanStr = ""
    api: CleanStr = ""
    vision: CleanStr = ""
    images_refused: CleanStr = ""
    figures: Count = 0
    context_window: Count = 0
    context_window_of: CleanStr = ""
    context_window_source: CleanStr = ""
    handed_out: list[CleanStr] = Field(default_factory=list)

    @field_validator("todos", mode="before")
    @classmethod
    def _number_todos(cls, value: Any) -> Any:
        """Give todo items written without an ``id`` the next free one."""
        if not isinstance(value, list):
            return value
        used = [t.get("id") for t in value if isinstance(t, dict)]
        next_id = max([i for i in used if type(i) is int] + [0]) + 1
        out = []
        for item in value:
            if isinstance(item, dict) and item.get("id") is None:
                item = {**item, "id": next_id}
                next_id += 1
            out.append(item)
        return out


class Compaction(_Model):
    """A compaction event: the working context was shortened, the transcript was not."""

    at: UtcDatetime
    summary: CleanStr
    replaced: Count
    transcript_length: Count


class ForkOrigin(_Model):
    """Where a forked session came from: the parent session and the turn it was forked after."""

    session_id: Annotated[str, AfterValidator(validate_session_id)]
    turn: Count | None = None


class SessionRecord(_Model):
    """A whole session; unknown keys are kept (``model_extra``) and written back.
    ``messages`` and ``transcript`` are plain dicts the store validates (pydantic would
    copy them)."""

    model_config = ConfigDict(extra="allow")

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


class LeaseHolder(_Model):
    """Who holds a session's lease, as recorded when it was taken; never a secret.
    ``label`` says what the holder is for people, e.g. ``"analysis.ipynb"``."""

    pid: int | None = None
    host: CleanStr = ""
    user: CleanStr = ""
    since: UtcDatetime | None = None
    label: CleanStr = ""

    def describe(self) -> str:
        """``alice on node-3 (pid 42, analysis.ipynb, since 2026-03-01 14:02:00 UTC)``, or ""."""
        name = " on ".join(part for part in (self.user, self.host) if part)
        if not name:
            return f"process {self.pid}" if self.pid is not None else ""
        since = self.since and f"since {self.since.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
        details = [d for d in (self.pid is not None and f"pid {self.pid}", self.label, since) if d]
        return name + (f" ({', '.join(details)})" if details else "")


class SessionListing(_Model, frozen=True):
    """One entry of :meth:`Store.list_sessions` (and :meth:`Store.describe_session`).

    ``status``: ``"active"`` when this store holds the lease, ``"in use"`` when another
    ``holder`` does, else ``"idle"``. ``message_count``: the transcript's length;
    ``first_prompt``: at most 200 characters. ``owner_*`` and ``shared_with`` (roles that
    may read it) come from a team store only; ``clock``: its place in the order of changes.
    """

    id: str
    updated_at: UtcDatetime
    summary: str
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
    owner_role: str = ""
    shared_with: tuple[str, ...] = ()
    parent: ForkOrigin | None = None
    clock: int | None = None


# --------------------------------------------------------------------------- upgrades
def upgrade_record(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """Bring a decoded record dict up to :data:`SCHEMA_VERSION` in place (version 0, no
    ``schema_version``, lacks fields added since); ``CorruptSessionError`` for a
    ``schema_version`` that is not a known non-negative integer."""
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
    if version == 0:  # lone surrogates of the older writer were replaced by decode_json
        messages = data.get("messages", [])
        data.setdefault("transcript", list(messages) if isinstance(messages, list) else messages)
        if data.get("summary") is None:  # the other fields added since have defaults
            data["summary"] = ""
        data["schema_version"] = 1
    return data


# --------------------------------------------------------------------------- (de)serialization

_HEAD_KEYS = (
    "schema_version", "id", "created_at", "updated_at", "summary", "title", "archived",
    "project_root",
)


def validation_reason(err: ValidationError) -> str:
    """The first problems of a pydantic error, as ``"state.usage.cost_usd: ..."``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}"
        for e in err.errors(include_input=False, include_url=False)[:3]
    )


def validated_record(head: dict[str, Any], path: Path | str, messages: list[dict[str, Any]],
                     transcript: list[dict[str, Any]]) -> SessionRecord:
    """The record of ``head`` (its fields but the messages) with ``messages`` and
    ``transcript`` (checked already) as they are; ``CorruptSessionError`` naming ``path``."""
    problem = depth_problem(head)
    if problem:
        raise CorruptSessionError(path, f"not a valid session record ({problem})")
    try:
        record = SessionRecord.model_validate(head)
    except ValidationError as err:
        raise CorruptSessionError(
            path, f"not a valid session record ({validation_reason(err)})") from None
    record.messages, record.transcript = messages, transcript
    return record


def parse_record(raw: bytes | dict[str, Any], path: Path, *,
                 expected_id: str | None = None) -> SessionRecord:
    """Decode (unless given decoded), upgrade and validate a record in its one-file form
    (``CorruptSessionError`` naming ``path``); ``messages`` and ``transcript`` are checked
    and kept as they are, not copied."""
    data = decode_json(raw, path) if isinstance(raw, bytes) else raw
    if not isinstance(data, dict):
        raise CorruptSessionError(path, f"expected a JSON object, found {type(data).__name__}")
    data = upgrade_record(dict(data), path)
    messages = check_messages(data.pop("messages", []), path, "messages")
    transcript = check_messages(data.pop("transcript", messages), path, "transcript")
    record = validated_record(data, path, messages, transcript)
    if expected_id is not None and record.id != expected_id:
        raise CorruptSessionError(path, f"it holds session {record.id!r}, not {expected_id!r}")
    return record


def record_head(record: SessionRecord) -> dict[str, Any]:
    """A record but its ``messages`` and ``transcript``, JSON-ready, in file order (unknown
    keys last)."""
    extra = record.model_extra or {}
    head = record.model_dump(mode="json", exclude={"messages", "transcript", *extra})
    head.update(extra)  # as they are: JSON mode would write an infinity as null
    return head


def dump_record(record: SessionRecord) -> bytes:
    """The one-file JSON form of a record (compact UTF-8, fixed key order), as exports
    write it and jupyter-agent 0.1 reads it; ``parent`` only for a fork, unknown keys last."""
    head = record_head(record)
    out: dict[str, Any] = {key: head.pop(key) for key in _HEAD_KEYS}
    out["messages"], out["transcript"] = record.messages, record.transcript
    if head["parent"] is None:
        del head["parent"]
    out.update(head)  # compactions, state, parent, unknown keys
    return encode_json(out)


def check_importable(record: SessionRecord) -> None:
    """Refuse a record that could not be loaded back once saved: ``InvalidMessageError``
    for a bad message (``index`` in its list), ``ValueError`` for another value JSON cannot
    hold."""
    for field in ("messages", "transcript"):
        for k, message in enumerate(getattr(record, field)):
            problem = message_problem(message) or json_problem(message)
            if problem:
                raise InvalidMessageError(k, f"{field}: {problem}")
    problem = json_problem(record_head(record))
    if problem:
        raise ValueError(f"session {record.id!r} cannot be saved: {problem}")
