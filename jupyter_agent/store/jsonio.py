"""JSON in and out of the store: strict decoding, fast encoding.

* :func:`decode_json` uses ``orjson``, which refuses ``NaN``, ``Infinity``, numbers that
  overflow a double and lone surrogates. A file that only the standard library can decode
  (a record written by an older version with a ``\\ud83d`` escape) is decoded by it with
  the same refusals, its lone surrogates replaced by U+FFFD and its values checked by
  :func:`json_problem`, so that whatever loads can be written back.
* :func:`encode_json` writes compact UTF-8 JSON with ``orjson``; values nested deeper
  than ``orjson`` writes (it reads deeper than it writes) go through the standard
  library instead, so a record that loaded never fails to save because of its depth.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from jupyter_agent.errors import CorruptSessionError
from jupyter_agent.store.messages import clean_json

__all__ = ["JOURNAL_CAP", "LINE_CAP", "MAX_DEPTH", "RECORD_CAP", "decode_json", "depth_problem",
           "encode_json", "json_problem"]

# Caps on what a session may hold, so that a file or row someone else wrote costs bounded
# memory and time. Decoding JSON into Python objects takes about 3 times the bytes for
# real sessions (mostly text) and up to ~30 times for a file made of tiny objects
# (``[{},{},...]``), so each cap is also what bounds the worst case.
#: A session snapshot, a record of the one-file form or a team-store record column. A
#: snapshot holds no transcript (3.5 KB at 50,000 messages, see ``benchmarks/``); only a
#: record of the one-file form of jupyter-agent 0.1 does (about 8,000 messages of 2 KiB).
RECORD_CAP = 16 * 1024 * 1024
#: One journal line (a save point: one step's messages, tool results clipped to
#: ``max_output_chars``) or one team-store transcript row.
LINE_CAP = 16 * 1024 * 1024
#: A whole journal (or team-store transcript), read whole on load: about 85,000 messages
#: of 3 KiB.
JOURNAL_CAP = 256 * 1024 * 1024

#: Values (a message, a checkpoint) nest at most this deep: what loads can then be written
#: by ``orjson`` and ``pydantic`` (255 levels each, with the record around it), compared
#: and walked within Python's recursion limit. Deeper values are refused when saved and
#: when loaded, with one line.
MAX_DEPTH = 200

_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


def encode_json(value: Any) -> bytes:
    """Compact UTF-8 JSON of ``value`` (dict key order kept).

    Raises
    ------
    TypeError
        For a value JSON cannot hold (see :func:`json_problem`); ``NaN`` and infinities
        raise ``ValueError``.
    """
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as err:
        if "recursion" not in str(err).lower():  # orjson writes 255 levels at most
            raise TypeError(str(err)) from None
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    finally:
        sys.setrecursionlimit(limit)
    return text.encode("utf-8")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} overflows a double")
    return value


def json_problem(value: Any, depth: int = 0) -> str | None:
    """Why ``value`` cannot be written as JSON by the store, or ``None``.

    Checks dicts with string keys, lists, strings without lone surrogates, finite
    floats, integers within 64 bits, booleans and null, at most :data:`MAX_DEPTH` levels
    deep.
    """
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
    """:func:`json_problem`'s depth rule for a decoded value, at C speed: ``value``
    wrapped in as many lists as make it too deep for ``orjson`` exactly when it nests
    more than :data:`MAX_DEPTH` levels is written (and thrown away) by ``orjson``.
    Other refusals of ``orjson`` (which decoded values do not have) are not reported."""
    for _ in range(_ORJSON_LEVELS - MAX_DEPTH - 1):
        value = [value]
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError as err:
        if "recursion" in str(err).lower():
            return f"values are nested too deeply (more than {MAX_DEPTH} levels)"
    return None


def decode_json(raw: bytes, path: Path | str) -> Any:
    """Decode JSON bytes as described in the module docstring.

    ``path`` names where the bytes come from: a file, or a location string of a database
    backend.

    Raises
    ------
    CorruptSessionError
        Naming ``path``: empty, not JSON, non-finite numbers, too deep, integers that do
        not fit 64 bits.
    """
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
