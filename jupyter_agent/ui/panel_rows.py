"""The rows of :class:`~jupyter_agent.ui.panel.SessionsPanel`: pure formatting and row widgets.

:func:`format_row` turns a listing into the texts of one row (a pure function);
:func:`detail_html` turns a saved record into the detail view's HTML (pure as well);
:class:`RowSlot` is the fixed set of widgets of one row position, reused for whichever
session the page shows there.

Layout of a row: the name and summary (flexible, at least ``INFO_MIN``), the status and
counts (a fixed width, so the columns line up from row to row), then the buttons, which
never shrink. The row wraps: on a narrow notebook the buttons go under the text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import ipywidgets as widgets

from jupyter_agent.artefacts.fork import fork_label
from jupyter_agent.store.messages import message_text
from jupyter_agent.ui.display import format_cost, one_line, relative_time

if TYPE_CHECKING:
    from jupyter_agent.artefacts.search import SearchMatch
    from jupyter_agent.store import SessionListing, SessionRecord

__all__ = ["UNTITLED", "PanelRow", "RowSlot", "RowText", "button", "detail_html",
           "format_row", "found_html", "inline_html", "lines_html", "matches"]

#: The name of a session with neither a title nor a prompt.
UNTITLED = "(untitled, no prompt yet)"
INFO_MIN = "240px"
META_WIDTH = "210px"


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
        ``name`` is the title, else the first words of the first prompt, else
        :data:`UNTITLED`; ``cost`` is in USD.
    """
    name = listing.title or one_line(listing.first_prompt, 60) or UNTITLED
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


def found_html(found: SearchMatch) -> str:
    """``found in <field>: …excerpt…`` with the matched text marked (HTML)."""
    e = found.excerpt
    return (f"<i>found in {html.escape(found.field)}:</i> {html.escape(e[:found.start])}"
            f"<mark>{html.escape(e[found.start:found.end])}</mark>{html.escape(e[found.end:])}")


def inline_html(text: str) -> str:
    """``text`` escaped for HTML, with Markdown `code` spans shown as ``<code>``."""
    return re.sub(r"`([^`\n]+)`", r"<code>\1</code>", html.escape(text))


def lines_html(body: str) -> str:
    """``body`` (HTML) in a block with a normal line height (ipywidgets' ``HTML`` sets the
    line height to the widget height, 28px)."""
    return f'<div style="line-height:1.4">{body}</div>'


def detail_html(record: SessionRecord) -> str:
    """The body of a session's detail view: ID and times, summary, todos, last messages."""
    todos = "".join(f"<li>[{html.escape(t.status)}] {inline_html(t.text)}</li>"
                    for t in record.state.todos) or "<li><i>none</i></li>"
    last = [m for m in record.transcript if m.get("role") in ("user", "assistant")
            and message_text(m)][-6:]
    messages = "".join(
        f"<p style='margin:2px 0'><b>{html.escape(str(m['role']))}:</b> "
        f"{inline_html(one_line(message_text(m), 400))}</p>" for m in last
    ) or "<p style='margin:2px 0'><i>no messages</i></p>"
    summary = "<br>".join(inline_html(line) for line in record.summary.strip().splitlines())
    fork = f" · {html.escape(fork_label(record.parent))}" if record.parent else ""
    return lines_html(
        f"<small>{html.escape(record.id)} · created {record.created_at:%Y-%m-%d %H:%M} "
        f"UTC · updated {relative_time(record.updated_at)}{fork}</small>"
        f"<p style='margin:4px 0'><b>Summary:</b><br>{summary or '<i>none yet</i>'}</p>"
        f"<b>Todos</b><ul style='margin:2px 0'>{todos}</ul><b>Last messages</b>{messages}"
    )


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


def button(description: str, tooltip: str = "", style: str = "", **layout: Any) -> widgets.Button:
    """A button that keeps its natural width (it never shrinks to "De…")."""
    return widgets.Button(description=description, tooltip=tooltip, button_style=style,
                          layout=widgets.Layout(flex="0 0 auto", width="auto", **layout))


class RowSlot:
    """The widgets of one row position, reused for whichever session it shows.

    Parameters
    ----------
    on_click : callable
        Called as ``on_click(action, slot)`` with ``action`` one of ``"details"``,
        ``"resume"``, ``"archive"``, ``"delete"``.
    """

    def __init__(self, on_click: Callable[[str, RowSlot], None]) -> None:
        self.session_id = ""
        self.name = ""
        self.archived = False
        self.info = widgets.HTML(layout=widgets.Layout(flex="1 1 0%", min_width=INFO_MIN))
        self.meta = widgets.HTML(layout=widgets.Layout(flex=f"0 0 {META_WIDTH}",
                                                       width=META_WIDTH))
        self.details = button("Details", "Show (or hide) summary, todos and last messages")
        self.resume = button("Resume", "Make this the active session of this kernel", "primary")
        self.archive = button("Archive", min_width="86px")  # as wide as "Unarchive"
        self.delete = button("Delete", "Delete this session (asks first)", "danger")
        for action in ("details", "resume", "archive", "delete"):
            getattr(self, action).on_click(lambda _b, a=action: on_click(a, self))
        self.buttons = widgets.HBox([self.details, self.resume, self.archive, self.delete],
                                    layout=widgets.Layout(flex="0 0 auto"))
        self.box = widgets.HBox(
            [self.info, self.meta, self.buttons],
            layout=widgets.Layout(flex_flow="row wrap", align_items="center", width="100%",
                                  border_bottom="1px solid var(--jp-border-color2, #e0e0e0)",
                                  padding="2px 0"))

    def all_widgets(self) -> list[widgets.Widget]:
        """Every widget of the slot (for closing them)."""
        return [self.box, self.info, self.meta, self.buttons, *self.buttons.children]

    def show(self, listing: SessionListing, found: SearchMatch | None = None) -> PanelRow:
        """Show ``listing`` in this slot and return the row as callers see it; ``found``
        (where the filter's text is) replaces the summary line."""
        text = format_row(listing)
        self.session_id, self.name, self.archived = listing.id, text.name, listing.archived
        untitled = text.name == UNTITLED
        name = f"<i>{text.name}</i>" if untitled else f"<b>{html.escape(text.name)}</b>"
        summary = f"<br><small>{inline_html(text.summary)}</small>" if text.summary else ""
        if found is not None:
            summary = f"<br><small>{found_html(found)}</small>"
        fork = fork_label(getattr(listing, "parent", None))
        fork = f" <small style='opacity:0.7'>· {html.escape(fork)}</small>" if fork else ""
        self.info.value = lines_html(
            f"{name} <small style='opacity:0.7'>{html.escape(listing.id)}</small>{fork}{summary}")
        active = listing.status == "active"
        status = ("<b style='color:var(--jp-success-color1, #388e3c)'>● active in this kernel"
                  "</b>" + (", archived" if listing.archived else "")
                  if active else html.escape(text.status))
        counts = " · ".join(html.escape(t) for t in (text.updated, text.messages, text.cost))
        self.meta.value = lines_html(f"{status}<br><small>{counts}</small>")
        self.resume.disabled = active
        self.resume.tooltip = ("This is already the active session of this kernel" if active
                               else "Make this the active session of this kernel")
        self.archive.description = "Unarchive" if listing.archived else "Archive"
        return PanelRow(listing.id, text, self.box, self.details, self.resume, self.archive,
                        self.delete)
