"""Script steps for :class:`~jupyter_agent.testing.ScriptedModelServer`.

A *script* is an ordered list of steps; the server answers each accepted
``/v1/chat/completions`` or ``/v1/responses`` request with the next step. A step is written as a
JSON-friendly dict (validated here into a :class:`Step`), a plain string
(shorthand for ``{"text": ...}``), or a Python callable that receives the request
body and returns a step.

Step fields
-----------
``text`` : str
    Assistant text reply (may accompany tool calls).
``tool_calls`` : list of ``{"name": str, "arguments": dict | str, "id"?: str}``
    Tool calls; ``arguments`` given as a dict is JSON-encoded, a string is sent
    verbatim (so a script can send malformed JSON on purpose). Missing ids are
    generated as ``call_<hex>``.
``usage`` : ``{"prompt_tokens"?, "completion_tokens"?, "cached_tokens"?: int, "omit"?: list}``
    Overrides the estimated token counts (tokens). Counts may be zero or negative and
    ``omit`` names fields left out of the reported usage (Chat Completions), to play an
    endpoint that misreports usage.
``error`` : ``{"status": int, "message": str, "type"?, "code"?, "param"?, "headers"?}``
    Answer with this HTTP error (OpenAI-shaped body) instead of a completion.
``finish_reason`` : "stop" | "length" | "tool_calls" | "content_filter"
    Overrides the default ("tool_calls" when there are tool calls, else "stop"). On the
    Responses API, "length" / "content_filter" make the response ``incomplete``.
``reasoning`` : str
    Responses API only: a reasoning item (with this summary) comes first in the output,
    carrying encrypted content, when the request includes
    ``"reasoning.encrypted_content"``; the server then accepts it back in later inputs.
``delay`` : float
    Seconds to wait before answering. ``chunk_delay``: seconds between stream chunks.
``drop_after`` : int
    Streamed answers only: the server sends this many chunks of the answer, then closes
    the connection without ending the stream (a connection that drops mid-reply). A
    request that does not stream is answered in full.

Loading never silently skips anything: a bad file or step raises
:class:`ScriptError` naming the file and the step index.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = [
    "ErrorSpec",
    "ScriptError",
    "Step",
    "StepLike",
    "ToolCallSpec",
    "UsageSpec",
    "load_script",
    "parse_step",
    "parse_steps",
]


class ScriptError(ValueError):
    """A script or one of its steps is invalid.

    Attributes
    ----------
    path : pathlib.Path or None
        The script file, when loaded from one.
    index : int or None
        0-based index of the offending step, when one step is at fault.
    """

    def __init__(self, message: str, *, path: Path | None = None, index: int | None = None) -> None:
        self.path = path
        self.index = index
        where = []
        if path is not None:
            where.append(f"script {str(path)!r}")
        if index is not None:
            where.append(f"step {index}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolCallSpec(_Model):
    """One scripted tool call.

    Attributes
    ----------
    name : str
        Function name (non-empty).
    arguments : dict or str
        A dict is sent JSON-encoded; a string is sent verbatim.
    id : str or None
        Tool call id; generated (``call_<hex>``, unique) when None.
    """

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = Field(default=None, min_length=1)

    def arguments_json(self) -> str:
        """Return the arguments as the JSON string the API sends."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


class UsageSpec(_Model):
    """Token counts overriding the server's estimate (tokens; None = estimate).

    ``omit`` lists usage fields the server leaves out ("prompt_tokens",
    "completion_tokens", "prompt_tokens_details").
    """

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int = 0
    omit: list[Literal["prompt_tokens", "completion_tokens", "prompt_tokens_details"]] = \
        Field(default_factory=list)


class ErrorSpec(_Model):
    """An HTTP error the server answers with instead of a completion.

    Attributes
    ----------
    status : int
        HTTP status, 400-599 (e.g. 429 -> ``openai.RateLimitError``).
    message : str
        ``error.message`` of the OpenAI-shaped body.
    type, code, param : str or None
        Body fields; ``type``/``code`` default by status (e.g. 429 -> "requests" /
        "rate_limit_exceeded").
    headers : dict
        Extra response headers, e.g. ``{"x-should-retry": "false"}`` or
        ``{"retry-after-ms": "10"}`` to steer the client's retries.
    """

    status: int = Field(ge=400, le=599)
    message: str
    type: str | None = None
    code: str | None = None
    param: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)


class Step(_Model):
    """One validated script step (see the module docstring for the fields)."""

    text: str | None = None
    tool_calls: list[ToolCallSpec] | None = None
    usage: UsageSpec | None = None
    error: ErrorSpec | None = None
    finish_reason: Literal["stop", "length", "tool_calls", "content_filter"] | None = None
    reasoning: str | None = None
    delay: float = Field(default=0.0, ge=0, le=600)
    chunk_delay: float = Field(default=0.0, ge=0, le=60)
    drop_after: int | None = Field(default=None, ge=0)

    @field_validator("tool_calls")
    @classmethod
    def _non_empty(cls, value: list[ToolCallSpec] | None) -> list[ToolCallSpec] | None:
        if value is not None and not value:
            raise ValueError("tool_calls must not be empty (omit it for a text reply)")
        return value

    @model_validator(mode="after")
    def _has_content(self) -> Step:
        if self.error is None and self.text is None and self.tool_calls is None:
            raise ValueError("a step needs 'text', 'tool_calls' or 'error'")
        if self.error is not None and (self.text is not None or self.tool_calls is not None):
            raise ValueError("an 'error' step cannot also have 'text' or 'tool_calls'")
        return self


StepCallable: TypeAlias = Callable[[dict[str, Any]], Any]
"""A callable step: receives the request body (dict), returns a step (dict, str or Step)."""

StepLike: TypeAlias = "Step | Mapping[str, Any] | str | StepCallable"


def _format_validation_error(err: ValidationError) -> str:
    parts = []
    for item in err.errors():
        loc = ".".join(str(p) for p in item["loc"])
        msg = item["msg"]
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def parse_step(step: Any, *, index: int | None = None, path: Path | None = None) -> Step:
    """Validate one non-callable step.

    Parameters
    ----------
    step : Step, mapping or str
        A string is shorthand for ``{"text": step}``.
    index, path : optional
        Used only to say where the step came from in the error message.

    Returns
    -------
    Step

    Raises
    ------
    ScriptError
        If the step is not a valid step (unknown keys, wrong types, no content).
    """
    if isinstance(step, Step):
        return step
    if isinstance(step, str):
        return Step(text=step)
    if not isinstance(step, Mapping):
        raise ScriptError(
            f"expected a step object (dict), a string or a callable, got {type(step).__name__}",
            path=path,
            index=index,
        )
    try:
        return Step.model_validate(dict(step))
    except ValidationError as err:
        raise ScriptError(_format_validation_error(err), path=path, index=index) from None


def parse_steps(
    steps: Iterable[Any], *, start: int = 0, path: Path | None = None
) -> list[Step | StepCallable]:
    """Validate steps, keeping callables as they are.

    Parameters
    ----------
    steps : iterable of step-likes
    start : int
        Index of the first step in the whole script (for error messages).
    path : pathlib.Path, optional
        Script file (for error messages).

    Returns
    -------
    list of Step or callable

    Raises
    ------
    ScriptError
        On the first invalid step; a bare string or mapping passed as *steps*
        is refused (a script is a list).
    """
    if isinstance(steps, str | bytes | Mapping | os.PathLike):
        raise ScriptError(
            f"a script is a list of steps, got {type(steps).__name__}"
            " (use ScriptedModelServer.from_file() or load_script() for a file)",
            path=path,
        )
    out: list[Step | StepCallable] = []
    for offset, step in enumerate(steps):
        if callable(step) and not isinstance(step, Step | Mapping | str):
            out.append(step)
        else:
            out.append(parse_step(step, index=start + offset, path=path))
    return out


def load_script(path: str | os.PathLike[str]) -> list[Step]:
    """Load and validate a JSON script file (a JSON list of steps, UTF-8).

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    list of Step

    Raises
    ------
    ScriptError
        If the file cannot be read, is not JSON, is not a list, or holds an
        invalid step (the message names the file and the step index).
    """
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ScriptError(f"cannot read: {err}", path=p) from err
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ScriptError(
            f"not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})", path=p
        ) from None
    if not isinstance(data, list):
        raise ScriptError(f"expected a JSON list of steps, got {type(data).__name__}", path=p)
    return [parse_step(step, index=i, path=p) for i, step in enumerate(data)]
