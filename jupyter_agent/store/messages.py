"""Messages: plain dicts, validation, JSON limits, figure references, how a context changes.

A saved message must load back: a Chat Completions message holding only what JSON can. A
save must *extend* the saved working context; a compaction keeps a common prefix and
suffix of the old one.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from jupyter_agent.errors import ContextMismatchError, CorruptSessionError, InvalidMessageError
from jupyter_agent.images import FORMAT_NAMES

_SURROGATE = re.compile("[\ud800-\udfff]")

#: How many user/assistant messages the fallback summary quotes.
SUMMARY_MESSAGES = 6
#: Maximum length of the fallback summary, in code points.
SUMMARY_MAX_CHARS = 2000
#: How messages the harness wrote itself begin (a limit that stopped a turn, a reply the
#: provider cut off, a compaction summary); the fallback summary quotes none of them.
HARNESS_PREFIX = "[jupyter-agent]"
#: A first line that starts a Markdown block (table, list, heading, quote, code fence).
_BLOCK_START = re.compile(r"^ {0,3}(?:\||#|>|[-*+] |\d+[.)] |```|~~~)")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate (which UTF-8 cannot encode) replaced by U+FFFD."""
    try:
        text.encode("utf-8")  # fails exactly when a surrogate is present; faster than a regex
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _dump_default(obj: Any) -> Any:
    model_dump = getattr(obj, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json", exclude_none=True)
    raise TypeError(f"cannot save a value of type {type(obj).__name__} in a session message")


def clean_json(value: Any) -> Any:
    """Deep-copy a JSON-compatible value, replacing lone surrogates everywhere;
    ``TypeError`` for what JSON cannot hold, ``ValueError`` for NaN or infinity."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=_dump_default)
    return json.loads(clean_text(text))


def to_message_dict(message: Any) -> dict[str, Any]:
    """The plain dict saved for a chat message (a mapping or a pydantic object);
    errors as :func:`clean_json`."""
    mapping = isinstance(message, Mapping)
    if not mapping and not callable(getattr(message, "model_dump", None)):
        raise TypeError(
            f"a message must be a dict or a pydantic object, not {type(message).__name__}")
    result = clean_json(dict(message) if mapping else message)
    if not isinstance(result, dict):
        raise TypeError(f"{type(message).__name__}.model_dump() did not return a dict")
    return result


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text, stripped: its string content, or its parts' ``text`` joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content if isinstance(part, Mapping)
                         and isinstance(part.get("text"), str)).strip()
    return ""


def figure_refs(messages: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The figure references of ``messages`` (the objects with a string ``id`` in their
    ``figures`` lists), in order; malformed entries are skipped."""
    for message in messages:
        refs = message.get("figures")
        for ref in refs if isinstance(refs, list) else ():
            if isinstance(ref, dict) and isinstance(ref.get("id"), str):
                yield ref


def figure_label(ref: dict[str, Any]) -> str:
    """``figure 2: PNG, 640×480 px`` for a reference (size left out when unknown)."""
    kind = FORMAT_NAMES.get(str(ref.get("media_type")), "image")
    width, height = ref.get("width"), ref.get("height")
    size = f", {width}×{height} px" if isinstance(width, int) and isinstance(height, int) else ""
    return f"figure {ref.get('n', '?')}: {kind}{size}"


def fallback_summary(messages: Iterable[Mapping[str, Any]]) -> str:
    """The excerpt used when a session has no summary: the last six user and assistant
    messages with text (not the harness's own), ``"<role>: <text>"`` oldest first, cut to
    :data:`SUMMARY_MAX_CHARS` code points."""
    picked: list[str] = []
    for message in reversed(list(messages)):
        role = message.get("role")
        if role not in ("user", "assistant"):
            continue
        text = message_text(message)
        if text and not text.startswith(HARNESS_PREFIX):
            picked.append(f"{role}:{chr(10) if _BLOCK_START.match(text) else ' '}{text}")
            if len(picked) == SUMMARY_MESSAGES:
                break
    entries = list(reversed(picked))
    out = entries[:1]
    for before, entry in itertools.pairwise(entries):
        out.append(("\n\n" if "\n" in before or "\n" in entry else "\n") + entry)
    return "".join(out)[:SUMMARY_MAX_CHARS]


def message_problem(message: Any) -> str | None:
    """What makes ``message`` unfit to be a saved Chat Completions message, or ``None``."""
    if type(message) is not dict:
        return "a message must be a JSON object"
    role = message.get("role")
    if type(role) is not str or not role:
        return "role must be a non-empty string"
    content = message.get("content")
    if content is not None and type(content) is not str:
        if type(content) is not list:
            return "content must be a string, a list of parts or null"
        for part in content:
            if type(part) is not dict or type(part.get("type")) is not str:
                return "each content part must be an object with a string type"
            if part["type"] == "text" and type(part.get("text")) is not str:
                return "a text part must have a string text"
    calls = message.get("tool_calls")
    if calls is not None and type(calls) is not list:
        return "tool_calls must be a list"
    for call in calls or ():
        if type(call) is not dict or type(call.get("id")) is not str:
            return "each tool call must be an object with a string id"
        if "type" in call and type(call["type"]) is not str:
            return "a tool call's type must be a string"
        if "function" in call:
            fn = call["function"]
            if type(fn) is not dict or type(fn.get("name")) is not str:
                return "a tool call's function must be an object with a string name"
            if type(fn.get("arguments", "")) is not str:
                return "a tool call's arguments must be a string"
    for key in ("tool_call_id", "name", "refusal"):
        value = message.get(key)
        if value is not None and type(value) is not str:
            return f"{key} must be a string"
    return None


_CORE_KEYS = frozenset(("role", "content", "tool_calls", "tool_call_id", "name", "refusal"))


def is_core_message(message: Any) -> bool:
    """Whether ``message`` is valid and of the core shape the journal's typed decoder reads
    (:data:`_CORE_KEYS`, strings, tool calls of exactly ``id``, ``type``, ``function``)."""
    if type(message) is not dict:
        return False
    role, content = message.get("role"), message.get("content")
    if type(role) is not str or not role or (content is not None and type(content) is not str):
        return False
    size = len(message) - ("content" in message)  # the most common shapes, first
    if size == 1 or (size == 2 and type(message.get("tool_call_id")) is str):
        return True
    calls = message.get("tool_calls", [])
    if (not message.keys() <= _CORE_KEYS
            or type(message.get("tool_call_id", "")) is not str
            or type(message.get("name", "")) is not str
            or type(message.get("refusal", "")) is not str
            or type(calls) is not list):
        return False
    for call in calls:
        if type(call) is not dict or len(call) != 3:
            return False
        fn = call.get("function")
        if (type(call.get("id")) is not str or type(call.get("type")) is not str
                or type(fn) is not dict or len(fn) != 2 or type(fn.get("name")) is not str
                or type(fn.get("arguments")) is not str):
            return False
    return True


def check_messages(messages: Any, path: Path | str, field: str) -> list[dict[str, Any]]:
    """Return ``messages`` if it is a list of valid messages, else raise
    ``CorruptSessionError`` naming ``path`` (a file, or a database location) and
    ``"<field>[i]: <reason>"`` of the first bad message."""
    if type(messages) is not list:
        raise CorruptSessionError(path, f"{field} must be a list of messages")
    for i, message in enumerate(messages):
        if is_core_message(message):
            continue
        problem = message_problem(message) or depth_problem(message)  # of other keys
        if problem is not None:
            raise CorruptSessionError(path, f"{field}[{i}]: {problem}")
    return messages


# Caps (bytes) so that a file or row someone else wrote costs bounded memory and time:
# decoded JSON takes ~3 times its bytes for real sessions, ~30 times for ``[{},{},...]``.
#: A snapshot (no transcript: 3.5 KB at 50,000 messages), a record of the one-file form
#: (about 8,000 messages of 2 KiB) or a team-store record column.
RECORD_CAP = 16 * 1024 * 1024
#: One journal line (one save point) or one team-store transcript row.
LINE_CAP = 16 * 1024 * 1024
#: A whole journal or team-store transcript, read whole on load (~85,000 messages of 3 KiB).
JOURNAL_CAP = 256 * 1024 * 1024
#: Values nest at most this deep, saved or loaded: ``orjson`` and ``pydantic`` (255 levels,
#: with the record around it) and Python's recursion limit can then handle them.
MAX_DEPTH = 200

_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


def encode_json(value: Any) -> bytes:
    """Compact UTF-8 JSON (dict key order kept); ``TypeError`` for a value JSON cannot hold
    (:func:`json_problem`) or nested deeper than ``orjson`` writes."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as err:
        raise TypeError(str(err)) from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} overflows a double")
    return value


def json_problem(value: Any, depth: int = 0) -> str | None:
    """Why the store cannot write ``value`` as JSON (a lone surrogate, a non-finite float, an
    integer beyond 64 bits, a non-string key, deeper than :data:`MAX_DEPTH`), or ``None``."""
    kind = type(value)
    if kind is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "a string holds a lone surrogate"
        return None
    if value is None or kind is bool:
        return None
    if kind is int:
        return None if _INT_MIN <= value <= _INT_MAX else "an integer does not fit 64 bits"
    if kind is float:
        return None if math.isfinite(value) else "a number is not finite"
    if depth > MAX_DEPTH:
        return f"values are nested too deeply (more than {MAX_DEPTH} levels)"
    items: Iterable[Any]
    if kind is dict:
        if any(type(k) is not str for k in value):
            return "an object has a key that is not a string"
        problem = json_problem(list(value), depth + 1)
        if problem:
            return problem
        items = value.values()
    elif kind is list:
        items = value
    else:
        return f"a value of type {kind.__name__} is not JSON"
    for item in items:
        problem = json_problem(item, depth + 1)
        if problem:
            return problem
    return None


_ORJSON_LEVELS = 254  # the most levels of arrays and objects orjson writes


def depth_problem(value: Any) -> str | None:
    """:func:`json_problem`'s depth rule for a decoded value, at C speed: ``orjson`` writes
    ``value`` wrapped in lists, enough to fail exactly when it is deeper than the rule."""
    for _ in range(_ORJSON_LEVELS - MAX_DEPTH - 1):
        value = [value]
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError as err:
        if "recursion" in str(err).lower():
            return f"values are nested too deeply (more than {MAX_DEPTH} levels)"
    return None


def decode_json(raw: bytes, path: Path | str) -> Any:
    """Decode JSON bytes; ``CorruptSessionError`` naming ``path`` (a file, or a database
    location) when empty, not JSON, non-finite, too deep, or an integer beyond 64 bits."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as first:
        if not raw.strip():
            raise CorruptSessionError(path, "empty file") from None
        try:
            data = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite_float)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise CorruptSessionError(path, f"not valid JSON ({first})") from None
    try:
        data = clean_json(data)  # lone surrogates -> U+FFFD (older writers)
    except (ValueError, RecursionError):
        raise CorruptSessionError(path, "not valid JSON (nested too deeply)") from None
    problem = json_problem(data)
    if problem:
        raise CorruptSessionError(path, f"not valid JSON for this store ({problem})")
    return data


def normalized(messages: Sequence[Any], first_index: int = 0) -> list[dict[str, Any]]:
    """Messages converted with :func:`to_message_dict` and checked
    (``InvalidMessageError`` for one that could not be saved and read back)."""
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
    """The messages of ``incoming`` beyond the saved working context, normalized, and
    the saved prefix when it equals ``saved``; ``ContextMismatchError`` if ``incoming``
    does not extend ``saved``, ``InvalidMessageError`` for a new message."""
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
    prefix = suffix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    while (suffix < min(len(old), len(new)) - prefix
           and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]):
        suffix += 1
    return prefix, suffix


def count_replaced(old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> int:
    """How many messages of ``old`` a compaction to ``new`` replaced (those not kept as a
    common prefix or suffix)."""
    prefix, suffix = compaction_parts(old, new)
    return len(old) - prefix - suffix
