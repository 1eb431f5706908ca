"""What a saved message may be.

A record is validated completely when it is loaded, so that nothing which loads can fail
later -- not when it is saved again, not when it is displayed (JSON itself is checked by
:mod:`jupyter_agent.store.jsonio`):

* every message must have the shape of a Chat Completions message
  (:func:`message_problem`): a non-empty string ``role``; ``content`` a string, null or a
  list of parts that are objects with a string ``type`` (and a string ``text`` for text
  parts); ``tool_calls`` a list of objects with a string ``id`` whose ``function`` (when
  present) has a string ``name`` and string ``arguments``; ``tool_call_id`` and ``name``
  strings. Other keys may hold any JSON nested at most
  :data:`~jupyter_agent.store.jsonio.MAX_DEPTH` levels: newer API fields survive a round
  trip.

The checks are written out by hand rather than as pydantic models: they run on every
message of every load and cost about a microsecond each (see ``benchmarks/``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jupyter_agent.errors import CorruptSessionError
from jupyter_agent.store.jsonio import depth_problem

__all__ = ["check_messages", "message_problem", "plain_tool_calls"]

_OPTIONAL_STRINGS = ("tool_call_id", "name", "refusal")


def message_problem(message: Any) -> str | None:
    """What makes ``message`` unfit to be a saved Chat Completions message, or ``None``.

    Parameters
    ----------
    message : object
        A decoded message.

    Returns
    -------
    str or None
        A short reason (``"role must be a non-empty string"``), ``None`` if it is fine.
    """
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
    if calls is not None:
        problem = _tool_calls_problem(calls)
        if problem:
            return problem
    if len(message) > 2:
        for key in _OPTIONAL_STRINGS:
            value = message.get(key)
            if value is not None and type(value) is not str:
                return f"{key} must be a string"
    return None


def _tool_calls_problem(calls: Any) -> str | None:
    if type(calls) is not list:
        return "tool_calls must be a list"
    for call in calls:
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
    return None


def plain_tool_calls(calls: list[Any]) -> bool:
    """Whether every tool call is ``{"id", "type", "function": {"name", "arguments"}}``
    with strings only (the common case, checked without building reasons)."""
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
    """Return ``messages`` if it is a list of valid messages, else raise naming ``path``.

    ``path`` is the file, or for a database backend a location string (database,
    project, session).

    Raises
    ------
    CorruptSessionError
        ``"<field>[i]: <reason>"`` for the first bad message.
    """
    if type(messages) is not list:
        raise CorruptSessionError(path, f"{field} must be a list of messages")
    for i, message in enumerate(messages):
        # fast paths, for the shapes almost every message has: {"role", "content"} with
        # string or null content, plus a string tool_call_id, or plus well-formed tool_calls
        if type(message) is dict:
            role = message.get("role")
            content = message.get("content")
            if type(role) is str and role and (content is None or type(content) is str):
                size = len(message) - ("content" in message)
                if size == 1:
                    continue
                if size == 2:
                    other = message.get("tool_call_id")
                    if type(other) is str:
                        continue
                    calls = message.get("tool_calls")
                    if type(calls) is list and plain_tool_calls(calls):
                        continue
        problem = message_problem(message) or depth_problem(message)  # of other keys
        if problem is not None:
            raise CorruptSessionError(path, f"{field}[{i}]: {problem}")
    return messages


