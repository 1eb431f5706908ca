"""Markdown that JupyterLab shows as typed (ui/markdown.py).

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

from jupyter_agent.ui.markdown import excerpt, literal, plain_text, reply_markdown, summary_html

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
    source = reply_markdown(reply)
    assert math_openers(source) == []
    assert mathjax_shows(rendered_text(source)) == rendered_text(reply)
    rendered = _MD.render(source)
    assert "<table>" in rendered and "<li>first " in rendered and "<strong>bold " in rendered
    assert "<code class=\"language-python\">print('$5', '$10')" in rendered  # code untouched
    assert "<code>df['$col']</code>" in rendered
    assert "<" not in source.replace("<", "", 0) or "<" not in reply  # no HTML added


def test_tex_triggers_show_as_commonmark_shows_them() -> None:
    for reply in ["the formula \\(x^2\\) and \\[y\\]", "literal \\\\(x\\\\) here",
                  "\\begin{align} a \\end{align}", "see \\ref{eq1}", "C:\\Users\\me",
                  "escaped \\$5 and \\\\$6", "entity &#36;5 and &dollar;6 and &#92;(",
                  "[a link](http://example.com/$1) costs $2", "@@0@@ and $ alone"]:
        source = reply_markdown(reply)
        assert math_openers(source) == [], reply
        assert mathjax_shows(rendered_text(source)) == rendered_text(reply), reply


def test_streaming_halves_are_safe_too() -> None:
    reply = "Costs: `$5` and $6\n\n```python\nx = '$7'\n"  # an unclosed fence while streaming
    source = reply_markdown(reply)
    assert math_openers(source) == [] and "x = '$7'" in source


_ALPHABET = st.sampled_from([*"$\\()[]{}`*_|#-+1.a &;x\n", "begin{", "ref{", "```", "&#36;",
                             "  ", "\n\n"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join))
@example("$```\n\n```$```")  # backticks that open no code span must not hide a $
def test_no_text_ever_becomes_maths(reply: str) -> None:
    source = reply_markdown(reply)
    assert math_openers(source) == []
    assert mathjax_shows(rendered_text(source)) == rendered_text(reply)


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
