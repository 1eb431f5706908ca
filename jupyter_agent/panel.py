"""``SessionsPanel``: an ipywidgets view of the sessions of one memory directory.

This is the only module that imports ``ipywidgets`` at module level; the magics import
it lazily (``%agent_sessions`` in a Jupyter kernel).

Layout, top to bottom: a toolbar (text filter, show-archived toggle, Refresh), an error
area, a message area, one row per session of the current page (title or first words of
the first prompt, summary excerpt, relative last update, status, message count, cost,
and Details / Resume / Archive|Unarchive / Delete buttons), a delete confirmation bar,
the pager ("page 1 of 7"), and the detail view of the selected session.

Design: child widgets are private attributes; handlers are named ``_on_<widget>_<event>``;
:func:`format_row` is a pure function; every handler is guarded so that an exception
becomes a message in the panel's error area instead of a traceback in the kernel log.
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
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import ipywidgets as widgets

from jupyter_agent.display import (
    format_cost,
    format_sessions_table,
    message_text,
    one_line,
    relative_time,
)

if TYPE_CHECKING:
    from jupyter_agent.store import SessionListing, SessionStore

__all__ = ["PanelRow", "RowText", "SessionsPanel", "format_row", "matches"]

F = TypeVar("F", bound=Callable[..., Any])


class RowText(NamedTuple):
    """The texts of one panel row (see :func:`format_row`)."""

    name: str
    summary: str
    updated: str
    status: str
    messages: str
    cost: str


def format_row(listing: SessionListing, now: datetime | None = None) -> RowText:
    """Format one session for the panel (a pure function).

    Parameters
    ----------
    listing : SessionListing
    now : datetime, optional
        The reference for the relative update time (default: now, UTC).

    Returns
    -------
    RowText
        ``name`` is the title, else the first words of the first prompt, else the ID;
        ``cost`` is in USD.
    """
    name = listing.title or one_line(listing.first_prompt, 60) or listing.id
    status = listing.status + (", archived" if listing.archived else "")
    from jupyter_agent.store import Usage

    return RowText(
        name=one_line(name, 60),
        summary=one_line(listing.summary, 120),
        updated=relative_time(listing.updated_at, now),
        status=status,
        messages=f"{listing.message_count} msg" + ("" if listing.message_count == 1 else "s"),
        cost=format_cost(Usage(cost_usd=listing.cost_usd)),
    )


def matches(listing: SessionListing, query: str) -> bool:
    """True if ``query`` (case-insensitive) occurs in the ID, title, summary or first prompt."""
    q = query.strip().lower()
    return not q or any(q in text.lower() for text in
                        (listing.id, listing.title, listing.summary, listing.first_prompt))


@dataclass(frozen=True)
class PanelRow:
    """The widgets of one row, for callers and tests that drive the panel."""

    session_id: str
    text: RowText
    box: widgets.HBox
    details: widgets.Button
    resume: widgets.Button
    archive: widgets.Button
    delete: widgets.Button


def _guarded(func: F) -> F:
    """Show any exception of a handler in the panel's error area."""

    @functools.wraps(func)
    def wrapper(self: SessionsPanel, *args: Any, **kwargs: Any) -> Any:
        self._errors.value = ""
        try:
            return func(self, *args, **kwargs)
        except Exception as err:  # the panel is the boundary: nothing reaches the kernel log
            self._show_error(err)
            return None

    return wrapper  # type: ignore[return-value]


def _button(description: str, tooltip: str = "", style: str = "") -> widgets.Button:
    return widgets.Button(description=description, tooltip=tooltip, button_style=style,
                          layout=widgets.Layout(width="auto"))


class _Slot:
    """The widgets of one row position, reused for whichever session it shows."""

    def __init__(self, panel: SessionsPanel) -> None:
        self.session_id = ""
        self.archived = False
        self.info = widgets.HTML(layout=widgets.Layout(width="40%"))
        self.meta = widgets.HTML()
        self.details = _button("Details", "Show summary, todos and last messages")
        self.resume = _button("Resume", "Make this the active session of this kernel", "primary")
        self.archive = _button("Archive")
        self.delete = _button("Delete", "Delete this session (asks first)", "danger")
        self.details.on_click(lambda _b: panel._on_details_click(self.session_id))
        self.resume.on_click(lambda _b: panel._on_resume_click(self.session_id))
        self.archive.on_click(lambda _b: panel._on_archive_click(self.session_id,
                                                                 not self.archived))
        self.delete.on_click(lambda _b: panel._on_delete_click(self.session_id))
        self.box = widgets.HBox([self.info, self.meta, self.details, self.resume, self.archive,
                                 self.delete])

    def show(self, listing: SessionListing) -> PanelRow:
        """Show ``listing`` in this slot and return the row as callers see it."""
        text = format_row(listing)
        self.session_id, self.archived = listing.id, listing.archived
        self.info.value = (f"<b>{html.escape(text.name)}</b> <small>{html.escape(listing.id)}"
                           f"</small><br><small>{html.escape(text.summary)}</small>")
        self.meta.value = " · ".join(html.escape(t) for t in
                                     (text.updated, text.status, text.messages, text.cost))
        self.archive.description = "Unarchive" if listing.archived else "Archive"
        return PanelRow(listing.id, text, self.box, self.details, self.resume, self.archive,
                        self.delete)


class SessionsPanel(widgets.VBox):
    """A browsable, filterable, pageable list of saved sessions.

    Parameters
    ----------
    store : SessionStore
        The store whose sessions are shown.
    on_resume : callable, optional
        Called with a session ID when its Resume button is clicked (the magics make it the
        active session of the kernel). A returned string is shown in the panel.
    on_delete : callable, optional
        Called with a session ID to delete it after confirmation; default
        ``store.delete_session``.
    page_size : int, optional
        Rows per page (default 20).
    show_archived : bool, optional
        Initial state of the show-archived toggle.
    """

    def __init__(self, store: SessionStore, *, on_resume: Callable[[str], Any] | None = None,
                 on_delete: Callable[[str], Any] | None = None, page_size: int = 20,
                 show_archived: bool = False) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1 (got {page_size})")
        self._store = store
        self._on_resume = on_resume
        self._on_delete = on_delete or store.delete_session
        self._page_size = page_size
        self._page = 0
        self._listing: list[SessionListing] = []
        self._rows: list[PanelRow] = []
        self._slots: list[_Slot] = []
        self._pending_delete: str | None = None
        self._selected: str | None = None

        self._filter = widgets.Text(placeholder="filter: title, summary, first prompt or ID",
                                    continuous_update=True)
        self._show_archived = widgets.Checkbox(value=show_archived, description="show archived",
                                               indent=False)
        self._refresh = _button("Refresh", "Re-read the sessions from disk")
        self._errors = widgets.HTML()
        self._message = widgets.HTML()
        self._rows_box = widgets.VBox()
        self._empty = widgets.HTML()
        self._confirm_text = widgets.HTML()
        self._confirm = _button("Delete for good", style="danger")
        self._cancel = _button("Cancel")
        self._confirm_box = widgets.HBox([self._confirm_text, self._confirm, self._cancel],
                                         layout=widgets.Layout(display="none"))
        self._prev = _button("◀ Prev")
        self._next = _button("Next ▶")
        self._page_label = widgets.Label()
        self._detail = widgets.HTML()

        self._filter.observe(self._on_filter_value, names="value")
        self._show_archived.observe(self._on_show_archived_value, names="value")
        self._refresh.on_click(self._on_refresh_click)
        self._confirm.on_click(self._on_confirm_click)
        self._cancel.on_click(self._on_cancel_click)
        self._prev.on_click(self._on_prev_click)
        self._next.on_click(self._on_next_click)

        self._toolbar = widgets.HBox([self._filter, self._show_archived, self._refresh])
        self._pager = widgets.HBox([self._prev, self._page_label, self._next])
        super().__init__([self._toolbar, self._errors, self._message, self._rows_box,
                          self._confirm_box, self._pager, self._detail])
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

    def text_table(self) -> str:
        """The sessions the panel shows (all pages) as the plain-text table of a terminal."""
        return format_sessions_table(self._visible())

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        data = super()._repr_mimebundle_(**kwargs)
        if data is not None:
            data["text/plain"] = self.text_table()
        return data

    def close(self) -> None:
        """Close every widget of the panel (their comms), then the panel itself."""
        owned: list[Any] = [self._toolbar, self._pager, self._empty, *self._pager.children,
                            *self._toolbar.children, self._errors, self._message, self._rows_box,
                            self._confirm_box, *self._confirm_box.children, self._detail]
        for slot in self._slots:
            owned += [slot.box, *slot.box.children]
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
        self._listing = self._store.list_sessions(include_archived=True)
        self._render()

    # ---- drawing
    def _visible(self) -> list[SessionListing]:
        return [s for s in self._listing
                if (self._show_archived.value or not s.archived) and matches(s, self._filter.value)]

    def _render(self) -> None:
        visible = self._visible()
        self._page = min(self._page, self.page_count - 1)
        start = self._page * self._page_size
        page = visible[start:start + self._page_size]
        while len(self._slots) < len(page):
            self._slots.append(_Slot(self))
        self._rows = [slot.show(s) for slot, s in zip(self._slots, page, strict=False)]
        self._empty.value = f"<i>no sessions {'match' if self._listing else 'yet'}</i>"
        self._rows_box.children = [r.box for r in self._rows] or [self._empty]
        self._page_label.value = (f"page {self._page + 1} of {self.page_count} "
                                  f"({len(visible)} sessions)")
        self._prev.disabled = self._page == 0
        self._next.disabled = self._page >= self.page_count - 1

    def _show_error(self, err: BaseException) -> None:
        text = html.escape(f"{type(err).__name__}: {err}")
        self._errors.value = f'<span style="color:#b00020">⚠ {text}</span>'

    def _say(self, text: str, *, pre: bool = False) -> None:
        body = html.escape(text)
        self._message.value = f"<pre>{body}</pre>" if pre else body

    def _show_detail(self, session_id: str) -> None:
        record = self._store.load_session(session_id)
        todos = "".join(f"<li>[{html.escape(t.status)}] {html.escape(t.text)}</li>"
                        for t in record.state.todos) or "<li><i>none</i></li>"
        last = [m for m in record.transcript if m.get("role") in ("user", "assistant")
                and message_text(m)][-6:]
        messages = "".join(
            f"<p><b>{html.escape(str(m['role']))}:</b> "
            f"{html.escape(one_line(message_text(m), 400))}</p>" for m in last
        ) or "<p><i>no messages</i></p>"
        self._detail.value = (
            f"<h4>{html.escape(record.title or record.id)}</h4>"
            f"<p><small>{html.escape(record.id)} · created {record.created_at:%Y-%m-%d %H:%M} "
            f"UTC · updated {relative_time(record.updated_at)}</small></p>"
            f"<p><b>Summary:</b> {html.escape(record.summary) or '<i>none yet</i>'}</p>"
            f"<b>Todos</b><ul>{todos}</ul><b>Last messages</b>{messages}"
        )
        self._selected = session_id

    # ---- handlers
    @_guarded
    def _on_filter_value(self, change: dict[str, Any]) -> None:
        self._page = 0
        self._render()

    @_guarded
    def _on_show_archived_value(self, change: dict[str, Any]) -> None:
        self._render()

    @_guarded
    def _on_refresh_click(self, _button: widgets.Button) -> None:
        self.refresh()

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
        self._show_detail(session_id)

    @_guarded
    def _on_resume_click(self, session_id: str) -> None:
        if self._on_resume is None:
            raise RuntimeError("this panel has no resume action (on_resume was not given)")
        said = self._on_resume(session_id)
        self._say(said if isinstance(said, str) else f"Resumed session {session_id}.", pre=True)
        self.refresh()

    @_guarded
    def _on_archive_click(self, session_id: str, archived: bool) -> None:
        self._store.set_archived(session_id, archived)
        self._say(f"{'Archived' if archived else 'Unarchived'} session {session_id}.")
        self.refresh()

    @_guarded
    def _on_delete_click(self, session_id: str) -> None:
        self._pending_delete = session_id
        self._confirm_text.value = f"Delete session <b>{html.escape(session_id)}</b> for good?"
        self._confirm_box.layout.display = "flex"

    def _close_confirm(self) -> None:
        self._pending_delete = None
        self._confirm_box.layout.display = "none"

    @_guarded
    def _on_confirm_click(self, _button: widgets.Button) -> None:
        session_id = self._pending_delete
        self._close_confirm()
        if session_id is None:
            return
        self._on_delete(session_id)
        if self._selected == session_id:
            self._detail.value, self._selected = "", None
        self._say(f"Deleted session {session_id}.")
        self.refresh()

    @_guarded
    def _on_cancel_click(self, _button: widgets.Button) -> None:
        self._close_confirm()
        self._say("Nothing deleted.")
