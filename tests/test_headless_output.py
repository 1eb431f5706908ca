"""What a headless run of the notebooks leaves: ``jupyter nbconvert --to markdown`` output.

The notebooks' stored outputs are checked (nbval, in the same test run, proves they are
what a fresh run produces): every turn is one Markdown output per stretch of text between
the figures its code displayed (design notes "Figures"), each figure an image output in its place;
none is empty (an empty output becomes a run of blank lines), and no output holds HTML:
converted to Markdown, the notebooks contain no raw HTML tag outside code.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from markdown_it import MarkdownIt
from nbconvert import MarkdownExporter

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def _is_turn(source: str) -> bool:
    first = source.lstrip().split(maxsplit=1)[0] if source.strip() else ""
    return first in ("%%agent", "%agent")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_turn_is_one_markdown_output_without_html(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    turns = [cell for cell in notebook.cells
             if cell.cell_type == "code" and _is_turn(cell.source)]
    assert turns
    for cell in turns:
        rich = [o for o in cell.outputs if o.output_type in ("display_data", "execute_result")]
        texts = [o for o in rich if "text/markdown" in o.data]
        figures = [o for o in rich if "text/markdown" not in o.data]
        # the reply, its tool calls and its footer; cut where the code showed a figure
        assert len(texts) == len(figures) + 1, cell.source
        assert rich[0::2] == texts and rich[1::2] == figures, cell.source
        for figure in figures:
            assert "image/png" in figure.data
            assert figure.data["text/plain"].startswith("<Figure size ")
        for output in texts:
            markdown = output.data["text/markdown"]
            assert markdown.strip() and "\n\n\n" not in markdown
            assert output.data["text/plain"].strip()  # readable as text too
            tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
            html = [t for t in tokens if t.type == "html_block"] + [
                c for t in tokens for c in (t.children or []) if c.type == "html_inline"]
            assert html == [], cell.source
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            assert not data or any(str(v).strip() for v in data.values())  # nothing empty


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nbconvert_markdown_has_no_raw_html(path: Path) -> None:
    body, _ = MarkdownExporter().from_filename(str(path))
    tokens = MarkdownIt("commonmark").enable("table").parse(body)
    html = [t.content for t in tokens if t.type == "html_block"] + [
        c.content for t in tokens for c in (t.children or []) if c.type == "html_inline"]
    assert html == []
