"""The magics' input: argument parsing, the one-line error boundary, and the input
transformer that lets ``%agent what is the mean?`` reach the magic (IPython reads a line
ending in ``?`` as a help request).
"""

from __future__ import annotations

import difflib
import functools
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

from IPython.core.error import StdinNotImplementedError, UsageError
from IPython.core.magic_arguments import argument

from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.settings import OPTIONS, SessionOptions
from jupyter_agent.ui.advice import error_message
from jupyter_agent.ui.display import terminal_text

F = TypeVar("F", bound=Callable[..., Any])

_AGENT_LINE = re.compile(r"^(?P<indent>[ \t]*)%agent[ \t]+(?P<text>\S.*?)[ \t]*(?P<end>\r?\n?)$")


def flatten_lines(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text).strip()


class AgentUsageError(UsageError):
    """A magic's one-line error, shown as the bare message (no traceback, no class name)."""


def error_boundary(func: F) -> F:
    """Turn the library's errors and the argument parser's into one-line
    :class:`AgentUsageError`\\ s saying what to do next; anything else keeps its traceback."""

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
    previous = getattr(shell, "_jupyter_agent_previous_tb", None)
    if not isinstance(value, AgentUsageError) and previous is not None:
        previous(etype, value, tb, tb_offset=tb_offset)
        return []
    print(terminal_text(str(value)), file=sys.stderr)  # it may quote a title or a path
    return []


def _installed(shell: Any) -> bool:
    return any(getattr(e, "__name__", "") == AgentUsageError.__name__
               for e in shell.custom_exceptions)


def install_error_display(shell: Any) -> None:
    """Show :class:`AgentUsageError` on stderr without the ``UsageError:`` prefix; a
    custom handler someone else set keeps handling its own exceptions."""
    if _installed(shell):
        return
    previous = tuple(shell.custom_exceptions)
    shell._jupyter_agent_previous_tb = shell.CustomTB if previous else None
    shell._jupyter_agent_previous_exc = previous
    shell.set_custom_exc((*previous, AgentUsageError), _show_agent_error)


def remove_error_display(shell: Any) -> None:
    if not _installed(shell):
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
    """Add the options of :class:`~jupyter_agent.settings.SessionOptions` (``--title`` and
    one per per-session setting) to a magic."""
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
    """Parse a magic's arguments with shell quoting (IPython's own keeps the quotes); a
    ``#`` starting a word begins a comment.

    Raises
    ------
    UsageError
        For text that does not parse or arguments the magic does not take.
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
        text, known = str(err), list(parser._option_string_actions)
        for word in argv:
            option = word.split("=", 1)[0]
            close = difflib.get_close_matches(option, known, n=1, cutoff=0.6)
            if option.startswith("--") and option not in known and close:
                text += f" (did you mean {close[0]}?)"
                break
        name = getattr(magic, "__name__", "")
        raise AgentUsageError(f"{text}; %{name}? shows the usage" if name else text) from err


def options_from_args(args: Any) -> SessionOptions:
    """The options of parsed ``%agent_new``/``%agent_resume`` arguments.

    Raises
    ------
    UsageError
        For a bad value.
    """
    try:
        return SessionOptions(**{f.name: getattr(args, f.name) for f in fields(SessionOptions)})
    except ValueError as err:
        raise UsageError(str(err)) from err


def confirm(shell: Any, question: str, hint: str) -> bool:
    """Ask a yes/no question; ``UsageError`` ending with ``hint`` when nobody can answer
    (in a kernel: its front end answers no input requests; elsewhere: no terminal)."""
    refused = f"cannot ask for confirmation (no input possible here): {hint}"
    kernel = getattr(shell, "kernel", None)
    try:
        can_ask = (bool(getattr(kernel, "_allow_stdin", False)) if kernel is not None else
                   sys.stdin is not None and not sys.stdin.closed and sys.stdin.isatty())
    except (AttributeError, OSError, ValueError):
        can_ask = False
    if not can_ask:
        raise UsageError(refused)
    try:
        answer = input(question)
    except (EOFError, OSError, StdinNotImplementedError) as err:
        print()  # the question is on screen without a line end
        raise UsageError(refused) from err
    return answer.strip().lower() in ("y", "yes")


def rewrite_agent_lines(lines: list[str]) -> list[str]:
    """Input transformer: a ``%agent TEXT`` line becomes ``run_line_magic("agent", TEXT)``.

    Not ``%agent ?`` / ``%agent ??`` (help), not the other magics, and not in a cell that
    starts with a cell magic (its body is not Python).
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


def _is_ours(transformer: Any) -> bool:  # also a copy from before a module reload
    return transformer is rewrite_agent_lines or (
        getattr(transformer, "__module__", "") == rewrite_agent_lines.__module__
        and getattr(transformer, "__name__", "") == rewrite_agent_lines.__name__)


def install_transformer(shell: Any) -> None:
    if not any(_is_ours(t) for t in shell.input_transformers_cleanup):
        shell.input_transformers_cleanup.append(rewrite_agent_lines)


def remove_transformer(shell: Any) -> None:
    shell.input_transformers_cleanup[:] = [
        t for t in shell.input_transformers_cleanup if not _is_ours(t)]
