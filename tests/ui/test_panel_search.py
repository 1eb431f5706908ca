"""The sessions panel's filter searches like %agent_sessions --search and shows where."""

from __future__ import annotations

from pathlib import Path

from jupyter_agent.artefacts.fork import fork_session
from jupyter_agent.store import FileStore
from jupyter_agent.ui.panel import SessionsPanel
from tests.ui.test_panel import make_session


def test_filter_shows_where_the_text_was_found(memory_dir: Path) -> None:
    store = FileStore(memory_dir)
    summary = make_session(store, "Count the birds", summary="Goal: <b>bill depth</b> by island")
    prompt = make_session(store, "Plot bill depth against length", title="Depth plot")
    reply = make_session(store, "What next?", reply="Look at the bill depth per sex.")
    make_session(store, "Weather in Bergen")
    panel = SessionsPanel(store, query="BILL depth")
    shown = {row.session_id: row for row in panel.rows}
    assert set(shown) == {summary, prompt}
    info = {sid: slot.info.value for slot in panel._slots for sid in [slot.session_id]}
    assert ("<i>found in summary:</i> Goal: &lt;b&gt;<mark>bill depth</mark>&lt;/b&gt; by"
            in info[summary])
    assert "found in first prompt:" in info[prompt]
    assert '2 sessions match "BILL depth":' in panel.text_table()
    panel._filter.value = "bergen"
    assert len(panel.rows) == 1 and "Weather" in panel.text_table()
    panel._filter.value = ""
    assert len(panel.rows) == 4 and "found in" not in panel.rows[0].box.children[0].value
    deep = SessionsPanel(store, query="per sex", deep=True)
    assert [row.session_id for row in deep.rows] == [reply]
    assert "found in message 3 (assistant):" in deep.rows[0].box.children[0].value
    panel.close()
    deep.close()


def test_rows_and_details_name_the_parent_of_a_fork(memory_dir: Path) -> None:
    store = FileStore(memory_dir)
    parent = make_session(store, "Count the birds")
    fork = fork_session(store, parent, at=1).record
    panel = SessionsPanel(store)
    panel._on_details_click(fork.id)
    assert f"fork of {parent} after turn 1" in panel._details.text.value
    panel.close()
