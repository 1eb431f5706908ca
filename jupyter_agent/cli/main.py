"""The ``jupyter agent`` parser, its command table, and exit codes.

:data:`COMMANDS` is the one place where subcommands are registered: each
:class:`Command` names its function (``run(ctx, args) -> int``, see
:mod:`jupyter_agent.cli.commands`) and its arguments. Adding a subcommand is adding a
row. Every subcommand also takes ``--memory-dir DIR`` and ``--json`` (before or after
its name).

Exit codes: 0 success; 1 a session not found, a refusal (session in use, file exists,
no confirmation) or any other error jupyter-agent reports, printed as one line on
standard error (the message the magics show); 2 a usage error (argparse's message).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jupyter_agent import __version__
from jupyter_agent.cli import commands
from jupyter_agent.cli.context import Context
from jupyter_agent.errors import JupyterAgentError, SessionNotFoundError, UnsafeDirectoryError

__all__ = ["COMMANDS", "PROG", "Argument", "Command", "build_parser", "main"]

PROG = "jupyter agent"

ELSEWHERE = "use --memory-dir DIR (or $JUPYTER_AGENT_MEMORY_DIR) to choose another one"
"""How to choose another memory directory on the command line (a refused directory's
message says this instead of the magics' setting)."""


@dataclass(frozen=True)
class Argument:
    """The ``add_argument`` call of one argument: its flags (or name) and options."""

    flags: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)


def arg(*flags: str, **options: Any) -> Argument:
    """An :class:`Argument` written like ``parser.add_argument``."""
    return Argument(flags, options)


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one line of help, its function and its arguments
    (``one_of``: options of which exactly one must be given)."""

    name: str
    help: str
    run: Callable[[Context, argparse.Namespace], int]
    arguments: tuple[Argument, ...] = ()
    one_of: tuple[Argument, ...] = ()


SESSION_ID = arg("session_id", metavar="ID", help="The session ID.")

COMMANDS: tuple[Command, ...] = (
    Command("list", "List sessions, most recently updated first.", commands.list_sessions, (
        arg("--all", action="store_true", help="Include archived sessions."),)),
    Command("show", "Show a session: facts, summary, todos, last exchange.", commands.show, (
        SESSION_ID,
        arg("--transcript", action="store_true", help="Also print the whole transcript."))),
    Command("search", "Find sessions by title, summary and first prompt (or transcript).",
            commands.search, (
                arg("text", nargs="+", metavar="TEXT", help="Words to find, in this order "
                    "(case-insensitive)."),
                arg("--deep", action="store_true",
                    help="Search the full transcripts too (reads every session)."),
                arg("--all", action="store_true", help="Include archived sessions."))),
    Command("export", "Export a session as a notebook, Markdown or JSON.", commands.export, (
        SESSION_ID,
        arg("--format", dest="fmt", choices=["ipynb", "md", "json"],
            help="ipynb: a notebook replaying the analysis; md: a readable transcript; json: "
                 "the session record (default: from the file name, else ipynb)."),
        arg("-o", "--output", metavar="PATH",
            help="File or folder to write, or - for standard output "
                 "(default: session-<ID>.<format> here)."),
        arg("--force", action="store_true", help="Replace an existing file."))),
    Command("fork", "Copy a session into a new one (the original is only read).", commands.fork, (
        SESSION_ID,
        arg("--at", type=int, metavar="N", help="Keep the first N user turns only."),
        arg("--title", help="Title of the new session (default: the original's, marked as "
                            "a fork)."))),
    Command("archive", "Archive a session (hidden from listings unless --all).",
            commands.archive, (SESSION_ID, arg("--undo", action="store_true",
                                               help="Unarchive instead."))),
    Command("share", "Share a session read-only with database roles (team store).",
            commands.share, (SESSION_ID, arg("roles", nargs="+", metavar="ROLE",
                                             help="Database roles (users or groups)."),
                             arg("--undo", action="store_true",
                                 help="Stop sharing it with these roles."))),
    Command("rm", "Delete a session for good.", commands.remove, (
        SESSION_ID, arg("-y", "--yes", action="store_true", help="Do not ask first."))),
    Command("gc", "Remove files that interrupted writes left behind.", commands.gc),
    Command("fsck", "Check every session's files; report damage and the safe repairs.",
            commands.fsck, (
                arg("--repair", action="store_true",
                    help="Make the safe repairs (damaged bytes are kept in "
                         "sessions/<ID>.jsonl.damaged). Default: report only (a dry run)."),
                arg("--dry-run", action="store_true",
                    help="Report only, change nothing (the default)."))),
    Command("migrate", "Copy every session between the JSON files and a PostgreSQL store.",
            commands.migrate, one_of=(
                arg("--to", metavar="URL", dest="to_url",
                    help="Copy the memory directory's sessions into this database."),
                arg("--from", metavar="URL", dest="from_url",
                    help="Copy this database's sessions of the project into the memory "
                         "directory."))),
)
"""The subcommands, in the order ``jupyter agent --help`` lists them."""


def _common_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """``--memory-dir`` and ``--json``; on a subcommand they do not reset the top level's."""
    memory_default: Any = None if top else argparse.SUPPRESS
    json_default: Any = False if top else argparse.SUPPRESS
    parser.add_argument("--memory-dir", metavar="DIR", default=memory_default,
                        help="The memory directory (default: $JUPYTER_AGENT_MEMORY_DIR, else "
                             "<project root>/.jupyter_agent, as in the magics).")
    parser.add_argument("--json", action="store_true", default=json_default,
                        help="Print JSON for scripts.")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``jupyter agent`` with every command of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="The saved jupyter-agent sessions of a project: list, show, "
                               "search, export, fork, archive, delete, clean up.")
    parser.add_argument("--version", action="version", version=f"jupyter-agent {__version__}")
    _common_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        child = sub.add_parser(command.name, help=command.help, description=command.help)
        for argument in command.arguments:
            child.add_argument(*argument.flags, **argument.options)
        if command.one_of:
            group = child.add_mutually_exclusive_group(required=True)
            for argument in command.one_of:
                group.add_argument(*argument.flags, **argument.options)
        _common_options(child, top=False)
        child.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``jupyter agent`` with ``argv`` (default: the process's arguments).

    Returns
    -------
    int
        The exit code: 0, 1 (not found, refused, other reported errors) or 2 (usage).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version (0) or a usage error (2)
        return int(stop.code or 0)
    ctx = Context.from_args(args.command, args.memory_dir, args.json)
    try:
        return int(args.run(ctx, args))
    except JupyterAgentError as err:
        from jupyter_agent.ui.display import terminal_text

        text = str(err)
        if isinstance(err, UnsafeDirectoryError):  # the command line's own advice
            text = err.advice(elsewhere=ELSEWHERE)
        elif isinstance(err, SessionNotFoundError):  # the next step
            text += f"; {PROG} list --all lists the saved sessions"
        message = " ".join(terminal_text(text).split())
        print(f"{PROG}: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `jupyter agent list | head -1`
        sys.stderr.close()
        return 0
    finally:
        ctx.close()
