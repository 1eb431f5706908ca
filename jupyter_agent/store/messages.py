"""Chat messages as they are saved: plain JSON dicts without lone surrogates.

The ``openai`` client returns pydantic objects (``ChatCompletionMessage`` with
``tool_calls``, ...), while the agent also builds plain dicts. Before anything is
written, every message goes through :func:`to_message_dict`, which

* dumps pydantic objects with ``model_dump(mode="json", exclude_none=True)`` so the
  structured tool calls and the IDs that link them to their results persist;
* deep-copies dicts by a JSON round trip, so the in-memory copy is exactly what a
  later load returns (tuples become lists, keys become strings);
* replaces lone surrogates (e.g. ``"\\ud83d"`` left by a cut emoji) with U+FFFD in
  every string, dict keys included, so a saved session always loads and is always
  accepted by the API.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "clean_json",
    "clean_text",
    "fallback_summary",
    "message_text",
    "to_message_dict",
]

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
    """Return ``text`` with every lone surrogate (U+D800-U+DFFF) replaced by U+FFFD.

    Python strings hold code points, so any surrogate in one is unpaired and could
    not be encoded as UTF-8.
    """
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
    """Deep-copy a JSON-compatible value, replacing lone surrogates everywhere.

    Parameters
    ----------
    value : object
        Nested dicts/lists/tuples of str, int, float, bool and None; pydantic
        objects found inside are dumped with ``model_dump(mode="json", exclude_none=True)``.

    Returns
    -------
    object
        A fresh structure equal to what ``json.loads`` of its saved form returns.

    Raises
    ------
    TypeError
        For values JSON cannot represent (sets, datetimes, arbitrary objects).
    ValueError
        For NaN or infinite floats (not valid JSON).
    """
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=_dump_default)
    return json.loads(clean_text(text))


def to_message_dict(message: Any) -> dict[str, Any]:
    """Convert one chat message to the plain dict that is saved.

    Parameters
    ----------
    message : Mapping or pydantic object
        A dict such as ``{"role": "user", "content": "hi"}`` or an ``openai`` object
        such as ``ChatCompletionMessage``.

    Returns
    -------
    dict
        A deep copy (dicts) or ``model_dump(mode="json", exclude_none=True)``
        (pydantic objects), with lone surrogates replaced by U+FFFD in all strings
        and keys.

    Raises
    ------
    TypeError
        If ``message`` is neither a mapping nor has ``model_dump``, or holds a value
        JSON cannot represent.
    ValueError
        If it holds a NaN or infinite float.
    """
    if isinstance(message, Mapping):
        data: Any = dict(message)
    else:
        model_dump = getattr(message, "model_dump", None)
        if not callable(model_dump):
            raise TypeError(
                f"a message must be a dict or a pydantic object, not {type(message).__name__}"
            )
        data = model_dump(mode="json", exclude_none=True)
        if not isinstance(data, dict):
            raise TypeError(f"{type(message).__name__}.model_dump() did not return a dict")
    result = clean_json(data)
    assert isinstance(result, dict)
    return result


def message_text(message: Mapping[str, Any]) -> str:
    """Return the text content of a message, stripped ("" if it has none).

    String content is used as is; a list of content parts contributes the ``text``
    of each part that has one (image parts and the like are ignored).
    """
    content = message.get("content")
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        return "\n".join(texts).strip()
    return ""


def fallback_summary(messages: Iterable[Mapping[str, Any]]) -> str:
    """Build the excerpt used when a session has no summary.

    The last six user and assistant messages that have text content, at most
    2000 characters; messages the harness wrote (they start with ``[jupyter-agent]``)
    are not quoted. Each is one ``"<role>: <text>"`` entry, oldest first, joined by
    newlines; the result is cut to 2000 code points.

    The excerpt stays well-formed Markdown, since front ends render it: a message whose
    first line starts a Markdown block (a table, a list, a code fence...) gets its label
    on a line of its own, and a multi-line message is set off by blank lines, so that a
    table or a code fence in a reply neither swallows the next entry nor breaks.

    Returns
    -------
    str
        The excerpt, or ``""`` when no user/assistant message has text.
    """
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
