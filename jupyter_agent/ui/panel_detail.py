"""``DetailView``: the details of one session under the rows of the sessions panel.

A bordered box: a head line with a Close button, the session's details
(:func:`~jupyter_agent.ui.panel_rows.detail_html`) and its last figures. Its widgets are
made once and reused; showing another session changes their values and replaces the
figure widgets (the old ones are closed). The panel places the box right under the row
of the session it shows.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from jupyter_agent.store.base import Store
from jupyter_agent.ui.panel_rows import button, detail_html, figure_widgets, lines_html

if TYPE_CHECKING:
    from jupyter_agent.store import SessionRecord

__all__ = ["DetailView"]


class DetailView:
    """The detail view of the sessions panel (hidden until a session is shown).

    Parameters
    ----------
    on_close : callable
        Called with the Close button when it is clicked.

    Attributes
    ----------
    box : ipywidgets.VBox
        The view, to place in the panel.
    head, text : ipywidgets.HTML
        The head line and the details.
    close_button : ipywidgets.Button
    figures : ipywidgets.HBox
        The figure widgets of the shown session.
    selected : str or None
        The ID of the session shown, ``None`` while hidden.
    """

    def __init__(self, on_close: Callable[[widgets.Button], Any]) -> None:
        self.head = widgets.HTML(layout=widgets.Layout(flex="1 1 auto"))
        self.close_button = button("Close", "Hide the details")
        self.text = widgets.HTML()
        self.figures = widgets.HBox(layout=widgets.Layout(flex_flow="row wrap"))
        self._head_row = widgets.HBox([self.head, self.close_button])
        self.box = widgets.VBox(
            [self._head_row, self.text, self.figures],
            layout=widgets.Layout(display="none", margin="8px 0 0 0", padding="4px 10px",
                                  border="1px solid var(--jp-border-color1, #bdbdbd)"))
        self.selected: str | None = None
        self._record: SessionRecord | None = None
        self.close_button.on_click(on_close)

    def show(self, session_id: str, name: str, store: Store,
             now: datetime | None = None) -> None:
        """Show the session ``session_id`` (read from ``store``) under the title ``name``;
        its update time relative to ``now`` (default now).

        Raises
        ------
        SessionNotFoundError, CorruptSessionError
            As :meth:`Store.load_session <jupyter_agent.store.base.Store.load_session>`;
            nothing shown changes.
        """
        record = store.load_session(session_id)
        self.head.value = lines_html(f"<b>Details — {html.escape(name)}</b>")
        self.text.value = detail_html(record, now)
        self._set_figures(figure_widgets(record, store))
        self.box.layout.display = "flex"
        self.selected, self._record = session_id, record

    def retime(self, now: datetime) -> None:
        """Say the shown session's update time relative to ``now`` (the rows' reference)."""
        if self._record is not None:
            self.text.value = detail_html(self._record, now)

    def hide(self) -> None:
        """Hide the view and forget what it showed (its figure widgets are closed)."""
        self.box.layout.display = "none"
        self.head.value = self.text.value = ""
        self._set_figures([])
        self.selected = self._record = None

    def all_widgets(self) -> list[widgets.Widget]:
        """Every widget of the view, for the panel to close."""
        return [self.box, self._head_row, self.head, self.close_button, self.text,
                *_with_parts(self.figures.children), self.figures]

    def _set_figures(self, shown: list[widgets.Widget]) -> None:
        """Show ``shown`` under the details (the last figures), closing the previous ones."""
        old, self.figures.children = self.figures.children, tuple(shown)
        for widget in _with_parts(old):
            widget.close()


def _with_parts(shown: Any) -> list[widgets.Widget]:
    """The figure widgets ``shown`` and the image and caption inside each."""
    return [part for widget in shown
            for part in (*getattr(widget, "children", ()), widget)]
