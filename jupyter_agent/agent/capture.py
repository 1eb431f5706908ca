"""Capturing what agent-run code displays: ``display()`` and matplotlib figures.

``run_python`` executes code with ``exec`` inside a ``%%agent`` cell, not as a cell of its
own, so neither the shell's display machinery nor matplotlib's inline backend knows the
code is a step the model should hear about. :class:`OutputCapture` wraps one call:

* **The display publisher.** While the code runs, the shell's
  ``display_pub.publish`` is wrapped (an attribute of that one publisher object, put
  back afterwards, also after an error or Ctrl-C). Every new display published *from
  the thread running the code* -- ``display(df)``, ``display(Image(...))``,
  ``plt.show()`` under the inline backend -- becomes a :class:`RichOutput`, recorded
  with how much the code had printed by then, so it takes its place among the printed
  lines. Updates of an existing display (``update=True``), displays from other threads
  (a front end's status line, say) and whatever the front end publishes while it shows
  an output pass straight through.
* **Showing, once.** Each output is handed to ``on_output`` at once. With
  ``forward=True`` (no front end watching) it is also published as the code meant,
  so the user sees it where a cell would show it; with ``forward=False`` the front end
  shows it from the event it receives, in its place within the turn.
* **matplotlib.** At the end of the call (when the ``with`` block ends without an
  exception), figures left
  open are what a notebook would show at the end of a cell: under the inline backend
  its own ``flush_figures`` is called (figures drawn since the last show are displayed,
  through the wrapped publisher, and closed, so the end of the ``%%agent`` cell shows
  none twice); under any other backend, figures *created during the call* and still
  open are rendered to PNG for the record without being displayed or closed (the
  backend shows them its own way, or not at all). ``matplotlib`` is never imported
  here: without ``matplotlib.pyplot`` in ``sys.modules`` there is nothing to collect.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["INLINE_BACKEND", "OutputCapture", "RichOutput"]

INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
"""The backend a Jupyter kernel uses for matplotlib by default."""


@dataclass(frozen=True)
class RichOutput:
    """One rich output of agent-run code.

    Attributes
    ----------
    data : dict
        The MIME bundle as published (``{"image/png": ..., "text/plain": ...}``).
    metadata : dict
        Its metadata (e.g. a retina figure's display ``width``).
    position : int or None
        How many characters the code had printed when it was displayed; ``None`` when it
        came after everything printed (figures collected at the end of the call).
    shown : bool
        Whether it is meant to be shown to the user (False for figures rendered only for
        the record under a non-inline matplotlib backend).
    """

    data: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    position: int | None = None
    shown: bool = True


def _printed() -> int | None:
    """How much the running code has printed: the position of the redirected stdout."""
    tell = getattr(sys.stdout, "tell", None)
    try:
        return int(tell()) if callable(tell) else None
    except (OSError, ValueError):
        return None


class OutputCapture:
    """Capture the rich output of one ``run_python`` call (see the module docstring).

    Parameters
    ----------
    shell : IPython shell or None
        Whose display publisher is wrapped; ``None``: only matplotlib figures are
        collected.
    on_output : callable
        Receives each :class:`RichOutput` as it happens.
    forward : bool
        Also publish each output through the shell's publisher (no front end shows it).

    Attributes
    ----------
    outputs : list of RichOutput
        What was captured, in order.
    error : str
        Why collecting the matplotlib figures failed ("" when it did not): rendering a
        figure is the code's business, so its failure is reported like the code's own.
    """

    def __init__(self, shell: Any, *, on_output: Callable[[RichOutput], object],
                 forward: bool) -> None:
        self.shell = shell
        self.on_output = on_output
        self.forward = forward
        self.outputs: list[RichOutput] = []
        self.error = ""
        self._publisher: Any = None
        self._had_attribute = False
        self._saved: Any = None
        self._thread = 0
        self._busy = False
        self._figures_before: set[int] = set()
        self._stdout: Any = None
        self._collecting = False

    # ---- the publisher
    def __enter__(self) -> OutputCapture:
        self._thread = threading.get_ident()
        self._figures_before = set(_open_figure_numbers())
        self._stdout = sys.stdout  # where a forwarded display prints, not the code's output
        publisher = getattr(self.shell, "display_pub", None)
        if publisher is None or not callable(getattr(publisher, "publish", None)):
            return self
        self._publisher = publisher
        self._had_attribute = "publish" in vars(publisher)
        self._saved = vars(publisher).get("publish")
        original = publisher.publish

        def publish(data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> Any:
            if (self._busy or threading.get_ident() != self._thread or kwargs.get("update")
                    or not isinstance(data, dict)):
                return original(data, metadata, *args, **kwargs)
            position = None if self._collecting else _printed()
            self._take(RichOutput(dict(data), dict(metadata or {}), position))
            if self.forward:
                with contextlib.redirect_stdout(self._stdout):
                    return original(data, metadata, *args, **kwargs)
            return None

        publisher.publish = publish
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        try:
            if exc_type is None:
                self._collecting = True  # after the code: these go after what it printed
                try:
                    self._collect_figures()
                except Exception as err:  # the code's figure cannot be drawn
                    self.error = (f"the figures left open could not be drawn: "
                                  f"{type(err).__name__}: {err}")
        finally:
            self._collecting = False
            self._restore()

    def _restore(self) -> None:
        publisher, self._publisher = self._publisher, None
        if publisher is None:
            return
        if self._had_attribute:
            publisher.publish = self._saved
        else:
            vars(publisher).pop("publish", None)

    def _take(self, item: RichOutput) -> None:
        self.outputs.append(item)
        self._busy = True  # what the front end displays now is not the code's output
        try:
            self.on_output(item)
        finally:
            self._busy = False

    # ---- matplotlib
    def _collect_figures(self) -> None:
        """Collect the matplotlib figures the call left open (see the module docstring)."""
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        backend = str(pyplot.get_backend())
        if backend in (INLINE_BACKEND, "inline"):
            inline = sys.modules.get("matplotlib_inline.backend_inline")
            if inline is not None and self._publisher is not None:
                inline.flush_figures()
            return
        from matplotlib._pylab_helpers import Gcf

        for manager in Gcf.get_all_fig_managers():
            if manager.num in self._figures_before:
                continue
            figure = manager.canvas.figure
            buffer = io.BytesIO()
            figure.savefig(buffer, format="png")
            text = repr(figure)
            self._take(RichOutput({"image/png": buffer.getvalue(), "text/plain": text},
                                  {}, None, shown=False))


def _open_figure_numbers() -> list[int]:
    """The numbers of the matplotlib figures open now (none without pyplot imported)."""
    if sys.modules.get("matplotlib.pyplot") is None:
        return []
    from matplotlib._pylab_helpers import Gcf

    return [int(m.num) for m in Gcf.get_all_fig_managers()]
