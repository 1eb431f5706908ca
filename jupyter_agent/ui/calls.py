"""How a tool call and its result are shown: the call on one line or with its code, the
result in labelled parts (pure functions shared by the renderers and the recap).

Text is cut by code points (Python ``str`` indices), never inside a character.
"""

from __future__ import annotations

import html
import json
from typing import Any

__all__ = ["RESULT_LABELS", "format_call", "format_tool_call", "is_code_call",
           "notice_shown_by", "one_line_result", "question_bundle", "result_preview",
           "show_question", "tool_result_sections"]


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def _one_line(text: str, limit: int = 80) -> str:
    return _shorten(" ".join(text.split()), limit)


def result_preview(text: str, max_lines: int = 10, width: int = 160) -> list[str]:
    """The first lines of a tool result, for showing it under its tool call.

    Parameters
    ----------
    text : str
        The tool result (what the model sees).
    max_lines : int
        Lines kept; when more follow, a last line says how many were left out.
    width : int
        Code points kept per line (a cut line ends with ``…``).

    Returns
    -------
    list of str
        At least one line (``"(no output)"`` for an empty result). Tables such as a
        printed DataFrame keep their rows, so the numbers stay readable.
    """
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        return ["(no output)"]
    shown = [_shorten(line, width) for line in lines[:max_lines]]
    if len(lines) > max_lines:
        more = len(lines) - max_lines
        shown.append(f"… ({more} more line{'s' if more != 1 else ''})")
    return shown


#: The section markers of a ``run_python`` result (what the model reads) and the label
#: each gets on screen (one label per block, never two).
_SECTIONS = {"[stderr]": "stderr", "[result]": "result", "[error]": "error"}


def tool_result_sections(result: str, ok: bool) -> list[tuple[str, str]]:
    """Split a tool result into labelled parts for showing it under its call.

    The result is what the model reads: ``run_python`` writes what the code printed,
    then ``[stderr]``, ``[result]`` and ``[error]`` sections; a failed call starts with
    ``error: ``; a refused one with ``error: refused: ``. On screen each part gets one
    label, so none of these markers is shown twice.

    Parameters
    ----------
    result : str
        The tool result text.
    ok : bool
        False when the call failed, was refused or was not run.

    Returns
    -------
    list of (kind, text)
        ``kind`` is ``"output"`` (printed), ``"stderr"``, ``"result"`` (the value of the
        last expression), ``"error"``, ``"refused"`` or ``"message"`` (why a call did
        not finish: "interrupted ...", "not executed: ...", "result unknown: ...", or a
        one-line failure; what an interrupted call printed follows as ``"output"``).
        Empty text parts are dropped; an empty result is ``[("output", "")]``.
    """
    text = result.strip("\n")
    if not ok and text.startswith(("interrupted", "not executed", "result unknown")):
        reason, _, printed = text.partition("\n")  # what the call printed may follow
        return [("message", reason)] + ([("output", printed.strip("\n"))]
                                        if printed.strip() else [])
    if not ok and text.startswith("error: "):
        text = text[len("error: "):]
        if text.startswith("refused: "):
            return [("refused", text[len("refused: "):])]
    parts: list[tuple[str, list[str]]] = [("output", [])]
    for line in text.split("\n"):
        if line in _SECTIONS:
            parts.append((_SECTIONS[line], []))
        else:
            parts[-1][1].append(line)
    sections = [(kind, "\n".join(lines).strip("\n")) for kind, lines in parts]
    sections = [(kind, body) for kind, body in sections if body]
    if not ok and len(sections) == 1 and sections[0][0] == "output":
        first = sections[0][1]
        kind = "message" if "\n" not in first and not first.startswith("Traceback") else "error"
        return [(kind, first)]
    return sections or [("output", "")]


def format_tool_call(name: str, arguments: str, *, limit: int = 2000) -> str:
    """A tool call in plain text: the code it runs for ``run_python``, else ``name(args)``."""
    try:
        args = json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to decode
        args = arguments
    if isinstance(args, dict) and isinstance(args.get("code"), str):
        code = _shorten(args["code"].rstrip(), limit)
        return f"▶ {name}\n" + "\n".join("    " + line for line in code.splitlines())
    shown = json.dumps(args, ensure_ascii=False) if not isinstance(args, str) else args
    return f"▶ {name}({_shorten(shown, 200)})"


def _arguments(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):
        return arguments


def is_code_call(arguments: str) -> bool:
    """True if a tool call's arguments carry Python ``code`` (``run_python``): such calls
    are shown with their code; all others as one line (:func:`format_call`)."""
    args = _arguments(arguments)
    return isinstance(args, dict) and isinstance(args.get("code"), str)


def _argument_value(value: Any, limit: int) -> str:
    # a cut string keeps its closing quote: "first words…"
    if isinstance(value, str):
        return json.dumps(_shorten(value, max(limit - 2, 1)), ensure_ascii=False)
    return _shorten(json.dumps(value, ensure_ascii=False), limit)


def format_call(name: str, arguments: str, *, limit: int = 80) -> str:
    """A tool call as ``name(key=value, ...)``, each value cut to ``limit`` code points,
    e.g. ``update_todo(id=1, status="in_progress")``; no arguments: ``read_scratchpad()``."""
    args = _arguments(arguments)
    if isinstance(args, dict):
        shown = ", ".join(f"{key}={_argument_value(value, limit)}" for key, value in args.items())
    else:
        shown = _shorten(_one_line(str(args)), limit)
    return f"{name}({shown})"


def one_line_result(result: str, ok: bool) -> str:
    """The result of a one-line tool call, for the end of its line: ``→ text``, ``✗ why``
    or ``⊘ refused: why`` (a refusal or failure is kept whole up to 400 code points)."""
    kind, body = tool_result_sections(result, ok)[0]
    text = _one_line(body, 120 if kind not in ("refused", "message") else 400) or "(no output)"
    if kind == "refused":
        return f"⊘ refused: {text}"
    return f"{'→' if ok else '✗'} {text}"


#: The label shown before each part of a tool result, by part (both renderers).
RESULT_LABELS = {"output": "→", "result": "→ result", "stderr": "stderr", "error": "✗ error",
           "message": "✗", "refused": "⊘ refused:"}


def notice_shown_by(notice: str, result: str) -> bool:
    """True if a tool's ``notice`` only repeats what its result says (e.g. a refusal)."""
    words = notice.split(" ", 1)
    return notice in result or (len(words) == 2 and words[1] in result)


#: The approval question's view in Jupyter: the whole text, scrolling past ~25 lines.
_QUESTION_STYLE = ("max-height: 25em; overflow: auto; white-space: pre; margin: 0.3em 0; "
                   "padding: 0.4em; border: 1px solid var(--jp-border-color1, #ccc)")


def question_bundle(intro: str, text: str) -> dict[str, str]:
    """An approval question as a MIME bundle: ``text/html`` shows the whole ``text``
    HTML-escaped in a scrollable ``<pre>`` under the intro and its length;
    ``text/plain`` is :func:`~jupyter_agent.agent.builtin_tools.question_text`."""
    from jupyter_agent.agent.builtin_tools import question_text, visible_controls

    plain = question_text(intro, text)
    head = plain.split("\n", 1)[0]
    body = html.escape(visible_controls(text.rstrip("\n")))
    return {"text/plain": plain,
            "text/html": f"<div><b>{html.escape(head)}</b>"
                         f'<pre style="{_QUESTION_STYLE}">{body}</pre></div>'}


def show_question(intro: str, text: str) -> None:
    """Display an approval question in a Jupyter front end (see :func:`question_bundle`)."""
    from IPython.display import display

    display(question_bundle(intro, text), raw=True)
