"""Running model-written code like a notebook cell, and keeping what it displays.

Code runs with ``exec`` in the namespace, not ``shell.run_cell`` (the running ``%%agent``
cell would be corrupted); exceptions, ``SystemExit`` too, become text; Ctrl-C is re-raised
as :class:`ToolInterrupted` carrying what was printed. How displays become figures:
docs/design.md, "Figures". matplotlib is never imported here.
"""

from __future__ import annotations

import ast
import base64
import binascii
import contextlib
import io
import linecache
import sys
import threading
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from jupyter_agent.agent.events import Displayed, EventCallback, ignore_event
from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.images import MEDIA_TYPES, image_size, sniff_media_type
from jupyter_agent.notebook import is_jupyter
from jupyter_agent.store import SessionState, new_session_id
from jupyter_agent.store.messages import figure_label
from jupyter_agent.store.records import check_figure


class ToolInterrupted(KeyboardInterrupt):
    """Ctrl-C while model-written code ran; still a ``KeyboardInterrupt``."""

    def __init__(self, output: str) -> None:
        super().__init__()
        self.output = output


class ApprovalInterrupted(KeyboardInterrupt):
    """Ctrl-C at the approval question: the user declined, and the code never ran."""


@dataclass(frozen=True)
class ExecOutcome:
    """What running one piece of code produced (``error``: None when no exception escaped)."""

    stdout: str
    stderr: str
    result: str | None
    error: str | None


def _format_exception(exc: BaseException) -> str:
    te = traceback.TracebackException.from_exception(exc)
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename != __file__])
    return "".join(te.format()).rstrip()


def run_code(code: str, namespace: dict[str, Any]) -> ExecOutcome:
    """Execute ``code`` in ``namespace``, evaluating a last expression like a notebook."""
    filename = f"<agent-cell-{uuid.uuid4().hex[:8]}>"
    out, err = io.StringIO(), io.StringIO()
    result = error = None
    try:
        tree = ast.parse(code, filename=filename, mode="exec")
    except SyntaxError as exc:
        return ExecOutcome("", "", None, _format_exception(exc))
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            exec(compile(tree, filename, "exec"), namespace)
            if isinstance(last, ast.Expr):
                value = eval(compile(ast.Expression(last.value), filename, "eval"), namespace)
                result = None if value is None else repr(value)
    except KeyboardInterrupt as exc:
        printed = format_outcome(ExecOutcome(out.getvalue(), err.getvalue(), None, None))
        raise ToolInterrupted("" if printed == "(no output)" else printed) from exc
    except BaseException as exc:  # SystemExit too: model code must not end the kernel
        error = _format_exception(exc)
    return ExecOutcome(out.getvalue(), err.getvalue(), result, error)


def format_outcome(outcome: ExecOutcome) -> str:
    """The tool result text for an :class:`ExecOutcome` (uncut)."""
    parts = [part for part in (
        outcome.stdout.rstrip("\n") if outcome.stdout else None,
        "[stderr]\n" + outcome.stderr.rstrip("\n") if outcome.stderr else None,
        None if outcome.result is None else "[result]\n" + outcome.result,
        None if outcome.error is None else "[error]\n" + outcome.error) if part is not None]
    return "\n".join(parts) if parts else "(no output)"


def image_of(data: dict[str, Any]) -> tuple[bytes, str] | None:
    """The image of a MIME bundle: PNG, else JPEG, else SVG, as ``(bytes, media type)``."""
    for media_type in MEDIA_TYPES:
        value = data.get(media_type)
        if isinstance(value, bytes | bytearray):
            raw = bytes(value)
        elif isinstance(value, str) and media_type == "image/svg+xml":
            raw = value.encode("utf-8")
        elif isinstance(value, str):
            try:
                raw = base64.b64decode(value, validate=False)
            except (binascii.Error, ValueError):
                continue
        else:
            continue
        if sniff_media_type(raw) == media_type:
            return raw, media_type
    return None


def describe_figure(ref: dict[str, Any]) -> str:
    """``figure 1: PNG, 640×480 px, shown to the user`` for a figure reference."""
    return f"{figure_label(ref)}, {'' if ref.get('shown') else 'not '}shown to the user"


def interleave(printed: str, pieces: list[tuple[int | None, str]]) -> str:
    """``printed`` with each ``(position, text)`` piece put on lines of its own at its
    position (characters printed before it; ``None``: at the end), in order."""
    end, start, out = len(printed), 0, []
    for at, _, text in sorted((end if position is None else min(max(position, 0), end), i, text)
                              for i, (position, text) in enumerate(pieces)):
        chunk = printed[start:at]
        out += [chunk, "\n" if chunk and not chunk.endswith("\n") else "",
                text.rstrip("\n") + "\n"]
        start = at
    return "".join(out) + printed[start:]


INLINE_BACKEND = "module://matplotlib_inline.backend_inline"


def _open_figures() -> dict[int, Any]:
    """pyplot's open figure managers by number (none before pyplot is imported)."""
    if sys.modules.get("matplotlib.pyplot") is None:
        return {}
    from matplotlib._pylab_helpers import Gcf  # pyplot is imported already

    return {int(m.num): m for m in Gcf.get_all_fig_managers()}


@dataclass
class FigureKeeper:
    """Runs ``run_python``'s code and keeps what it displays, the figures of one agent's
    session among it (see the module docstring)."""

    get_state: Callable[[], SessionState]
    save: Callable[[str, bytes, str], object] = check_figure  # checks, then keeps
    emit: EventCallback = ignore_event
    forward: bool = True  # displays go on to the shell (no front end shows the events)
    _shown: list[tuple[int | None, str]] = field(default_factory=list)  # (position, text)
    _refs: list[dict[str, Any]] = field(default_factory=list)  # of the figures kept
    _shows_images: bool = False
    _busy: bool = False

    def run(self, shell: Any, code: str, namespace: dict[str, Any]
            ) -> tuple[ExecOutcome, tuple[dict[str, Any], ...]]:
        """:func:`run_code`, catching what it displays in ``shell`` (None: no shell) in this
        thread; its figures are saved and every output put into the printed text."""
        self._shown, self._refs, error = [], [], ""
        self._shows_images = is_jupyter(shell)
        thread, before, stdout = threading.get_ident(), set(_open_figures()), sys.stdout
        publisher = getattr(shell, "display_pub", None)
        if publisher is None or not callable(getattr(publisher, "publish", None)):
            publisher = None
        else:
            had, saved, original = ("publish" in vars(publisher),
                                    vars(publisher).get("publish"), publisher.publish)

            def publish(data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> Any:
                if (self._busy or threading.get_ident() != thread or kwargs.get("update")
                        or not isinstance(data, dict)):
                    return original(data, metadata, *args, **kwargs)
                position: int | None = None  # where in the printed text
                with contextlib.suppress(Exception):
                    position = int(sys.stdout.tell())
                self._take(dict(data), dict(metadata or {}), position)
                if self.forward:  # printed where displays go, not into the code's output
                    with contextlib.redirect_stdout(stdout):
                        return original(data, metadata, *args, **kwargs)
                return None

            publisher.publish = publish
        try:
            outcome = run_code(code, namespace)
            try:  # after the code: these go after what it printed
                self._collect_figures(publisher is not None, before)
            except Exception as err:  # the code's figure cannot be drawn
                error = f"the figures left open could not be drawn: {type(err).__name__}: {err}"
        finally:
            if publisher is not None:  # as it was: its own attribute, or the class's
                vars(publisher).pop("publish", None)
                if had:
                    publisher.publish = saved
        outcome = replace(outcome, stdout=interleave(outcome.stdout, self._shown))
        if error:
            outcome = replace(outcome, error=f"{outcome.error}\n{error}" if outcome.error
                              else error)
        return outcome, tuple(self._refs)

    def _collect_figures(self, publishing: bool, before: set[int]) -> None:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        if str(pyplot.get_backend()) in (INLINE_BACKEND, "inline"):
            inline = sys.modules.get("matplotlib_inline.backend_inline")
            if inline is not None and publishing:
                inline.flush_figures()
            return
        for number, manager in _open_figures().items():
            if number not in before:
                figure, buffer = manager.canvas.figure, io.BytesIO()
                figure.savefig(buffer, format="png")
                self._take({"image/png": buffer.getvalue(), "text/plain": repr(figure)}, {},
                           None, shown=False)

    def _take(self, data: dict[str, Any], metadata: dict[str, Any], position: int | None,
              shown: bool = True) -> None:
        self._busy = True  # what the front end displays now is not the code's output
        try:
            image = image_of(data)
            if image is None:
                text = data.get("text/plain")
                self._shown.append((position, text if isinstance(text, str) and text.strip()
                                    else f"[display: {', '.join(sorted(data)) or 'nothing'}]"))
                self.emit(Displayed(data, metadata, None))
                return
            raw, media_type = image
            state = self.get_state()
            state.figures += 1
            ref: dict[str, Any] = {"id": new_session_id(), "n": state.figures,
                                   "media_type": media_type}
            size = image_size(raw, media_type)
            if size is not None:
                ref["width"], ref["height"] = size
            ref.update(bytes=len(raw), shown=bool(shown and self._shows_images))
            note = ""
            try:
                self.save(ref["id"], raw, media_type)
            except (JupyterAgentError, OSError) as err:
                note = f"; not kept: {err}"
            else:
                self._refs.append(ref)
            self._shown.append((position, f"[{describe_figure(ref)}{note}]"))
            self.emit(Displayed(data, metadata, dict(ref), shown=shown))
        finally:
            self._busy = False
