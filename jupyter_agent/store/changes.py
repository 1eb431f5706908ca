"""How a session record changes: extending the working context, compaction.

Pure functions from one :class:`~jupyter_agent.store.records.SessionRecord` to the
next (no I/O, no lease); :class:`~jupyter_agent.store.sessions.SessionStore` applies
them under the session's lease. The rules (spec: "Working Context and Full
Transcripts"):

* a normal save must *extend* the saved working context: its first ``len(saved)``
  messages equal the saved ones (after :func:`~jupyter_agent.store.to_message_dict`
  normalization), otherwise :class:`~jupyter_agent.errors.ContextMismatchError` (a
  ``ValueError``) and nothing changes; the new messages are appended to both
  ``messages`` and ``transcript``;
* a compaction replaces ``messages`` only and appends a
  :class:`~jupyter_agent.store.records.Compaction` event; the transcript is untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jupyter_agent.errors import ContextMismatchError
from jupyter_agent.store.messages import to_message_dict
from jupyter_agent.store.records import Compaction, SessionRecord, utc_now

__all__ = ["count_replaced", "extend_context", "replace_context"]


def extend_context(record: SessionRecord, incoming: Sequence[Any]) -> SessionRecord:
    """The record with ``incoming`` as its working context, new messages appended.

    Parameters
    ----------
    record : SessionRecord
        The saved record (not modified).
    incoming : sequence of dict or pydantic objects
        The whole current working context.

    Returns
    -------
    SessionRecord
        ``record`` itself when nothing is new, else a new record with the new
        messages appended to ``messages`` and ``transcript`` and ``updated_at`` now.

    Raises
    ------
    ContextMismatchError
        If ``incoming`` does not extend the saved working context.
    TypeError
        For a message that cannot be converted.
    """
    saved = record.messages
    if len(incoming) < len(saved):
        raise ContextMismatchError(
            record.id, len(incoming), f"{len(incoming)} messages given but {len(saved)} are saved"
        )
    for index, (given, kept) in enumerate(zip(incoming, saved, strict=False)):
        if given is kept or given == kept or to_message_dict(given) == kept:
            continue
        raise ContextMismatchError(
            record.id, index, f"the saved {kept.get('role')!r} message differs"
        )
    if len(incoming) == len(saved):
        return record
    new = [to_message_dict(m) for m in incoming[len(saved) :]]
    return record.model_copy(
        update={
            "messages": [*saved, *new],
            "transcript": [*record.transcript, *new],
            "updated_at": utc_now(),
        }
    )


def replace_context(
    record: SessionRecord,
    messages: list[dict[str, Any]],
    *,
    summary: str,
    replaced: int | None = None,
) -> SessionRecord:
    """The record after a compaction to ``messages`` (already normalized dicts).

    Parameters
    ----------
    record : SessionRecord
        The saved record (not modified).
    messages : list of dict
        The new working context.
    summary : str
        The summary recorded in the compaction event.
    replaced : int, optional
        How many working messages were replaced; default :func:`count_replaced`.

    Returns
    -------
    SessionRecord
        A new record: ``messages`` replaced, one more compaction event, the
        transcript unchanged, ``updated_at`` now.
    """
    now = utc_now()
    event = Compaction(
        at=now,
        summary=summary,
        replaced=count_replaced(record.messages, messages) if replaced is None else replaced,
        transcript_length=len(record.transcript),
    )
    return record.model_copy(
        update={
            "messages": messages,
            "compactions": [*record.compactions, event],
            "updated_at": now,
        }
    )


def count_replaced(old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> int:
    """How many messages of ``old`` a compaction to ``new`` replaced.

    Parameters
    ----------
    old, new : sequence of dict
        The working context before and after.

    Returns
    -------
    int
        The messages of ``old`` not kept in ``new`` as a common prefix or suffix.
    """
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while (
        suffix < min(len(old), len(new)) - prefix
        and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]
    ):
        suffix += 1
    return len(old) - prefix - suffix
