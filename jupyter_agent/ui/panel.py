"""The sessions panel: an ipywidgets list of the sessions of one memory directory.

The store is read once per :meth:`SessionsPanel.refresh`; rows are fixed slots of widgets
whose values change, so redrawing opens no new comms. Its ``text/plain`` is the table.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from jupyter_agent.artefacts.fork import fork_label
from jupyter_agent.artefacts.search import SearchHit, SearchMatch, search_listings, search_sessions
from jupyter_agent.text import excerpt, plural
from jupyter_agent.ui.display import (
    UNTITLED,
    RowText,
    error_message,
    format_row,
    format_search_results,
    format_sessions_table,
)
from jupyter_agent.ui.panel_details import DetailView, button, close_widgets, lines_html, role_lines

if TYPE_CHECKING:
    from jupyter_agent.store import SessionListing, Store

def row_summary(summary: str) -> str:
    """A listed summary's readable text on one line (a fallback summary's first two lines)."""
    roles = role_lines(summary)
    if roles is None:
        return excerpt(summary, 120)
    return "\n".join(f"{role}: {excerpt(text, 100)}" for role, text in roles[:2])


class RowSlot:
    """The widgets of one row position, reused for whichever session it shows (its
    ``session_id`` and ``text``); ``on_click(action, slot)`` gets ``"details"``,
    ``"resume"``, ``"archive"`` or ``"delete"``."""

    def __init__(self, on_click: Callable[[str, RowSlot], None]) -> None:
        self.session_id = self.summary = ""
        self.text = RowText("", "", "", "", "")
        self.info = widgets.HTML(layout=widgets.Layout(flex="1 1 0%", min_width="240px"))
        self.meta = widgets.HTML(layout=widgets.Layout(flex="0 0 210px", width="210px"))
        self.details = button("Details", "Show (or hide) summary, todos and last messages")
        self.resume = button("Resume", style="primary")
        self.archive = button("Archive", min_width="86px")  # as wide as "Unarchive"
        self.delete = button("Delete", style="danger")
        for action in ("details", "resume", "archive", "delete"):
            getattr(self, action).on_click(lambda _b, a=action: on_click(a, self))
        buttons = widgets.HBox([self.details, self.resume, self.archive, self.delete],
                               layout=widgets.Layout(flex="0 1 auto", flex_flow="row wrap"))
        self.box = widgets.HBox(
            [self.info, self.meta, buttons],
            layout=widgets.Layout(flex_flow="row wrap", align_items="center", width="100%",
                                  border_bottom="1px solid var(--jp-border-color2, #e0e0e0)",
                                  padding="2px 0"))

    def clear(self) -> None:
        # a slot off the page keeps no text: a saved notebook holds only what is shown
        self.session_id = self.summary = ""
        self.info.value = self.meta.value = ""
        self.resume.tooltip = self.archive.tooltip = self.delete.tooltip = ""  # no holder's name

    def show(self, listing: SessionListing, found: SearchMatch | None = None,
             now: datetime | None = None) -> RowSlot:
        """Show ``listing``; ``found`` (where the filter's text is) replaces the summary."""
        self.text = text = format_row(listing, now)
        self.session_id, self.summary = listing.id, row_summary(listing.summary)
        untitled = text.name == UNTITLED
        name = f"<i>{text.name}</i>" if untitled else f"<b>{html.escape(text.name)}</b>"
        summary = "".join(f"<br><small>{html.escape(line)}</small>"
                          for line in self.summary.splitlines())
        if found is not None:
            e, start, end = found.excerpt, found.start, found.end
            summary = (f"<br><small><i>found in {html.escape(found.field)}:</i> "
                       f"{html.escape(e[:start])}<mark>{html.escape(e[start:end])}</mark>"
                       f"{html.escape(e[end:])}</small>")
        fork = fork_label(listing.parent)
        fork = f" <small style='opacity:0.7'>· {html.escape(fork)}</small>" if fork else ""
        if text.owner:  # a team store: who created it
            fork += f" <small style='opacity:0.7'>· by {html.escape(text.owner)}</small>"
        in_use = listing.status == "in use"
        held = (f"<br><small style='color:var(--jp-warn-color0, #e65100)'>In use by "
                f"{html.escape(text.holder)}. To use it here: stop that kernel (or switch it "
                f"to another session), then Resume; its lease is freed when that kernel "
                f"exits.</small>" if in_use else "")
        self.info.value = lines_html(
            f"{name} <small style='opacity:0.7'>{html.escape(listing.id)}</small>{fork}"
            f"{summary}{held}")
        active = listing.status == "active"
        status = html.escape(text.status) if not (active or in_use) else (
            "<b style='color:var(--jp-success-color1, #388e3c)'>● active in this kernel</b>"
            if active else "<b style='color:var(--jp-warn-color0, #e65100)'>● in use elsewhere"
            "</b>") + (", archived" if listing.archived else "")
        counts = " · ".join(html.escape(t) for t in (text.updated, text.messages, text.cost))
        self.meta.value = lines_html(f"{status}<br><small>{counts}</small>")
        why = f"In use by {text.holder}; stop that kernel first"
        self.resume.disabled = active or in_use
        self.resume.tooltip = why if in_use else (
            "This is already the active session of this kernel" if active else
            "Make this the active session of this kernel")
        self.archive.description = "Unarchive" if listing.archived else "Archive"
        self.archive.disabled = self.delete.disabled = in_use
        self.archive.tooltip = (why if in_use else
                                "Show it again in the list" if listing.archived else
                                "Hide it from the list (show archived shows it again)")
        self.delete.tooltip = why if in_use else "Delete this session (asks first)"
        return self


def _guarded(func: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(func)
    def wrapper(self: SessionsPanel, *args: Any) -> None:
        self._errors.value = self._message.value = ""
        try:
            func(self, *args)
        except Exception as err:  # the panel is the boundary: nothing reaches the kernel log
            text = html.escape(error_message(err))
            self._errors.value = lines_html(f'<span style="color:#b00020">⚠ {text}</span>')

    return wrapper


class SessionsPanel(widgets.VBox):
    """A browsable, filterable, pageable list of saved sessions.

    ``on_resume(id)``, ``on_archive(id, archived)`` and ``on_delete(id)`` (after
    confirmation) act on a session; a string they return is shown in the panel.
    ``deep``: the filter searches whole transcripts too, when Enter is pressed.
    :attr:`page` is 0-based; :attr:`rows` are those of the current page.
    """

    def __init__(self, store: Store, *, on_resume: Callable[[str], Any] | None = None,
                 on_archive: Callable[[str, bool], Any] | None = None,
                 on_delete: Callable[[str], Any] | None = None, page_size: int = 20,
                 show_archived: bool = False, query: str = "", deep: bool = False) -> None:
        self._store = store
        self._on_resume = on_resume
        self._on_archive = on_archive or (lambda sid, flag: store.update(sid, archived=flag))
        self._on_delete = on_delete or store.delete_session
        self._page_size = page_size
        self.page = 0
        self._listing: list[SessionListing] = []
        self.rows: list[RowSlot] = []
        self._slots: list[RowSlot] = []
        self._pending_delete: str | None = None
        self._deep = deep
        self._hits: list[SearchHit] = []  # the shown sessions that match the filter, with where
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
                                         layout=widgets.Layout(flex_flow="row wrap"))
        self._prev = button("◀ Prev")
        self._next = button("Next ▶")
        self._page_label = widgets.Label()
        self._details = DetailView(lambda _b: self._on_details_click(self._details.selected))

        self._filter.observe(self._on_filter_value, names="value")
        self._show_archived.observe(self._on_filter_value, names="value")
        self._refresh.on_click(lambda _button: self.refresh())
        self._confirm.on_click(self._on_confirm_click)
        self._cancel.on_click(self._on_cancel_click)
        self._prev.on_click(self._on_pager_click)
        self._next.on_click(self._on_pager_click)

        toolbar = widgets.HBox([self._filter, self._show_archived, self._refresh],
                               layout=widgets.Layout(align_items="center", flex_flow="row wrap"))
        self._pager = widgets.HBox([self._prev, self._page_label, self._next],
                                   layout=widgets.Layout(align_items="center"))
        super().__init__([toolbar, self._errors, self._message, self._rows_box, self._pager])
        self.refresh()

    @property
    def page_count(self) -> int:
        return max(1, -(-len(self._hits) // self._page_size))

    def text_table(self) -> str:
        """The current page as the terminal's table (only what the panel shows: it is
        saved with the notebook), with where the filter's text was found."""
        hits = self._hits[self.page * self._page_size:][:self._page_size]
        if self._filter.value.strip():
            table = format_search_results(hits, query=self._filter.value.strip())
        else:
            table = format_sessions_table([hit.session for hit in hits])
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
        close_widgets([*self.children, self._empty, self._confirm_box, self._details.box,
                       *(slot.box for slot in self._slots)])
        self._slots, self.rows = [], []
        self.layout.close()
        super().close()

    # ---- drawing
    def _reload(self) -> None:
        """Re-read the store and redraw (keeps the filter, the toggle and if possible the page)."""
        listing = self._store.list_sessions(include_archived=True)
        # who holds a session in use elsewhere, where the listing does not say
        self._listing = [s if s.status != "in use" or s.holder is not None else
                         s.model_copy(update={"holder": self._store.describe_session(s.id).holder})
                         for s in listing]
        self._deep_hits = None
        self._render()

    refresh = _guarded(_reload)

    def _render(self) -> None:
        now = datetime.now(UTC)
        shown = [s for s in self._listing if self._show_archived.value or not s.archived]
        query = self._filter.value
        if not (self._deep and query.strip()):
            self._hits = search_listings(shown, query)
        else:  # the transcripts are read again only for a new query, or after a reload
            if self._deep_hits is None or self._deep_hits[0] != query:
                self._deep_hits = (query, search_sessions(self._store, query, deep=True,
                                                          include_archived=True))
            ids = {s.id for s in shown}
            self._hits = [hit for hit in self._deep_hits[1] if hit.session.id in ids]
        self.page = min(self.page, self.page_count - 1)
        page = self._hits[self.page * self._page_size:][:self._page_size]
        while len(self._slots) < len(page):
            self._slots.append(RowSlot(lambda action, slot: getattr(
                self, f"_on_{action}_click")(slot.session_id)))
        self.rows = [slot.show(hit.session, hit.matches[0] if hit.matches else None, now)
                     for slot, hit in zip(self._slots, page, strict=False)]
        for slot in self._slots[len(page):]:
            slot.clear()
        self._empty.value = lines_html(f"<i>no sessions {'match' if self._listing else 'yet'}</i>")
        count = plural(len(self._hits), "session")
        paged = self.page_count > 1
        self._page_label.value = (f"page {self.page + 1} of {self.page_count} ({count})"
                                  if paged else count)
        self._prev.layout.display = self._next.layout.display = None if paged else "none"
        self._pager.layout.display = None if self._hits else "none"
        self._prev.disabled = self.page == 0
        self._next.disabled = self.page >= self.page_count - 1
        on_page = {r.session_id for r in self.rows}
        if self._details.selected in on_page:
            self._details.retime(now)
        elif self._details.selected is not None:
            self._details.hide()
        if self._pending_delete is not None and self._pending_delete not in on_page:
            self._close_confirm()
        self._place()

    def _place(self) -> None:
        # the delete confirmation and the detail view go right under their row
        children: list[widgets.Widget] = []
        for row in self.rows:
            children.append(row.box)
            if row.session_id == self._pending_delete:
                children.append(self._confirm_box)
            if row.session_id == self._details.selected:
                children.append(self._details.box)
        self._rows_box.children = children or [self._empty]

    def _name(self, session_id: str) -> str:
        return next((r.text.name for r in self.rows if r.session_id == session_id), UNTITLED)

    def _label(self, session_id: str) -> str:
        name = self._name(session_id)
        return f"session {session_id}" if name == UNTITLED else f"‘{name}’ ({session_id})"

    def _say(self, said: Any, default: str = "") -> None:  # what an action returned, if text
        self._message.value = lines_html(html.escape(said if isinstance(said, str) else default))

    # ---- handlers
    @_guarded
    def _on_filter_value(self, change: dict[str, Any]) -> None:
        if change["owner"] is self._filter:  # (the show-archived toggle keeps the page)
            self.page = 0
        self._render()

    @_guarded
    def _on_pager_click(self, button: widgets.Button) -> None:
        self.page = min(max(self.page + (-1 if button is self._prev else 1), 0),
                        self.page_count - 1)
        self._render()

    @_guarded
    def _on_details_click(self, session_id: str | None) -> None:
        if session_id is None or session_id == self._details.selected:  # again, or Close
            self._details.hide()
            self._place()
        else:
            self._details.show(session_id, self._name(session_id), self._store)
            self._render()  # rows and details say their times from the same instant

    @_guarded
    def _on_resume_click(self, session_id: str) -> None:
        if self._on_resume is None:
            raise RuntimeError("this panel has no resume action (on_resume was not given)")
        self._say(self._on_resume(session_id), f"Resumed {self._label(session_id)} — it is "
                  "this kernel's active session; continue with %%agent")
        self._reload()

    @_guarded
    def _on_archive_click(self, session_id: str) -> None:
        archived = not next(s for s in self._listing if s.id == session_id).archived
        self._say(self._on_archive(session_id, archived),
                  f"{'Archived' if archived else 'Unarchived'} {self._label(session_id)}.")
        self._reload()

    @_guarded
    def _on_delete_click(self, session_id: str) -> None:
        self._pending_delete = session_id
        self._confirm_text.value = lines_html(
            f"Delete <b>{html.escape(self._label(session_id))}</b> for good?")
        self._place()

    def _close_confirm(self) -> None:
        self._pending_delete = None
        self._confirm_text.value = ""
        self._place()

    @_guarded
    def _on_confirm_click(self, _button: widgets.Button) -> None:
        session_id = self._pending_delete
        self._close_confirm()
        if session_id is None:
            return
        self._say(self._on_delete(session_id), f"Deleted {self._label(session_id)}.")
        self._reload()  # (and the Details of a deleted session close)

    @_guarded
    def _on_cancel_click(self, _button: widgets.Button) -> None:
        self._close_confirm()
        self._say("Nothing deleted.")
