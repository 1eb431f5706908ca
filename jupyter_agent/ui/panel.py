"""``SessionsPanel``: an ipywidgets view of the sessions of one memory directory.

This module, :mod:`jupyter_agent.ui.panel_rows` and :mod:`jupyter_agent.ui.panel_detail`
are the only ones that import ``ipywidgets`` at module level; the magics import them
lazily (``%agent_sessions`` in a Jupyter kernel).

Layout, top to bottom: a toolbar (text filter, show-archived toggle, Refresh), an error
area, a one-line message area (cleared by the next action), one row per session of the
current page (see :mod:`jupyter_agent.ui.panel_rows`: name, summary excerpt, status, relative
last update, message count, cost, and Details / Resume / Archive|Unarchive / Delete
buttons; the kernel's active session is marked and cannot be resumed again; a session
in use elsewhere can be neither resumed, archived nor deleted), and the pager ("page 1 of 7
(130 sessions)", just "3 sessions" on one page). The delete confirmation bar and the detail
view of the selected session (:mod:`jupyter_agent.ui.panel_detail`: a bordered box; Close
or a second Details click hides it, and so does filtering, paging or deleting its session
away) appear right under the row they concern. Relative times ("5 min ago") are computed
at each redraw, rows and details from the same instant.

Design: child widgets are private attributes; handlers are named ``_on_<widget>_<event>``;
:func:`~jupyter_agent.ui.panel_rows.format_row` is a pure function; every handler is guarded
so that an exception becomes a message in the panel's error area instead of a traceback
in the kernel log.
The store is read once per :meth:`SessionsPanel.refresh` (filtering and paging work on
that listing), so the panel stays responsive with hundreds of sessions.

Widgets are not made per redraw: a row is a fixed slot of widgets (at most
``page_size`` slots, made when first needed) whose values change when the page is
redrawn, so refreshing, filtering and paging open no new comms in the kernel.
:meth:`SessionsPanel.close` closes every widget the panel made.

Outside Jupyter (nbconvert, a console, nbval) the panel's ``text/plain`` form is the
sessions table of ``%agent_sessions`` in a terminal.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import ipywidgets as widgets

from jupyter_agent.artefacts.search import SearchHit, SearchMatch, search_listings, search_sessions
from jupyter_agent.ui.advice import error_message
from jupyter_agent.ui.artefacts import format_search_results
from jupyter_agent.ui.display import format_sessions_table
from jupyter_agent.ui.panel_detail import DetailView
from jupyter_agent.ui.panel_rows import (
    UNTITLED,
    PanelRow,
    RowSlot,
    RowText,
    button,
    format_row,
    lines_html,
    matches,
)

if TYPE_CHECKING:
    from jupyter_agent.store import SessionListing, Store

__all__ = ["PanelRow", "RowText", "SessionsPanel", "format_row", "matches"]

F = TypeVar("F", bound=Callable[..., Any])


def _guarded(func: F) -> F:
    """Clear the last message, then show any exception of a handler in the error area."""

    @functools.wraps(func)
    def wrapper(self: SessionsPanel, *args: Any, **kwargs: Any) -> Any:
        self._errors.value = ""
        self._message.value = ""
        try:
            return func(self, *args, **kwargs)
        except Exception as err:  # the panel is the boundary: nothing reaches the kernel log
            self._show_error(err)
            return None

    return wrapper  # type: ignore[return-value]


class SessionsPanel(widgets.VBox):
    """A browsable, filterable, pageable list of saved sessions.

    Parameters
    ----------
    store : Store
        The store whose sessions are shown.
    on_resume : callable, optional
        Called with a session ID when its Resume button is clicked (the magics make it the
        active session of the kernel). A returned string is shown in the panel.
    on_archive : callable, optional
        Called as ``on_archive(session_id, archived)`` to archive (``True``) or unarchive
        a session; default ``store.set_archived``. A returned string is shown in the
        panel (the magics say there whether the kernel's active session was archived).
    on_delete : callable, optional
        Called with a session ID to delete it after confirmation; default
        ``store.delete_session``. A returned string is shown in the panel.
    page_size : int, optional
        Rows per page (default 20).
    show_archived : bool, optional
        Initial state of the show-archived toggle.
    query : str, optional
        Initial text of the filter (titles, summaries, first prompts, IDs).
    deep : bool, optional
        The filter searches the full transcripts too (when Enter is pressed, since it reads
        every session).
    """

    def __init__(self, store: Store, *, on_resume: Callable[[str], Any] | None = None,
                 on_archive: Callable[[str, bool], Any] | None = None,
                 on_delete: Callable[[str], Any] | None = None, page_size: int = 20,
                 show_archived: bool = False, query: str = "", deep: bool = False) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1 (got {page_size})")
        self._store = store
        self._on_resume = on_resume
        self._on_archive = on_archive or (lambda sid, flag: store.update(sid, archived=flag))
        self._on_delete = on_delete or store.delete_session
        self._page_size = page_size
        self._page = 0
        self._listing: list[SessionListing] = []
        self._rows: list[PanelRow] = []
        self._slots: list[RowSlot] = []
        self._pending_delete: str | None = None
        self._deep = deep
        self._found: dict[str, SearchMatch] = {}
        self._deep_hits: tuple[str, list[SearchHit]] | None = None

        self._filter = widgets.Text(value=query, continuous_update=not deep,
                                    placeholder="search: title, summary, first prompt, ID"
                                    + (", transcript" if deep else ""),
                                    layout=widgets.Layout(flex="1 1 auto", width="auto",
                                                          min_width="160px", max_width="420px"))
        self._show_archived = widgets.Checkbox(value=show_archived, description="show archived",
                                               indent=False, layout=widgets.Layout(width="auto"))
        self._refresh = button("Refresh", "Re-read the sessions from disk")
        self._errors = widgets.HTML()
        self._message = widgets.HTML()
        self._rows_box = widgets.VBox()
        self._empty = widgets.HTML()
        self._confirm_text = widgets.HTML()
        self._confirm = button("Delete for good", style="danger")
        self._cancel = button("Cancel")
        self._confirm_box = widgets.HBox([self._confirm_text, self._confirm, self._cancel],
                                         layout=widgets.Layout(display="none",
                                                               flex_flow="row wrap"))
        self._prev = button("◀ Prev")
        self._next = button("Next ▶")
        self._page_label = widgets.Label()
        self._details = DetailView(self._on_detail_close_click)

        self._filter.observe(self._on_filter_value, names="value")
        self._show_archived.observe(self._on_show_archived_value, names="value")
        self._refresh.on_click(self._on_refresh_click)
        self._confirm.on_click(self._on_confirm_click)
        self._cancel.on_click(self._on_cancel_click)
        self._prev.on_click(self._on_prev_click)
        self._next.on_click(self._on_next_click)

        self._toolbar = widgets.HBox([self._filter, self._show_archived, self._refresh],
                                     layout=widgets.Layout(align_items="center",
                                                           flex_flow="row wrap"))
        self._pager = widgets.HBox([self._prev, self._page_label, self._next],
                                   layout=widgets.Layout(align_items="center"))
        super().__init__([self._toolbar, self._errors, self._message, self._rows_box,
                          self._pager])
        self.refresh()

    # ---- public
    @property
    def rows(self) -> list[PanelRow]:
        """The rows of the current page, in display order."""
        return list(self._rows)

    @property
    def page(self) -> int:
        """The current page, 0-based."""
        return self._page

    @property
    def page_count(self) -> int:
        """How many pages the filtered listing has (at least 1)."""
        return max(1, -(-len(self._visible()) // self._page_size))

    @property
    def error(self) -> str:
        """The HTML of the error area ("" when the last action succeeded)."""
        return str(self._errors.value)

    @property
    def detail_visible(self) -> bool:
        """True while the detail view of a session is shown."""
        return self._details.selected is not None

    def text_table(self) -> str:
        """The sessions of the current page as the plain-text table of a terminal (what
        the panel shows, nothing more: it is saved with the notebook's outputs), with where
        the filter's text was found while it filters."""
        start = self._page * self._page_size
        if self._filter.value.strip():
            hits = self._search()[start:start + self._page_size]
            table = format_search_results(hits, query=self._filter.value.strip())
        else:
            table = format_sessions_table(self._visible()[start:start + self._page_size])
        if self.page_count > 1:
            table += f"\n({self._page_label.value})"
        return table

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        data = super()._repr_mimebundle_(**kwargs)
        if data is not None:
            data["text/plain"] = self.text_table()
        return data

    def close(self) -> None:
        """Close every widget of the panel (their comms), then the panel itself."""
        owned: list[Any] = [self._toolbar, self._pager, self._empty, *self._pager.children,
                            *self._toolbar.children, self._errors, self._message, self._rows_box,
                            self._confirm_box, *self._confirm_box.children,
                            *self._details.all_widgets()]
        for slot in self._slots:
            owned += slot.all_widgets()
        for widget in owned:
            for part in ("layout", "style"):
                sub = getattr(widget, part, None)
                if isinstance(sub, widgets.Widget):
                    sub.close()
            widget.close()
        self._slots, self._rows = [], []
        self.layout.close()
        super().close()

    @_guarded
    def refresh(self) -> None:
        """Re-read the store and redraw (keeps the filter, the toggle and if possible the page)."""
        self._reload()

    # ---- drawing
    def _reload(self) -> None:
        listing = self._store.list_sessions(include_archived=True)
        # who holds a session in use elsewhere, where the listing does not say
        self._listing = [s if s.status != "in use" or s.holder is not None else
                         s.model_copy(update={"holder": self._store.describe_session(s.id).holder})
                         for s in listing]
        self._deep_hits = None
        self._render()

    def _search(self) -> list[SearchHit]:
        """The shown sessions that match the filter, with where."""
        shown = [s for s in self._listing if self._show_archived.value or not s.archived]
        query = self._filter.value
        if not (self._deep and query.strip()):
            return search_listings(shown, query)
        if self._deep_hits is None or self._deep_hits[0] != query:
            self._deep_hits = (query, search_sessions(self._store, query, deep=True,
                                                      include_archived=True))
        ids = {s.id for s in shown}
        return [hit for hit in self._deep_hits[1] if hit.session.id in ids]

    def _visible(self) -> list[SessionListing]:
        hits = self._search()
        self._found = {hit.session.id: hit.matches[0] for hit in hits if hit.matches}
        return [hit.session for hit in hits]

    def _render(self) -> None:
        now = datetime.now(UTC)
        visible = self._visible()
        self._page = min(self._page, self.page_count - 1)
        start = self._page * self._page_size
        page = visible[start:start + self._page_size]
        while len(self._slots) < len(page):
            self._slots.append(RowSlot(self._on_row_click))
        self._rows = [slot.show(s, self._found.get(s.id), now)
                      for slot, s in zip(self._slots, page, strict=False)]
        for slot in self._slots[len(page):]:
            slot.clear()
        self._empty.value = lines_html(f"<i>no sessions {'match' if self._listing else 'yet'}</i>")
        count = f"{len(visible)} session" + ("" if len(visible) == 1 else "s")
        paged = self.page_count > 1
        self._page_label.value = (f"page {self._page + 1} of {self.page_count} ({count})"
                                  if paged else count)
        self._prev.layout.display = self._next.layout.display = None if paged else "none"
        self._pager.layout.display = None if visible else "none"
        self._prev.disabled = self._page == 0
        self._next.disabled = self._page >= self.page_count - 1
        on_page = {r.session_id for r in self._rows}
        if self._details.selected is not None:
            if self._details.selected in on_page:
                self._details.retime(now)
            else:
                self._details.hide()
        if self._pending_delete is not None and self._pending_delete not in on_page:
            self._close_confirm()
        self._place()

    def _place(self) -> None:
        """The rows, with the delete confirmation and the detail view right under the row
        they concern (not under the whole list, off screen for a top row)."""
        children: list[widgets.Widget] = []
        for row in self._rows:
            children.append(row.box)
            if row.session_id == self._pending_delete:
                children.append(self._confirm_box)
            if row.session_id == self._details.selected:
                children.append(self._details.box)
        self._rows_box.children = children or [self._empty]

    def _name(self, session_id: str) -> str:
        listing = next((s for s in self._listing if s.id == session_id), None)
        return format_row(listing).name if listing is not None else UNTITLED

    def _label(self, session_id: str) -> str:
        """``‘Title’ (ID)`` for messages, or ``session ID`` when it has no name."""
        name = self._name(session_id)
        return f"session {session_id}" if name == UNTITLED else f"‘{name}’ ({session_id})"

    def _show_error(self, err: BaseException) -> None:
        text = html.escape(error_message(err))
        self._errors.value = lines_html(f'<span style="color:#b00020">⚠ {text}</span>')

    def _say(self, text: str) -> None:
        self._message.value = lines_html(html.escape(text))

    # ---- handlers
    def _on_row_click(self, action: str, slot: RowSlot) -> None:
        if action == "archive":
            self._on_archive_click(slot.session_id, not slot.archived)
        else:
            getattr(self, f"_on_{action}_click")(slot.session_id)

    @_guarded
    def _on_filter_value(self, change: dict[str, Any]) -> None:
        self._page = 0
        self._render()

    @_guarded
    def _on_show_archived_value(self, change: dict[str, Any]) -> None:
        self._render()

    @_guarded
    def _on_refresh_click(self, _button: widgets.Button) -> None:
        self._reload()

    @_guarded
    def _on_prev_click(self, _button: widgets.Button) -> None:
        self._page = max(self._page - 1, 0)
        self._render()

    @_guarded
    def _on_next_click(self, _button: widgets.Button) -> None:
        self._page = min(self._page + 1, self.page_count - 1)
        self._render()

    @_guarded
    def _on_details_click(self, session_id: str) -> None:
        if self._details.selected == session_id:  # a second click hides it
            self._details.hide()
            self._place()
        else:
            self._details.show(session_id, self._name(session_id), self._store)
            self._render()  # rows and details say their times from the same instant

    @_guarded
    def _on_detail_close_click(self, _button: widgets.Button) -> None:
        self._details.hide()
        self._place()

    @_guarded
    def _on_resume_click(self, session_id: str) -> None:
        if self._on_resume is None:
            raise RuntimeError("this panel has no resume action (on_resume was not given)")
        said = self._on_resume(session_id)
        self._say(said if isinstance(said, str) else
                  f"Resumed {self._label(session_id)} — it is this kernel's active session; "
                  "continue with %%agent")
        self._reload()

    @_guarded
    def _on_archive_click(self, session_id: str, archived: bool) -> None:
        said = self._on_archive(session_id, archived)
        self._say(said if isinstance(said, str) else
                  f"{'Archived' if archived else 'Unarchived'} {self._label(session_id)}.")
        self._reload()

    @_guarded
    def _on_delete_click(self, session_id: str) -> None:
        self._pending_delete = session_id
        self._confirm_text.value = lines_html(
            f"Delete <b>{html.escape(self._label(session_id))}</b> for good?")
        self._confirm_box.layout.display = "flex"
        self._place()

    def _close_confirm(self) -> None:
        self._pending_delete = None
        self._confirm_box.layout.display = "none"
        self._confirm_text.value = ""
        self._place()

    @_guarded
    def _on_confirm_click(self, _button: widgets.Button) -> None:
        session_id = self._pending_delete
        self._close_confirm()
        if session_id is None:
            return
        label = self._label(session_id)
        said = self._on_delete(session_id)
        if self._details.selected == session_id:
            self._details.hide()
        self._say(said if isinstance(said, str) else f"Deleted {label}.")
        self._reload()

    @_guarded
    def _on_cancel_click(self, _button: widgets.Button) -> None:
        self._close_confirm()
        self._say("Nothing deleted.")
