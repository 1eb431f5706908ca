"""IPython magics for jupyter-agent (``%load_ext jupyter_agent``) over
:class:`~jupyter_agent.controller.AgentController`. Library errors become one-line
messages; the active session lives on the :class:`AgentMagics` instance.
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

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display
from traitlets import Bool, Float, Int, TraitError, Unicode, validate
from traitlets.config import Config

from jupyter_agent.artefacts.search import search_sessions
from jupyter_agent.controller import AgentController, UsageReport, share_session
from jupyter_agent.errors import JupyterAgentError, LimitExceededError
from jupyter_agent.notebook import can_ask, is_jupyter
from jupyter_agent.project import confirm_delete
from jupyter_agent.settings import OPTIONS, SessionOptions, Settings, option
from jupyter_agent.text import terminal_text
from jupyter_agent.ui import render
from jupyter_agent.ui.display import (
    error_message,
    format_change,
    format_exported,
    format_footer,
    format_forked,
    format_resumed_line,
    format_search_results,
    format_sessions_table,
    format_todos,
    format_usage,
    limit_message,
    transcript_blocks,
)

F = TypeVar("F", bound=Callable[..., Any])
_TRAITS = {str: Unicode, int: Int, float: Float, bool: Bool}
_AGENT_LINE = re.compile(r"^(?P<indent>[ \t]*)%agent[ \t]+(?P<text>\S.*?)[ \t]*(?P<end>\r?\n?)$")


def flatten_lines(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text).strip()


class AgentUsageError(UsageError):
    """A magic's one-line error, shown as the bare message (no traceback, no class name)."""


def agent_magic(kind: Callable[..., Any] = line_magic, *, typed: bool = False,
                parse: bool = True) -> Callable[[F], F]:
    """Declare a magic parsing its ``@argument`` s below (``typed``: the line as typed, no
    ``{...}`` or ``$name`` expansion; ``parse=False``: the line as is); library errors
    become :class:`AgentUsageError`, anything else keeps its traceback."""

    def decorate(func: F) -> F:
        func = magic_arguments()(func)

        @functools.wraps(func)
        def wrapper(self: Any, line: str, *cell: str) -> Any:
            try:
                return func(self, parse_argstring(func, line) if parse and not typed
                            else line, *cell)
            except JupyterAgentError as err:
                raise AgentUsageError(flatten_lines(error_message(err))) from err

        return kind(no_var_expand(wrapper) if typed else wrapper)

    return decorate


def show_agent_error(shell: Any, etype: type, value: BaseException, tb: Any,
                      tb_offset: int | None = None) -> list[str]:
    previous = getattr(shell, "_jupyter_agent_previous_tb", None)
    if isinstance(value, AgentUsageError) or previous is None:
        print(terminal_text(str(value)), file=sys.stderr)  # it may quote a title or a path
    else:
        previous(etype, value, tb, tb_offset=tb_offset)
    return []


def session_options(func: F) -> F:
    """Add ``--title`` and the per-session setting flags to a magic."""
    for row in reversed([row for row in OPTIONS if row.flag is not None]):  # argparse formats help
        func = argument(row.flag, dest=row.name, type=row.type, metavar=row.metavar,
                        choices=list(row.choices) if row.choices else None,
                        help=(row.flag_help or row.help).replace("%", "%%"))(func)
    return argument("--title", help="Title of the session.")(func)


def parse_argstring(magic: Callable[..., Any], line: str) -> Any:
    """Parse with shell quoting (IPython's own keeps the quotes); a word starting with ``#``
    begins a comment."""
    try:
        argv = shlex.split(line, comments=True)
    except ValueError as err:
        raise AgentUsageError(f"cannot parse the arguments: {err}; put text with quotes or "
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
        raise AgentUsageError(f"{text}; %{magic.__name__}? shows the usage") from err


def options_from_args(args: Any) -> SessionOptions:
    try:
        return SessionOptions(**{f.name: getattr(args, f.name) for f in fields(SessionOptions)})
    except ValueError as err:
        raise AgentUsageError(str(err)) from err


def rewrite_agent_lines(lines: list[str]) -> list[str]:
    """Input transformer: a ``%agent TEXT`` line becomes ``run_line_magic("agent", TEXT)``,
    except ``%agent ?`` / ``??`` and in a cell that starts with a cell magic."""
    first = next((line for line in lines if line.strip()), "")
    if first.lstrip().startswith("%%"):
        return lines
    out = []
    for line in lines:
        match = _AGENT_LINE.match(line)
        if match is not None and match["text"] not in ("?", "??"):
            line = (f"{match['indent']}get_ipython().run_line_magic('agent', "
                    f"{match['text']!r}){match['end']}")
        out.append(line)
    return out


def _footer(result: UsageReport | None) -> str | None:
    # none for a turn without a successful model call ("0 tokens · $0.0000")
    return None if result is None or result.turn_usage.calls == 0 else format_footer(result)


def _print(text: str) -> None:  # text that may come from outside
    print(terminal_text(text))


@magics_class
class AgentMagics(Magics):
    """The agent magics; one config trait per row of :data:`~jupyter_agent.settings.OPTIONS`."""

    vars().update({row.name: _TRAITS[row.type](row.default, allow_none=row.none is not None,
                                               help=row.help).tag(config=True)
                   for row in OPTIONS})

    @validate(*(row.name for row in OPTIONS))
    def _validate_setting(self, proposal: Any) -> Any:
        try:
            return option(proposal["trait"].name).validate(proposal["value"])
        except ValueError as err:
            raise TraitError(f"AgentMagics: {err}") from err

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self._jupyter = is_jupyter(shell)
        self.controller = AgentController(self.settings, shell=shell, show_question=(
            render.show_question if self._jupyter else None))

    def settings(self) -> Settings:
        return Settings(**{o.name: getattr(self, o.name) for o in OPTIONS})

    def update_config(self, config: Any) -> None:
        """Refuse a bad value in one line on stderr and take it out of ``config`` and the
        shell's config (there it would break the next ``%load_ext``)."""
        owner = type(self).__name__
        section = config.get(owner) if isinstance(config, Config) else None
        if not isinstance(section, Config):
            super().update_config(config)
            return
        for name in list(section):
            try:
                super().update_config(Config({owner: {name: section[name]}}))
            except TraitError as err:
                del section[name]
                shell_section = getattr(self.shell, "config", Config()).get(owner)
                if isinstance(shell_section, Config) and name in shell_section:
                    del shell_section[name]
                # (the value kept is not shown: a store URL may carry a password)
                print(f"{flatten_lines(str(err)).rstrip('.')}; {owner}.{name} is unchanged",
                      file=sys.stderr)
        rest = Config({k: v for k, v in config.items() if k != owner})
        if rest:
            super().update_config(rest)

    @agent_magic(parse=False)
    @session_options
    def agent_new(self, line: str) -> None:
        """Start a new session, make it active and print its ID."""
        try:
            options = options_from_args(parse_argstring(self.agent_new, line))
            session_id = self.controller.new_session(options)
        except (JupyterAgentError, UsageError) as err:
            active = self.controller.active_session_id
            if active is None:
                raise
            # else the next %agent would go, unannounced, to the session still active
            message = error_message(err) if isinstance(err, JupyterAgentError) else str(err)
            raise AgentUsageError(f"{flatten_lines(message)}; no new session: session "
                                  f"{active} stays active") from err
        _print(f"New session {session_id}" + (f" — {options.title}" if options.title else ""))
        for line in self.controller.notes_notice:
            _print(line)

    @agent_magic()
    @argument("session_id", nargs="?", metavar="SESSION_ID",
              help="Default: the most recently updated non-archived session.")
    @session_options
    def agent_resume(self, args: Any) -> None:
        """Make a saved session active again and show a recap of it (unarchives it).

        Each option: the one given here, else the one this kernel last used for the
        session, else -- model, API and vision -- what the session last used (saved in
        it), else the AgentMagics setting. The base URL is never taken from the session:
        given here or earlier in this kernel, else AgentMagics.base_url, else
        $OPENAI_BASE_URL; the recap says when the session last used another one. Limits:
        given here or earlier in this kernel, else the settings.
        """
        resumed = self.controller.resume(args.session_id, options_from_args(args))
        record = resumed.record
        shown = render.recap_text(record, unarchived=resumed.unarchived,
                                  endpoint_note=resumed.endpoint_note)
        if not self._jupyter:
            _print(shown.plain)
            return
        display(shown)
        figure = render.last_figure(record.transcript)
        if figure is not None:  # the last figure, small
            render.show_figure(figure, functools.partial(self.controller.read_figure, record.id),
                               width=render.RECAP_WIDTH)

    @agent_magic(line_cell_magic, typed=True)
    @argument("prompt", nargs="*",
              help="What to ask; with %%%%agent, the cell (after the line). Sent as typed: "
                   "{...} and $name are not expanded.")
    def agent(self, line: str, cell: str | None = None) -> None:
        """Send a prompt to the active session (``%agent PROMPT`` or a ``%%agent`` cell).

        Starts a session first if none is active. The reply streams in; tool calls show
        compactly; a footer gives tokens, cost, tool calls and what the limits leave.
        """
        prompt = "\n".join(p for p in (line.strip(), (cell or "").strip()) if p)
        if not prompt:
            raise AgentUsageError("nothing to ask: use %agent PROMPT or a %%agent cell")
        ended = self.controller.ended
        created = self.controller.ensure_session()
        if created is not None:
            why = f"session {ended[0]} was {ended[1]}" if ended else "no active session"
            _print(f"{why[0].upper()}{why[1:]}: started session {created}"
                   + (" with the same options" if ended else "")
                   + " (%agent_resume picks up an earlier one).")
            for notice in self.controller.notes_notice:
                _print(notice)
        renderer = (render.MarkdownTurnRenderer(live=can_ask(self.shell)) if self._jupyter
                    else render.PlainTurnRenderer())
        try:
            result = self.controller.ask(prompt, on_event=renderer)
        except KeyboardInterrupt as exc:  # Ctrl-C: the agent saved the session, then re-raised
            renderer.finish(interrupted=True, footer=_footer(getattr(exc, "turn", None)))
            _print("[jupyter-agent] interrupted — the session is saved; send another prompt "
                   "to go on.")
            return
        except BaseException as exc:  # a model error: what streamed stays, with the footer
            renderer.finish(footer=_footer(getattr(exc, "turn", None)))
            raise
        limit = result.limit_error
        renderer.finish(footer=_footer(result), drop_notice=None if limit is None else result.reply)
        if limit is not None:
            raise AgentUsageError(limit_message(result)) from limit

    @agent_magic()
    @argument("--all", action="store_true", help="Include archived sessions.")
    @argument("--search", nargs="+", metavar="TEXT",
              help="Only sessions whose title, summary or first prompt contain TEXT "
                   "(case-insensitive), with an excerpt of where.")
    @argument("--deep", action="store_true",
              help="With --search: search the full transcripts too (reads every session).")
    def agent_sessions(self, args: Any) -> None:
        """List the sessions of the memory directory (a panel in Jupyter, a table in a terminal),
        or find sessions with --search TEXT [--deep]."""
        query = " ".join(args.search or [])
        if args.deep and not query:
            raise AgentUsageError("--deep searches the transcripts for --search TEXT: add "
                                  "--search TEXT")
        if self._jupyter:
            display(self.sessions_panel(show_archived=args.all, query=query, deep=args.deep))
        elif query:
            hits = search_sessions(self.controller.store, query, deep=args.deep,
                                   include_archived=args.all)
            _print(format_search_results(hits, query=query,
                                        active_id=self.controller.active_session_id))
        else:
            listing = self.controller.store.list_sessions(include_archived=args.all)
            _print(format_sessions_table(listing, active_id=self.controller.active_session_id))

    def sessions_panel(self, **options: Any) -> Any:
        from jupyter_agent.ui.panel import SessionsPanel  # ipywidgets: only when shown

        c = self.controller
        return SessionsPanel(
            c.store, on_resume=lambda sid: format_resumed_line(c.resume(sid)),
            on_archive=lambda sid, archived: format_change(c.archive(sid, undo=not archived)),
            on_delete=lambda sid: format_change(c.delete(sid)), **options)

    @agent_magic(typed=True)
    @argument("text", nargs="*", help="New summary (as typed); without it, show the summary.")
    def agent_summary(self, line: str) -> None:
        """Show the active session's summary, or replace it with TEXT."""
        text = line.strip()
        sid, store = self.controller.target(None)
        if text:
            store.update(sid, summary=text)
            _print("Summary saved.")
        else:
            _print(store.load_session(sid).summary or "(no summary yet)")

    @agent_magic(typed=True)
    @argument("text", nargs="+", help="The new title (one pair of surrounding quotes is removed).")
    def agent_title(self, line: str) -> None:
        """Set the active session's title."""
        text = line.strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":  # one pair of quotes
            text = text[1:-1].strip()
        if not text:
            raise AgentUsageError("usage: %agent_title TEXT")
        sid, store = self.controller.target(None)
        store.update(sid, title=text)
        _print(f"Title set: {text}")

    @agent_magic()
    @argument("session_id", nargs="?", metavar="ID", help="Default: the active session.")
    @argument("--undo", action="store_true", help="Unarchive instead.")
    def agent_archive(self, args: Any) -> None:
        """Archive a session (hidden from listings unless --all), or unarchive it with --undo."""
        _print(format_change(self.controller.archive(args.session_id, undo=args.undo)))

    @agent_magic()
    @argument("session_id", metavar="ID", help="One of your sessions.")
    @argument("roles", nargs="+", metavar="ROLE", help="Database roles (users or groups).")
    @argument("--undo", action="store_true", help="Stop sharing it with these roles.")
    def agent_share(self, args: Any) -> None:
        """Share a session of the team store read-only with database roles: their members
        may read and fork it, never change it (--undo stops sharing)."""
        sid, store = self.controller.target(args.session_id)
        _print(share_session(store, sid, args.roles, undo=args.undo)[1])

    @agent_magic()
    @argument("session_id", metavar="ID", help="The session to delete.")
    @argument("--yes", action="store_true", help="Do not ask for confirmation.")
    def agent_delete(self, args: Any) -> None:
        """Delete a session's file for good (asks for confirmation unless --yes)."""
        sid = args.session_id
        if not args.yes and not confirm_delete(
                self.shell, self.controller.record(sid),
                f"cannot ask for confirmation (no input possible here): use %agent_delete {sid} "
                "--yes"):
            _print("Not deleted.")
            return
        _print(format_change(self.controller.delete(sid)))

    @agent_magic()
    @argument("session_id", nargs="?", metavar="ID", help="Default: the active session.")
    @argument("--title", help="Title of the fork (default: the parent's, marked as a fork).")
    @argument("--at", type=int, metavar="N",
              help="Keep the first N user turns only (default: the whole session).")
    def agent_fork(self, args: Any) -> None:
        """Start a new session as a copy of a session, optionally cut after its Nth turn, and
        make it the active one (the parent is unchanged; it may be active in another kernel)."""
        _print(format_forked(self.controller.fork(args.session_id, at=args.at, title=args.title)))

    @agent_magic()
    @argument("session_id", nargs="?", metavar="ID", help="Default: the active session.")
    @argument("--format", dest="fmt", choices=["ipynb", "md", "json"],
              help="ipynb: a notebook replaying the analysis; md: a readable transcript; "
                   "json: the session record (default: from PATH's suffix, else ipynb).")
    @argument("-o", "--output", metavar="PATH",
              help="File or folder to write (default: session-<ID>.<format> here).")
    @argument("--force", action="store_true", help="Replace an existing file.")
    def agent_export(self, args: Any) -> None:
        """Export a session to a notebook, a Markdown transcript or a JSON record (secrets
        are redacted; an existing file is replaced only with --force)."""
        _print(format_exported(self.controller.export(
            args.session_id, fmt=args.fmt, output=args.output, force=args.force)))

    @agent_magic()
    def agent_compact(self, _args: Any) -> None:
        """Summarise the older turns of the active session's working context now."""
        notices: list[str] = []
        try:
            done = self.controller.compact(
                on_event=lambda e: notices.append(e.text) if e.kind == "notice" else None)
        except LimitExceededError as err:
            raise AgentUsageError(
                f"not compacted: {err.reached}, and compaction is a model call; raise the limit "
                "(%config AgentMagics.max_cost_usd, or --max-cost of %agent_resume) to "
                "compact") from err
        if done:
            _print("Compacted the working context.")
        elif notices:
            raise AgentUsageError(
                f"{notices[-1]}; nothing was lost: run %agent_compact again later (a turn "
                "also compacts by itself when the context gets long)")
        else:
            _print("Nothing to compact.")

    @agent_magic()
    def agent_usage(self, _args: Any) -> None:
        """Show the active session's tokens, cost, tool calls and what the limits leave."""
        _print(format_usage(self.controller.usage()))

    @agent_magic()
    @argument("--full", action="store_true",
              help="The full transcript with compaction markers, not the working context.")
    def agent_history(self, args: Any) -> None:
        """Show the active session's working context (or with --full its whole transcript);
        in Jupyter with the figures its code made, where they were made."""
        record = self.controller.record()
        blocks = transcript_blocks(*((record.transcript, record.compactions) if args.full
                                     else (record.messages,)),
                                   cells=frozenset(record.state.handed_out))
        if not blocks:
            _print("(no messages)")
        else:  # a terminal shows no figures
            render.show_blocks(blocks, functools.partial(self.controller.read_figure, record.id)
                               if self._jupyter else None)

    @agent_magic()
    @argument("n", nargs="?", type=int, metavar="N",
              help="The session's Nth run_python call (1 is the first); default: the last.")
    def agent_cell(self, args: Any) -> None:
        """Put the code of the agent's last run_python call (or call N) into a new cell
        below, tagged with the session and turn; in a terminal, print it to copy."""
        turn, call, code = self.controller.agent_cell(args.n)
        if self._jupyter:  # the front end makes the new cell (JupyterLab, Notebook, VS Code)
            assert self.shell is not None
            self.shell.set_next_input(code, replace=False)
        if self._jupyter and can_ask(self.shell):  # ... and someone watches it
            _print(f"The code of call {call} (turn {turn}) is in a new cell below.")
        else:  # a terminal, or a headless runner (nbclient), which makes no new cell
            _print(code)
            _print(f"(call {call} of session {self.controller.active_session_id}: copy it "
                   "into a cell to keep it)")

    @agent_magic()
    def agent_todo(self, _args: Any) -> None:
        """Show the active session's todo list."""
        _print(format_todos(self.controller.record().state.todos))


