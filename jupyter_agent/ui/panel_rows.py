"""The rows of :class:`~jupyter_agent.ui.panel.SessionsPanel`: pure formatting and row widgets.

:func:`format_row` turns a listing into the texts of one row (a pure function);
:func:`detail_html` turns a saved record into the detail view's HTML (pure as well);
:class:`RowSlot` is the fixed set of widgets of one row position, reused for whichever
session the page shows there.

Layout of a row: the name and summary (flexible, at least ``INFO_MIN``), the status and
counts (a fixed width, so the columns line up from row to row), then the buttons, which
never shrink. The row wraps: on a narrow notebook the buttons go under the text, and
wrap among themselves where even one row of buttons does not fit.
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
from jupyter_agent.ui.advice import describe_holder
from jupyter_agent.ui.display import (
    format_cost,
    format_owner,
    message_count_text,
    one_line,
    relative_time,
)
from jupyter_agent.ui.markdown import excerpt, summary_html

if TYPE_CHECKING:
    from jupyter_agent.artefacts.search import SearchMatch
    from jupyter_agent.store import SessionListing, SessionRecord, Store

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
    holder: str = ""
    owner: str = ""


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
        :data:`UNTITLED`; ``summary`` is the summary's readable text on one line (no
        Markdown marks), or for the fallback summary (``user: …`` / ``assistant: …``
        lines) its first two lines, one per line; ``messages`` counts the transcript
        without its system prompt ("no messages yet" for a session never used);
        ``cost`` is in USD; ``holder`` says who holds a session that
        is in use elsewhere (a notebook or kernel, its host and process), else "";
        ``owner`` whose it is and with whom it is shared (``"alice on node-3, shared
        with bob"``, :func:`~jupyter_agent.ui.display.format_owner`) when the store
        records owners (a team store), else "".
    """
    name = listing.title or excerpt(listing.first_prompt, 60) or UNTITLED
    status = listing.status + (", archived" if listing.archived else "")
    holder = ""
    if listing.status == "in use":
        holder = describe_holder(listing.holder)
    from jupyter_agent.store import Usage

    return RowText(
        name=one_line(name, 60),
        summary=_row_summary(listing.summary),
        updated=relative_time(listing.updated_at, now),
        status=status,
        messages=message_count_text(listing.message_count),
        cost=format_cost(Usage(cost_usd=listing.cost_usd)),
        holder=holder,
        owner=format_owner(listing.owner_user, listing.owner_host, listing.owner_role,
                           listing.shared_with),
    )


#: A line of the fallback summary (see ``ensure_summary``): ``"user: ..."``.
_ROLE_LINE = re.compile(r"(user|assistant): ")


def role_lines(summary: str) -> list[tuple[str, str]] | None:
    """The ``(role, text)`` lines of a fallback summary (``"user: ...\nassistant: ..."``),
    or ``None`` when ``summary`` is not one."""
    lines = [line for line in summary.strip().splitlines() if line.strip()]
    found = [_ROLE_LINE.match(line) for line in lines]
    if not lines or not all(found):
        return None
    return [(m.group(1), line[m.end():]) for m, line in zip(found, lines, strict=True) if m]


def _row_summary(summary: str) -> str:
    roles = role_lines(summary)
    if roles is None:
        return excerpt(summary, 120)
    return "\n".join(f"{role}: {excerpt(text, 100)}" for role, text in roles[:2])


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


def local_time(when: datetime) -> str:
    """``when`` in the kernel's local time zone, saying which: ``"2026-01-31 14:05 CET"``."""
    local = when.astimezone()
    return f"{local:%Y-%m-%d %H:%M} {local.tzname() or ''}".rstrip()


#: Styles for Markdown rendered inside the detail view (code blocks scroll, tables fit).
_DETAIL_STYLE = ("<style>.jupyter-agent-md pre{overflow-x:auto;padding:4px 6px;"
                 "background:var(--jp-layout-color2,#f5f5f5)}"
                 ".jupyter-agent-md table{border-collapse:collapse}"
                 ".jupyter-agent-md td,.jupyter-agent-md th{border:1px solid "
                 "var(--jp-border-color2,#ddd);padding:1px 6px}"
                 ".jupyter-agent-md p{margin:2px 0}</style>")


def _role_html(role: str, text: str) -> str:
    return f"<p style='margin:2px 0'><b>{html.escape(role)}:</b> {html.escape(text)}</p>"


def detail_html(record: SessionRecord, now: datetime | None = None) -> str:
    """The body of a session's detail view: ID and times (local; "updated" relative to
    ``now``, default now), summary (its Markdown rendered: lists, tables, code; the
    fallback summary one labelled message a line), todos, the readable text of the last
    messages."""
    todos = "".join(f"<li>[{html.escape(t.status)}] {inline_html(t.text)}</li>"
                    for t in record.state.todos) or "<li><i>none</i></li>"
    last = [m for m in record.transcript if m.get("role") in ("user", "assistant")
            and message_text(m)][-6:]
    messages = "".join(_role_html(str(m["role"]), excerpt(message_text(m), 400))
                       for m in last) or "<p style='margin:2px 0'><i>no messages</i></p>"
    roles = role_lines(record.summary)
    if roles is not None:
        summary = "".join(_role_html(role, text) for role, text in roles)
    else:
        summary = summary_html(record.summary.strip()) if record.summary.strip() else \
            "<p><i>none yet</i></p>"
    fork = f" · {html.escape(fork_label(record.parent))}" if record.parent else ""
    return lines_html(
        f"{_DETAIL_STYLE}<small>{html.escape(record.id)} · created "
        f"{html.escape(local_time(record.created_at))} · updated "
        f"{relative_time(record.updated_at, now)}{fork}</small>"
        f"<div style='margin:4px 0'><b>Summary</b><div class='jupyter-agent-md'>{summary}"
        f"</div></div>"
        f"<b>Todos</b><ul style='margin:2px 0'>{todos}</ul><b>Last messages</b>{messages}"
    )


#: How many of a session's last figures its detail view shows, and how wide (CSS px).
DETAIL_FIGURES, DETAIL_FIGURE_WIDTH = 4, 200


def figure_widgets(record: SessionRecord, store: Store) -> list[widgets.Widget]:
    """Small images of the session's last figures, each over a caption naming it, for
    its detail view; a figure that cannot be read is named with why, instead.

    An ``Image`` never gets a ``tooltip``: ipywidgets 8.1's front end then reads the
    ``description`` an ``Image`` does not have, and the view fails to render.
    """
    from jupyter_agent.errors import JupyterAgentError
    from jupyter_agent.store.figure_files import figure_refs
    from jupyter_agent.ui.figures import figure_label

    refs = list(figure_refs(record.transcript))[-DETAIL_FIGURES:]
    shown: list[widgets.Widget] = []
    for ref in refs:
        label = figure_label(ref)
        try:
            figure = store.read_figure(record.id, str(ref["id"]))
        except (JupyterAgentError, OSError) as err:
            shown.append(widgets.HTML(f"<small>{html.escape(label)}: {html.escape(str(err))}"
                                      "</small>"))
            continue
        image = widgets.Image(value=figure.data, format=figure.media_type.split("/")[1],
                              width=str(DETAIL_FIGURE_WIDTH))
        caption = widgets.HTML(f"<small>{html.escape(label)}</small>")
        shown.append(widgets.VBox([image, caption],
                                  layout=widgets.Layout(margin="2px 6px 2px 0")))
    return shown


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
                                    layout=widgets.Layout(flex="0 1 auto",
                                                          flex_flow="row wrap"))
        self.box = widgets.HBox(
            [self.info, self.meta, self.buttons],
            layout=widgets.Layout(flex_flow="row wrap", align_items="center", width="100%",
                                  border_bottom="1px solid var(--jp-border-color2, #e0e0e0)",
                                  padding="2px 0"))

    def all_widgets(self) -> list[widgets.Widget]:
        """Every widget of the slot (for closing them)."""
        return [self.box, self.info, self.meta, self.buttons, *self.buttons.children]

    def clear(self) -> None:
        """Forget the session this slot showed (a slot off the page keeps no text: the
        widget state a notebook may save holds only what the panel shows)."""
        self.session_id, self.name, self.archived = "", "", False
        self.info.value = self.meta.value = ""
        self.resume.tooltip = self.archive.tooltip = ""
        self.delete.tooltip = "Delete this session (asks first)"  # no holder's name kept

    def show(self, listing: SessionListing, found: SearchMatch | None = None,
             now: datetime | None = None) -> PanelRow:
        """Show ``listing`` in this slot and return the row as callers see it; ``found``
        (where the filter's text is) replaces the summary line; ``now`` is the reference
        of the relative update time (default now)."""
        text = format_row(listing, now)
        self.session_id, self.name, self.archived = listing.id, text.name, listing.archived
        untitled = text.name == UNTITLED
        name = f"<i>{text.name}</i>" if untitled else f"<b>{html.escape(text.name)}</b>"
        summary = "".join(f"<br><small>{html.escape(line)}</small>"
                          for line in text.summary.splitlines())
        if found is not None:
            summary = f"<br><small>{found_html(found)}</small>"
        fork = fork_label(getattr(listing, "parent", None))  # listings name it when known
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
        if active:
            status = ("<b style='color:var(--jp-success-color1, #388e3c)'>● active in this "
                      "kernel</b>" + (", archived" if listing.archived else ""))
        elif in_use:
            status = ("<b style='color:var(--jp-warn-color0, #e65100)'>● in use elsewhere</b>"
                      + (", archived" if listing.archived else ""))
        else:
            status = html.escape(text.status)
        counts = " · ".join(html.escape(t) for t in (text.updated, text.messages, text.cost))
        self.meta.value = lines_html(f"{status}<br><small>{counts}</small>")
        self.resume.disabled = active or in_use
        self.resume.tooltip = (
            "This is already the active session of this kernel" if active else
            f"In use by {text.holder}; stop that kernel first" if in_use else
            "Make this the active session of this kernel")
        self.archive.description = "Unarchive" if listing.archived else "Archive"
        # another process holds it: it cannot be archived or deleted from here
        self.archive.disabled = self.delete.disabled = in_use
        why = f"In use by {text.holder}; stop that kernel first"
        self.archive.tooltip = (why if in_use else
                                "Show it again in the list" if listing.archived else
                                "Hide it from the list (show archived shows it again)")
        self.delete.tooltip = why if in_use else "Delete this session (asks first)"
        return PanelRow(listing.id, text, self.box, self.details, self.resume, self.archive,
                        self.delete)
