"""Scripts of the scripted model (docs/scripted-model.md). A step is a dict (validated into a
:class:`Step`), a string (``{"text": ...}``) or a callable of the request body returning a
step. A bad file or step raises :class:`ScriptError`; nothing is skipped.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

StepCallable: TypeAlias = Callable[[dict[str, Any]], Any]


class ScriptError(ValueError):
    """The message names the file and step (0-based)."""

    def __init__(self, message: str, *, path: Path | None = None, index: int | None = None) -> None:
        where = [f"script {str(path)!r}"] if path is not None else []
        where += [f"step {index}"] if index is not None else []
        super().__init__(", ".join(where) + ": " + message if where else message)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolCallSpec(_Model):
    """A scripted tool call; dict ``arguments`` are sent JSON-encoded, a string verbatim."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = Field(default=None, min_length=1)


class UsageSpec(_Model):
    """Token counts overriding the estimate (None: estimate); ``omit`` drops reported fields."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int = 0
    omit: list[Literal["prompt_tokens", "completion_tokens", "prompt_tokens_details"]] = \
        Field(default_factory=list)


class ErrorSpec(_Model):
    """An HTTP error (status 400-599) answered instead of a completion; ``type`` and ``code``
    default by status, ``headers`` steer the client's retries."""

    status: int = Field(ge=400, le=599)
    message: str
    type: str | None = None
    code: str | None = None
    param: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)


class Step(_Model):
    """One validated step; ``delay`` and ``chunk_delay`` are seconds."""

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


def parse_step(step: Any, *, index: int | None = None, path: Path | None = None) -> Step:
    """``ScriptError`` for unknown keys, wrong types or no content."""
    if isinstance(step, str):
        return Step(text=step)
    if not isinstance(step, Mapping | Step):
        raise ScriptError(
            f"expected a step object (dict), a string or a callable, got {type(step).__name__}",
            path=path, index=index)
    try:
        return Step.model_validate(step)
    except ValidationError as err:
        message = "; ".join(
            f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']}" if item["loc"]
            else item["msg"] for item in err.errors())
        raise ScriptError(message, path=path, index=index) from None


def parse_steps(steps: Iterable[Any], *, start: int = 0) -> list[Step | StepCallable]:
    """Callables are kept; ``start`` numbers the first step in messages. ``ScriptError`` on
    the first invalid step, or for a string, mapping or path."""
    if isinstance(steps, str | bytes | Mapping | os.PathLike):
        raise ScriptError(f"a script is a list of steps, got {type(steps).__name__}"
                          " (use ScriptedModelServer.from_file() or load_script() for a file)")
    return [step if callable(step) and not isinstance(step, Mapping)
            else parse_step(step, index=start + offset) for offset, step in enumerate(steps)]


def load_script(path: str | os.PathLike[str]) -> list[Step]:
    """A UTF-8 JSON list of steps; ``ScriptError`` if the file is unreadable, not JSON, not a
    list, or has an invalid step."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ScriptError(f"not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})",
                          path=p) from None
    except (OSError, UnicodeDecodeError) as err:
        raise ScriptError(f"cannot read: {err}", path=p) from err
    if not isinstance(data, list):
        raise ScriptError(f"expected a JSON list of steps, got {type(data).__name__}", path=p)
    return [parse_step(step, index=i, path=p) for i, step in enumerate(data)]


class Script:
    """The steps a scripted model answers with and how many were consumed, behind one lock."""

    def __init__(self, steps: Iterable[Any] | None) -> None:
        self._lock = threading.RLock()
        self._steps: list[Step | StepCallable] = parse_steps(steps or [])
        self._served = 0

    def add_steps(self, steps: Iterable[Any]) -> None:
        """Also while answering; ``ScriptError`` if a step is invalid (nothing is appended)."""
        with self._lock:
            self._steps.extend(parse_steps(steps, start=len(self._steps)))

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._steps) - self._served

    def _next(self, body: dict[str, Any]) -> Step:
        """``ScriptError`` when the script is exhausted, or (with the cause) when a callable
        step raises or returns an invalid step."""
        with self._lock:
            if self._served >= len(self._steps):
                raise ScriptError(f"script exhausted after {self._served} steps; add steps to"
                                  " the script (add_steps() in Python, or more entries in the"
                                  " script file)")
            index, step = self._served, self._steps[self._served]
            self._served += 1
        if isinstance(step, Step):
            return step
        try:
            return parse_step(step(body))
        except ScriptError as err:
            raise ScriptError(f"callable step {index} returned an invalid step: {err}") from err
        except Exception as err:
            raise ScriptError(f"callable step {index} failed: {err!r}") from err
