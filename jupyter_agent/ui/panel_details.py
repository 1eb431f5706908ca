"""The Details view of the sessions panel: one session's summary, todos, last messages and
last figures, in a bordered box placed under its row. Its widgets are made once and
reused; every text in it is escaped."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from jupyter_agent.artefacts.fork import fork_label
from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.store.messages import figure_label, figure_refs, message_text
from jupyter_agent.text import excerpt, relative_time, summary_html

if TYPE_CHECKING:
    from jupyter_agent.store import SessionRecord, Store

#: How many of a session's last figures the view shows, and how wide (CSS px).
DETAIL_FIGURES, DETAIL_FIGURE_WIDTH = 4, 200
#: Styles for Markdown rendered inside the view (code blocks scroll, tables fit).
_STYLE = ("<style>.jupyter-agent-md pre{overflow-x:auto;padding:4px 6px;"
          "background:var(--jp-layout-color2,#f5f5f5)}"
          ".jupyter-agent-md table{border-collapse:collapse}"
          ".jupyter-agent-md td,.jupyter-agent-md th{border:1px solid "
          "var(--jp-border-color2,#ddd);padding:1px 6px}"
          ".jupyter-agent-md p{margin:2px 0}</style>")
#: A line of the fallback summary: ``"user: ..."``.
_ROLE_LINE = re.compile(r"(user|assistant): ")


def lines_html(body: str) -> str:
    """``body`` (HTML) with a normal line height (an ``HTML`` widget sets it to 28px)."""
    return f'<div style="line-height:1.4">{body}</div>'


def button(description: str, tooltip: str = "", style: str = "", **layout: Any) -> widgets.Button:
    """A button that keeps its natural width (it never shrinks to "De…")."""
    return widgets.Button(description=description, tooltip=tooltip, button_style=style,
                          layout=widgets.Layout(flex="0 0 auto", width="auto", **layout))


def role_lines(summary: str) -> list[tuple[str, str]] | None:
    """The ``(role, text)`` lines of a fallback summary, ``None`` if it is not one."""
    found = [_ROLE_LINE.match(line) for line in summary.strip().splitlines() if line.strip()]
    if not found or not all(found):
        return None
    return [(m.group(1), m.string[m.end():]) for m in found if m]


def _role_html(role: str, text: str) -> str:
    return f"<p style='margin:2px 0'><b>{html.escape(role)}:</b> {html.escape(text)}</p>"


def detail_html(record: SessionRecord, now: datetime | None = None) -> str:
    """ID and times (local; "updated" relative to ``now``), the summary's Markdown
    rendered, todos, the readable text of the last messages."""
    todos = "".join(f"<li>[{html.escape(t.status)}] "
                    + re.sub(r"`([^`\n]+)`", r"<code>\1</code>", html.escape(t.text)) + "</li>"
                    for t in record.state.todos) or "<li><i>none</i></li>"
    last = [m for m in record.transcript if m.get("role") in ("user", "assistant")
            and message_text(m)][-6:]
    messages = "".join(_role_html(str(m["role"]), excerpt(message_text(m), 400))
                       for m in last) or "<p style='margin:2px 0'><i>no messages</i></p>"
    roles = role_lines(record.summary)
    summary = ("".join(_role_html(role, text) for role, text in roles) if roles is not None
               else summary_html(record.summary.strip()) or "<p><i>none yet</i></p>")
    fork = f" · {html.escape(fork_label(record.parent))}" if record.parent else ""
    created = record.created_at.astimezone()
    created_text = f"{created:%Y-%m-%d %H:%M} {created.tzname() or ''}".rstrip()
    return lines_html(
        f"{_STYLE}<small>{html.escape(record.id)} · created {html.escape(created_text)} · "
        f"updated {relative_time(record.updated_at, now)}{fork}</small>"
        f"<div style='margin:4px 0'><b>Summary</b><div class='jupyter-agent-md'>{summary}"
        f"</div></div>"
        f"<b>Todos</b><ul style='margin:2px 0'>{todos}</ul><b>Last messages</b>{messages}"
    )


def figure_widgets(record: SessionRecord, store: Store) -> list[widgets.Widget]:
    """Small images of the last figures over a caption each (or why one cannot be read). No
    ``Image`` gets a ``tooltip``: ipywidgets 8.1 then reads the ``description`` it lacks and
    the view fails to render."""
    shown: list[widgets.Widget] = []
    for ref in list(figure_refs(record.transcript))[-DETAIL_FIGURES:]:
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


def close_widgets(shown: Any) -> None:
    """Close ``shown`` and every widget inside (children, layouts, styles)."""
    for widget in shown:
        close_widgets(getattr(widget, "children", ()))
        for part in ("layout", "style"):
            sub = getattr(widget, part, None)
            if isinstance(sub, widgets.Widget):
                sub.close()
        widget.close()


class DetailView:
    """The Details view of one session, its :attr:`box` placed under that row by the panel."""

    def __init__(self, on_close: Callable[[widgets.Button], Any]) -> None:
        self.head = widgets.HTML(layout=widgets.Layout(flex="1 1 auto"))
        self.close_button = button("Close", "Hide the details")
        self.text = widgets.HTML()
        self.figures = widgets.HBox(layout=widgets.Layout(flex_flow="row wrap"))
        self.box = widgets.VBox(
            [widgets.HBox([self.head, self.close_button]), self.text, self.figures],
            layout=widgets.Layout(margin="8px 0 0 0", padding="4px 10px",
                                  border="1px solid var(--jp-border-color1, #bdbdbd)"))
        self._record: SessionRecord | None = None
        self.close_button.on_click(on_close)

    @property
    def selected(self) -> str | None:
        """The ID of the session shown (``None``: none)."""
        return self._record.id if self._record is not None else None

    def show(self, session_id: str, name: str, store: Store) -> None:
        """Show the session read from ``store`` under the title ``name``.

        Raises
        ------
        SessionNotFoundError, CorruptSessionError
            As ``store.load_session``; nothing shown changes.
        """
        record = store.load_session(session_id)
        self.head.value = lines_html(f"<b>Details — {html.escape(name)}</b>")
        self.text.value = detail_html(record)
        self._set_figures(figure_widgets(record, store))
        self._record = record

    def retime(self, now: datetime) -> None:
        """Say the update time relative to ``now`` (the rows' reference)."""
        if self._record is not None:
            self.text.value = detail_html(self._record, now)

    def hide(self) -> None:
        self.head.value = self.text.value = ""
        self._set_figures([])
        self._record = None

    def _set_figures(self, shown: list[widgets.Widget]) -> None:
        old, self.figures.children = self.figures.children, tuple(shown)
        close_widgets(old)
