"""Text from outside made inert: for a terminal (:func:`terminal_text`) and as Markdown for
Jupyter (:func:`inert_markdown`; why and what: docs/design.md "What the notebook shows");
sizes, counts, costs and times as the short text every view shows.

Outside code a ``$`` becomes ``\\\\$`` and a backslash MathJax would read ``&#92;&#92;``.
The result is checked with ``markdown-it-py`` (HTML on, every link accepted); should it
still hold HTML, an image or an unsafe link, the whole text is shown literally instead.
"""

from __future__ import annotations

import functools
import html
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jupyter_agent.store.records import CLOCK_SKEW, Usage

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

#: Terminal escape sequences (CSI, OSC such as hyperlinks and window titles, DCS, and
#: the rest), 7-bit and 8-bit, each to its end if it has one.
_ESCAPES = re.compile(
    r"\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x9d[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?|[\x90\x98\x9e\x9f][^\x1b\x9c]*(?:\x1b\\|\x9c)?"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?|\x1b[ -/]*[0-~]?")
#: What a terminal would still act on, or that reorders text: C0 controls but tab and
#: newline, DEL, C1 controls, bidirectional embeddings, overrides and isolates.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: str) -> str:
    """``text`` from outside made safe to print on a terminal: escape sequences removed,
    a carriage return made a line break, every other control character and bidirectional
    override replaced by ``\ufffd``. Tab and newline are kept."""
    text = _ESCAPES.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    return _CONTROLS.sub("\ufffd", text)


def truncate(text: str, limit: int) -> str:
    """Cut ``text`` to ``limit`` code points (negative: no limit), keeping both ends, with a
    marker saying how much was cut between them (not counted in ``limit``)."""
    if limit < 0 or len(text) <= limit:
        return text
    tail = limit // 2
    end = text[len(text) - tail:] if tail else ""
    return (f"{text[:limit - tail]}\n... [output truncated: {len(text) - limit:,} characters "
            f"cut] ...\n{end}")


def format_bytes(size: int) -> str:
    """``312 bytes``, ``1.2 KiB``, ``5.0 MiB``."""
    if size < 1024:
        return f"{size} byte{'s' if size != 1 else ''}"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def plural(n: int | float, word: str) -> str:
    """``"1 token"``, ``"2 tokens"``, ``"1,205 sessions"``."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def relative_time(when: datetime, now: datetime | None = None) -> str:
    """``"just now"``, ``"5 min ago"``, ``"3 h ago"``, ``"2 days ago"``, else the local
    date. Naive datetimes are UTC; a time further ahead than ``CLOCK_SKEW`` shows as its
    date ``"(in the future)"``."""
    now = now or datetime.now(UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = (now - when).total_seconds()
    if -seconds > CLOCK_SKEW.total_seconds():
        return f"{when.date().isoformat()} (in the future)"
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    days = int(seconds // 86400)
    if days < 30:
        return "yesterday" if days == 1 else f"{days} days ago"
    return when.astimezone().date().isoformat()


def format_cost(usage: Usage) -> str:
    """``"$0.0123"``, or ``"price unknown"`` when no call could be priced."""
    if usage.price_unknown and usage.cost_usd == 0:
        return "price unknown"
    text = f"${usage.cost_usd:.4f}"
    return text + " + price unknown" if usage.price_unknown else text


def format_tokens(usage: Usage) -> str:
    """``"1,234 tokens (1,000 in / 234 out)"``."""
    total = usage.input_tokens + usage.output_tokens
    return f"{plural(total, 'token')} ({usage.input_tokens:,} in / {usage.output_tokens:,} out)"


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` code points, ending with ``…`` when cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def one_line(text: str, limit: int = 80) -> str:
    """``text`` made inert (:func:`terminal_text`) on one line, cut to ``limit`` code points."""
    return shorten(" ".join(terminal_text(text).split()), limit)


_PUNCT = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
#: What MathJax reads after a backslash (environments, references) outside maths.
_TEX_WORD = re.compile(r"(?:begin|end|ref|eqref)\s*\{")
_ENTITY = re.compile(r"&(?:#36|#x24|dollar|#92|#x5c|bsol);", re.IGNORECASE)
#: CommonMark's autolinks: ``<scheme:...>`` and ``<name@host>``.
_AUTOLINK = re.compile(
    r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\x00-\x20<>]*|[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}"
    r"[A-Za-z0-9])?)*)>")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
#: Characters that have a meaning in Markdown (escaped by :func:`literal`).
_MD_SPECIAL = set("\\`*_[]<>#|~!&")
#: The schemes a link in text we did not write may have; any other link shows as text.
SAFE_SCHEMES = frozenset({"http", "https", "mailto"})
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_UNESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
#: A backslash escape (skipped whole) or a character the scanners below look for.
_ESCAPED_OR = re.compile(r"\\.?|[()|\n]", re.S)


def safe_url(url: str) -> bool:
    """True if ``url`` is relative or its scheme is in :data:`SAFE_SCHEMES`, read as a
    browser reads it after Markdown (escapes and entities decoded, ASCII spaces and
    controls dropped: ``java&#10;script:`` is ``javascript:``)."""
    url = html.unescape(_UNESCAPE.sub(r"\1", url))
    match = _SCHEME.match(re.sub(r"[\x00-\x20\x7f]", "", url))
    return match is None or match.group(1).lower() in SAFE_SCHEMES


def _destination(text: str) -> str:  # the link destination after "](" or "]:"
    text = text.lstrip()
    if text.startswith("<"):
        return text[1:].split(">", 1)[0]
    return text.split(None, 1)[0] if text.strip() else ""


@functools.cache
def _parser(*, html: bool = False, breaks: bool = False) -> MarkdownIt:
    # html: the check of _inert (raw HTML shown, every link accepted); breaks: summaries
    from markdown_it import MarkdownIt  # lazy: ~60 ms more at extension load

    md = MarkdownIt("commonmark", {"html": html, "breaks": breaks}).enable("table")
    md.core.ruler.before("text_join", "delimiters_as_typed", _delimiters_as_typed)
    if html:
        md.validateLink = lambda url: True  # type: ignore[method-assign]
    if breaks:  # only safe links, opening in a new tab; an image a link to it
        md.validateLink = safe_url  # type: ignore[method-assign]
        md.add_render_rule("link_open", _link_open)
        md.add_render_rule("image", _image_as_link)
    return md


def _delimiters_as_typed(state: Any) -> None:  # "\(x\)" reads "\(x\)", not "(x)"
    for token in state.tokens:
        for child in token.children or []:
            if child.type == "text_special" and child.info == "escape" \
                    and child.content in "()[]":
                child.content = "\\" + child.content


def _blocks(markdown: str) -> tuple[set[int], set[int], set[int], bool]:
    # line numbers (0-based) as a parser that shows raw HTML as text sees them: of code
    # blocks (fenced, indented), of tables (a code span never runs past a cell's "|"),
    # where a block of inline text starts or the one before ends; and whether a link's
    # destination holds a "$"
    code: set[int] = set()
    tables: set[int] = set()
    starts: set[int] = set()
    dollar_links = False
    for token in _parser().parse(markdown):
        if token.type in ("fence", "code_block") and token.map:
            code.update(range(*token.map))
        elif token.type == "table_open" and token.map:
            tables.update(range(*token.map))
        if token.type == "inline" and token.map:
            starts.update(token.map)  # what follows is another block (or no text)
        for child in token.children or []:
            if child.type == "link_open" and "$" in str(child.attrGet("href") or ""):
                dollar_links = True
    return code, tables, starts, dollar_links


def _backtick_run(text: str, i: int) -> int:
    return next((j for j in range(i, len(text)) if text[j] != "`"), len(text)) - i


def _inline(text: str, dollar_links: bool = False, maths: bool = True) -> str:
    # One run of non-code lines made inert (and safe from maths); with dollar_links a
    # "$" in a link destination becomes "%24" (the same URL).
    out: list[str] = []
    i, n = 0, len(text)
    dest_end = 0  # a link destination runs to here: no code spans, no maths escapes
    while i < n:
        c = text[i]
        in_dest = i < dest_end
        if c == "\\" and i + 1 < n and text[i + 1] in _PUNCT:
            p = text[i + 1]
            if not maths or (in_dest and p in "()[]"):
                out.append(text[i:i + 2])
            elif in_dest and dollar_links and p == "$":
                out.append("\\%24")
            elif p == "\\" and text.startswith("|", i + 2):  # "\\|": a table keeps the | in
                out.append("\\\\")  # its cell; nothing for maths follows the backslash
            elif p == "`" and "```" not in text[text.rfind("\n", 0, i) + 1:i]:
                out.append("&#96;")  # a literal backtick no scanner takes for a code span
            elif p in "()[]":  # "\(" shows as typed: "\\" (MathJax shows "\"), then "("
                out.append("&#92;&#92;\\" + p)
            else:  # (but "\\`" in what could be a fence's info string keeps it no fence)
                out.append("\\\\\\$" if p == "$" else "\\\\&#92;" if p == "\\" else "\\" + p)
            i += 2
        elif c == "`" and not in_dest:
            run = _backtick_run(text, i)
            blank = _BLANK_LINE.search(text, i)  # a code span ends with its paragraph
            limit = n if blank is None else blank.start()
            close = text.find("`" * run, i + run, limit)
            while close != -1 and _backtick_run(text, close) != run:
                close = text.find("`" * run, close + _backtick_run(text, close), limit)
            newline = text.find("\n", i, close) if close != -1 else -1
            if newline != -1 and "<" in text[newline:close]:
                close = -1  # a "<" on a later line could open an HTML block mid-span
            if close == -1:  # no code span: literal backticks, escaped so that nothing
                out.append("\\`" * run)  # that scans the source can pair them with others
                i += run
            else:
                out.append(text[i:close + run])
                i = close + run
        elif c == "&" and maths and (m := _ENTITY.match(text, i)):
            dollar = m.group(0).lower() in ("&#36;", "&#x24;", "&dollar;")
            out.append("\\\\" + m.group(0) if dollar else "&#92;&#92;")
            i = m.end()
        elif c == "<" and not in_dest and (m := _AUTOLINK.match(text, i)) \
                and safe_url(m.group(1)):
            out.append(m.group(0))
            i = m.end()
        elif c == "!" and text.startswith("[", i + 1) and not in_dest:
            out.append("[image: ")  # an image is a link to it, never fetched by itself
            i += 2
        elif c == "]" and text.startswith("(", i + 1):
            link = safe_url(_destination(text[i + 2:i + 2050]))
            out.append("](" if link else "]\\(")  # no link: the destination shows as text
            dest_end = _link_end(text, i + 2) if link else dest_end
            i += 2
        elif c == "]" and text.startswith(":", i + 1) \
                and not safe_url(_destination(text[i + 2:i + 2050])):
            out.append("]\\:")  # no link reference definition with that destination
            i += 2
        else:  # one character
            if c == "\\":
                c = "&#92;&#92;" if maths and _TEX_WORD.match(text, i + 1) else "\\"
            elif c == "$" and (maths or (in_dest and dollar_links)):
                c = "%24" if in_dest and dollar_links else "\\\\$"
            elif c == "<":  # raw HTML shows as typed
                c = "\\<"
            out.append(c)
            i += 1
    return "".join(out)


def _link_end(text: str, start: int) -> int:
    # the index after the ")" that closes a link destination opened at start
    depth = 1
    for match in _ESCAPED_OR.finditer(text, start):
        if match.group() == "\n":
            break
        depth += {"(": 1, ")": -1}.get(match.group(), 0)
        if depth == 0:
            return match.end()
    return start


def _cells(line: str) -> list[str]:
    # a table row split at each "|" not escaped (by an odd number of backslashes)
    cuts = [m.start() for m in _ESCAPED_OR.finditer(line) if m.group() == "|"]
    return [line[a + 1:b] for a, b in zip([-1, *cuts], [*cuts, len(line)], strict=True)]


def _inert(markdown: str) -> bool:
    for token in _parser(html=True).parse(markdown):
        if token.type == "html_block":
            return False
        for child in token.children or []:
            if child.type in ("html_inline", "image") or (
                    child.type == "link_open" and not safe_url(str(child.attrGet("href")))):
                return False
    return True


def _markdown(markdown: str, maths: bool) -> str:
    code, tables, starts, dollar_links = _blocks(markdown)
    out: list[str] = []
    run: list[str] = []
    for index, line in enumerate(markdown.split("\n")):
        if run and (index in tables or index in code or index in starts):
            out.append(_inline("\n".join(run), dollar_links, maths))  # a block ends: so do
            run = []  # its code spans
        if index in code:
            out.append(line)
        elif index in tables:
            out.append("|".join(_inline(cell, dollar_links, maths) for cell in _cells(line)))
        else:
            run.append(line)
    if run:
        out.append(_inline("\n".join(run), dollar_links, maths))
    return "\n".join(out)


def inert_markdown(markdown: str, *, maths: bool = True) -> str:
    """Markdown from outside (a reply, also while it streams in) made inert; code, tables,
    lists, emphasis and safe links render as usual. ``maths``: safe from MathJax too (False
    in exports, where maths is left as written)."""
    source = _markdown(markdown, maths)
    return source if _inert(source) else literal(markdown)


def hard_breaks(markdown: str) -> str:
    """Each line break inside a paragraph made a hard break; code blocks untouched."""
    lines = markdown.split("\n")
    code = _blocks(markdown)[0]
    for i, line in enumerate(lines[:-1]):
        if i not in code and line.strip() and lines[i + 1].strip() and i + 1 not in code:
            lines[i] = line.rstrip() + "  "
    return "\n".join(lines)


def literal(text: str, *, code_spans: bool = False) -> str:
    """Markdown that shows ``text`` character for character: line breaks hard, leading
    spaces no-break, no line a list item, heading underline or code block. With
    ``code_spans``, one-line `` `...` `` spans are kept and show as code."""
    parts = re.split(r"(`[^`\n]+`)", text) if code_spans else [text]
    return "".join(part if i % 2 else _literal(part, line_start=i == 0)
                   for i, part in enumerate(parts))


def _literal(text: str, *, line_start: bool) -> str:
    lines = []
    for number, line in enumerate(text.split("\n")):
        chars = ["\\\\$" if c == "$" else "\\\\&#92;" if c == "\\" else
                 "\\" + c if c in _MD_SPECIAL else c for c in line]
        if number or line_start:  # no list item, heading underline or code block
            if line[:1] in ("-", "+", "="):
                chars[0] = "\\" + line[0]
            digits = next((i for i, c in enumerate(line) if not c.isdigit()), len(line))
            if 0 < digits < len(line) and line[digits] in ".)":
                chars[digits] = "\\" + line[digits]
        body = "".join(chars)
        stripped = body.lstrip(" ") if number or line_start else body
        lines.append("\u00a0" * (len(body) - len(stripped)) + stripped)
    return "  \n".join(lines)


def fence(text: str, info: str = "") -> str:
    """``text`` in a fenced code block whose fence no line of ``text`` can close."""
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    marks = "`" * (longest + 1)
    return f"{marks}{info}\n{text.rstrip()}\n{marks}"


def code_span(text: str) -> str:
    """``text`` on one line as a code span no backtick in it can close (shown as typed)."""
    text = " ".join(text.splitlines())
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def plain_text(markdown: str) -> str:
    """The readable text: a line per paragraph, heading, list item and code line, a
    table row's cells joined by `` · ``; no marks, backticks or link targets."""
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
    return shorten(" ".join(plain_text(markdown).split()), limit)


def summary_html(markdown: str) -> str:
    """A summary (line breaks kept) as HTML: raw HTML escaped, an image a link, only
    safe links (opening in a new tab), ``\\(`` keeping its backslash."""
    return _parser(breaks=True).render(markdown)


def _link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    tokens[idx].attrSet("target", "_blank")
    tokens[idx].attrSet("rel", "noopener noreferrer")
    return str(self.renderToken(tokens, idx, options, env))


def _image_as_link(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    return (f'<a href="{html.escape(str(token.attrGet("src") or ""))}" target="_blank" '
            f'rel="noopener noreferrer">image: {html.escape(alt)}</a>')
