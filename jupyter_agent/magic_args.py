"""The magics' input: argument parsing, the error boundary, and the ``%agent PROMPT?`` rewrite.

Helpers of :mod:`jupyter_agent.magics`, kept apart so that the magics stay thin:

- :func:`parse_argstring` parses with shell quoting (IPython's own keeps the quotes);
- :func:`session_options` adds the options shared by ``%agent_new`` / ``%agent_resume``
  (generated from the settings table) and :func:`options_from_args` turns them into a
  validated :class:`~jupyter_agent.settings.SessionOptions`;
- :func:`error_boundary` turns the library's errors (and the argument parser's) into
  one-line :class:`AgentUsageError`\\ s, which :func:`install_error_display` shows as the
  bare message (IPython would print ``UsageError: `` before it: a class name);
- :func:`rewrite_agent_lines` is an input transformer (registered in
  ``shell.input_transformers_cleanup`` while the extension is loaded): IPython reads a
  line ending in ``?`` as a help request, so ``%agent what is the mean?`` would never
  reach the magic. The transformer turns such a line into a call of
  ``run_line_magic("agent", ...)`` with the text as it was typed.
"""

from __future__ import annotations

import functools
import re
import shlex
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from IPython.core.error import UsageError
from IPython.core.magic_arguments import argument

from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.settings import OPTIONS, SessionOptions
from jupyter_agent.ui.advice import error_message

__all__ = [
    "AgentUsageError",
    "can_ask",
    "collect_notice",
    "confirm",
    "error_boundary",
    "flatten_lines",
    "install_error_display",
    "install_transformer",
    "options_from_args",
    "parse_argstring",
    "remove_error_display",
    "remove_transformer",
    "rewrite_agent_lines",
    "session_options",
    "strip_quotes",
]

F = TypeVar("F", bound=Callable[..., Any])

#: ``%agent`` (exactly that magic) followed by a prompt, possibly indented.
_AGENT_LINE = re.compile(r"^(?P<indent>[ \t]*)%agent[ \t]+(?P<text>\S.*?)[ \t]*(?P<end>\r?\n?)$")


def flatten_lines(text: str) -> str:
    """``text`` with every line break (and the whitespace around it) turned into one space."""
    return re.sub(r"\s*\n\s*", " ", text).strip()


class AgentUsageError(UsageError):
    """A magic's one-line error: shown as the message alone, without a traceback and
    without a class name (see :func:`install_error_display`). A ``UsageError``, so code
    that catches those (and ``run_line_magic`` callers) see no difference."""


def error_boundary(func: F) -> F:
    """Turn the library's own errors into a one-line :class:`AgentUsageError`: what
    happened and what to do next (:func:`~jupyter_agent.ui.advice.error_message`); the
    magic's own and the argument parser's ``UsageError`` likewise (the parser's with a
    pointer to the magic's help). Anything else keeps its traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except JupyterAgentError as err:
            raise AgentUsageError(flatten_lines(error_message(err))) from err
        except AgentUsageError:
            raise
        except UsageError as err:
            raise AgentUsageError(str(err)) from err

    return wrapper  # type: ignore[return-value]


def _show_agent_error(shell: Any, etype: type, value: BaseException, tb: Any,
                      tb_offset: int | None = None) -> list[str]:
    """IPython custom exception handler: print an :class:`AgentUsageError` as its message,
    on stderr (like IPython's own usage errors); hand anything else to the handler that
    was there before."""
    previous = getattr(shell, "_jupyter_agent_previous_tb", None)
    if not isinstance(value, AgentUsageError) and previous is not None:
        previous(etype, value, tb, tb_offset=tb_offset)
        return []
    from jupyter_agent.ui.display import terminal_text

    print(terminal_text(str(value)), file=sys.stderr)  # it may quote a title or a path
    return []


def install_error_display(shell: Any) -> None:
    """Show :class:`AgentUsageError` without the ``UsageError:`` prefix (IPython's custom
    exception handler; a handler someone else set keeps handling its own exceptions)."""
    if any(getattr(e, "__name__", "") == AgentUsageError.__name__
           for e in shell.custom_exceptions):
        return
    previous = tuple(shell.custom_exceptions)
    shell._jupyter_agent_previous_tb = shell.CustomTB if previous else None
    shell._jupyter_agent_previous_exc = previous
    shell.set_custom_exc((*previous, AgentUsageError), _show_agent_error)


def remove_error_display(shell: Any) -> None:
    """Undo :func:`install_error_display` (the previous handler, if any, is restored)."""
    if not any(getattr(e, "__name__", "") == AgentUsageError.__name__
               for e in shell.custom_exceptions):
        return
    previous = getattr(shell, "_jupyter_agent_previous_exc", ())
    handler = getattr(shell, "_jupyter_agent_previous_tb", None)
    if previous and handler is not None:
        shell.custom_exceptions = previous
        shell.CustomTB = handler
    else:
        shell.set_custom_exc((), None)
    shell._jupyter_agent_previous_tb = None
    shell._jupyter_agent_previous_exc = ()


def session_options(func: F) -> F:
    """Add the options shared by ``%agent_new`` and ``%agent_resume``: ``--title`` and one
    option per per-session setting of :data:`~jupyter_agent.settings.OPTIONS`."""
    arguments = [argument("--title", help="Title of the session.")]
    for row in OPTIONS:
        if row.flag is None:
            continue
        extra: dict[str, Any] = {"choices": list(row.choices)} if row.choices else {}
        if row.metavar:
            extra["metavar"] = row.metavar
        arguments.append(argument(row.flag, dest=row.name, type=row.type,
                                  help=row.flag_help or row.help, **extra))
    for decorator in reversed(arguments):
        func = decorator(func)
    return func


def parse_argstring(magic: Callable[..., Any], line: str) -> Any:
    """Parse a magic's arguments with shell quoting (``--title "two words"``).

    IPython's own ``parse_argstring`` keeps the quotes in the values; this one removes
    them. A ``#`` that starts a word begins a comment, as in Python and the shell:
    ``%agent_resume ID  # yesterday's work`` (inside quotes it is text). Errors are
    ``UsageError`` (from ``MagicArgumentParser``).
    """
    try:
        argv = shlex.split(line, comments=True)
    except ValueError as err:
        raise UsageError(f"cannot parse the arguments: {err}; put text with quotes or "
                         "spaces in matching quotes") from err
    parser = magic.parser  # type: ignore[attr-defined]
    try:
        return parser.parse_args(argv)
    except UsageError as err:
        name = getattr(magic, "__name__", "")
        text = str(err) + _did_you_mean(parser, argv)
        raise AgentUsageError(f"{text}; %{name}? shows the usage" if name else text) from err


def _did_you_mean(parser: Any, argv: list[str]) -> str:
    """``" (did you mean --approve?)"`` for the first option in ``argv`` the parser does
    not know and that is close to one it does, else ``""``."""
    import difflib

    known = list(parser._option_string_actions)
    for word in argv:
        option = word.split("=", 1)[0]
        if not option.startswith("--") or option in known:
            continue
        close = difflib.get_close_matches(option, known, n=1, cutoff=0.6)
        if close:
            return f" (did you mean {close[0]}?)"
    return ""


def options_from_args(args: Any) -> SessionOptions:
    """The validated :class:`SessionOptions` of parsed ``%agent_new``/``%agent_resume`` args.

    Raises
    ------
    UsageError
        For a bad value (the message of :class:`SessionOptions`' check).
    """
    try:
        return SessionOptions(**{name: getattr(args, name) for name in SessionOptions._fields})
    except ValueError as err:
        raise UsageError(str(err)) from err


def strip_quotes(text: str) -> str:
    """``text`` stripped, without one pair of matching surrounding quotes (``"..."``/``'...'``)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1].strip()
    return text


def can_ask(shell: Any) -> bool:
    """Whether ``input()`` can reach a person: in a kernel, whether the front end of the
    running cell answers input requests (headless runners do not); elsewhere, whether
    stdin is an open terminal."""
    kernel = getattr(shell, "kernel", None)
    if kernel is not None:
        return bool(getattr(kernel, "_allow_stdin", False))
    stdin = sys.stdin
    try:
        return stdin is not None and not stdin.closed and stdin.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def confirm(shell: Any, question: str, hint: str) -> bool:
    """Ask a yes/no question; where nobody can answer, refuse with ``hint`` before
    anything is printed.

    Raises
    ------
    UsageError
        No input is possible (headless run, no terminal), or it ended (end of file).
    """
    from IPython.core.error import StdinNotImplementedError

    refused = f"cannot ask for confirmation (no input possible here): {hint}"
    if not can_ask(shell):
        raise UsageError(refused)
    try:
        answer = input(question)
    except (EOFError, OSError, StdinNotImplementedError) as err:
        print()  # the question is on screen without a line end
        raise UsageError(refused) from err
    return answer.strip().lower() in ("y", "yes")


def collect_notice(event: object, notices: list[str]) -> None:
    """Keep the text of the agent's notices (e.g. why a compaction failed)."""
    if getattr(event, "kind", "") == "notice":
        notices.append(str(getattr(event, "text", "")))


def rewrite_agent_lines(lines: list[str]) -> list[str]:
    """Input transformer: ``%agent TEXT`` lines become ``run_line_magic("agent", TEXT)``.

    Only the ``agent`` magic itself (not ``%agent_new`` ...), only with text after it, and
    not ``%agent ?`` / ``%agent ??`` (help). Cells that start with a cell magic (``%%agent``
    ...) are left alone: their body is not Python.

    Parameters
    ----------
    lines : list of str
        The cell's lines, each with its line ending (IPython's cleanup transformer API).

    Returns
    -------
    list of str
    """
    first = next((line for line in lines if line.strip()), "")
    if first.lstrip().startswith("%%"):
        return lines
    out = []
    for line in lines:
        match = _AGENT_LINE.match(line)
        if match is None or match["text"] in ("?", "??"):
            out.append(line)
            continue
        out.append(f"{match['indent']}get_ipython().run_line_magic('agent', "
                   f"{match['text']!r}){match['end']}")
    return out


def _is_ours(transformer: Any) -> bool:
    """True for :func:`rewrite_agent_lines` (also a copy from before a module reload)."""
    return transformer is rewrite_agent_lines or (
        getattr(transformer, "__module__", "") == rewrite_agent_lines.__module__
        and getattr(transformer, "__name__", "") == rewrite_agent_lines.__name__)


def install_transformer(shell: Any) -> None:
    """Add :func:`rewrite_agent_lines` to ``shell.input_transformers_cleanup`` (once)."""
    if not any(_is_ours(t) for t in shell.input_transformers_cleanup):
        shell.input_transformers_cleanup.append(rewrite_agent_lines)


def remove_transformer(shell: Any) -> None:
    """Remove :func:`rewrite_agent_lines` from ``shell.input_transformers_cleanup``."""
    shell.input_transformers_cleanup[:] = [
        t for t in shell.input_transformers_cleanup if not _is_ours(t)]
