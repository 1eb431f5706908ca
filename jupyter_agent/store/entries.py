"""The journal entry of each change, and the session it leads to.

Pure functions from a :class:`~jupyter_agent.store.snapshot.Loaded` session to a
:data:`Change`: the journal entry to append, the session after it, and the listing fields
it changed. The store appends the entry under the lease; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from jupyter_agent.store.changes import compaction_parts, new_messages
from jupyter_agent.store.journal import first_prompt_of, items_append, items_length, items_slice
from jupyter_agent.store.records import Compaction, SessionState, utc_now
from jupyter_agent.store.snapshot import Loaded

__all__ = ["Change", "compaction", "save_point"]

Change = tuple[dict[str, Any], Loaded, dict[str, Any], Callable[[], None] | None]
"""``(entry, session after it, changed listing fields, finish)``: ``finish``, when given,
is called once the entry is on disk; it completes the session after it in place (appending
to long lists there, rather than copying them for every save)."""


def save_point(loaded: Loaded, incoming: Sequence[Any],
               state: SessionState | None) -> Change | None:
    """The entry of a save point: new messages and what changed in the checkpoint.

    Returns
    -------
    Change or None
        ``None`` when nothing is new.

    Raises
    ------
    ContextMismatchError, InvalidMessageError
        See :func:`~jupyter_agent.store.changes.new_messages`.
    """
    record = loaded.record
    added, kept = new_messages(record.id, record.messages, incoming)
    state_json = loaded.state_json
    patch: dict[str, Any] = {}
    if state is not None and state != record.state:
        state_json = state.model_dump(mode="json")
        patch = {k: v for k, v in state_json.items() if loaded.state_json.get(k) != v}
    if not added and not patch:
        return None
    now = utc_now()
    entry: dict[str, Any] = {}
    update: dict[str, Any] = {"updated_at": now}
    fields: dict[str, Any] = {"updated_at": now}
    items = loaded.items
    first_prompt = loaded.first_prompt
    messages = record.messages if kept is None else kept
    if added:
        entry["add"] = added
        size = len(record.transcript)
        update["messages"] = messages
        items = list(items)
        items_append(items, size, size + len(added))
        fields["message_count"] = size + len(added)
        if not first_prompt:
            first_prompt = first_prompt_of(added)
            fields["first_prompt"] = first_prompt
    if patch:
        assert state is not None
        entry["state"] = patch
        update["state"] = state
        fields["cost_usd"] = state.usage.cost_usd
        fields["tool_calls"] = state.tool_calls
    entry["updated_at"] = now.isoformat(timespec="microseconds")
    new = replace(loaded, record=record.model_copy(update=update), items=items,
                  state_json=state_json, first_prompt=first_prompt)

    def finish() -> None:  # the lists are the cache's own: the old session is dropped
        messages.extend(added)
        new.record.transcript.extend(added)

    return entry, new, fields, finish if added else None


def compaction(loaded: Loaded, new_context: list[dict[str, Any]], summary: str,
               replaced: int | None) -> Change:
    """The entry of a compaction to ``new_context`` (normalized messages): what it keeps of
    the old working context as a prefix and a suffix, and the messages in between."""
    record = loaded.record
    head, tail = compaction_parts(record.messages, new_context)
    now = utc_now()
    event = Compaction(at=now, summary=summary,
                       replaced=len(record.messages) - head - tail if replaced is None
                       else replaced, transcript_length=len(record.transcript))
    insert = new_context[head:len(new_context) - tail]
    size = items_length(loaded.items)
    items = [*items_slice(loaded.items, 0, head), *insert,
             *items_slice(loaded.items, size - tail, size)]
    entry = {"compact": {"head": head, "tail": tail, "insert": insert,
                         "event": event.model_dump(mode="json")},
             "updated_at": now.isoformat(timespec="microseconds")}
    new = replace(loaded, items=items, record=record.model_copy(update={
        "messages": new_context, "compactions": [*record.compactions, event],
        "updated_at": now}))
    return entry, new, {"updated_at": now}, None
