"""SessionsPanel driven with Button.click() and widget values, on real store files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jupyter_agent.store import (
    FileStore,
    SessionListing,
    SessionState,
    TodoItem,
    Usage,
    ensure_summary,
    holding,
)
from jupyter_agent.ui.display import format_row
from jupyter_agent.ui.panel import SessionsPanel, row_summary


def make_session(store: FileStore, prompt: str, *, title: str = "", summary: str = "",
                 cost: float = 0.0, reply: str = "ok") -> str:
    sid = store.create_session([{"role": "system", "content": "sys"}], title=title)
    store.save(sid, [{"role": "system", "content": "sys"},
                              {"role": "user", "content": prompt},
                              {"role": "assistant", "content": reply}])
    if cost:
        store.save(sid, state=SessionState(usage=Usage(cost_usd=cost, calls=1)))
    if summary:
        store.update(sid, summary=summary)
    return sid


@pytest.fixture
def store(memory_dir: Path) -> FileStore:
    return FileStore(memory_dir)


def listing(**kw: object) -> SessionListing:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    base: dict[str, object] = dict(
        id="abc123", updated_at=now - timedelta(minutes=5), summary="  Goal: clean\n data ",
        title="", archived=False, status="idle", created_at=now - timedelta(days=1),
        message_count=7, cost_usd=0.01234, tool_calls=2,
        first_prompt="Load the penguins data set and plot bill length against depth please",
    )
    base.update(kw)
    return SessionListing(**base)  # type: ignore[arg-type]


def test_format_row_is_pure_and_complete() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    row = format_row(listing(), now)
    assert row.name.startswith("Load the penguins data set")
    assert len(row.name) <= 60
    assert row_summary(listing().summary) == "Goal: clean data"
    assert row.updated == "5 min ago"
    assert (row.status, row.messages, row.cost) == ("idle", "6 messages", "$0.0123")
    assert format_row(listing(title="Penguins"), now).name == "Penguins"
    assert format_row(listing(first_prompt=""), now).name == "(untitled, no prompt yet)"
    assert format_row(listing(archived=True, status="in use"), now).status == "in use, archived"
    assert format_row(listing(updated_at=now - timedelta(hours=3)), now).updated == "3 h ago"
    assert format_row(listing(updated_at=now - timedelta(days=3)), now).updated == "3 days ago"


def test_rows_show_sessions_with_their_details(store: FileStore) -> None:
    a = make_session(store, "first question about penguins", summary="penguin work", cost=0.5)
    b = make_session(store, "second", title="Titled")
    panel = SessionsPanel(store)
    assert [r.session_id for r in panel.rows] == [b, a]
    assert panel.rows[0].text.name == "Titled"
    assert panel.rows[1].text.name == "first question about penguins"
    assert panel.rows[1].summary == "penguin work"
    assert panel.rows[1].text.cost == "$0.5000"
    assert panel.rows[1].text.messages == "2 messages"  # the system prompt is not counted
    assert panel.rows[1].text.updated == "just now"
    assert panel._errors.value == ""


@pytest.mark.slow
def test_paging_filter_and_refresh_with_hundreds_of_sessions(store: FileStore) -> None:
    ids = [make_session(store, f"prompt number {i}" + (" needle" if i % 50 == 0 else ""))
           for i in range(205)]
    panel = SessionsPanel(store, page_size=20)
    assert panel.page_count == 11
    assert panel._page_label.value == "page 1 of 11 (205 sessions)"
    assert len(panel.rows) == 20 and panel._prev.disabled and not panel._next.disabled
    first_page = [r.session_id for r in panel.rows]
    panel._next.click()
    assert panel.page == 1 and panel._page_label.value.startswith("page 2 of 11")
    assert not set(first_page) & {r.session_id for r in panel.rows}
    for _ in range(20):
        panel._next.click()
    assert panel.page == 10 and len(panel.rows) == 5 and panel._next.disabled
    shown: set[str] = set()
    for _ in range(11):
        shown |= {r.session_id for r in panel.rows}
        panel._prev.click()
    assert shown == set(ids) and panel.page == 0

    panel._filter.value = "NEEDLE"
    assert panel.page == 0 and len(panel.rows) == 5
    assert all("needle" in r.text.name for r in panel.rows)
    panel._filter.value = ids[7]
    assert [r.session_id for r in panel.rows] == [ids[7]]
    panel._filter.value = "no such thing"
    assert panel.rows == [] and "no sessions match" in panel._rows_box.children[0].value

    panel._filter.value = ""
    new = make_session(store, "a brand new one")
    assert new not in {r.session_id for r in panel.rows}
    panel._refresh.click()
    assert panel.rows[0].session_id == new and panel.page_count == 11


def test_archive_unarchive_and_show_archived_toggle(store: FileStore) -> None:
    a = make_session(store, "keep")
    b = make_session(store, "archive me")
    panel = SessionsPanel(store)
    row = next(r for r in panel.rows if r.session_id == b)
    assert row.archive.description == "Archive"
    row.archive.click()
    assert store.load_session(b).archived is True
    assert [r.session_id for r in panel.rows] == [a]
    panel._show_archived.value = True
    row = next(r for r in panel.rows if r.session_id == b)
    assert row.archive.description == "Unarchive" and "archived" in row.text.status
    row.archive.click()
    assert store.load_session(b).archived is False
    panel._show_archived.value = False
    assert {r.session_id for r in panel.rows} == {a, b}


def test_delete_asks_first(store: FileStore) -> None:
    a = make_session(store, "keep")
    b = make_session(store, "delete me")
    panel = SessionsPanel(store)
    row = next(r for r in panel.rows if r.session_id == b)
    row.delete.click()
    assert store.exists(b)
    assert panel._confirm_box in panel._rows_box.children and b in panel._confirm_text.value
    panel._cancel.click()
    assert store.exists(b) and panel._confirm_box not in panel._rows_box.children
    panel._confirm.click()  # nothing pending: nothing happens
    assert store.exists(b)
    next(r for r in panel.rows if r.session_id == b).delete.click()
    panel._confirm.click()
    assert not store.exists(b) and store.exists(a)
    assert [r.session_id for r in panel.rows] == [a]
    assert "Deleted ‘delete me’" in panel._message.value


def test_detail_view(store: FileStore) -> None:
    sid = make_session(store, "how many penguins?", summary="Goal: count penguins",
                       reply="There are 344 penguins.")
    store.save(sid, state=SessionState(todos=[TodoItem(id=1, text="plot species counts")]))
    panel = SessionsPanel(store)
    panel.rows[0].details.click()
    detail = panel._details.text.value
    for text in ("Goal: count penguins", "plot species counts", "how many penguins?",
                 "There are 344 penguins."):
        assert text in detail


def test_callback_errors_are_shown_in_the_panel(store: FileStore) -> None:
    sid = make_session(store, "x")

    def broken(session_id: str) -> None:
        raise RuntimeError(f"cannot resume {session_id} today")

    panel = SessionsPanel(store, on_resume=broken)
    panel.rows[0].resume.click()  # must not raise
    assert f"something unexpected went wrong (cannot resume {sid} today)" in panel._errors.value
    assert "RuntimeError" not in panel._errors.value
    # a file that vanished after listing: the store's error shows up too
    store.delete_session(sid)
    panel.rows[0].details.click()
    assert "no saved session" in panel._errors.value
    panel._refresh.click()
    assert panel._errors.value == "" and panel.rows == []
    # no on_resume at all
    make_session(store, "y")
    bare = SessionsPanel(store)
    bare.rows[0].resume.click()
    assert "no resume action" in bare._errors.value


def test_status_in_use_by_another_store(store: FileStore, memory_dir: Path) -> None:
    sid = make_session(store, "busy")
    other = FileStore(memory_dir)
    other.acquire_lease(sid)
    try:
        panel = SessionsPanel(store)
        assert panel.rows[0].text.status == "in use"
        # archiving a session in use elsewhere is refused, and the panel says so
        panel.rows[0].archive.click()
        assert "in use" in panel._errors.value and store.load_session(sid).archived is False
    finally:
        other.release_all()
    store.acquire_lease(sid)
    panel.refresh()
    assert panel.rows[0].text.status == "active"
    store.release_all()


def live_widgets() -> int:
    from ipywidgets.widgets import widget

    return len(widget._instances)  # Widget.widgets / _active_widgets warn in ipywidgets 8


def test_redraws_make_no_new_widgets_and_close_frees_them(store: FileStore) -> None:
    for i in range(25):
        make_session(store, f"prompt {i}" + (" needle" if i % 10 == 0 else ""))
    before = live_widgets()
    panel = SessionsPanel(store, page_size=10)
    made = live_widgets() - before
    assert len(panel.rows) == 10 and made > 0
    for _ in range(3):
        panel._refresh.click()
        panel._next.click()
        panel._next.click()
        panel._prev.click()
        panel._filter.value = "needle"
        panel._filter.value = "nothing matches this"
        panel._filter.value = ""
        panel._show_archived.value = not panel._show_archived.value
        panel.rows[0].details.click()
        panel.rows[0].archive.click()
        panel.refresh()
    assert live_widgets() - before == made
    # the reused row widgets act on the session they show now
    shown = panel.rows[3].session_id
    panel.rows[3].details.click()
    assert shown in panel._details.text.value
    panel.close()
    assert live_widgets() == before


def test_text_plain_fallback_is_the_sessions_table(store: FileStore) -> None:
    a = make_session(store, "plot bill length", title="Bills")
    b = make_session(store, "count penguins")
    store.update(b, archived=True)
    panel = SessionsPanel(store)
    bundle = panel._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    text = bundle["text/plain"]
    assert text.splitlines()[0].split()[:2] == ["ID", "UPDATED"]
    assert a in text and "Bills" in text and b not in text
    panel._show_archived.value = True
    assert b in panel._repr_mimebundle_()["text/plain"]
    assert "SessionsPanel(" not in text


def test_one_message_is_singular_and_a_session_never_used_has_none(
        store: FileStore) -> None:
    assert format_row(listing(message_count=2)).messages == "1 message"
    assert format_row(listing(message_count=1)).messages == "no messages yet"
    store.create_session([{"role": "system", "content": "sys"}])  # only the system prompt
    assert SessionsPanel(store).rows[0].text.messages == "no messages yet"


def test_layout_buttons_never_shrink_and_rows_wrap(store: FileStore) -> None:
    make_session(store, "x")
    panel = SessionsPanel(store)
    row = panel.rows[0]
    for b in (row.details, row.resume, row.archive, row.delete, panel._refresh):
        assert (b.layout.flex, b.layout.width) == ("0 0 auto", "auto")
    assert row.box.layout.flex_flow == "row wrap"
    info, meta, buttons = row.box.children
    assert meta.layout.width == meta.layout.flex.split()[-1]  # a fixed column: rows line up
    # the buttons wrap among themselves when a narrow notebook has no room for them
    assert info.layout.min_width and buttons.layout.flex_flow == "row wrap"
    assert panel._show_archived.indent is False and panel._show_archived.layout.width == "auto"
    assert panel._filter.layout.flex.startswith("1 1")
    # HTML widgets set line-height to their own height: contents get a normal one
    assert info.value.startswith('<div style="line-height:1.4">')
    assert meta.value.startswith('<div style="line-height:1.4">')


def test_active_session_is_marked_and_cannot_be_resumed_again(store: FileStore) -> None:
    a = make_session(store, "mine")
    b = make_session(store, "other")
    store.acquire_lease(a)
    try:
        panel = SessionsPanel(store, on_resume=lambda sid: None)
        rows = {r.session_id: r for r in panel.rows}
        assert rows[a].resume.disabled and not rows[b].resume.disabled
        metas = {slot.session_id: slot.meta.value for slot in panel._slots}
        assert "● active in this kernel" in metas[a] and "active" not in metas[b]
    finally:
        store.release_all()


def test_untitled_session_without_prompt_shows_its_id_once(store: FileStore) -> None:
    sid = store.create_session([{"role": "system", "content": "sys"}])
    panel = SessionsPanel(store)
    assert panel.rows[0].text.name == "(untitled, no prompt yet)"
    info = panel._slots[0].info.value
    assert info.count(sid) == 1 and "(untitled, no prompt yet)" in info


def test_pager_counts_and_hides_with_one_page(store: FileStore) -> None:
    make_session(store, "only one")
    panel = SessionsPanel(store, page_size=2)
    assert panel._page_label.value == "1 session"
    assert panel._prev.layout.display == panel._next.layout.display == "none"
    make_session(store, "two")
    panel.refresh()
    assert panel._page_label.value == "2 sessions"
    make_session(store, "three")
    panel.refresh()
    assert panel._page_label.value == "page 1 of 2 (3 sessions)"
    assert panel._prev.layout.display is None and panel._next.layout.display is None
    panel._filter.value = "nothing matches"
    assert panel._pager.layout.display == "none"


def test_details_toggle_close_and_hide_when_filtered_or_deleted(store: FileStore) -> None:
    a = make_session(store, "keep `df` around", title="Penguins",
                     summary="Goal: the `body_mass` <b>mean</b>", reply="See `df.head()`")
    b = make_session(store, "other")
    panel = SessionsPanel(store)
    row = next(r for r in panel.rows if r.session_id == a)
    assert panel._details.selected is None and panel._details.box not in panel._rows_box.children
    row.details.click()
    assert panel._details.selected is not None and panel._details.box in panel._rows_box.children
    assert "Details — Penguins" in panel._details.head.value
    detail = panel._details.text.value
    assert "`" not in detail and "<code>body_mass</code>" in detail
    assert "See df.head()" in detail and "&lt;b&gt;mean&lt;/b&gt;" in detail
    row.details.click()  # a second click hides it
    assert panel._details.selected is None and panel._details.box not in panel._rows_box.children
    row.details.click()
    panel._details.close_button.click()
    assert panel._details.selected is None
    row.details.click()
    panel._filter.value = "other"  # its session filtered out: hidden
    assert panel._details.selected is None
    panel._filter.value = ""
    next(r for r in panel.rows if r.session_id == b).details.click()
    next(r for r in panel.rows if r.session_id == b).delete.click()
    panel._confirm.click()
    assert not store.exists(b) and panel._details.selected is None
    # the row summary is the summary's readable text: no Markdown marks, no HTML from it
    assert "Goal: the body_mass &lt;b&gt;mean&lt;/b&gt;" in panel._slots[0].info.value


def test_delete_confirmation_names_the_session_and_messages_clear(store: FileStore) -> None:
    sid = make_session(store, "x", title="Palmer penguins")
    panel = SessionsPanel(store)
    panel.rows[0].delete.click()
    assert f"Palmer penguins’ ({sid})" in panel._confirm_text.value
    panel._cancel.click()
    assert "Nothing deleted." in panel._message.value
    panel.rows[0].archive.click()
    assert f"Archived ‘Palmer penguins’ ({sid})." in panel._message.value
    panel._show_archived.value = True  # the next action clears the message
    assert panel._message.value == ""


def test_resume_message_is_one_line(store: FileStore) -> None:
    sid = make_session(store, "x", title="Palmer penguins")
    panel = SessionsPanel(store, on_resume=lambda s: None)
    panel.rows[0].resume.click()
    assert panel._message.value == (
        f'<div style="line-height:1.4">Resumed ‘Palmer penguins’ ({sid}) — it is this '
        "kernel&#x27;s active session; continue with %%agent</div>")


def test_a_session_in_use_elsewhere_names_its_holder_and_cannot_be_resumed(
    store: FileStore,
) -> None:
    from jupyter_agent.store import LeaseHolder
    from jupyter_agent.ui.panel import RowSlot

    holder = LeaseHolder(pid=4242, host="", label="analysis/penguins.ipynb",
                         since=datetime(2026, 1, 1, 9, 30, tzinfo=UTC))
    row = format_row(listing(status="in use", holder=holder))
    assert row.holder.startswith("the kernel of analysis/penguins.ipynb (pid 4242, since ")
    slot = RowSlot(lambda action, slot: None)
    shown = slot.show(listing(status="in use", holder=holder))
    assert shown.resume.disabled and "stop that kernel first" in shown.resume.tooltip
    assert "In use by the kernel of analysis/penguins.ipynb" in slot.info.value
    assert "stop that kernel (or switch it to another session), then Resume" in slot.info.value
    assert "in use elsewhere" in slot.meta.value
    elsewhere = format_row(listing(status="in use", holder=LeaseHolder(pid=7, host="gpu-9")))
    assert elsewhere.holder == "process 7 on host gpu-9"
    assert format_row(listing(status="in use")).holder == "another process"


def test_rows_off_the_page_keep_no_text(store: FileStore) -> None:
    for i in range(3):
        make_session(store, f"private question {i}", title=f"secret {i}")
    panel = SessionsPanel(store)
    panel._filter.value = "secret 1"
    values = [w.value for slot in panel._slots for w in (slot.info, slot.meta)]
    assert sum("secret" in v for v in values) == 1  # only the row that is shown
    assert "secret 0" not in panel.text_table() and "secret 2" not in panel.text_table()


def test_details_render_the_summary_and_say_the_time_zone(store: FileStore) -> None:
    sid = make_session(store, "q", summary="Goal: **42**\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    panel = SessionsPanel(store)
    panel.rows[0].details.click()
    detail = panel._details.text.value
    assert "<strong>42</strong>" in detail and "<td>1</td>" in detail and "**" not in detail
    created = store.load_session(sid).created_at.astimezone()
    assert f"created {created:%Y-%m-%d %H:%M} {created.tzname()}" in detail
    assert "Goal: 42 a · b 1 · 2" in panel.rows[0].summary


def _session_with_figure(store: FileStore) -> str:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (64, 48), (200, 30, 30)).save(out, format="PNG")
    sid = make_session(store, "plot it")
    ref = {"id": "fig1", "n": 1, "media_type": "image/png", "width": 64, "height": 48,
           "bytes": len(out.getvalue()), "shown": True}
    with holding(store, sid):
        store.save_figure(sid, "fig1", out.getvalue(), "image/png")
    messages = store.load_session(sid).transcript
    store.save(sid, [*messages, {"role": "tool", "tool_call_id": "c1",
                                          "content": "[figure 1]", "figures": [ref]}])
    return sid


def test_no_image_in_the_panel_has_a_tooltip(store: FileStore) -> None:
    """ipywidgets 8.1's front end fails to render an Image given a tooltip (it reads the
    description an Image has not): the figure in Details would never show."""
    import ipywidgets as widgets

    sid = _session_with_figure(store)
    panel = SessionsPanel(store)
    panel.rows[0].details.click()
    assert panel._details.selected == sid

    def walk(widget: widgets.Widget) -> list[widgets.Widget]:
        return [widget] + [w for c in getattr(widget, "children", ()) for w in walk(c)]

    images = [w for w in walk(panel) if isinstance(w, widgets.Image)]
    assert len(images) == 1 and bytes(images[0].value).startswith(b"\x89PNG")
    assert all(getattr(w, "tooltip", None) in (None, "") for w in images)
    assert "figure 1" in panel._details.figures.children[0].children[1].value  # the caption


def test_confirmation_and_details_appear_right_under_their_row(store: FileStore) -> None:
    ids = [make_session(store, f"question {i}") for i in range(8)]
    panel = SessionsPanel(store)
    top = panel.rows[0]
    assert top.session_id == ids[-1]
    top.delete.click()
    children = list(panel._rows_box.children)
    assert children.index(panel._confirm_box) == children.index(top.box) + 1
    top.details.click()
    children = list(panel._rows_box.children)
    assert children[children.index(top.box) + 1:][:2] == [panel._confirm_box,
                                                          panel._details.box]
    panel._cancel.click()
    third = panel.rows[2]
    third.details.click()  # Details moves to the row it shows
    children = list(panel._rows_box.children)
    assert children.index(panel._details.box) == children.index(third.box) + 1
    assert panel._confirm_box not in children
    panel._details.close_button.click()
    assert list(panel._rows_box.children) == [r.box for r in panel.rows]


def test_a_session_in_use_elsewhere_cannot_be_archived_or_deleted() -> None:
    from jupyter_agent.store import LeaseHolder
    from jupyter_agent.ui.panel import RowSlot

    slot = RowSlot(lambda action, slot: None)
    held = slot.show(listing(status="in use", holder=LeaseHolder(pid=4242, host="")))
    for button in (held.archive, held.delete):
        assert button.disabled
        assert button.tooltip.startswith("In use by process 4242")
        assert "stop that kernel first" in button.tooltip
    free = slot.show(listing())  # the slot shows another session: enabled again
    assert not free.archive.disabled and not free.delete.disabled
    assert "In use" not in free.archive.tooltip + free.delete.tooltip


def test_rows_and_details_say_their_times_from_the_same_instant(
        store: FileStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import jupyter_agent.ui.panel as panel_module

    sid = make_session(store, "q")
    updated = store.load_session(sid).updated_at
    clock = [updated]

    class Clock(datetime):
        @classmethod
        def now(cls, tz: object = None) -> datetime:  # type: ignore[override]
            return clock[0]

    monkeypatch.setattr(panel_module, "datetime", Clock)
    panel = SessionsPanel(store)
    assert panel.rows[0].text.updated == "just now"
    clock[0] = updated + timedelta(minutes=10)  # the panel stays open ten minutes
    panel.rows[0].details.click()
    assert panel.rows[0].text.updated == "10 min ago"
    assert "updated 10 min ago" in panel._details.text.value
    clock[0] = updated + timedelta(minutes=25)
    panel.refresh()
    assert panel.rows[0].text.updated == "25 min ago"
    assert "updated 25 min ago" in panel._details.text.value


def test_a_summary_of_messages_shows_one_labelled_message_a_line(store: FileStore) -> None:
    sid = make_session(store, "how many penguins?", reply="There are 344.")
    summary = ensure_summary(store, sid)
    assert summary == "user: how many penguins?\nassistant: There are 344."
    panel = SessionsPanel(store)
    assert panel.rows[0].summary == summary
    info = panel._slots[0].info.value
    assert ("<br><small>user: how many penguins?</small>"
            "<br><small>assistant: There are 344.</small>") in info
    panel.rows[0].details.click()
    detail = panel._details.text.value
    assert "<b>user:</b> how many penguins?</p><p style='margin:2px 0'><b>assistant:</b> " \
           "There are 344.</p>" in detail


def test_archived_message_names_the_title(store: FileStore) -> None:
    from jupyter_agent.controller import SessionChange
    from jupyter_agent.ui.display import format_change

    assert format_change(SessionChange("abc", "archived", title="Penguins")) == \
        "Archived session ‘Penguins’ (abc)."
    assert format_change(SessionChange("abc", "deleted")) == "Deleted session abc."


def test_details_last_messages_keep_maths_delimiters_as_typed(store: FileStore) -> None:
    sid = make_session(store, r"solve \(x^2 = 4\)", reply=r"so \(x = 2\) or \[x = -2\]")
    panel = SessionsPanel(store)
    panel.rows[0].details.click()
    detail = panel._details.text.value
    assert r"solve \(x^2 = 4\)" in detail and r"so \(x = 2\) or \[x = -2\]" in detail
    assert panel.rows[0].session_id == sid
    assert format_row(store.describe_session(sid)).name == r"solve \(x^2 = 4\)"
    panel.close()
