"""How a session changes: extending the working context, compaction.

Pure functions (no I/O, no lease); the store applies their results under the session's
lease. The rules:

* a save must *extend* the saved working context: its first ``len(saved)`` messages equal
  the saved ones (after :func:`~jupyter_agent.store.to_message_dict` normalization),
  otherwise :class:`~jupyter_agent.errors.ContextMismatchError` (a ``ValueError``) and
  nothing changes; what follows is new, and must have the shape of a Chat Completions
  message (:class:`~jupyter_agent.errors.InvalidMessageError` otherwise), so that
  nothing saved can fail to load;
* a compaction replaces the working context only; what it keeps of the old one is found
  as a common prefix and suffix (:func:`compaction_parts`);
* a whole record imported as a new session (forks, migrations) is checked the same way
  (:func:`check_importable`), whichever backend receives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jupyter_agent.errors import ContextMismatchError, InvalidMessageError
from jupyter_agent.store.jsonio import json_problem
from jupyter_agent.store.messages import to_message_dict
from jupyter_agent.store.records import SessionRecord, record_head
from jupyter_agent.store.validation import message_problem

__all__ = ["check_importable", "compaction_parts", "count_replaced", "new_messages",
           "normalized"]


def normalized(messages: Sequence[Any], first_index: int = 0) -> list[dict[str, Any]]:
    """Messages converted with :func:`to_message_dict` and checked.

    Parameters
    ----------
    messages : sequence of dict or pydantic objects
    first_index : int
        Position of the first one in the caller's list (for error messages).

    Raises
    ------
    InvalidMessageError
        For a message that is not a Chat Completions message or holds a value JSON
        cannot (an integer beyond 64 bits, NaN, an object that is not JSON), or values
        nested too deeply to be read back.
    """
    out = []
    for k, message in enumerate(messages):
        try:
            data = to_message_dict(message)
        except (TypeError, ValueError) as err:
            raise InvalidMessageError(first_index + k, str(err)) from None
        except RecursionError:  # deeper than a load could read back
            raise InvalidMessageError(first_index + k, "values are nested too deeply") from None
        problem = message_problem(data) or json_problem(data)
        if problem:
            raise InvalidMessageError(first_index + k, problem)
        out.append(data)
    return out


def new_messages(session_id: str, saved: list[dict[str, Any]],
                 incoming: Sequence[Any]) -> tuple[list[dict[str, Any]], list[Any] | None]:
    """The messages of ``incoming`` beyond the saved working context, normalized.

    Parameters
    ----------
    session_id : str
        For error messages.
    saved : list of dict
        The saved working context.
    incoming : sequence of dict or pydantic objects
        The whole current working context.

    Returns
    -------
    (list of dict, list or None)
        The new messages (empty when nothing is new), and the caller's own objects for the
        saved part when they equal the saved messages as they are (no conversion needed):
        the store keeps those, so that the next save of the same list is checked by
        identity, at C speed, instead of message by message.

    Raises
    ------
    ContextMismatchError
        If ``incoming`` does not extend ``saved``.
    InvalidMessageError
        For a new message that could not be saved.
    """
    n = len(saved)
    if len(incoming) < n:
        raise ContextMismatchError(
            session_id, len(incoming), f"{len(incoming)} messages given but {n} are saved")
    prefix = list(incoming[:n]) if not isinstance(incoming, list) else incoming[:n]
    same = prefix == saved  # identical objects compare at C speed
    if not same:
        for index, (given, kept) in enumerate(zip(incoming, saved, strict=False)):
            if given is kept or given == kept:
                continue
            try:
                same = to_message_dict(given) == kept
            except (TypeError, ValueError, RecursionError):
                same = False
            if not same:
                raise ContextMismatchError(
                    session_id, index, f"the saved {kept.get('role')!r} message differs")
    return normalized(incoming[n:], n), prefix if same else None


def compaction_parts(old: Sequence[dict[str, Any]],
                     new: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """``(prefix, suffix)``: how many messages of ``new`` are kept from the start and the
    end of ``old`` (they never overlap)."""
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < min(len(old), len(new)) - prefix
        and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]
    ):
        suffix += 1
    return prefix, suffix


def count_replaced(old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> int:
    """How many messages of ``old`` a compaction to ``new`` replaced (those not kept as a
    common prefix or suffix)."""
    prefix, suffix = compaction_parts(old, new)
    return len(old) - prefix - suffix


def check_importable(record: SessionRecord) -> None:
    """Refuse a record that could not be loaded back once saved.

    Parameters
    ----------
    record : SessionRecord
        A whole record to import (its messages are plain dicts, as loads return them).

    Raises
    ------
    InvalidMessageError
        For a message of ``messages`` or ``transcript`` that is not a Chat Completions
        message or holds a value JSON cannot; ``index`` is its position in that list.
    ValueError
        If another part of the record holds something JSON cannot (an unknown key with
        a NaN, say).
    """
    for field in ("messages", "transcript"):
        for k, message in enumerate(getattr(record, field)):
            problem = message_problem(message) or json_problem(message)
            if problem:
                raise InvalidMessageError(k, f"{field}: {problem}")
    problem = json_problem(record_head(record))
    if problem:
        raise ValueError(f"session {record.id!r} cannot be saved: {problem}")
