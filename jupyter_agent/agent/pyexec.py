"""Run model-written Python in a namespace the way a notebook cell would, capturing output.

The code runs with ``exec`` directly in the namespace (the IPython user namespace when
a shell exists), *not* through ``shell.run_cell``: the agent is itself usually running
inside a cell magic, and re-entering ``run_cell`` from there would corrupt the
execution count, history and display hooks. Like a notebook, a final expression
statement is evaluated and its ``repr`` reported. ``stdout``/``stderr`` are redirected
for the duration; exceptions (including ``SyntaxError`` and ``SystemExit``) are
reported as text. ``KeyboardInterrupt`` is re-raised so Ctrl-C interrupts the turn, as a
:class:`ToolInterrupted` that carries what the code had printed until then.

Text is cut by code points (Python ``str`` indexing), never inside a UTF-16
surrogate pair, with a visible marker saying how much was left out.
"""

from __future__ import annotations

import ast
import contextlib
import io
import linecache
import traceback
import uuid
from dataclasses import dataclass
from typing import Any

__all__ = ["ApprovalInterrupted", "ExecOutcome", "ToolInterrupted", "format_outcome",
           "run_code", "truncate"]


class ToolInterrupted(KeyboardInterrupt):
    """Ctrl-C while model-written code ran; still a ``KeyboardInterrupt``.

    Attributes
    ----------
    output : str
        What the code had printed (stdout, then stderr) when it was interrupted.
    """

    def __init__(self, output: str) -> None:
        super().__init__()
        self.output = output


class ApprovalInterrupted(KeyboardInterrupt):
    """Ctrl-C at the approval question: the user declined, and the code never ran.

    The turn ends as on any Ctrl-C, but the call is answered as refused (and not
    counted as a tool call), not as interrupted while running.
    """


@dataclass(frozen=True)
class ExecOutcome:
    """What running one piece of code produced.

    Attributes
    ----------
    stdout, stderr : str
    result : str or None
        ``repr`` of the final expression's value (None when there was none or it
        was ``None``).
    error : str or None
        The exception as a short traceback text, or None on success.
    """

    stdout: str
    stderr: str
    result: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        """True when no exception escaped the code."""
        return self.error is None


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` code points, keeping both ends, with a marker between.

    About half of the kept characters come from the start and half from the end, so a
    traceback at the end of long output stays visible; the marker in the middle says
    how many characters were cut. Counting is by code points (never inside a
    surrogate pair); the marker is not counted in ``limit``.

    Parameters
    ----------
    text : str
    limit : int
        Code points to keep; negative means no limit.

    Returns
    -------
    str
        ``text`` unchanged when it fits.

    Examples
    --------
    >>> truncate("abcdefgh", 4)
    'ab\\n... [output truncated: 4 characters cut] ...\\ngh'
    """
    if limit < 0 or len(text) <= limit:
        return text
    tail = limit // 2
    head = limit - tail
    end = text[len(text) - tail :] if tail else ""
    marker = f"\n... [output truncated: {len(text) - limit:,} characters cut] ...\n"
    return f"{text[:head]}{marker}{end}"


def _format_exception(exc: BaseException, filename: str) -> str:
    """The traceback text, without the harness's own frames."""
    te = traceback.TracebackException.from_exception(exc)
    frames = [f for f in te.stack if f.filename != __file__]
    te.stack = traceback.StackSummary.from_list(frames)
    return "".join(te.format()).rstrip()


def run_code(code: str, namespace: dict[str, Any]) -> ExecOutcome:
    """Execute ``code`` in ``namespace``, evaluating a last expression like a notebook.

    Parameters
    ----------
    code : str
    namespace : dict
        Globals for the code (e.g. ``shell.user_ns``); modified in place.

    Returns
    -------
    ExecOutcome

    Raises
    ------
    ToolInterrupted
        On Ctrl-C (a ``KeyboardInterrupt`` with what was printed until then), so the
        caller can record the interrupt and re-raise it.
    """
    filename = f"<agent-cell-{uuid.uuid4().hex[:8]}>"
    out, err = io.StringIO(), io.StringIO()
    result: str | None = None
    error: str | None = None
    try:
        tree = ast.parse(code, filename=filename, mode="exec")
    except SyntaxError as exc:
        return ExecOutcome("", "", None, _format_exception(exc, filename))
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    last: ast.Expression | None = None
    final = tree.body[-1] if tree.body else None
    if isinstance(final, ast.Expr):
        tree.body.pop()
        last = ast.Expression(final.value)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            exec(compile(tree, filename, "exec"), namespace)
            if last is not None:
                value = eval(compile(last, filename, "eval"), namespace)
                if value is not None:
                    result = repr(value)
    except KeyboardInterrupt as exc:
        printed = format_outcome(ExecOutcome(out.getvalue(), err.getvalue(), None, None))
        raise ToolInterrupted("" if printed == "(no output)" else printed) from exc
    except BaseException as exc:  # SystemExit too: model code must not end the kernel
        error = _format_exception(exc, filename)
    return ExecOutcome(out.getvalue(), err.getvalue(), result, error)


def format_outcome(outcome: ExecOutcome) -> str:
    """The tool result text for an :class:`ExecOutcome` (uncut)."""
    parts: list[str] = []
    if outcome.stdout:
        parts.append(outcome.stdout.rstrip("\n"))
    if outcome.stderr:
        parts.append("[stderr]\n" + outcome.stderr.rstrip("\n"))
    if outcome.result is not None:
        parts.append("[result]\n" + outcome.result)
    if outcome.error is not None:
        parts.append("[error]\n" + outcome.error)
    return "\n".join(parts) if parts else "(no output)"
