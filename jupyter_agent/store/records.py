"""The session record's one-file JSON form, its versions and upgrades.

The models themselves (:class:`SessionRecord`, :class:`SessionState`, ...) are defined in
:mod:`jupyter_agent.store.models` and re-exported here; :class:`SessionRecord` is what
:meth:`~jupyter_agent.store.Store.load_session` returns.
Its *one-file form* (:func:`dump_record`, :func:`parse_record`) is the layout of
jupyter-agent 0.1 and of exports: one JSON object with the top-level keys, in this order,
``schema_version``, ``id``, ``created_at``, ``updated_at``, ``summary``, ``title``,
``archived``, ``project_root``, ``messages`` (the working context), ``transcript``
(every message ever saved), ``compactions``, ``state`` (the checkpoint), ``parent``
(when forked), then any keys this version does not know, kept as they were. The file
backend stores sessions differently (see :mod:`jupyter_agent.store.journal`), but reads
this form and converts it on the first write. Datetimes are timezone-aware UTC, written
as ISO 8601 with offset (``"2026-11-30T01:38:27.123456+00:00"``).

Validation is complete: counts, tokens and costs are non-negative and
finite, integers fit 64 bits, timestamps convert to UTC, every message has the shape of
a Chat Completions message; todo items written without an ``id`` get the next free one.
Whatever validates can be written back and displayed.

Versioning: :data:`SCHEMA_VERSION` is the version of this form. A file is read by
applying :data:`UPGRADES` (``{from_version: function}``) *before* validation. A file
without ``schema_version`` is version 0 (only ``id``, ``created_at``, ``updated_at``,
``summary`` and ``messages``): it loads with ``transcript = messages``, no compactions,
an empty state. A file from a *newer* version is refused with
:class:`~jupyter_agent.errors.CorruptSessionError` and never rewritten.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from jupyter_agent.errors import CorruptSessionError
from jupyter_agent.store import models
from jupyter_agent.store.jsonio import decode_json, depth_problem, encode_json
from jupyter_agent.store.models import CLOCK_SKEW as CLOCK_SKEW
from jupyter_agent.store.models import SCHEMA_VERSION as SCHEMA_VERSION
from jupyter_agent.store.models import Compaction as Compaction
from jupyter_agent.store.models import ForkOrigin as ForkOrigin
from jupyter_agent.store.models import LeaseHolder as LeaseHolder
from jupyter_agent.store.models import SessionInfo as SessionInfo
from jupyter_agent.store.models import SessionListing as SessionListing
from jupyter_agent.store.models import SessionRecord as SessionRecord
from jupyter_agent.store.models import SessionState as SessionState
from jupyter_agent.store.models import TodoItem as TodoItem
from jupyter_agent.store.models import Usage as Usage
from jupyter_agent.store.models import check_not_future as check_not_future
from jupyter_agent.store.models import utc_now as utc_now
from jupyter_agent.store.validation import check_messages

__all__ = [  # the models are re-exported
    *models.__all__,
    "UPGRADES",
    "dump_record",
    "parse_record",
    "record_from_dict",
    "upgrade_record",
    "validation_reason",
]

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
    return out  # lone surrogates of the older writer were replaced by decode_json


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

_HEAD_KEYS = (
    "schema_version", "id", "created_at", "updated_at", "summary", "title", "archived",
    "project_root",
)
_KNOWN = frozenset((*_HEAD_KEYS, "messages", "transcript", "compactions", "state", "parent"))


def validation_reason(err: ValidationError) -> str:
    """The first problems of a pydantic error, as ``"state.usage.cost_usd: ..."``."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}"
        for e in err.errors(include_input=False, include_url=False)[:3]
    )


def record_from_dict(data: dict[str, Any], path: Path, *,
                     expected_id: str | None = None) -> SessionRecord:
    """Validate a decoded one-file record (already upgraded) and build the record.

    ``messages`` and ``transcript`` are checked by
    :func:`~jupyter_agent.store.validation.check_messages` and kept as they are (no
    copy); everything else goes through the pydantic models.

    Raises
    ------
    CorruptSessionError
        Naming ``path``, for anything that is not a valid record.
    """
    data = dict(data)
    messages = check_messages(data.pop("messages", []), path, "messages")
    transcript = check_messages(data.pop("transcript", messages), path, "transcript")
    problem = depth_problem(data)
    if problem:
        raise CorruptSessionError(path, f"not a valid session record ({problem})")
    try:
        record = SessionRecord.model_validate(data)
    except ValidationError as err:
        raise CorruptSessionError(
            path, f"not a valid session record ({validation_reason(err)})") from None
    if expected_id is not None and record.id != expected_id:
        raise CorruptSessionError(path, f"it holds session {record.id!r}, not {expected_id!r}")
    record.messages = messages
    record.transcript = transcript
    return record


def parse_record(raw: bytes, path: Path, *, expected_id: str | None = None) -> SessionRecord:
    """Decode, upgrade and validate a record in its one-file form.

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
        Lone surrogates of an older file are replaced by U+FFFD; unknown top-level keys
        are kept.

    Raises
    ------
    CorruptSessionError
        Naming ``path``, for anything that is not a valid record (the file is not touched).
    """
    data = decode_json(raw, path)
    if not isinstance(data, dict):
        raise CorruptSessionError(path, f"expected a JSON object, found {type(data).__name__}")
    return record_from_dict(upgrade_record(data, path), path, expected_id=expected_id)


def record_head(record: SessionRecord) -> dict[str, Any]:
    """Everything of a record but ``messages`` and ``transcript``, JSON-ready, in file order.

    ``compactions``, ``state`` and ``parent`` (``None`` when not forked) follow the
    head keys; unknown keys come last.
    """
    data = record.model_dump(mode="json", exclude={"messages", "transcript"})
    head = {key: data[key] for key in _HEAD_KEYS}
    head["compactions"] = data["compactions"]
    head["state"] = data["state"]
    head["parent"] = data["parent"]
    for key, value in (record.model_extra or {}).items():
        if key not in _KNOWN:
            head[key] = value
    return head


def dump_record(record: SessionRecord) -> bytes:
    """The one-file JSON form of a record (compact UTF-8, fixed key order).

    This is what exports write and what jupyter-agent 0.1 reads. ``parent`` is written
    only for a fork; unknown keys the record was loaded with follow, unchanged.

    Raises
    ------
    TypeError, ValueError
        If the record holds something JSON cannot (it never does once validated).
    """
    head = record_head(record)
    out: dict[str, Any] = {key: head.pop(key) for key in _HEAD_KEYS}
    out["messages"] = record.messages
    out["transcript"] = record.transcript
    out["compactions"] = head.pop("compactions")
    out["state"] = head.pop("state")
    parent = head.pop("parent")
    if parent is not None:
        out["parent"] = parent
    out.update(head)
    return encode_json(out)
