"""``jupyter agent``: the saved sessions of a project from the command line.

The memory directory and the store are found as the magics find them (``--memory-dir``
stands for ``AgentMagics.memory_dir``). Reads take no lease; a command that writes holds a
lease labelled with its name. Exit codes: 0 success; 1 an error jupyter-agent reports (one
line on stderr, the magics' message) or a refusal; 2 a usage error; 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from tqdm import tqdm

from jupyter_agent import __version__
from jupyter_agent.artefacts.export import choose_format, export_record, render
from jupyter_agent.artefacts.fork import fork_label, fork_session
from jupyter_agent.artefacts.redact import secrets_from_environ
from jupyter_agent.artefacts.search import search_sessions
from jupyter_agent.artefacts.steps import Progress, no_progress
from jupyter_agent.controller import SessionChange, share_session
from jupyter_agent.errors import JupyterAgentError, SessionNotFoundError, UnsafeDirectoryError
from jupyter_agent.project import confirm_delete, open_store, resolve_memory_dir
from jupyter_agent.store import FileStore, Store
from jupyter_agent.store.messages import message_text
from jupyter_agent.store.migrate import migrate_sessions
from jupyter_agent.store.postgres.url import redact_url
from jupyter_agent.store.sweep import check_sessions, collect_garbage
from jupyter_agent.text import (
    format_cost,
    format_tokens,
    one_line,
    plural,
    relative_time,
    terminal_text,
)
from jupyter_agent.ui.display import (
    describe_holder,
    format_change,
    format_exported,
    format_forked,
    format_owner,
    format_search_results,
    format_sessions_table,
    format_todos,
    format_transcript,
)

PROG = "jupyter agent"
_JSON_CONTROLS = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@dataclass
class Context:
    """What one command works with: its memory directory, stores and output."""

    command: str
    memory_dir: Path
    json: bool = False
    _opened: list[Any] = field(default_factory=list, repr=False)

    @cached_property
    def files(self) -> FileStore:
        """The JSON files of the memory directory, whatever the store URL."""
        return FileStore(self.memory_dir, holder_label=f"{PROG} {self.command}")

    @cached_property
    def store(self) -> Store:
        """The team store of ``$JUPYTER_AGENT_STORE_URL`` if set, else :attr:`files`."""
        store = self.open(None)
        return self.files if isinstance(store, FileStore) else store

    def open(self, url: str | None) -> Store:
        """Closed when the command ends."""
        store = open_store(self.memory_dir, url, holder_label=f"{PROG} {self.command}")
        self._opened.append(store)
        return store

    def close(self) -> None:
        for store in self._opened:
            getattr(store, "close", lambda: None)()

    def print(self, text: str) -> None:  # titles, summaries and prompts come from files
        print(terminal_text(text))

    def emit_json(self, value: Any) -> None:
        """C1 controls and bidirectional overrides are escaped."""
        text = json.dumps(value, indent=2, ensure_ascii=False)
        print(_JSON_CONTROLS.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text))

    def report(self, value: Any, text: str) -> int:
        """Print ``value`` as JSON with ``--json``, else ``text``; exit code 0."""
        if self.json:
            self.emit_json(value)
        else:
            self.print(text)
        return 0

    def progress(self, what: str, unit: str) -> Progress:
        """A ``tqdm`` bar on stderr when it is a terminal, else nothing."""

        def show(items: Iterable[Any], total: int) -> Iterable[Any]:
            width = shutil.get_terminal_size((80, 24)).columns  # a terminal may report 0
            return tqdm(items, total=total, desc=what, unit=unit, file=sys.stderr, leave=False,
                        ncols=min(width, 100) if width > 0 else 80)

        with contextlib.suppress(AttributeError, ValueError, OSError):
            if sys.stderr.isatty():
                return show
        return no_progress


def list_sessions(ctx: Context, args: argparse.Namespace) -> int:
    listing = ctx.store.list_sessions(include_archived=args.all)
    files = ctx.store is ctx.files
    if ctx.json:
        ctx.emit_json([entry.model_dump(mode="json") for entry in listing])
    elif listing:
        ctx.print(format_sessions_table(listing))
    elif files and not ctx.memory_dir.is_dir():  # a mistyped --memory-dir shows here
        ctx.print(f"no sessions in {ctx.memory_dir}: the directory does not exist yet (the "
                  "first session saved in this project creates it; elsewhere, check "
                  "--memory-dir DIR or $JUPYTER_AGENT_MEMORY_DIR)")
    else:
        ctx.print(f"no sessions in {ctx.memory_dir}")
    damaged = ctx.files.damaged_sessions() if files and not ctx.json else {}
    for sid, reason in sorted(damaged.items()):
        ctx.print(f"damaged, not listed: {sid}: {one_line(reason, 300)}")
    if damaged:
        ctx.print("(jupyter agent fsck tells more and offers the safe repairs)")
    return 0


def show(ctx: Context, args: argparse.Namespace) -> int:
    record = ctx.store.load_session(args.session_id)
    if ctx.json:
        ctx.emit_json(record.model_dump(mode="json"))
        return 0
    state, usage = record.state, record.state.usage
    listed = ctx.store.describe_session(record.id)  # status, holder and owner
    rows = [
        ("id", record.id),
        ("created", f"{record.created_at:%Y-%m-%d %H:%M} UTC (updated "
                    f"{relative_time(record.updated_at)})"),
        ("owner", format_owner(listed.owner_user, listed.owner_host, listed.owner_role,
                               listed.shared_with)),
        ("parent", fork_label(record.parent)),
        ("status", {"idle": "idle", "active": "active in this process"}.get(
            listed.status, f"in use by {describe_holder(listed.holder)}")
         + (", archived" if record.archived else "")),
        ("model", state.model),
        ("usage", f"{format_tokens(usage)} · {format_cost(usage)} · "
                  f"{plural(usage.calls, 'model call')} · {plural(state.tool_calls, 'tool call')}"),
        ("messages", f"{max(len(record.transcript) - 1, 0):,} in the transcript, "
                     f"{max(len(record.messages) - 1, 0):,} in the working context, "
                     f"{plural(len(record.compactions), 'compaction')}"),
        ("summary", record.summary.strip()),
        ("todos", format_todos(state.todos) if state.todos else ""),
    ]
    last = {m.get("role"): message_text(m) for m in record.transcript
            if m.get("role") in ("user", "assistant") and message_text(m)}
    rows += [("last prompt", one_line(last.get("user", ""), 300)),
             ("last reply", one_line(last.get("assistant", ""), 300))]
    ctx.print("\n".join([record.title or "(untitled)"] + [
        f"{label:<12}" + ("\n" + " " * 12).join(value.splitlines())
        for label, value in rows if value]))
    if args.transcript:
        ctx.print("\n" + format_transcript(record.transcript, record.compactions))
    return 0


def search(ctx: Context, args: argparse.Namespace) -> int:
    text = " ".join(args.text)
    hits = search_sessions(ctx.store, text, deep=args.deep, include_archived=args.all,
                           progress=ctx.progress("searching", "session"))
    return ctx.report([{"session": hit.session.model_dump(mode="json"), "count": hit.count,
                        "matches": [asdict(m) for m in hit.matches]} for hit in hits],
                      format_search_results(hits, query=text))


def export(ctx: Context, args: argparse.Namespace) -> int:
    record = ctx.store.load_session(args.session_id)
    common: dict[str, Any] = {
        "secrets": secrets_from_environ(os.environ, ["OPENAI_API_KEY"]),
        "progress": ctx.progress("exporting", "message"),
        "figures": partial(ctx.store.read_figure, record.id)}
    if args.output == "-":
        data, _ = render(record, choose_format(args.fmt), **common)
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    done = export_record(record, args.fmt, args.output, force=args.force, **common)
    return ctx.report({**asdict(done), "path": str(done.path)}, format_exported(done))


def fork(ctx: Context, args: argparse.Namespace) -> int:
    forked = fork_session(ctx.store, args.session_id, at=args.at, title=args.title)
    facts = forked.record.model_dump(mode="json", include={"id", "title", "parent"})
    return ctx.report({**facts, "turns": forked.turns, "rebuilt": forked.rebuilt},
                      format_forked(forked, active=False))


def archive(ctx: Context, args: argparse.Namespace) -> int:
    ctx.store.update(args.session_id, archived=not args.undo)
    action = "unarchived" if args.undo else "archived"
    return ctx.report({"id": args.session_id, "archived": not args.undo},
                      format_change(SessionChange(args.session_id, action)))


def share(ctx: Context, args: argparse.Namespace) -> int:
    now, line = share_session(ctx.store, args.session_id, args.roles, undo=args.undo)
    return ctx.report({"id": args.session_id, "shared_with": now}, line)


def remove(ctx: Context, args: argparse.Namespace) -> int:
    if not args.yes:  # with --yes a session too damaged to load can go
        record = ctx.store.load_session(args.session_id)
        if not confirm_delete(
                None, record, f"not deleting session {record.id} without confirmation: add --yes"):
            ctx.print("Not deleted.")
            return 1
    ctx.store.delete_session(args.session_id)
    return ctx.report({"id": args.session_id, "deleted": True},
                      format_change(SessionChange(args.session_id, "deleted")))


def gc(ctx: Context, args: argparse.Namespace) -> int:
    removed = [str(path) for path in sorted(collect_garbage(ctx.files))]
    lines = [f"Removed {plural(len(removed), 'stale file')}:", *(f"  {p}" for p in removed)]
    return ctx.report({"removed": removed},
                      "\n".join(lines) if removed else f"Nothing to remove in {ctx.memory_dir}.")


def fsck(ctx: Context, args: argparse.Namespace) -> int:
    """Exit code 1 when a session is still damaged or cut short afterwards."""
    if args.repair and args.dry_run:
        raise JupyterAgentError("fsck takes --repair or --dry-run, not both")
    checks = check_sessions(ctx.files, repair=args.repair)
    bad = sum(c.state in ("damaged", "torn") and not c.repaired for c in checks)
    if ctx.json:
        ctx.emit_json([{**asdict(c), "kept": None if c.kept is None else str(c.kept)}
                       for c in checks])
        return int(bad > 0)
    for c in checks:
        ctx.print(f"{c.session_id}  {c.state}"
                  + (f": {one_line(c.reason, 400)}" if c.reason else ""))
        if c.repaired:
            ctx.print(f"    repaired: {c.repair}" + (f" (kept in {c.kept})" if c.kept else ""))
        elif c.repair:
            ctx.print(f"    {'--repair would ' if not args.repair else 'not repaired: '}"
                      f"{c.repair}")
    ctx.print(f"{plural(len(checks), 'session')} checked in {ctx.memory_dir}: {bad} "
              f"need{'s' if bad == 1 else ''} attention"
              + ("" if args.repair or not bad else "; run with --repair for the safe repairs"))
    return int(bad > 0)


def migrate(ctx: Context, args: argparse.Namespace) -> int:
    """Copy every session, verifying each copy; nothing is copied twice. The database is
    reached first. Exit code 1 when a session could not be read or a copy differs."""
    url = args.to_url or args.from_url  # the parser requires exactly one
    team = ctx.open(url)
    source, target = (ctx.files, team) if args.to_url else (team, ctx.files)
    team.list_sessions(include_archived=True, limit=1)  # connects: an error says so now
    total = len(source.list_sessions(include_archived=True))
    where = redact_url(url)
    if total == 0 and not ctx.json:
        empty = str(ctx.memory_dir) if args.to_url else f"the database at {where}"
        ctx.print(f"Nothing to migrate: no sessions in {empty}"
                  + (f" (the database at {where} answers)." if args.to_url else "."))
        return 0
    ticks = iter(ctx.progress("sessions", "session")(range(total), total))
    result = migrate_sessions(source, target, on_session=lambda sid, outcome: next(ticks, None))
    list(ticks)  # let the bar finish
    ctx.report({"from": str(ctx.memory_dir) if args.to_url else where,
                "to": where if args.to_url else str(ctx.memory_dir),
                "copied": list(result.copied), "skipped": list(result.skipped),
                "conflicts": list(result.conflicts), "mismatched": list(result.mismatched),
                "unreadable": [sid for sid, _ in result.unreadable],
                "verified": result.verified, "ok": result.ok}, result.summary())
    return 0 if result.ok else 1


def _common_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # on a subcommand they do not reset what was given before its name
    parser.add_argument("--memory-dir", metavar="DIR",
                        default=None if top else argparse.SUPPRESS,
                        help="The memory directory (default: $JUPYTER_AGENT_MEMORY_DIR, else "
                             "<project root>/.jupyter_agent, as in the magics).")
    parser.add_argument("--json", action="store_true",
                        default=False if top else argparse.SUPPRESS,
                        help="Print JSON for scripts.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="The saved jupyter-agent sessions of a project: list, show, "
                               "search, export, fork, archive, delete, clean up.")
    parser.add_argument("--version", action="version", version=f"jupyter-agent {__version__}")
    _common_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, text: str, run: Callable[[Context, argparse.Namespace], int], *,
                session: bool = True) -> argparse.ArgumentParser:
        child = sub.add_parser(name, help=text, description=text)
        child.set_defaults(run=run)
        if session:
            child.add_argument("session_id", metavar="ID", help="The session ID.")
        return child

    every = "Include archived sessions."
    command("list", "List sessions, most recently updated first.", list_sessions,
            session=False).add_argument("--all", action="store_true", help=every)
    command("show", "Show a session: facts, summary, todos, last exchange.", show).add_argument(
        "--transcript", action="store_true", help="Also print the whole transcript.")
    child = command("search", "Find sessions by title, summary and first prompt (or "
                              "transcript).", search, session=False)
    child.add_argument("text", nargs="+", metavar="TEXT",
                       help="Words to find, in this order (case-insensitive).")
    child.add_argument("--deep", action="store_true",
                       help="Search the full transcripts too (reads every session).")
    child.add_argument("--all", action="store_true", help=every)
    child = command("export", "Export a session as a notebook, Markdown or JSON.", export)
    child.add_argument("--format", dest="fmt", choices=["ipynb", "md", "json"],
                       help="ipynb: a notebook replaying the analysis; md: a readable "
                            "transcript; json: the session record (default: from the file "
                            "name, else ipynb).")
    child.add_argument("-o", "--output", metavar="PATH",
                       help="File or folder to write, or - for standard output "
                            "(default: session-<ID>.<format> here).")
    child.add_argument("--force", action="store_true", help="Replace an existing file.")
    child = command("fork", "Copy a session into a new one (the original is only read).", fork)
    child.add_argument("--at", type=int, metavar="N", help="Keep the first N user turns only.")
    child.add_argument("--title", help="Title of the new session (default: the original's, "
                                       "marked as a fork).")
    command("archive", "Archive a session (hidden from listings unless --all).",
            archive).add_argument("--undo", action="store_true", help="Unarchive instead.")
    child = command("share", "Share a session read-only with database roles (team store).", share)
    child.add_argument("roles", nargs="+", metavar="ROLE", help="Database roles (users or groups).")
    child.add_argument("--undo", action="store_true", help="Stop sharing it with these roles.")
    command("rm", "Delete a session for good.", remove).add_argument(
        "-y", "--yes", action="store_true", help="Do not ask first.")
    command("gc", "Remove files that interrupted writes left behind.", gc, session=False)
    child = command("fsck", "Check every session's files; report damage and the safe repairs.",
                    fsck, session=False)
    child.add_argument("--repair", action="store_true",
                       help="Make the safe repairs (damaged bytes are kept in "
                            "sessions/<ID>.jsonl.damaged). Default: report only (a dry run).")
    child.add_argument("--dry-run", action="store_true",
                       help="Report only, change nothing (the default).")
    child = command("migrate", "Copy every session between the JSON files and a PostgreSQL "
                               "store.", migrate, session=False)
    group = child.add_mutually_exclusive_group(required=True)
    group.add_argument("--to", metavar="URL", dest="to_url",
                       help="Copy the memory directory's sessions into this database.")
    group.add_argument("--from", metavar="URL", dest="from_url",
                       help="Copy this database's sessions of the project into the memory "
                            "directory.")
    for child in sub.choices.values():
        _common_options(child, top=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The exit code of ``jupyter agent`` with ``argv`` (default: the process's)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, --version (0) or a usage error (2)
        return int(stop.code or 0)
    ctx = Context(args.command, resolve_memory_dir(args.memory_dir), json=args.json)
    try:
        return int(args.run(ctx, args))
    except JupyterAgentError as err:
        text = str(err)
        if isinstance(err, UnsafeDirectoryError):  # the command line's way out
            text = err.advice(elsewhere="use --memory-dir DIR (or $JUPYTER_AGENT_MEMORY_DIR) "
                                        "to choose another one")
        elif isinstance(err, SessionNotFoundError):  # the next step
            text += f"; {PROG} list --all lists the saved sessions"
        print(f"{PROG}: {' '.join(terminal_text(text).split())}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `jupyter agent list | head -1`
        sys.stderr.close()
        return 0
    finally:
        ctx.close()


if __name__ == "__main__":
    sys.exit(main())
