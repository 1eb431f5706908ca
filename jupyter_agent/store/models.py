"""The session record and its parts as pydantic v2 models.

:class:`SessionRecord` is what :meth:`~jupyter_agent.store.Store.load_session` returns;
:class:`SessionState` is the checkpoint, :class:`SessionListing` one entry of a listing
and :class:`LeaseHolder` who holds a lease. Validation is complete: counts, tokens and
costs are non-negative and finite, integers fit 64 bits, timestamps convert to UTC
(written as ISO 8601 with ``+00:00``), todo items written without an ``id`` get the
next free one; the messages themselves are checked when a record is read
(:func:`~jupyter_agent.store.records.record_from_dict`). How a record is read from and
written to its one-file JSON form, and upgraded from older versions, is
:mod:`jupyter_agent.store.records`, which also re-exports every name of this module.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
)

from jupyter_agent.store.ids import validate_session_id
from jupyter_agent.store.messages import clean_text

__all__ = [
    "CLOCK_SKEW",
    "SCHEMA_VERSION",
    "Compaction",
    "ForkOrigin",
    "LeaseHolder",
    "SessionInfo",
    "SessionListing",
    "SessionRecord",
    "SessionState",
    "TodoItem",
    "Usage",
    "check_not_future",
    "utc_now",
]

#: The record format this code writes.
SCHEMA_VERSION = 1


def utc_now() -> datetime:
    """Return the current time as an aware UTC datetime."""
    return datetime.now(UTC)


#: How far a stored time may be ahead of this machine's clock (the clocks of a team's
#: machines differ a little) before it is not believed (:func:`check_not_future`).
CLOCK_SKEW = timedelta(minutes=5)


def check_not_future(what: str, when: datetime, now: datetime | None = None) -> datetime:
    """Return ``when`` (aware) unless it is more than :data:`CLOCK_SKEW` after ``now``.

    A listing leaves out a session whose ``updated_at`` fails this check (as it does a
    session it cannot read), so a record dated in the future is never shown as updated
    "just now" and never the newest session to resume.

    Raises
    ------
    ValueError
        ``"updated_at 9999-12-31T00:00:00+00:00 is in the future ..."``.
    """
    now = now or utc_now()
    if when - now > CLOCK_SKEW:
        raise ValueError(f"{what} {when.isoformat()} is in the future (more than "
                         f"{CLOCK_SKEW.seconds // 60} minutes after this machine's clock, "
                         f"{now:%Y-%m-%d %H:%M} UTC): a time ahead of the clock is not believed")
    return when


def _to_utc(value: datetime) -> datetime:
    # Naive datetimes come only from older files; they were written in UTC.
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the time cannot be converted to UTC") from None


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

Count = Annotated[int, Field(ge=0, le=2**63 - 1)]
"""A non-negative integer that fits 64 bits (counts, tokens, IDs)."""

Dollars = Annotated[float, Field(ge=0, allow_inf_nan=False)]
"""A finite, non-negative amount of US dollars."""


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

    input_tokens: Count = 0
    output_tokens: Count = 0
    cost_usd: Dollars = 0.0
    calls: Count = 0
    price_unknown: bool = False


class TodoItem(_Model):
    """One to-do item with its retry count.

    Attributes
    ----------
    id : int
        Unique in its list; an item saved without one gets the next free ID at load.
    text : str
    status : {"pending", "in_progress", "done", "failed"}
    retries : int
        How many times it moved to ``failed``.
    """

    id: Count
    text: CleanStr
    status: Literal["pending", "in_progress", "done", "failed"] = "pending"
    retries: Count = 0


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
    vision : str
        Whether the session sends figures to the model as images: "auto", "on" or
        "off" ("" if unknown).
    images_refused : str
        With vision "auto": the model and endpoint (``"model at URL"``) that refused
        image input in this session, so later requests to them go without images; ""
        when none did.
    figures : int
        Figures the session's code made (the last one is "figure <figures>").
    context_window : int
        The context window (tokens) the endpoint reported or refused with (0: none).
    context_window_of : str
        The model and endpoint (``"model at URL"``) that said it: the value is only a
        hint for that same model at that same configured endpoint.
    context_window_source : str
        "server" (reported) or "refusal" (named in a refusal); "" when none.
    handed_out : list of str
        The IDs of the ``run_python`` calls whose code ``%agent_cell`` put into a cell,
        oldest first (a reader that does not know the field ignores it).
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
        if not isinstance(value, list) or all(
            not isinstance(t, dict) or t.get("id") is not None for t in value
        ):
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
    replaced: Count
    transcript_length: Count


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
    turn: Count | None = None


class SessionRecord(_Model):
    """A whole session (see the module docstring).

    Keys this version does not know are kept (``model_extra``) and written back.
    ``messages`` and ``transcript`` hold plain message dicts; the store validates them
    (:mod:`jupyter_agent.store.validation`) rather than pydantic, which would copy them.
    """

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


class SessionInfo(_Model):
    """The core of a listing entry: ID, last update, summary (see :class:`SessionListing`)."""

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
    owner_role : str
        The database role the session belongs to (a team store; "" otherwise).
    shared_with : tuple of str
        The roles it is shared with to read, as far as this role may see (its owner sees
        all of them; a reader, its own roles); empty when not shared.
    parent : ForkOrigin or None
        The session this one was forked from, if any.
    clock : int or None
        The session's place in its store's order of changes, when the store keeps one
        (the JSON files do; see :func:`~jupyter_agent.store.paging.listing_order`).
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
    owner_role: str = ""
    shared_with: tuple[str, ...] = ()
    parent: ForkOrigin | None = None
    clock: int | None = None
