"""Validating a chat-completions request the way the real OpenAI API does.

:func:`validate_chat_request` mirrors what the real API rejects with HTTP 400
(messages worded like the real ones): a missing ``model``; missing or empty
``messages``; a message that is not an object, has no or an unknown ``role``, or a
``content`` that is not a string, a list or null; a non-assistant message without
``content``; an assistant message with ``content`` null (or missing) and no
``tool_calls``; a ``tool`` message that answers no tool call of the assistant
message it follows; an assistant message whose ``tool_calls`` are not all answered
by the tool messages that directly follow it. Unknown request fields and extra
message keys are accepted and ignored. Pure functions, no I/O.
"""

from __future__ import annotations

import json

from jupyter_agent.testing.protocol import RequestRejected, error_body

__all__ = ["ROLES", "validate_chat_request"]

ROLES = ("system", "developer", "user", "assistant", "tool")


def _reject(message: str, *, param: str | None = None, code: str | None = None) -> RequestRejected:
    return RequestRejected(400, error_body(400, message, param=param, code=code))


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _validate_tool_calls(i: int, tool_calls: object) -> list[str]:
    if not isinstance(tool_calls, list):
        raise _reject(
            f"Invalid type for 'messages[{i}].tool_calls': expected an array of objects,"
            f" but got {_json_type(tool_calls)} instead.",
            param=f"messages[{i}].tool_calls", code="invalid_type")
    if not tool_calls:
        raise _reject(
            f"Invalid 'messages[{i}].tool_calls': empty array. Expected an array with minimum"
            " length 1, but got an empty array instead.",
            param=f"messages[{i}].tool_calls", code="empty_array")
    ids = []
    for j, call in enumerate(tool_calls):
        where = f"messages[{i}].tool_calls[{j}]"
        if not isinstance(call, dict):
            raise _reject(f"Invalid type for '{where}': expected an object, but got"
                          f" {_json_type(call)} instead.", param=where, code="invalid_type")
        for key in ("id", "type", "function"):
            if key not in call:
                raise _reject(f"Missing required parameter: '{where}.{key}'.",
                              param=f"{where}.{key}", code="missing_required_parameter")
        function = call["function"]
        if not isinstance(function, dict):
            raise _reject(f"Invalid type for '{where}.function': expected an object, but got"
                          f" {_json_type(function)} instead.", param=f"{where}.function",
                          code="invalid_type")
        for key in ("name", "arguments"):
            if key not in function:
                raise _reject(f"Missing required parameter: '{where}.function.{key}'.",
                              param=f"{where}.function.{key}", code="missing_required_parameter")
            if not isinstance(function[key], str):
                raise _reject(f"Invalid type for '{where}.function.{key}': expected a string,"
                              f" but got {_json_type(function[key])} instead.",
                              param=f"{where}.function.{key}", code="invalid_type")
        if not isinstance(call["id"], str):
            raise _reject(f"Invalid type for '{where}.id': expected a string, but got"
                          f" {_json_type(call['id'])} instead.", param=f"{where}.id",
                          code="invalid_type")
        ids.append(call["id"])
    return ids


def _validate_message(i: int, message: object) -> None:
    if not isinstance(message, dict):
        raise _reject(f"Invalid type for 'messages[{i}]': expected an object, but got"
                      f" {_json_type(message)} instead.", param=f"messages[{i}]",
                      code="invalid_type")
    if "role" not in message:
        raise _reject(f"Missing required parameter: 'messages[{i}].role'.",
                      param=f"messages[{i}].role", code="missing_required_parameter")
    role = message["role"]
    if role not in ROLES:
        supported = ", ".join(f"'{r}'" for r in ROLES[:-1]) + f", and '{ROLES[-1]}'"
        shown = f"'{role}'" if isinstance(role, str) else json.dumps(role)
        raise _reject(f"Invalid value: {shown}. Supported values are: {supported}.",
                      param=f"messages[{i}].role", code="invalid_value")
    content = message.get("content")
    if not (content is None or isinstance(content, str | list)):
        raise _reject(f"Invalid type for 'messages[{i}].content': expected one of a string or"
                      f" array of objects, but got {_json_type(content)} instead.",
                      param=f"messages[{i}].content", code="invalid_type")
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                raise _reject(f"Invalid type for 'messages[{i}].content[{j}]': expected an"
                              f" object, but got {_json_type(part)} instead.",
                              param=f"messages[{i}].content[{j}]", code="invalid_type")
    if role != "assistant" and content is None:
        raise _reject(f"Missing required parameter: 'messages[{i}].content'.",
                      param=f"messages[{i}].content", code="missing_required_parameter")
    if (role == "assistant" and content is None and message.get("tool_calls") is None
            and message.get("function_call") is None):
        # The real API: 400 "Invalid value for 'content': expected a string, got null."
        raise _reject("Invalid value for 'content': expected a string, got null.",
                      param=f"messages.[{i}].content")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise _reject(f"Missing required parameter: 'messages[{i}].tool_call_id'.",
                      param=f"messages[{i}].tool_call_id", code="missing_required_parameter")


def _unanswered_error(index: int, missing: list[str]) -> RequestRejected:
    return _reject(
        "An assistant message with 'tool_calls' must be followed by tool messages responding"
        " to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(missing),
        param=f"messages.[{index}].role")


def validate_chat_request(body: object) -> None:
    """Reject what the real API rejects for ``POST /v1/chat/completions``.

    Parameters
    ----------
    body : object
        The parsed JSON request body.

    Raises
    ------
    RequestRejected
        HTTP 400 with an OpenAI-shaped body whose message mirrors the real API's.
    """
    if not isinstance(body, dict):
        raise _reject("Invalid type for request body: expected an object, but got"
                      f" {_json_type(body)} instead.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _reject("you must provide a model parameter")
    if "messages" not in body:
        raise _reject("Missing required parameter: 'messages'.", param="messages",
                      code="missing_required_parameter")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _reject(f"Invalid type for 'messages': expected an array of objects, but got"
                      f" {_json_type(messages)} instead.", param="messages", code="invalid_type")
    if not messages:
        raise _reject("Invalid 'messages': empty array. Expected an array with minimum length 1,"
                      " but got an empty array instead.", param="messages", code="empty_array")
    # Tool-pair rules: tool messages must directly follow (after other tool messages)
    # the assistant message whose tool_calls they answer, each call answered once.
    open_ids: set[str] | None = None
    unanswered: list[str] = []
    opened_at = -1
    for i, message in enumerate(messages):
        _validate_message(i, message)
        role = message["role"]
        if role == "tool":
            call_id = message["tool_call_id"]
            if open_ids is None or call_id not in unanswered:
                raise _reject("Invalid parameter: messages with role 'tool' must be a response to"
                              " a preceeding message with 'tool_calls'.",
                              param=f"messages.[{i}].role")
            unanswered.remove(call_id)
            continue
        if unanswered:
            raise _unanswered_error(opened_at, unanswered)
        open_ids, unanswered = None, []
        if role == "assistant" and message.get("tool_calls") is not None:
            ids = _validate_tool_calls(i, message["tool_calls"])
            open_ids, unanswered, opened_at = set(ids), list(ids), i
    if unanswered:
        raise _unanswered_error(opened_at, unanswered)
