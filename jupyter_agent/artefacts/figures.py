"""A session's figures in its exports.

A ``run_python`` result names each figure its code made on a line of its own,
``[figure 2: PNG, 640×480 px, shown to the user]``, where it was made among the printed
lines; the tool message carries the figure *references* (``figures``). The exports put
the figures back where those lines are:

* ``ipynb``: the code cell's outputs are the printed text in ``stream`` outputs, cut at
  each figure, with a ``display_data`` output per figure between them (``image/png``,
  ``image/jpeg`` as base64, ``image/svg+xml`` as text, and the figure's line as
  ``text/plain``) -- what running the cell in Jupyter shows;
* ``md``: each figure after the call's result, as an image embedded as a ``data:`` URL,
  so the export stays one self-contained file;
* ``json``: the record as stored, whose tool messages keep the references (the figure
  files stay in the memory directory, in ``sessions/<id>.figures/``).

A figure that cannot be read (deleted, refused as unsafe) keeps its text line and gets a
note instead of an image; the export does not fail for it.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any

from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.store.figure_files import FigureData

__all__ = ["ReadFigure", "figure_data", "split_at_figures"]

ReadFigure = Callable[[str], FigureData]
"""``read(figure_id) -> FigureData`` for the exported session (its store's)."""


def _is_line_of(line: str, ref: dict[str, Any]) -> bool:
    return line.startswith(f"[figure {ref.get('n')}:")


def split_at_figures(result: str, refs: Sequence[dict[str, Any]]
                     ) -> list[str | dict[str, Any]]:
    """``result`` cut at the lines naming ``refs``: text pieces and references, in order.

    A reference whose line is not found comes after the text. The naming lines are kept
    in the text pieces only for figures that are not references (not kept).

    Parameters
    ----------
    result : str
        A ``run_python`` result.
    refs : sequence of dict
        The figure references of its tool message.

    Returns
    -------
    list of str or dict
        Non-empty text pieces and references.
    """
    pending = list(refs)
    out: list[str | dict[str, Any]] = []
    text: list[str] = []
    for line in result.splitlines(keepends=True):
        match = next((ref for ref in pending if _is_line_of(line, ref)), None)
        if match is None:
            text.append(line)
            continue
        if text:
            out.append("".join(text))
        text = []
        out.append(match)
        pending.remove(match)
    if text:
        out.append("".join(text))
    out.extend(pending)
    return out


def figure_data(read: ReadFigure | None, ref: dict[str, Any]
                ) -> tuple[dict[str, Any] | None, str]:
    """A figure as MIME data for a notebook output, or why it cannot be.

    Returns
    -------
    (dict or None, str)
        ``({media type: base64 or SVG text}, "")``, or ``(None, why)``.
    """
    if read is None:
        return None, "the figure files were not available to the export"
    try:
        figure = read(str(ref.get("id")))
    except (JupyterAgentError, OSError) as err:
        return None, str(err)
    if figure.media_type == "image/svg+xml":
        return {figure.media_type: figure.data.decode("utf-8", "replace")}, ""
    return {figure.media_type: base64.b64encode(figure.data).decode("ascii")}, ""
