"""The file format of a saved session: a JSON Lines journal beside a snapshot (design §20).

A session ``<id>`` is two files in ``sessions/``:

``<id>.jsonl`` -- the journal, append-only
    Line 1 is a header, ``{"jupyter_agent_journal": 2, "id": ..., "generation": ...}``.
    Every later line is one *entry*, one JSON object written by one ``write`` and
    ``fsync``-ed before the call that wrote it returns. An entry holds any of:

    * ``"add"``: messages appended to the transcript and to the working context;
    * ``"compact"``: ``{"head": p, "tail": s, "insert": [...], "event": {...}}``, the
      working context becomes its first ``p`` messages, then ``insert``, then its last
      ``s`` (the compaction event is recorded; the transcript is untouched);
    * ``"state"``: the top-level fields of the checkpoint that changed;
    * ``"set"``: ``summary``, ``title`` or ``archived``;
    * ``"updated_at"``: the new last-update time.

    A save point (messages and checkpoint) is therefore one line, and a save writes only
    its new bytes. The transcript is never rewritten.

``<id>.json`` -- the snapshot, replaced atomically
    The record without its transcript, as of byte ``journal.offset`` of the journal:
    the head keys of the one-file form (``schema_version`` 2 so that jupyter-agent 0.1
    refuses it rather than misreads it), ``context`` (the working context as
    ``[start, end]`` spans of transcript positions and, for messages that exist only in
    the working context such as compaction summaries, the messages themselves),
    ``compactions``, ``state``, ``parent``, unknown keys kept from older files, and
    ``journal`` (``generation``, ``offset``, ``transcript_length``, ``first_prompt``).
    It is rewritten when the journal has grown past it by
    ``max(SNAPSHOT_MIN_BYTES, SNAPSHOT_RATIO x snapshot size)`` (see ``benchmarks/``),
    so a reader that wants the session without its transcript (the listing) reads a
    small file and a short tail.

Loading reads both files once: the transcript from every ``add`` of the journal, the
rest from the snapshot plus the entries after its offset. A last line without its
newline, or that does not parse, is a write cut short by a crash: it was never
acknowledged, so it is ignored (and cut off by the next writer, under the lease). Any
other damage -- a bad line followed by good ones, a journal shorter than its snapshot
says, another generation -- is a :class:`~jupyter_agent.errors.CorruptSessionError`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from jupyter_agent.errors import CorruptSessionError
from jupyter_agent.store.jsonio import encode_json
from jupyter_agent.store.messages import message_text
from jupyter_agent.store.validation import check_messages

__all__ = [
    "FIRST_PROMPT_CHARS",
    "JOURNAL_SCHEMA_VERSION",
    "SNAPSHOT_MIN_BYTES",
    "SNAPSHOT_RATIO",
    "Item",
    "Journal",
    "first_prompt_of",
    "header_line",
    "items_for",
    "items_length",
    "items_slice",
    "new_generation",
    "parse_journal",
    "resolve_items",
]

#: ``schema_version`` of snapshot files and journals.
JOURNAL_SCHEMA_VERSION = 2
#: The journal may grow this far past its snapshot before the snapshot is rewritten...
SNAPSHOT_MIN_BYTES = 64 * 1024
#: ...or this many times the snapshot's own size, whichever is larger.
SNAPSHOT_RATIO = 4
#: Characters of the first user prompt kept for listings.
FIRST_PROMPT_CHARS = 200
_HEADER_KEY = "jupyter_agent_journal"

Item = tuple[int, int] | dict[str, Any]
"""One run of the working context: a ``(start, end)`` span of transcript positions, or a
message that exists only in the working context."""


def new_generation() -> str:
    """A fresh journal generation (16 hex digits): pairs a snapshot with its journal."""
    return secrets.token_hex(8)


def header_line(session_id: str, generation: str) -> bytes:
    """The first line of a journal."""
    return encode_json({_HEADER_KEY: JOURNAL_SCHEMA_VERSION, "id": session_id,
                        "generation": generation}) + b"\n"


def first_prompt_of(messages: list[dict[str, Any]]) -> str:
    """Text of the first user message, cut to :data:`FIRST_PROMPT_CHARS` ("" if none)."""
    for m in messages:
        if m.get("role") == "user":
            return message_text(m)[:FIRST_PROMPT_CHARS]
    return ""


# --------------------------------------------------------------------------- context items
def items_length(items: list[Item]) -> int:
    """How many messages the items stand for."""
    return sum(i[1] - i[0] if type(i) is tuple else 1 for i in items)


def items_slice(items: list[Item], start: int, stop: int) -> list[Item]:
    """The items standing for messages ``start:stop`` of the working context."""
    out: list[Item] = []
    pos = 0
    for item in items:
        size = item[1] - item[0] if type(item) is tuple else 1
        lo, hi = max(start - pos, 0), min(stop - pos, size)
        if lo < hi:
            if type(item) is tuple:
                out.append((item[0] + lo, item[0] + hi))
            else:
                out.append(item)
        pos += size
        if pos >= stop:
            break
    return out


def items_append(items: list[Item], start: int, end: int) -> None:
    """Append transcript positions ``start:end`` (merged into a preceding span)."""
    if start >= end:
        return
    last = items[-1] if items else None
    if type(last) is tuple and last[1] == start:
        items[-1] = (last[0], end)
    else:
        items.append((start, end))


def resolve_items(items: list[Item], transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The working context the items stand for."""
    if len(items) == 1 and type(items[0]) is tuple and items[0] == (0, len(transcript)):
        return list(transcript)
    out: list[dict[str, Any]] = []
    for item in items:
        if type(item) is tuple:
            out.extend(transcript[item[0]:item[1]])
        else:
            out.append(item)  # type: ignore[arg-type]
    return out


def items_for(messages: list[dict[str, Any]], transcript: list[dict[str, Any]]) -> list[Item]:
    """Items for a working context: its common prefix and suffix with the transcript as
    spans, what lies between as messages (for records of the one-file form)."""
    n, t = len(messages), len(transcript)
    if n == t and messages == transcript:
        return [(0, t)] if t else []
    p = 0
    while p < min(n, t) and messages[p] == transcript[p]:
        p += 1
    s = 0
    while s < min(n, t) - p and messages[n - 1 - s] == transcript[t - 1 - s]:
        s += 1
    items: list[Item] = []
    items_append(items, 0, p)
    items.extend(messages[p:n - s])
    items_append(items, t - s, t)
    return items


def encode_items(items: list[Item]) -> list[Any]:
    """The snapshot's ``context``: spans as ``[start, end]``, messages as they are."""
    return [list(i) if type(i) is tuple else i for i in items]


def decode_items(raw: Any, transcript_length: int, path: Path) -> list[Item]:
    """Read a snapshot's ``context`` back, checking spans and messages.

    Raises
    ------
    CorruptSessionError
    """
    if type(raw) is not list:
        raise CorruptSessionError(path, "context must be a list")
    items: list[Item] = []
    for k, item in enumerate(raw):
        if type(item) is list:
            if (len(item) != 2 or type(item[0]) is not int or type(item[1]) is not int
                    or not 0 <= item[0] < item[1] <= transcript_length):
                raise CorruptSessionError(path, f"context[{k}] is not a span of the transcript")
            items.append((item[0], item[1]))
        else:
            check_messages([item], path, f"context[{k}]")
            items.append(item)
    return items


# --------------------------------------------------------------------------- reading
@dataclass
class Journal:
    """A parsed journal (see :func:`parse_journal`).

    Attributes
    ----------
    generation : str
    before : list of dict
        Entries that lie before the snapshot's offset (only their ``add`` still matters).
    after : list of dict
        Entries from the offset on (replayed in full).
    end : int
        Byte offset just past the last whole, valid entry.
    torn : int
        Bytes after ``end`` (a write cut short; 0 when the journal is whole).
    """

    generation: str
    before: list[dict[str, Any]] = field(default_factory=list)
    after: list[dict[str, Any]] = field(default_factory=list)
    end: int = 0
    torn: int = 0


_NEWLINE_TO_COMMA = bytes.maketrans(b"\n", b",")


def _parse_all(whole: bytes) -> list[Any] | None:
    """All lines of ``whole`` (each ending with a newline) in one ``orjson`` call, or
    ``None`` if some line does not parse. JSON text never holds a raw newline, so the
    lines joined by commas inside brackets are one JSON array."""
    try:
        if whole.count(b"\n") < 64:  # a few lines: no need to copy them into one array
            return [orjson.loads(line) for line in whole.split(b"\n")[:-1]]
        buf = bytearray(b"[")
        buf += whole.translate(_NEWLINE_TO_COMMA)
        buf[-1] = 93  # "]" in place of the last comma
        values: list[Any] = orjson.loads(buf)
    except orjson.JSONDecodeError:
        return None
    return values


def _parse_lines(whole: bytes, path: Path) -> tuple[list[Any], int]:
    """Parse line by line (the slow path, for a journal with a bad line): return the
    values of the lines before a bad *last* line and where that line starts.

    Raises
    ------
    CorruptSessionError
        If a bad line is followed by others.
    """
    values: list[Any] = []
    pos = 0
    lines = whole.split(b"\n")[:-1]
    for k, line in enumerate(lines):
        try:
            values.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            if k == len(lines) - 1:
                return values, pos  # a torn last line
            raise CorruptSessionError(
                path, f"line {k + 1} is not valid JSON, and lines follow it") from None
        pos += len(line) + 1
    return values, pos


def parse_journal(raw: bytes, path: Path, *, session_id: str, offset: int,
                  generation: str | None) -> Journal:
    """Split a journal's bytes into header, entries before and after ``offset``.

    Parameters
    ----------
    raw : bytes
        The journal.
    path : pathlib.Path
        For messages.
    session_id : str
        The header must name it.
    offset : int
        The snapshot's ``journal.offset`` (a line boundary).
    generation : str or None
        The snapshot's generation; ``None`` accepts any.

    Returns
    -------
    Journal

    Raises
    ------
    CorruptSessionError
    """
    whole = raw if raw.endswith(b"\n") else raw[: raw.rfind(b"\n") + 1]
    values = _parse_all(whole) if whole else []
    if values is None:
        values, used = _parse_lines(whole, path)
    else:
        used = len(whole)
    header = values[0] if values else None
    header_end = whole.find(b"\n") + 1
    if (type(header) is not dict or header.get(_HEADER_KEY) != JOURNAL_SCHEMA_VERSION
            or header.get("id") != session_id or type(header.get("generation")) is not str):
        if type(header) is dict and type(header.get(_HEADER_KEY)) is int \
                and header[_HEADER_KEY] > JOURNAL_SCHEMA_VERSION:
            raise CorruptSessionError(path, "it was written by a newer jupyter-agent; "
                                            "upgrade jupyter-agent to open it")
        raise CorruptSessionError(path, f"not a journal of session {session_id!r}")
    if generation is not None and header["generation"] != generation:
        raise CorruptSessionError(path, "it does not belong to the snapshot beside it")
    if offset < header_end or offset > used or whole[offset - 1:offset] != b"\n":
        raise CorruptSessionError(
            path, f"it ends before byte {offset}, where its snapshot says it continues")
    split = len(values) - whole.count(b"\n", offset, used)  # the tail is the short part
    before, after = values[1:split], values[split:]
    for k, entry in enumerate(values):
        if type(entry) is not dict:
            raise CorruptSessionError(path, f"line {k + 1} is not a JSON object")
    end = used
    return Journal(header["generation"], before, after, end, len(raw) - end)
