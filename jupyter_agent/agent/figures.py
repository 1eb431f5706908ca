"""The figures a ``run_python`` call makes: numbered, kept with the session, named in
its result.

:class:`FigureKeeper` is the part of the built-in tools that turns what
:class:`~jupyter_agent.agent.capture.OutputCapture` caught into

* a :class:`~jupyter_agent.agent.events.Displayed` event per output, at once, so a front
  end shows it in its place within the turn;
* for each image (PNG, JPEG, SVG): a figure of the session, numbered in order ("figure
  3"), saved through the conversation (a file of the session's store, or memory) *before*
  the tool result that refers to it, and a reference for the tool message
  (``{"id", "n", "media_type", "width", "height", "bytes", "shown"}``, see
  :mod:`jupyter_agent.store.figure_files`);
* a line in the tool result, where the output happened among the printed lines:
  ``[figure 1: PNG, 640×480 px, shown to the user]``; a rich display that is not an
  image (``display(df)``) gives its text form there instead.

A figure that cannot be kept (too large, the disk full) is still named, with why it was
not kept, and gets no reference: nothing ever refers to a file that was not written.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from jupyter_agent.agent.capture import OutputCapture, RichOutput
from jupyter_agent.agent.events import Displayed, EventCallback, ignore_event
from jupyter_agent.agent.pyexec import ExecOutcome
from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.images import FORMAT_NAMES, MEDIA_TYPES, image_size, sniff_media_type
from jupyter_agent.store import SessionState, new_session_id
from jupyter_agent.store.figure_files import check_figure

__all__ = ["FigureKeeper", "PendingFigure", "describe_figure", "image_of", "interleave"]

SaveFigure = Callable[[str, bytes, str], object]
"""``save(figure_id, data, media_type)``: keeps a figure with the session."""


@dataclass
class PendingFigure:
    """A figure caught during a call, numbered, not saved yet.

    Attributes
    ----------
    ref : dict
        Its reference (see the module docstring).
    data : bytes
        The image file.
    position : int or None
        Where it goes among the printed characters (``None``: after them).
    note : str
        Why it was not kept ("" when it was, or not yet tried).
    """

    ref: dict[str, Any]
    data: bytes
    position: int | None
    note: str = ""


def image_of(data: dict[str, Any]) -> tuple[bytes, str] | None:
    """The image of a MIME bundle: PNG, else JPEG, else SVG, as ``(bytes, media type)``.

    Values may be bytes or (as Jupyter sends them) base64 text; SVG is text. ``None``
    when the bundle holds no image that decodes to its media type.
    """
    for media_type in MEDIA_TYPES:
        value = data.get(media_type)
        if value is None:
            continue
        raw: bytes | None = None
        if isinstance(value, bytes | bytearray):
            raw = bytes(value)
        elif isinstance(value, str) and media_type == "image/svg+xml":
            raw = value.encode("utf-8")
        elif isinstance(value, str):
            try:
                raw = base64.b64decode(value, validate=False)
            except (binascii.Error, ValueError):
                raw = None
        if raw is not None and sniff_media_type(raw) == media_type:
            return raw, media_type
    return None


def describe_figure(ref: dict[str, Any]) -> str:
    """``figure 1: PNG, 640×480 px, shown to the user`` for a figure reference."""
    kind = FORMAT_NAMES.get(str(ref.get("media_type")), "image")
    width, height = ref.get("width"), ref.get("height")
    size = f", {width}×{height} px" if isinstance(width, int) and isinstance(height, int) else ""
    seen = "shown to the user" if ref.get("shown") else "not shown to the user"
    return f"figure {ref.get('n', '?')}: {kind}{size}, {seen}"


def interleave(printed: str, pieces: list[tuple[int | None, str]]) -> str:
    """``printed`` with each ``(position, text)`` piece put on lines of its own at its
    position (characters printed before it; ``None``: at the end), in order."""
    if not pieces:
        return printed
    end = len(printed)

    def where(index: int) -> int:
        position = pieces[index][0]
        return end if position is None else min(max(position, 0), end)

    out: list[str] = []
    start, last = 0, "\n"
    for index in sorted(range(len(pieces)), key=lambda i: (where(i), i)):
        at = max(where(index), start)
        chunk = printed[start:at]
        out.append(chunk)
        last = chunk[-1] if chunk else last
        if last != "\n":
            out.append("\n")
        out.append(pieces[index][1].rstrip("\n") + "\n")
        start, last = at, "\n"
    out.append(printed[start:])
    return "".join(out)


class FigureKeeper:
    """Figures of one agent's session (see the module docstring).

    Parameters
    ----------
    get_state : callable
        Returns the session's checkpoint; its ``figures`` count numbers new figures.

    Attributes
    ----------
    save : callable
        ``save(figure_id, data, media_type)`` keeps a figure with the session (the agent
        binds it to its conversation); by default figures are kept nowhere.
    emit : callable
        Receives a :class:`Displayed` event per output, as it happens.
    forward : bool
        Outputs are also published through the shell (no front end shows them).
    """

    def __init__(self, get_state: Callable[[], SessionState]) -> None:
        self._get_state = get_state
        self.save: SaveFigure = lambda figure_id, data, media_type: None
        self.emit: EventCallback = ignore_event
        self.forward = True
        self._pending: list[PendingFigure] = []
        self._texts: list[tuple[int | None, str]] = []
        self._shows_images = False

    def capture(self, shell: Any) -> OutputCapture:
        """A fresh :class:`OutputCapture` for one call in ``shell`` (``None``: no shell)."""
        self._pending, self._texts = [], []
        self._shows_images = _shows_images(shell)
        return OutputCapture(shell, on_output=self._on_output, forward=self.forward)

    def _on_output(self, output: RichOutput) -> None:
        image = image_of(output.data)
        if image is None:
            text = output.data.get("text/plain")
            shown = text if isinstance(text, str) and text.strip() else \
                f"[display: {', '.join(sorted(output.data)) or 'nothing'}]"
            self._texts.append((output.position, shown))
            self.emit(Displayed(output.data, output.metadata, None))
            return
        data, media_type = image
        state = self._get_state()
        state.figures += 1
        ref: dict[str, Any] = {"id": new_session_id(), "n": state.figures,
                               "media_type": media_type}
        size = image_size(data, media_type)
        if size is not None:
            ref["width"], ref["height"] = size
        ref["bytes"] = len(data)
        ref["shown"] = bool(output.shown and self._shows_images)
        pending = PendingFigure(ref, data, output.position)
        self._pending.append(pending)
        self._texts.append((output.position, ""))  # placeholder, filled by keep()
        self.emit(Displayed(output.data, output.metadata, dict(ref), shown=output.shown))

    def keep(self, capture: OutputCapture,
             outcome: ExecOutcome) -> tuple[ExecOutcome, tuple[dict[str, Any], ...]]:
        """Save the call's figures and put every output into the printed text.

        Returns
        -------
        (ExecOutcome, tuple of dict)
            The outcome with the outputs among its printed lines (and a collection error
            added to its error, if any), and the references of the figures kept.
        """
        refs: list[dict[str, Any]] = []
        figures = iter(self._pending)
        pieces: list[tuple[int | None, str]] = []
        for position, text in self._texts:
            if text:
                pieces.append((position, text))
                continue
            pending = next(figures)
            try:
                check_figure(pending.ref["id"], pending.data, pending.ref["media_type"])
                self.save(pending.ref["id"], pending.data, pending.ref["media_type"])
            except (JupyterAgentError, OSError) as err:
                pending.note = f"; not kept: {err}"
            else:
                refs.append(pending.ref)
            pieces.append((position, f"[{describe_figure(pending.ref)}{pending.note}]"))
        self._pending, self._texts = [], []
        outcome = replace(outcome, stdout=interleave(outcome.stdout, pieces))
        if capture.error:
            error = f"{outcome.error}\n{capture.error}" if outcome.error else capture.error
            outcome = replace(outcome, error=error)
        return outcome, tuple(refs)


def _shows_images(shell: Any) -> bool:
    """Whether the user sees images this shell displays: a Jupyter kernel's shell."""
    if shell is None:
        return False
    if type(shell).__name__ == "ZMQInteractiveShell":
        return True
    has_trait = getattr(shell, "has_trait", None)
    return bool(has_trait("kernel")) if callable(has_trait) else False
