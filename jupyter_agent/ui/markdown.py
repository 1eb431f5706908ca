"""Markdown for Jupyter that shows TeX triggers as typed: replies, notices, our own lines.

JupyterLab (and Notebook 7, nbconvert's HTML) render ``text/markdown`` in three steps:
``removeMath`` lifts ``$...$``, ``$$...$$``, ``\\\\(...\\\\)``, ``\\\\[...\\\\]`` and
``\\begin{env}...\\end{env}`` out of the source, the Markdown parser renders the rest,
then MathJax typesets the page (``processEscapes``: ``\\$`` shows ``$`` and ``\\\\``
shows ``\\``; ``\\ref{}`` and environments are triggers too). A reply that says "costs
$5 and $10" therefore shows italic maths. This module writes Markdown whose *rendered
text* is what CommonMark without maths shows (design §18):

- outside code, every ``$`` becomes ``\\\\$`` (the page then holds ``\\$``, which MathJax
  shows as ``$``); a backslash MathJax would read becomes ``&#92;&#92;``; nothing is
  left for ``removeMath`` to lift;
- code spans, fenced and indented code blocks and raw HTML are left exactly as they are
  (MathJax never typesets ``<code>``/``<pre>``), so code, tables, lists and emphasis
  still render;
- no HTML tags are added, so headless output (``nbconvert --to markdown``) stays plain
  Markdown.

:func:`reply_markdown` does this for Markdown written by the model; :func:`literal`
turns any plain text of ours (a footer, a tool call line) into Markdown that shows it
character for character. :func:`plain_text` and :func:`excerpt` go the other way
(Markdown to readable text), :func:`summary_html` renders a summary for the panel's
detail view. Parsing is ``markdown-it-py`` (CommonMark plus GitHub tables).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = ["excerpt", "hard_breaks", "literal", "plain_text", "reply_markdown", "summary_html"]

_PUNCT = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
#: What MathJax reads after a backslash (environments, references) outside maths.
_TEX_WORD = re.compile(r"(?:begin|end|ref|eqref)\s*\{")
_ENTITY = re.compile(r"&(?:#36|#x24|dollar|#92|#x5c|bsol);", re.IGNORECASE)
_AUTOLINK = re.compile(r"<(?:[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[^\s<>@]+@[^\s<>]+)>")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
#: Characters that have a meaning in Markdown (escaped by :func:`literal`).
_MD_SPECIAL = set("\\`*_[]<>#|~!&")


@functools.lru_cache(maxsize=4)
def _parser(breaks: bool = False, html: bool = False) -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": html, "breaks": breaks}).enable("table")


@dataclass(frozen=True)
class _Blocks:
    """Where the blocks of a Markdown text are, by line number (0-based).

    Attributes
    ----------
    code : set of int
        Lines of fenced and indented code blocks, and of raw HTML blocks whose text is
        shown as it is (``<pre>``, ``<script>``, ``<style>``, ``<textarea>``).
    html : set of int
        Lines of the other raw HTML blocks (their text is rendered as HTML).
    starts : set of int
        Lines where a block of inline text (a paragraph, heading, table row, list item)
        starts or the one before ends: a code span never runs past its block.
    dollar_links : bool
        Whether a link's destination holds a ``$``.
    """

    code: set[int]
    html: set[int]
    starts: set[int]
    dollar_links: bool


_RAW_HTML = re.compile(r"\s*<(?:pre|script|style|textarea)[\s>]", re.IGNORECASE)


def _blocks(markdown: str, *, html: bool = True) -> _Blocks:
    """The :class:`_Blocks` of ``markdown``, as a front end that renders raw HTML parses it
    (``html=False``: as a renderer that escapes it)."""
    blocks = _Blocks(set(), set(), set(), False)
    dollar_links = False
    for token in _parser(html=html).parse(markdown):
        if token.type in ("fence", "code_block") and token.map:
            blocks.code.update(range(*token.map))
        elif token.type == "html_block" and token.map:
            raw = _RAW_HTML.match(token.content)
            (blocks.code if raw else blocks.html).update(range(*token.map))
        if token.type == "inline" and token.map:
            blocks.starts.update(token.map)  # what follows is another block (or no text)
        for child in token.children or []:
            if child.type == "link_open" and "$" in str(child.attrGet("href") or ""):
                dollar_links = True
    return replace(blocks, dollar_links=dollar_links)


_TAG_OR_COMMENT = re.compile(r"<!--.*?(?:-->|$)|<[^<>]*>")


def _html_text(line: str) -> str:
    """One line of a raw HTML block with nothing left for maths: in text, ``$`` becomes
    ``\\$`` (an escaped dollar to the maths scanners, ``$`` on the page), a backslash
    ``&#92;&#92;`` and a backtick ``&#96;``; in tags and comments a ``$`` becomes ``&#36;``."""
    out: list[str] = []
    at = 0
    for match in _TAG_OR_COMMENT.finditer(line):
        out.append(_html_chars(line[at:match.start()]))
        out.append(match.group(0).replace("$", "&#36;"))
        at = match.end()
    out.append(_html_chars(line[at:]))
    return "".join(out)


def _html_chars(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "&" and (m := _ENTITY.match(text, i)):
            dollar = m.group(0).lower() in ("&#36;", "&#x24;", "&dollar;")
            out.append("\\" + m.group(0) if dollar else "&#92;&#92;")
            i = m.end()
            continue
        out.append("\\$" if c == "$" else "&#92;&#92;" if c == "\\" else "&#96;" if c == "`"
                   else c)
        i += 1
    return "".join(out)


def _backtick_run(text: str, i: int) -> int:
    j = i
    while j < len(text) and text[j] == "`":
        j += 1
    return j - i


def _inline(text: str, dollar_links: bool = False) -> str:
    """Escape the maths of one run of non-code lines (see the module docstring); with
    ``dollar_links``, a ``$`` in a link destination becomes ``%24`` (the same URL)."""
    out: list[str] = []
    i, n = 0, len(text)
    brackets = 0  # "[" not escaped and not closed yet: a "](" may start a link destination
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in _PUNCT:
            p = text[i + 1]
            if p == "\\" and text.startswith("|", i + 2):  # "\\|": a table keeps the | in
                out.append("\\\\")  # its cell; nothing for maths follows the backslash
            elif p == "`" and "```" not in text[text.rfind("\n", 0, i) + 1:i]:
                out.append("&#96;")  # a literal backtick no scanner takes for a code span
            else:  # (but "\\`" in what could be a fence's info string keeps it no fence)
                out.append("\\\\\\$" if p == "$" else "\\\\&#92;" if p == "\\" else "\\" + p)
            i += 2
        elif c == "\\":
            out.append("&#92;&#92;" if _TEX_WORD.match(text, i + 1) else "\\")
            i += 1
        elif c == "$":
            out.append("\\\\$")
            i += 1
        elif c == "`":
            run = _backtick_run(text, i)
            blank = _BLANK_LINE.search(text, i)  # a code span ends with its paragraph
            limit = n if blank is None else blank.start()
            close = text.find("`" * run, i + run, limit)
            while close != -1 and _backtick_run(text, close) != run:
                close = text.find("`" * run, close + _backtick_run(text, close), limit)
            if close == -1:  # no code span: literal backticks, escaped so that nothing
                out.append("\\`" * run)  # that scans the source can pair them with others
                i += run
            else:
                out.append(text[i:close + run])
                i = close + run
        elif c == "&" and (m := _ENTITY.match(text, i)):
            dollar = m.group(0).lower() in ("&#36;", "&#x24;", "&dollar;")
            out.append("\\\\" + m.group(0) if dollar else "&#92;&#92;")
            i = m.end()
        elif c == "<" and (m := _AUTOLINK.match(text, i)):
            out.append(m.group(0))
            i = m.end()
        elif c == "<" and (m := _HTML_TAG.match(text, i)):  # a $ in an attribute: &#36;
            out.append(m.group(0).replace("$", "&#36;"))
            i = m.end()
        elif c == "[":
            brackets += 1
            out.append(c)
            i += 1
        elif c == "]" and brackets:
            brackets -= 1
            end = _link_end(text, i + 2) if text.startswith("](", i) and dollar_links else i + 1
            out.append(text[i:end].replace("$", "%24"))
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _link_end(text: str, start: int) -> int:
    """The index after the ``)`` that closes a link destination opened at ``start``."""
    depth = 1
    i = start
    while i < len(text) and text[i] != "\n":
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return start


def reply_markdown(markdown: str) -> str:
    """Markdown written by the model, made safe from maths (design §18).

    Parameters
    ----------
    markdown : str
        A reply, or part of one while it streams in (an unclosed code fence runs to the end).

    Returns
    -------
    str
        Markdown that JupyterLab renders as CommonMark without maths: ``$``, ``$$``,
        ``\\\\(``, ``\\\\[`` and ``\\begin{...}`` show as typed; code spans, code blocks,
        tables, lists, emphasis and links render as usual. Code is left untouched.
    """
    if not any(c in markdown for c in "$\\&"):
        return markdown
    lines = markdown.split("\n")
    blocks = _blocks(markdown)
    out: list[str] = []
    run: list[str] = []
    for index, line in enumerate(lines):
        block = index in blocks.code or index in blocks.html
        if run and (block or index in blocks.starts):  # a block ends: so do its code spans
            out.append(_inline("\n".join(run), blocks.dollar_links))
            run = []
        if index in blocks.code:
            out.append(line)
        elif index in blocks.html:
            out.append(_html_text(line))
        else:
            run.append(line)
    if run:
        out.append(_inline("\n".join(run), blocks.dollar_links))
    return "\n".join(out)


def hard_breaks(markdown: str) -> str:
    """``markdown`` with each line break inside a paragraph kept as a line break (two
    trailing spaces), as in a summary written line by line; code blocks are untouched."""
    lines = markdown.split("\n")
    code = _blocks(markdown, html=False).code
    for i, line in enumerate(lines[:-1]):
        if i not in code and line.strip() and lines[i + 1].strip() and i + 1 not in code:
            lines[i] = line.rstrip() + "  "
    return "\n".join(lines)


def literal(text: str, *, code_spans: bool = False) -> str:
    """Markdown that shows ``text`` exactly, character for character (no emphasis, no
    links, no maths), e.g. a footer with ``$0.0012`` or a tool call ``add_todo(text="x")``.

    Line breaks are kept as hard line breaks; leading spaces are kept as no-break spaces
    (a line of our text never becomes a code block); a leading ``-``, ``+``, ``1.`` or
    ``=`` is escaped so that no line becomes a list item or a heading underline. With
    ``code_spans``, `` `...` `` spans (on one line) are kept and show as code.
    """
    if code_spans:
        parts = re.split(r"(`[^`\n]+`)", text)
        return "".join(part if i % 2 else _literal(part, line_start=i == 0)
                       for i, part in enumerate(parts))
    return _literal(text, line_start=True)


def _literal(text: str, *, line_start: bool) -> str:
    lines = []
    for number, line in enumerate(text.split("\n")):
        if number == 0 and not line_start:
            line_chars = [("\\\\$" if c == "$" else "\\\\&#92;" if c == "\\" else
                           "\\" + c if c in _MD_SPECIAL else c) for c in line]
            lines.append("".join(line_chars))
            continue
        chars = []
        for i, c in enumerate(line):
            if c == "$":
                chars.append("\\\\$")
            elif c == "\\":
                chars.append("\\\\&#92;")
            elif c in _MD_SPECIAL:
                chars.append("\\" + c)
            else:
                chars.append(c)
            if (i == 0 and c in "-+=") or (i > 0 and c in ".)" and line[:i].isdigit()):
                chars[-1] = "\\" + c
        body = "".join(chars)
        stripped = body.lstrip(" ")
        lines.append("\u00a0" * (len(body) - len(stripped)) + stripped)
    return "  \n".join(lines)


# --------------------------------------------------------------------------- Markdown -> text
def plain_text(markdown: str) -> str:
    """The readable text of ``markdown``: no emphasis marks, no backticks, no link targets.

    Paragraphs, headings and list items become lines; a table becomes one line per row
    with its cells joined by `` · ``; code blocks keep their lines.

    Parameters
    ----------
    markdown : str

    Returns
    -------
    str
    """
    lines: list[str] = []
    row: list[str] | None = None
    for token in _parser().parse(markdown):
        if token.type == "tr_open":
            row = []
        elif token.type == "tr_close" and row is not None:
            lines.append(" · ".join(cell for cell in row if cell))
            row = None
        elif token.type == "inline":
            text = "".join(child.content if child.type in ("text", "code_inline") else
                           " " if child.type in ("softbreak", "hardbreak") else ""
                           for child in token.children or [])
            (row if row is not None else lines).append(text.strip())
        elif token.type in ("fence", "code_block"):
            lines.extend(token.content.rstrip("\n").splitlines())
    return "\n".join(line for line in lines if line)


def excerpt(markdown: str, limit: int = 120) -> str:
    """:func:`plain_text` on one line, cut to ``limit`` code points (``…`` when cut)."""
    text = " ".join(plain_text(markdown).split())
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def summary_html(markdown: str) -> str:
    """A session summary (Markdown, line breaks kept) as HTML for the panel's detail view.

    Raw HTML in the summary is escaped, not rendered; code blocks, tables and lists
    render; links get ``rel="noopener"`` and open in a new tab.
    """
    rendered = _parser(breaks=True).render(markdown)
    return rendered.replace("<a href=", '<a target="_blank" rel="noopener" href=')
