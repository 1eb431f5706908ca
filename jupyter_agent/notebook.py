"""The notebook the user ran, as the model may see it: cells, outputs, errors, variables.

``context_privacy`` decides what leaves the kernel: ``"schema"`` (names, types, shapes,
dtypes, columns, row counts, memory; cell code; an output's type and shape; tracebacks,
whose message can quote a value), ``"preview"`` (also a few rows and short reprs) or
``"none"`` (nothing). IPython keeps inputs and expression results but not which cell
raised: :class:`CellLog` keeps the tracebacks as text (no frame or value stays alive) and
which cells were ``%agent`` magics. Printed output is not captured. Describing a value
runs its type's code (``len``, ``repr``); one whose methods raise is named by type only.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal

from jupyter_agent.text import format_bytes, shorten, truncate

Privacy = Literal["schema", "preview", "none"]
PRIVACY_LEVELS: tuple[Privacy, ...] = ("schema", "preview", "none")

KEPT_ERRORS = 50  # tracebacks kept by CellLog
TRACEBACK_CHARS = 8_000  # code points, as the other sizes here
CELL_CHARS = 2_000  # a cell's input in a listing of several
PREVIEW_CHARS = 1_000
PREVIEW_ROWS = 5
_COLUMNS_SHOWN = 60
_AGENT_MAGIC = re.compile(r"\s*%%?agent")  # %agent, %%agent and every %agent_* magic
_IPYTHON_DIR = "/IPython/core/"


def is_jupyter(shell: Any) -> bool:
    """False for terminal or plain IPython."""
    return shell is not None and (type(shell).__name__ == "ZMQInteractiveShell"
                                  or bool(getattr(shell, "has_trait", lambda _: False)("kernel")))


def can_ask(shell: Any) -> bool:
    """Whether :func:`input` reaches a person. In a kernel: whether its front end answers
    input requests (JupyterLab, Notebook and VS Code do; nbclient and papermill do not, and
    their cells get only final outputs). Elsewhere: whether stdin is a terminal."""
    if is_jupyter(shell):
        return bool(getattr(getattr(shell, "kernel", None), "_allow_stdin", False))
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return sys.stdin is not None and not sys.stdin.closed and sys.stdin.isatty()
    return False


def _safe(get: Any, default: Any = None) -> Any:
    try:
        return get()
    except Exception:
        return default


def _type_name(value: Any) -> str:
    cls = type(value)
    module = cls.__module__ or ""
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def schema_lines(value: Any) -> list[str]:
    """The type, then one line each of shape, dtypes, columns, rows, memory (as far as
    the type tells): ``value`` without its values."""
    lines = [_type_name(value)]
    module = type(value).__module__ or ""
    shape = _safe(lambda: value.shape)
    if module.startswith("pandas") and hasattr(value, "dtypes") and hasattr(value, "columns"):
        rows, cols = shape if isinstance(shape, tuple) and len(shape) == 2 else ("?", "?")
        memory = _safe(lambda: value.memory_usage(index=True, deep=False).sum())
        lines.append(f"{rows:,} rows × {cols:,} columns" if isinstance(rows, int)
                     else "shape unknown")
        if memory is not None:
            lines.append(f"memory: {format_bytes(int(memory))} (without object contents)")
        dtypes = _safe(lambda: list(value.dtypes.items()), [])
        shown = ", ".join(f"{name} ({dtype})" for name, dtype in dtypes[:_COLUMNS_SHOWN])
        more = f", … {len(dtypes) - _COLUMNS_SHOWN:,} more" if len(dtypes) > _COLUMNS_SHOWN else ""
        lines.append(f"columns: {shown}{more}")
        return lines
    if module.startswith("pandas") and hasattr(value, "dtype") and hasattr(value, "index"):
        lines.append(f"{_safe(lambda: len(value), '?'):,} rows, dtype {value.dtype}, "
                     f"name {_safe(lambda: value.name)!r}")
        memory = _safe(lambda: value.memory_usage(index=True, deep=False))
        if memory is not None:
            lines.append(f"memory: {format_bytes(int(memory))} (without object contents)")
        return lines
    if isinstance(shape, tuple):
        lines.append(f"shape: {shape}")
    dtype = _safe(lambda: value.dtype)
    if dtype is not None:
        lines.append(f"dtype: {dtype}")
    nbytes = _safe(lambda: value.nbytes)
    if isinstance(nbytes, int):
        lines.append(f"memory: {format_bytes(int(nbytes))}")
    elif not isinstance(shape, tuple):
        length = _safe(lambda: len(value)) if not callable(value) else None
        if isinstance(length, int):
            lines.append(f"length: {length:,}")
        size = _safe(lambda: sys.getsizeof(value))
        if isinstance(size, int):
            lines.append(f"memory: {format_bytes(int(size))} (the object itself)")
    return lines


def brief_schema(value: Any) -> list[str]:
    """:func:`schema_lines` without the memory line."""
    return [line for line in schema_lines(value) if not line.startswith("memory")]


def preview_text(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """A few rows of a DataFrame or Series, else a ``repr``; ``limit`` in code points."""
    module = type(value).__module__ or ""
    if module.startswith("pandas") and hasattr(value, "head"):
        text = _safe(lambda: value.head(PREVIEW_ROWS).to_string(), "")
        if text:
            return truncate(text, limit)
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<repr failed: {type(exc).__name__}>"
    return truncate(text, limit)


def describe_value(label: str, value: Any, privacy: Privacy, *, values: bool = False) -> str:
    """``"label: type"`` and its schema lines; with the preview privacy or ``values``, a few
    rows or a cut ``repr`` too."""
    lines = schema_lines(value)
    out = [f"{label}: {lines[0]}", *("  " + line for line in lines[1:])]
    if privacy == "preview" or values:
        out.append("  preview:")
        out.extend("    " + line for line in preview_text(value).splitlines())
    return "\n".join(out)


def visible_namespace(ns: dict[str, Any], shell: Any) -> dict[str, Any]:
    """No private names, none ``shell`` hides, no modules."""
    hidden = set(getattr(shell, "user_ns_hidden", {}) or {})
    return {k: v for k, v in dict(ns).items()
            if not k.startswith("_") and k not in hidden and type(v).__name__ != "module"}


def _short_path(path: str) -> str:  # a traceback names no user's folders
    unix = path.replace("\\", "/")
    if "/site-packages/" in unix:
        return "…/site-packages/" + unix.split("/site-packages/", 1)[1]
    home = os.path.expanduser("~").replace("\\", "/")
    if home not in ("", "/") and unix.startswith(home + "/"):
        return "~" + unix[len(home):]
    return path


def _format_traceback(exc: BaseException, names: dict[str, int]) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if _IPYTHON_DIR not in f.filename.replace("\\", "/")]
    for frame in frames:  # a cell's file is named by its execution count
        match = re.fullmatch(r"<ipython-input-(\d+)-\w+>", frame.filename)
        count = names.get(frame.filename, int(match.group(1)) if match else None)
        frame.filename = _short_path(frame.filename) if count is None else f"In [{count}]"
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(exc), exc)
    return truncate("".join(lines).rstrip("\n"), TRACEBACK_CHARS)


@dataclass
class CellLog:
    """What the kernel does not keep about the user's cells: the tracebacks of failing
    ones (the last :data:`KEPT_ERRORS`) and which were ``%agent`` magics, recorded by a
    ``post_run_cell`` hook between :meth:`start` and :meth:`stop` (both idempotent)."""

    shell: Any
    errors: OrderedDict[int, str] = field(default_factory=OrderedDict)
    agent_cells: set[int] = field(default_factory=set)
    since: int = 0  # cells before it were in an earlier "notebook so far"
    names: dict[str, tuple[int, type]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.mark()

    def mark(self) -> None:
        """Remember where the notebook is now: the next :func:`notebook_so_far` covers
        only the cells run, and the variables rebound, after this (a turn's end)."""
        self.since = len(self.inputs())
        self.names = {k: (id(v), type(v)) for k, v in self.variables().items()}

    def start(self) -> None:
        events = getattr(self.shell, "events", None)
        if events is not None and self._on_post_run not in events.callbacks["post_run_cell"]:
            events.register("post_run_cell", self._on_post_run)

    def stop(self) -> None:
        events = getattr(self.shell, "events", None)
        if events is not None and self._on_post_run in events.callbacks["post_run_cell"]:
            events.unregister("post_run_cell", self._on_post_run)

    def _on_post_run(self, result: Any) -> None:
        count, error = result.execution_count, result.error_in_exec or result.error_before_exec
        if not isinstance(count, int):
            return
        if _AGENT_MAGIC.match(getattr(result.info, "raw_cell", "") or ""):
            self.agent_cells.add(count)
        elif isinstance(error, BaseException):
            names = getattr(getattr(self.shell, "compile", None), "_filename_map", {}) or {}
            try:
                text = _format_traceback(error, dict(names))
            except Exception:  # a hook that fails would complain after every cell
                text = f"{_type_name(error)} (its traceback could not be formatted)"
            self.errors[count] = text
            self.errors.move_to_end(count)  # the last is the newest, should a count come again
            while len(self.errors) > KEPT_ERRORS:
                self.errors.popitem(last=False)

    def variables(self) -> dict[str, Any]:
        return visible_namespace(getattr(self.shell, "user_ns", None) or {}, self.shell)

    def inputs(self) -> list[str]:
        """By execution count (index 0 is empty)."""
        history = getattr(self.shell, "history_manager", None)
        return list(getattr(history, "input_hist_raw", None) or [""])

    def outputs(self) -> dict[int, Any]:
        history = getattr(self.shell, "history_manager", None)
        return dict(getattr(history, "output_hist", None) or {})

    def last_error(self) -> str | None:
        """The traceback of the last failing cell, headed by its execution count: from the
        hook, else from ``sys.last_value`` (cell unknown); ``None`` when none failed."""
        if self.errors:
            count = next(reversed(self.errors))
            return f"Error in [{count}]:\n{self.errors[count]}"
        value = getattr(sys, "last_value", None)
        if isinstance(value, BaseException):
            return "Last error:\n" + _format_traceback(value, {})
        return None


def _output_text(value: Any, privacy: Privacy, values: bool) -> str:
    lines = schema_lines(value)
    text = lines[0] + (f" ({'; '.join(lines[1:])})" if len(lines) > 1 else "")
    if privacy == "preview" or values:
        text += "\n" + preview_text(value, 500 if not values else PREVIEW_CHARS)
    return text


def format_cell(log: CellLog, n: int, privacy: Privacy, *, values: bool = False,
                input_chars: int = -1) -> str:
    """Cell ``n``: its code, output (per ``privacy``) and error; an ``%agent`` cell is
    named as such, its prompt left out. ``KeyError`` if this kernel has no cell ``n``."""
    inputs = log.inputs()
    if not 0 < n < len(inputs):
        raise KeyError(n)
    if n in log.agent_cells or _AGENT_MAGIC.match(inputs[n]):
        return f"In [{n}]: (a jupyter-agent magic: a prompt is in the conversation)"
    parts = [f"In [{n}]:\n{truncate(inputs[n].rstrip(), input_chars)}"]
    outputs = log.outputs()
    if n in outputs:
        parts.append(f"Out [{n}]: {_output_text(outputs[n], privacy, values)}")
    if n in log.errors:
        parts.append(f"Error in [{n}]:\n{log.errors[n]}")
    return "\n".join(parts)


def _one_line(text: str, limit: int) -> str:
    more = text.strip().count("\n")
    line = shorten(" ".join(text.strip().splitlines()[:1]), limit)
    return line + (f" … (+{more} line{'s' if more != 1 else ''})" if more else "")


def notebook_so_far(log: CellLog, privacy: Privacy, budget_tokens: int) -> str | None:
    """What the user did since :meth:`CellLog.mark`, a line per cell run and one for the
    variables rebound, the newest within ``budget_tokens`` (4 characters a token);
    ``None`` when no cell ran, under ``"none"`` or with a budget of 0."""
    inputs = log.inputs()
    numbers = [n for n in range(max(1, log.since), len(inputs))
               if n not in log.agent_cells and not _AGENT_MAGIC.match(inputs[n])]
    if privacy == "none" or budget_tokens <= 0 or not numbers:
        return None
    outputs = log.outputs()
    lines = []
    for n in numbers:
        line = f"In [{n}]: {_one_line(inputs[n], 100)}"
        if n in log.errors:
            line += " → " + _one_line(log.errors[n].rstrip().splitlines()[-1], 120)
        elif n in outputs:
            line += " → " + _one_line(_output_text(outputs[n], privacy, False), 160)
        lines.append(line)
    variables = log.variables()
    changed = [f"{name}{'' if name in log.names else ' (new)'}: "
               + "; ".join(brief_schema(value))[:160]
               for name, value in variables.items()
               if log.names.get(name) != (id(value), type(value))]
    removed = sorted(set(log.names) - set(variables))
    if changed:  # at most half of the budget: the cells keep room
        lines.append(shorten("variables changed: " + " | ".join(changed), budget_tokens * 2))
    if removed:
        lines.append("variables deleted: " + ", ".join(removed[:20]))
    budget, used = budget_tokens * 4, 0
    kept: list[str] = []
    for line in reversed(lines):  # the newest first, within the budget
        if used + len(line) + 1 > budget:
            if not kept:  # the newest line alone is too long: its start
                kept.append(line[:max(1, budget - 1)] + "…")
            if len(kept) < len(lines):
                kept.append(f"(… {len(lines) - len(kept)} earlier lines left out)")
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join([f"--- the notebook since the last prompt (jupyter-agent, context_privacy: "
                      f"{privacy}) ---", *reversed(kept), "--- end of the notebook section ---"])


_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_SPAN = re.compile(r"`[^`\n]*`")
_REFERENCE = re.compile(r"(?:(?<=\s)|^)@(In\[(\d+)\]|Out\[(\d+)\]|error\b|"
                        r"[A-Za-z_][A-Za-z0-9_]*)")
_MAX_REFERENCES = 20


@dataclass
class References:
    """The prompt as sent (with its attachments block) and a notice line per reference."""

    prompt: str
    attached: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


def attach_references(prompt: str, log: CellLog, privacy: Privacy, *,
                      limit: int = 10_000) -> References:
    """Attach what ``@name``, ``@In[N]``, ``@Out[N]`` and ``@error`` in ``prompt`` name.

    A reference starts the prompt or follows whitespace and is outside code (so neither
    ``bob@example.com`` nor a decorator is one); at most 20, each cut to ``limit`` code
    points; none under ``"none"``.
    """
    text = _SPAN.sub(lambda m: " " * len(m.group()), _FENCE.sub(
        lambda m: re.sub(r"[^\n]", " ", m.group()), prompt))
    found = list(dict.fromkeys(match.group(0) for match in _REFERENCE.finditer(text)))
    refs = References(prompt)
    if not found:
        return refs
    if privacy == "none":
        refs.unknown.append(f"not attached: {', '.join(found)} (context_privacy is 'none')")
        return refs
    ns = log.variables()
    inputs, outputs = log.inputs(), log.outputs()
    blocks: list[str] = []
    for ref in found[:_MAX_REFERENCES]:
        body: str | None = None
        n = int(ref[ref.index("[") + 1:-1]) if "[" in ref else 0
        if ref.startswith("@In[") and 0 < n < len(inputs) and not _AGENT_MAGIC.match(inputs[n]):
            body = format_cell(log, n, privacy)
        elif ref.startswith("@Out[") and n in outputs:
            body = f"Out [{n}]: {_output_text(outputs[n], privacy, False)}"
        elif ref == "@error":
            body = log.last_error()
        elif ref[1:] in ns:
            body = describe_value(ref[1:], ns[ref[1:]], privacy)
        if body is None:
            what = ("no cell has failed" if ref == "@error" else
                    "no such cell or output in this kernel" if "[" in ref else
                    "no such variable")
            refs.unknown.append(f"{ref}: {what}; sent as typed")
            continue
        body = truncate(body, limit)
        blocks.append(f"{ref}\n{body}")
        head = " · ".join(line.strip() for line in body.splitlines()[:2])
        refs.attached.append(f"attached {ref}: {head[:160]} ({len(body):,} characters, "
                             f"context_privacy {privacy})")
    if len(found) > _MAX_REFERENCES:
        refs.unknown.append(f"{len(found) - _MAX_REFERENCES} more references not attached "
                            f"(at most {_MAX_REFERENCES})")
    if blocks:
        refs.prompt = "\n\n".join([
            prompt.rstrip(), f"--- attached by jupyter-agent (context_privacy: {privacy}) ---",
            *blocks, "--- end of attachments ---"])
    return refs
