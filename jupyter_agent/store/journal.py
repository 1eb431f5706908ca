"""The journal format: ``sessions/<id>.jsonl``, append-only, beside its snapshot.

Every line is ``{"n": number, ...entry..., "c": crc}``: its 1-based line number and the
CRC-32 of the bytes before ``,"c"``, so each line proves its place and content unparsed.
Line 1 is a header (``jupyter_agent_journal`` 3, ``id``, ``generation``). An entry holds any
of ``add`` (messages appended to transcript and working context), ``compact`` (``head``,
``tail``, ``insert``, ``event``: the context becomes its first ``head`` messages, then
``insert``, then its last ``tail``), ``state`` (changed checkpoint fields), ``set``
(summary/title/archived), ``updated_at`` and ``clock``. A save point is one line.

Loading, damage and the 0.2 format: docs/design.md, "Session files: a journal beside a
snapshot".
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NotRequired, TypedDict

import msgspec
import orjson

from jupyter_agent.errors import CorruptSessionError, TooLargeError
from jupyter_agent.store.messages import (
    JOURNAL_CAP,
    LINE_CAP,
    check_messages,
    compaction_parts,
    encode_json,
    is_core_message,
    message_text,
)

#: The header's ``jupyter_agent_journal`` of journals whose every line is checked...
JOURNAL_VERSION = 3
#: ...and of journals of jupyter-agent 0.2 (no checks; upgraded by their next write).
PREVIOUS_JOURNAL_VERSION = 2
#: The journal may grow this far past its snapshot before the snapshot is rewritten...
SNAPSHOT_MIN_BYTES = 64 * 1024
#: ...or this many times the snapshot's own size, whichever is larger.
SNAPSHOT_RATIO = 4
#: Characters of the first user prompt kept for listings.
FIRST_PROMPT_CHARS = 200
_HEADER_KEY = "jupyter_agent_journal"
_CHECK = b',"c":"'
_TRAILER = len(b',"c":"01234567"}')
_NUMBER = re.compile(rb'\{"n":([0-9]{1,15}),')

Line = bytes | memoryview
"""A journal line without its newline (a view into the journal's bytes, or a copy)."""

Item = tuple[int, int] | dict[str, Any]
"""One run of the working context: a ``(start, end)`` span of transcript positions, or a
message that exists only in the working context."""


def refuse_over(path: Path, size: int, cap: int, what: str) -> None:
    """``TooLargeError`` (nothing written) when ``size`` bytes of ``what`` exceed ``cap``."""
    if size > cap:
        raise TooLargeError(path, size, cap, what, written=True)


def _add_chunks(messages: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """``messages`` in runs whose ``add`` line stays under :data:`LINE_CAP` (or one message)."""
    chunk: list[dict[str, Any]] = []
    size = 0
    for message in messages:
        data = len(encode_json(message))
        if chunk and size + data + 64 > LINE_CAP:
            yield chunk
            chunk, size = [], 0
        chunk.append(message)
        size += data + 1
    if chunk:
        yield chunk


def fresh_journal(session_id: str, generation: str, transcript: list[dict[str, Any]],
                  path: Path) -> bytes:
    """A whole journal of ``transcript`` in ``add`` lines after the header, which holds
    ``generation`` (the snapshot names it too); ``TooLargeError`` naming ``path`` for a
    line over :data:`LINE_CAP` or a journal over :data:`JOURNAL_CAP`."""
    journal = encode_line(1, {_HEADER_KEY: JOURNAL_VERSION, "id": session_id,
                              "generation": generation})
    for number, chunk in enumerate(_add_chunks(transcript), start=2):
        line = encode_line(number, {"add": chunk})
        refuse_over(path, len(line) - 1, LINE_CAP, "journal line")
        journal += line
    refuse_over(path, len(journal), JOURNAL_CAP, "journal")
    return journal


def first_prompt_of(messages: list[dict[str, Any]]) -> str:
    """Text of the first user message, cut to :data:`FIRST_PROMPT_CHARS` ("" if none)."""
    return next((message_text(m)[:FIRST_PROMPT_CHARS] for m in messages
                 if m.get("role") == "user"), "")


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
    p, s = compaction_parts(transcript, messages)
    items: list[Item] = []
    items_append(items, 0, p)
    items.extend(messages[p:n - s])
    items_append(items, t - s, t)
    return items


def decode_items(raw: Any, transcript_length: int, path: Path) -> list[Item]:
    """Read a snapshot's ``context`` back, checking spans and messages."""
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


# --------------------------------------------------------------------------- lines
def encode_line(number: int, entry: dict[str, Any]) -> bytes:
    """Journal line ``number`` (the header is 1) holding ``entry``, newline included."""
    add = entry.get("add")
    if add is not None and not all(map(is_core_message, add)):
        entry = {**entry, "extra": 1}
    body = encode_json({"n": number, **entry})[:-1]
    return b'%s,"c":"%08x"}\n' % (body, zlib.crc32(body))


def line_problem(line: Line, number: int) -> str | None:
    """Why complete line ``number`` is not the checked line that belongs there, or ``None``."""
    if line[-_TRAILER:-10] != _CHECK or line[-2:] != b'"}':
        return "it has no checksum (it was cut short, changed or inserted)"
    if line[-10:-2] != b"%08x" % zlib.crc32(line[:-_TRAILER]):
        return "its checksum does not match its content (it was changed or damaged)"
    match = _NUMBER.match(bytes(line[:32]))
    if match is None:
        return "it has no line number"
    found = int(match.group(1))
    if found == number:
        return None
    if found < number:
        return f"it repeats line {found} (a line was duplicated or moved)"
    missing = f"line {number}" if found == number + 1 else f"lines {number}-{found - 1}"
    return f"it is line {found}: {missing} missing (removed or moved)"


def check_lines(lines: list[Line], first: int, path: Path) -> None:
    """Check ``lines`` are lines ``first``, ``first + 1``, ... (CRC-32 and number, unparsed);
    ``CorruptSessionError`` naming the first line at fault and what is wrong."""
    crc32 = zlib.crc32
    for number, line in enumerate(lines, first):
        start = b'{"n":%d,' % number
        if (line[-10:-2] != b"%08x" % crc32(line[:-_TRAILER])
                or line[-_TRAILER:-10] != _CHECK or line[:len(start)] != start):
            raise CorruptSessionError(path, f"line {number}: {line_problem(line, number)}")


# --------------------------------------------------------------------------- reading
@dataclass
class Journal:
    """A parsed journal (see :func:`parse_journal`)."""

    generation: str
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    end: int
    torn: int
    lines: int
    check: bytes
    version: int
    offset: int


class _Function(TypedDict):
    name: str
    arguments: str


class _ToolCall(TypedDict):
    id: str
    type: str
    function: _Function


class _Message(TypedDict):
    role: Annotated[str, msgspec.Meta(min_length=1)]
    content: NotRequired[str | None]
    tool_calls: NotRequired[list[_ToolCall]]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]
    refusal: NotRequired[str]


class _Line(TypedDict):
    """A checked line whose ``add`` holds core messages only (no ``"extra"``)."""

    n: int
    add: NotRequired[list[_Message]]
    compact: NotRequired[dict[str, Any]]
    state: NotRequired[dict[str, Any]]
    set: NotRequired[dict[str, Any]]
    updated_at: NotRequired[Any]
    clock: NotRequired[Any]
    c: str


#: Parses and validates a line of the core shape in one pass (as ``check_messages`` would).
#: Lines it refuses, and lines marked ``"extra"``, are read by ``orjson`` and checked by
#: hand, which keeps every key and names what is wrong.
_LineDecoder = msgspec.json.Decoder(_Line)
_EXTRA = b',"extra":1'


def split_lines(whole: bytes) -> list[Line]:
    """The lines of ``whole`` (which ends with a newline), without their newlines: views
    into it when there are few (long lines are not copied), else copies."""
    out: list[Line] = []
    view, pos, size = memoryview(whole), 0, len(whole)
    find = whole.index
    while pos < size:
        if len(out) == 256:  # many short lines: one call copies them faster
            lines: list[Line] = list(whole.split(b"\n"))
            lines.pop()
            return lines
        end = find(b"\n", pos)
        out.append(view[pos:end])
        pos = end + 1
    return out


def _parse_lines(lines: list[Line], path: Path, first: int, typed: bool) -> list[Any]:
    """``lines`` (numbered from ``first``) parsed to dicts, their ``add`` validated."""
    values: list[Any] = []
    for number, line in enumerate(lines, first):
        if typed and line[-_TRAILER - len(_EXTRA):-_TRAILER] != _EXTRA:
            try:
                values.append(_LineDecoder.decode(line))
                continue
            except (msgspec.ValidationError, msgspec.DecodeError):
                pass
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as err:
            raise CorruptSessionError(path, f"line {number}: not valid JSON ({err})") from None
        if type(value) is not dict:
            raise CorruptSessionError(path, f"line {number}: not a JSON object")
        if "add" in value:
            check_messages(value["add"], path, f"line {number}: add")
        values.append(value)
    return values


def parse_journal(raw: bytes | None, path: Path, session_id: str, ref: dict[str, Any], *,
                  decode_before: bool) -> Journal:
    """Check every line of a journal (``None``: missing) and split its entries where its
    snapshot ends, as the snapshot's journal reference ``ref`` says (``CorruptSessionError``
    naming the line at fault, ``TooLargeError`` for one over :data:`LINE_CAP`);
    ``decode_before``: parse the lines before it too."""
    if raw is None:
        raise CorruptSessionError(path, "the journal of this session is missing")
    end = raw.rfind(b"\n") + 1
    whole = raw if end == len(raw) else raw[:end]
    lines = split_lines(whole)
    if len(whole) > LINE_CAP:  # a line over the cap is refused before any is parsed
        for number, line in enumerate(lines, 1):
            if len(line) > LINE_CAP:
                raise TooLargeError(path, len(line), LINE_CAP, f"journal line {number}")
    if lines and lines[0][:5] == b'{"n":':
        check_lines(lines[:1], 1, path)
    try:
        header = orjson.loads(lines[0] if lines else b"")
    except orjson.JSONDecodeError:
        header = None
    version = header.get(_HEADER_KEY) if type(header) is dict else None
    if type(version) is int and version > JOURNAL_VERSION:
        raise CorruptSessionError(path, "it was written by a newer jupyter-agent; "
                                        "upgrade jupyter-agent to open it")
    if (type(header) is not dict or version not in (PREVIOUS_JOURNAL_VERSION, JOURNAL_VERSION)
            or header.get("id") != session_id or type(header.get("generation")) is not str):
        raise CorruptSessionError(path, f"line 1: not the header of a journal of session "
                                        f"{session_id!r}")
    if version == JOURNAL_VERSION:
        check_lines(lines, 1, path)
    if header["generation"] != ref["generation"]:
        raise CorruptSessionError(path, "line 1: it does not belong to the snapshot beside it")
    header_end = len(lines[0]) + 1
    offset, lines_covered = ref["offset"], ref.get("lines")
    if lines_covered is not None:
        if not 1 <= lines_covered <= len(lines):
            raise CorruptSessionError(
                path, f"it ends at line {len(lines)}, where its snapshot says it continues "
                      f"to line {lines_covered}")
        split = lines_covered
        offset = sum(map(len, lines[:split])) + split
    else:
        if offset < header_end or offset > end or whole[offset - 1:offset] != b"\n":
            raise CorruptSessionError(
                path, f"it ends before byte {offset}, where its snapshot says it continues")
        split = len(lines) - whole.count(b"\n", offset)
    first = 2 if decode_before else split + 1
    values = _parse_lines(lines[first - 1:], path, first, version == JOURNAL_VERSION)
    before, after = (values[:split - 1], values[split - 1:]) if decode_before else ([], values)
    check = bytes(lines[-1][-10:-2]) if version == JOURNAL_VERSION else b""
    return Journal(header["generation"], before, after, end, len(raw) - end, len(lines),
                   check, version, offset)


def upgraded_journal(raw: bytes) -> bytes:
    """A whole journal of jupyter-agent 0.2 with ``n`` and ``c`` added to every line (line
    numbers are unchanged, byte offsets are not)."""
    out = []
    for number, line in enumerate(raw.split(b"\n")[:-1], 1):
        value = {k: v for k, v in orjson.loads(line).items() if k not in ("n", "c")}
        if number == 1:
            value[_HEADER_KEY] = JOURNAL_VERSION
        out.append(encode_line(number, value))
    return b"".join(out)
