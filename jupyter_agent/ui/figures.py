"""Showing a session's figures again: in the history, the resume recap, the panel.

Pure helpers, except :func:`show_blocks`, which prints and displays. A figure is shown
from its file (read through the store, never following a link) as a display of its own:
PNG and JPEG as ``image/png`` / ``image/jpeg`` (``width`` in the display metadata for a
small copy), SVG as ``image/svg+xml``, each with a ``text/plain`` line naming it, which is
what a terminal or a text conversion shows. A figure that cannot be read is named, with
why, instead of failing the whole output.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.store.figure_files import FigureData, figure_label, figure_refs

__all__ = [
    "RECAP_WIDTH",
    "ReadFigure",
    "figure_bundle",
    "figure_label",
    "last_figure",
    "show_blocks",
    "split_at_figures",
]

#: Display width (CSS pixels) of the last figure in the resume recap.
RECAP_WIDTH = 320

ReadFigure = Callable[[str], FigureData]
"""``read(figure_id) -> FigureData`` for one session (the controller's store)."""


def last_figure(messages: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The last figure reference of ``messages`` (``None`` when there is none)."""
    found = None
    for ref in figure_refs(messages):
        found = ref
    return found


def figure_bundle(figure: FigureData, ref: dict[str, Any], *,
                  width: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The display data and metadata showing a figure (``width``: CSS pixels)."""
    label = f"[{figure_label(ref)}]"
    if figure.media_type == "image/svg+xml":
        data: dict[str, Any] = {"image/svg+xml": figure.data.decode("utf-8", "replace")}
    else:
        data = {figure.media_type: base64.b64encode(figure.data).decode("ascii")}
    data["text/plain"] = label
    metadata = {figure.media_type: {"width": width}} if width else {}
    return data, metadata


def split_at_figures(blocks: Sequence[tuple[str, dict[str, Any] | None]]
                     ) -> list[str | dict[str, Any]]:
    """Join text blocks (``"\\n\\n"``) into runs that end where a message has figures.

    Parameters
    ----------
    blocks : sequence of (str, dict or None)
        Each block's text and the message it shows (``None`` for a marker).

    Returns
    -------
    list of str or dict
        Text runs, each followed by the figure references of the message that ended it.
    """
    parts: list[str | dict[str, Any]] = []
    run: list[str] = []
    for text, message in blocks:
        run.append(text)
        refs = list(figure_refs([message])) if message is not None else []
        if refs:
            parts.append("\n\n".join(run))
            parts.extend(refs)
            run = []
    if run:
        parts.append("\n\n".join(run))
    return parts


def show_blocks(parts: Sequence[str | dict[str, Any]], read: ReadFigure | None, *,
                width: int | None = None) -> None:
    """Print the text runs (control characters made inert) and display the figures
    between them, in order.

    Parameters
    ----------
    parts : sequence of str or dict
        From :func:`split_at_figures`.
    read : callable or None
        Reads a figure; ``None`` (a terminal): figures are left to the text, which names
        them.
    width : int, optional
        Display width of the figures (CSS pixels); default their own.
    """
    from IPython.display import display

    from jupyter_agent.ui.display import terminal_text  # (display imports this module)

    text: list[str] = []
    for part in parts:
        if isinstance(part, str):
            text.append(part)
            continue
        if read is None:
            continue
        if text:
            print(terminal_text("\n\n".join(text)))
        text = []
        try:
            figure = read(str(part["id"]))
        except (JupyterAgentError, OSError) as err:
            print(terminal_text(f"[{figure_label(part)}: cannot be shown: {err}]"))
            continue
        data, metadata = figure_bundle(figure, part, width=width)
        display(data, metadata=metadata, raw=True)
    if text:
        print(terminal_text("\n\n".join(text)))
