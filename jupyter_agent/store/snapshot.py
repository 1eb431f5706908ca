"""A session read from its snapshot and journal (:class:`Loaded`), and each change's entry.

``load`` reads both files once; ``snapshot_bytes`` writes the snapshot; ``save_point`` and
``compaction`` plan a change as a :data:`Change` (journal entry, session after it, changed
listing fields), applied by the file store under the lease.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jupyter_agent.errors import CorruptSessionError
from jupyter_agent.store.journal import (
    JOURNAL_VERSION,
    Item,
    decode_items,
    first_prompt_of,
    items_append,
    items_for,
    items_length,
    items_slice,
    parse_journal,
    resolve_items,
)
from jupyter_agent.store.messages import (
    check_messages,
    compaction_parts,
    decode_json,
    encode_json,
    new_messages,
)
from jupyter_agent.store.records import (
    SCHEMA_VERSION,
    Compaction,
    SessionRecord,
    SessionState,
    parse_record,
    record_head,
    utc_now,
    validated_record,
)

#: ``schema_version`` of snapshot files.
JOURNAL_SCHEMA_VERSION = 2
_META = ("updated_at", "summary", "title", "archived")


@dataclass
class Loaded:
    """A session as read from its files, and where those files stand."""

    record: SessionRecord
    items: list[Item]
    generation: str
    offset: int
    end: int
    torn: int
    snapshot_size: int
    state_json: dict[str, Any]
    first_prompt: str
    legacy: bool = False
    lines: int = 0
    check: bytes = b""
    clock: int = 0
    version: int = JOURNAL_VERSION


def clock_of(entries: list[dict[str, Any]], ref: dict[str, Any], updated_at: Any) -> int:
    """The store clock of a session's last change: its last entry's or snapshot's ``clock``,
    else (older records) ``updated_at`` in microseconds since the epoch."""
    for value in itertools.chain((e.get("clock") for e in reversed(entries)), [ref.get("clock")]):
        if type(value) is int and value >= 0:
            return value
    return int(updated_at.timestamp() * 1_000_000)


def _apply(entry: dict[str, Any], transcript: list[dict[str, Any]], items: list[Item],
           head: dict[str, Any], path: Path, line: str) -> None:
    """Replay one journal entry onto the transcript, the items and the head dict."""
    compact = entry.get("compact")
    if compact is not None:
        size = items_length(items)
        if (type(compact) is not dict or type(compact.get("head")) is not int
                or type(compact.get("tail")) is not int or compact["head"] < 0
                or compact["tail"] < 0 or compact["head"] + compact["tail"] > size
                or type(compact.get("event")) is not dict):
            raise CorruptSessionError(path, f"{line}: not a valid compaction")
        insert = check_messages(compact.get("insert", []), path, f"{line}: insert")
        items[:] = [*items_slice(items, 0, compact["head"]), *insert,
                    *items_slice(items, size - compact["tail"], size)]
        head["compactions"] = [*head["compactions"], compact["event"]]
    add = entry.get("add")
    if add is not None:  # validated when the line was parsed
        start = len(transcript)
        transcript.extend(add)
        items_append(items, start, len(transcript))
    state = entry.get("state")
    if state is not None:
        if type(state) is not dict or type(head["state"]) is not dict:
            raise CorruptSessionError(path, f"{line}: state must be an object")
        head["state"] = {**head["state"], **state}
    changed = entry.get("set")
    if changed is not None:
        if type(changed) is not dict:
            raise CorruptSessionError(path, f"{line}: set must be an object")
        head.update({k: v for k, v in changed.items() if k in _META})
    if "updated_at" in entry:
        head["updated_at"] = entry["updated_at"]


def _build(head: dict[str, Any], items: list[Item], transcript: list[dict[str, Any]],
           path: Path) -> SessionRecord:
    data = {k: v for k, v in head.items() if k not in ("context", "journal")}
    data["schema_version"] = SCHEMA_VERSION
    return validated_record(data, path, resolve_items(items, transcript), transcript)


def _snapshot(raw: bytes, path: Path, session_id: str) -> dict[str, Any] | SessionRecord:
    """The checked head of a snapshot, or the whole record of the one-file form."""
    data = decode_json(raw, path)
    if type(data) is not dict:
        raise CorruptSessionError(path, f"expected a JSON object, found {type(data).__name__}")
    version = data.get("schema_version")
    if "journal" in data and type(version) is int and version > JOURNAL_SCHEMA_VERSION:
        raise CorruptSessionError(path, f"it has schema_version {version}, but this "
                                        f"jupyter-agent reads only up to {JOURNAL_SCHEMA_VERSION}"
                                        "; upgrade jupyter-agent to open it")
    if version != JOURNAL_SCHEMA_VERSION or "journal" not in data:
        return parse_record(data, path, expected_id=session_id)
    if data.get("id") != session_id:
        raise CorruptSessionError(path, f"it holds session {data.get('id')!r}, not {session_id!r}")
    journal = data["journal"]
    if (type(journal) is not dict or type(journal.get("generation")) is not str
            or type(journal.get("offset")) is not int
            or type(journal.get("transcript_length")) is not int
            or type(journal.get("first_prompt", "")) is not str
            or type(journal.get("lines", 1)) is not int):
        raise CorruptSessionError(path, "its journal reference is missing or malformed")
    data.setdefault("compactions", [])
    data.setdefault("state", {})
    if type(data["compactions"]) is not list:
        raise CorruptSessionError(path, "compactions must be a list")
    return data


def load(snapshot_raw: bytes, snapshot_path: Path, read_journal: Callable[[], bytes | None],
         journal_path: Path, session_id: str) -> Loaded:
    """Read a session from its files' bytes, the cyclic garbage collector paused: it would
    cost a third of the load at 50,000 messages (many new objects, none garbage)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        head = _snapshot(snapshot_raw, snapshot_path, session_id)
        if isinstance(head, SessionRecord):
            return Loaded(head, items_for(head.messages, head.transcript), "", 0, 0, 0,
                          len(snapshot_raw), head.state.model_dump(mode="json"),
                          first_prompt_of(head.transcript), legacy=True,
                          clock=clock_of([], {}, head.updated_at))
        ref = head["journal"]
        journal = parse_journal(read_journal(), journal_path, session_id, ref,
                                decode_before=True)
        transcript: list[dict[str, Any]] = []
        for entry in journal.before:  # each add was validated when its line was parsed
            add = entry.get("add")
            if add is not None:
                transcript.extend(add)
        if len(transcript) != ref["transcript_length"]:
            raise CorruptSessionError(snapshot_path, f"it counts {ref['transcript_length']} "
                                      f"transcript messages, its journal has {len(transcript)}")
        items = decode_items(head.get("context", []), len(transcript), snapshot_path)
        first = len(journal.before) + 2
        for k, entry in enumerate(journal.after):
            _apply(entry, transcript, items, head, journal_path, f"line {first + k}")
        record = _build(head, items, transcript,
                        journal_path if journal.after else snapshot_path)
        first_prompt = ref.get("first_prompt") or first_prompt_of(transcript)
        return Loaded(record, items, journal.generation, journal.offset, journal.end,
                      journal.torn, len(snapshot_raw), record.state.model_dump(mode="json"),
                      first_prompt, lines=journal.lines, check=journal.check,
                      version=journal.version,
                      clock=clock_of(journal.after, ref, record.updated_at))
    finally:
        if paused:
            gc.enable()


def snapshot_bytes(loaded: Loaded) -> bytes:
    """The snapshot of ``loaded`` at its journal end (``loaded.offset`` is not used)."""
    record = loaded.record
    head = record_head(record)
    head["schema_version"] = JOURNAL_SCHEMA_VERSION
    out: dict[str, Any] = {}
    for key, value in head.items():
        if key == "compactions":
            out["context"] = loaded.items  # spans as [start, end], messages as they are
        out[key] = value
    out["journal"] = {"generation": loaded.generation, "offset": loaded.end,
                      "transcript_length": len(record.transcript),
                      "first_prompt": loaded.first_prompt, "lines": loaded.lines,
                      "clock": loaded.clock}
    return encode_json(out)


def listing_fields(snapshot_raw: bytes, snapshot_path: Path, journal_raw: bytes | None,
                   journal_path: Path, session_id: str) -> dict[str, Any]:
    """What a listing shows of a session; every journal line is checked but only those after
    the snapshot are parsed (never the transcript). Raises ``CorruptSessionError``."""
    head = _snapshot(snapshot_raw, snapshot_path, session_id)
    if isinstance(head, SessionRecord):
        return _fields(head, len(head.transcript), first_prompt_of(head.transcript),
                       clock_of([], {}, head.updated_at), None)
    ref = head["journal"]
    journal = parse_journal(journal_raw, journal_path, session_id, ref, decode_before=False)
    transcript: list[dict[str, Any]] = []
    items = decode_items(head.get("context", []), ref["transcript_length"], snapshot_path)
    first_line = journal.lines - len(journal.after) + 1
    for k, entry in enumerate(journal.after):
        _apply(entry, transcript, items, head, journal_path, f"line {first_line + k}")
    record = _build(head, [], [], snapshot_path)
    return _fields(record, ref["transcript_length"] + len(transcript),
                   ref.get("first_prompt") or first_prompt_of(transcript),
                   clock_of(journal.after, ref, record.updated_at),
                   [journal.generation, journal.lines, journal.check.decode("ascii")])


Change = tuple[dict[str, Any], Loaded, dict[str, Any], Callable[[], None] | None]
"""``(entry, session after it, changed listing fields, finish)``: ``finish`` is called once
the entry is on disk, to complete the session in place (no copy of long lists per save)."""


def save_point(loaded: Loaded, incoming: Sequence[Any] | None,
               state: SessionState | None) -> Change | None:
    """The entry of a save point; raises as :func:`~jupyter_agent.store.messages.new_messages`."""
    record = loaded.record
    added, kept = new_messages(record.id, record.messages,
                               record.messages if incoming is None else incoming)
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


def _fields(r: SessionRecord, count: int, first: str, clock: int,
            at: list[Any] | None) -> dict[str, Any]:
    return {"created_at": r.created_at, "updated_at": r.updated_at, "summary": r.summary,
            "title": r.title, "archived": r.archived, "message_count": count,
            "cost_usd": r.state.usage.cost_usd, "tool_calls": r.state.tool_calls,
            "first_prompt": first, "parent": None if r.parent is None else r.parent.model_dump(),
            "clock": clock, "at": at}


def listing_of(loaded: Loaded) -> dict[str, Any]:
    """The index fields of ``loaded`` (what ``listing_fields`` reads back from files)."""
    return _fields(loaded.record, len(loaded.record.transcript), loaded.first_prompt,
                   loaded.clock, [loaded.generation, loaded.lines, loaded.check.decode("ascii")])


def plan_update(loaded: Loaded, fields: dict[str, Any], touch: bool) -> Change | None:
    """The entry setting ``fields`` (``touch``: and ``updated_at`` to now); ``None`` when
    nothing would change."""
    record = loaded.record
    if not touch and all(getattr(record, k) == v for k, v in fields.items()):
        return None
    entry: dict[str, Any] = {"set": dict(fields)}
    update = dict(fields)
    if touch:
        now = utc_now()
        entry["updated_at"] = now.isoformat(timespec="microseconds")
        update["updated_at"] = now
    new = replace(loaded, record=record.model_copy(update=update))
    return entry, new, listing_of(new), None
