"""The ``jupyter agent`` subcommands: one small function each, ``run(ctx, args) -> exit code``.

Each function reads or changes sessions through the store protocol and prints text, or
JSON with ``--json``. Library errors (:class:`~jupyter_agent.errors.JupyterAgentError`)
are left to :func:`jupyter_agent.cli.main.main`, which prints them as one line and exits
with 1. Reads (``list``, ``show``, ``search``, ``export``, and ``fork`` for the parent)
take no lease, so they work while kernels hold sessions; ``archive``, ``rm`` and the
new session of ``fork`` take a lease briefly, and a session in use is refused with the
message the magics show.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from jupyter_agent.cli.context import Context
from jupyter_agent.errors import JupyterAgentError
from jupyter_agent.store import FigureData, SessionListing, SessionRecord
from jupyter_agent.store.messages import message_text

__all__ = [
    "archive", "export", "fork", "fsck", "gc", "list_sessions", "migrate", "remove", "search",
    "show",
]


def list_sessions(ctx: Context, args: argparse.Namespace) -> int:
    """``list [--all]``: the sessions, most recently updated first.

    A memory directory that does not exist yet lists no sessions (exit code 0, as for an
    empty one), and the line says that it does not exist, so that a mistyped
    ``--memory-dir`` is noticed.
    """
    from jupyter_agent.ui.display import format_sessions_table, one_line

    listing = ctx.store.list_sessions(include_archived=args.all)
    if ctx.json:
        ctx.emit_json([entry.model_dump(mode="json") for entry in listing])
    elif listing:
        ctx.print(format_sessions_table(listing))
    elif ctx.store is ctx.files and not ctx.memory_dir.is_dir():
        ctx.print(f"no sessions in {ctx.memory_dir}: the directory does not exist yet (the "
                  "first session saved in this project creates it; elsewhere, check "
                  "--memory-dir DIR or $JUPYTER_AGENT_MEMORY_DIR)")
    else:
        ctx.print(f"no sessions in {ctx.memory_dir}")
    damaged = ctx.files.damaged_sessions() if ctx.store is ctx.files and not ctx.json else {}
    for sid, reason in sorted(damaged.items()):
        ctx.print(f"damaged, not listed: {sid}: {one_line(reason, 300)}")
    if damaged:
        ctx.print("(jupyter agent fsck tells more and offers the safe repairs)")
    return 0


def _status(listed: SessionListing) -> str:
    if listed.status != "in use":
        return "idle" if listed.status == "idle" else "active in this process"
    holder = listed.holder
    pid = None if holder is None else holder.pid
    who = f"process {pid}" if pid is not None else "another process"
    return f"in use by {who}" + (f" ({holder.label})" if holder is not None and holder.label
                                 else "")


def _show_text(ctx: Context, record: SessionRecord) -> str:
    from jupyter_agent.artefacts.fork import fork_label
    from jupyter_agent.ui.display import (
        format_cost,
        format_owner,
        format_todos,
        one_line,
        plural,
        relative_time,
    )

    state, usage = record.state, record.state.usage
    listed = ctx.store.describe_session(record.id)  # status, holder and owner
    rows = [
        ("id", record.id),
        ("created", f"{record.created_at:%Y-%m-%d %H:%M} UTC (updated "
                    f"{relative_time(record.updated_at)})"),
        ("owner", format_owner(listed.owner_user, listed.owner_host, listed.owner_role,
                               listed.shared_with)),
        ("parent", fork_label(record.parent)),
        ("status", _status(listed) + (", archived" if record.archived else "")),
        ("model", state.model),
        ("usage", f"{plural(usage.input_tokens + usage.output_tokens, 'token')} "
                  f"({usage.input_tokens:,} in / {usage.output_tokens:,} out) · "
                  f"{format_cost(usage)} · {plural(usage.calls, 'model call')} · "
                  f"{plural(state.tool_calls, 'tool call')}"),
        ("messages", f"{len(record.transcript):,} in the transcript, "
                     f"{len(record.messages):,} in the working context, "
                     f"{plural(len(record.compactions), 'compaction')}"),
        ("summary", record.summary.strip()),
        ("todos", format_todos(state.todos) if state.todos else ""),
    ]
    last = {m.get("role"): message_text(m) for m in record.transcript
            if m.get("role") in ("user", "assistant") and message_text(m)}
    rows += [("last prompt", one_line(last.get("user", ""), 300)),
             ("last reply", one_line(last.get("assistant", ""), 300))]
    lines = [record.title or "(untitled)"]
    for label, value in rows:
        if value:
            body = value.splitlines()
            lines.append(f"{label:<12}{body[0]}")
            lines += [" " * 12 + line for line in body[1:]]
    return "\n".join(lines)


def show(ctx: Context, args: argparse.Namespace) -> int:
    """``show ID [--transcript]``: one session's facts, or its record with ``--json``."""
    record = ctx.store.load_session(args.session_id)
    if ctx.json:
        ctx.emit_json(record.model_dump(mode="json"))
        return 0
    ctx.print(_show_text(ctx, record))
    if args.transcript:
        from jupyter_agent.ui.display import format_transcript

        ctx.print("\n" + format_transcript(record.transcript, record.compactions))
    return 0


def search(ctx: Context, args: argparse.Namespace) -> int:
    """``search TEXT [--deep] [--all]``: sessions matching TEXT, with where."""
    from jupyter_agent.artefacts.search import search_sessions
    from jupyter_agent.ui.artefacts import format_search_results

    text = " ".join(args.text)
    progress = ctx.progress("searching", "session")
    hits = search_sessions(ctx.store, text, deep=args.deep, include_archived=args.all,
                           progress=progress)
    if ctx.json:
        ctx.emit_json([{"session": hit.session.model_dump(mode="json"), "count": hit.count,
                        "matches": [asdict(m) for m in hit.matches]} for hit in hits])
    else:
        ctx.print(format_search_results(hits, query=text))
    return 0


def export(ctx: Context, args: argparse.Namespace) -> int:
    """``export ID [--format F] [-o PATH|-] [--force]``: a notebook, Markdown or JSON."""
    from jupyter_agent.artefacts.export import choose_format, export_record, render
    from jupyter_agent.artefacts.redact import secrets_from_environ
    from jupyter_agent.ui.artefacts import format_exported

    record = ctx.store.load_session(args.session_id)
    secrets = secrets_from_environ(ctx.environ, ["OPENAI_API_KEY"])
    progress = ctx.progress("exporting", "message")
    store, sid = ctx.store, record.id

    def figures(figure_id: str) -> FigureData:
        return store.read_figure(sid, figure_id)

    if args.output == "-":
        data, _ = render(record, choose_format(args.fmt), secrets=secrets, progress=progress,
                         figures=figures)
        ctx.out.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    done = export_record(record, args.fmt, args.output, force=args.force, secrets=secrets,
                         progress=progress, figures=figures)
    if ctx.json:
        ctx.emit_json({"session_id": done.session_id, "format": done.format,
                       "path": str(done.path), "size": done.size, "redacted": done.redacted})
    else:
        ctx.print(format_exported(done))
    return 0


def fork(ctx: Context, args: argparse.Namespace) -> int:
    """``fork ID [--at N] [--title T]``: a new session copied from ID (ID is only read)."""
    from jupyter_agent.artefacts.fork import fork_session
    from jupyter_agent.ui.artefacts import format_forked

    forked = fork_session(ctx.store, args.session_id, at=args.at, title=args.title)
    record = forked.record
    if ctx.json:
        ctx.emit_json({"id": record.id, "title": record.title, "turns": forked.turns,
                       "parent": None if record.parent is None
                       else record.parent.model_dump(mode="json"),
                       "rebuilt": forked.rebuilt})
    else:
        ctx.print(format_forked(forked, active=False))
    return 0


def archive(ctx: Context, args: argparse.Namespace) -> int:
    """``archive ID [--undo]``: hide a session from listings (or show it again)."""
    ctx.store.update(args.session_id, archived=not args.undo)
    if ctx.json:
        ctx.emit_json({"id": args.session_id, "archived": not args.undo})
    else:
        ctx.print(f"{'Unarchived' if args.undo else 'Archived'} session {args.session_id}.")
    return 0


def share(ctx: Context, args: argparse.Namespace) -> int:
    """``share ID ROLE... [--undo]``: let database roles read (and fork) a session."""
    from jupyter_agent.controller import share_session

    now = share_session(ctx.store, args.session_id, args.roles, undo=args.undo)
    if ctx.json:
        ctx.emit_json({"id": args.session_id, "shared_with": now})
    else:
        ctx.print(f"Session {args.session_id} is shared with "
                  f"{', '.join(map(repr, now)) if now else 'nobody'}.")
    return 0


def _confirmed(ctx: Context, record: SessionRecord) -> bool:
    name = f" ({record.title})" if record.title else ""
    if not (sys.stdin is not None and sys.stdin.isatty()):
        raise JupyterAgentError(
            f"not deleting session {record.id} without confirmation: add --yes")
    answer = input(f"Delete session {record.id}{name} for good? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def remove(ctx: Context, args: argparse.Namespace) -> int:
    """``rm ID [--yes]``: delete a session's file for good (asks first on a terminal)."""
    record = ctx.store.load_session(args.session_id)
    if not args.yes and not _confirmed(ctx, record):
        ctx.print("Not deleted.")
        return 1
    ctx.store.delete_session(args.session_id)
    if ctx.json:
        ctx.emit_json({"id": args.session_id, "deleted": True})
    else:
        ctx.print(f"Deleted session {args.session_id}.")
    return 0


def gc(ctx: Context, args: argparse.Namespace) -> int:
    """``gc``: remove files that killed writers left in the memory directory (sessions in
    use are left alone)."""
    removed = ctx.files.collect_garbage()
    if ctx.json:
        ctx.emit_json({"removed": sorted(str(p) for p in removed)})
    elif not removed:
        ctx.print(f"Nothing to remove in {ctx.memory_dir}.")
    else:
        ctx.print(f"Removed {len(removed)} stale file{'s' if len(removed) != 1 else ''}:")
        for path in sorted(removed):
            ctx.print(f"  {path}")
    return 0


def fsck(ctx: Context, args: argparse.Namespace) -> int:
    """``fsck [--repair | --dry-run]``: every session's state (ok, cut-short last line,
    damaged with the file and line, old format, in use) and the safe repair for it;
    nothing changes without ``--repair``. Exit code 1 when a session is still damaged
    (or cut short) afterwards, else 0."""
    from jupyter_agent.ui.display import one_line

    if args.repair and args.dry_run:
        raise JupyterAgentError("fsck takes --repair or --dry-run, not both")
    checks = ctx.files.check_sessions(repair=args.repair)
    if ctx.json:
        ctx.emit_json([{**asdict(c), "kept": None if c.kept is None else str(c.kept)}
                       for c in checks])
    else:
        for c in checks:
            line = f"{c.session_id}  {c.state}"
            if c.reason:
                line += f": {one_line(c.reason, 400)}"
            ctx.print(line)
            if c.repaired:
                ctx.print(f"    repaired: {c.repair}" + (f" (kept in {c.kept})" if c.kept else ""))
            elif c.repair:
                ctx.print(f"    {'--repair would ' if not args.repair else 'not repaired: '}"
                          f"{c.repair}")
        bad = sum(c.state in ("damaged", "torn") and not c.repaired for c in checks)
        ctx.print(f"{len(checks)} session{'s' if len(checks) != 1 else ''} checked in "
                  f"{ctx.memory_dir}: {bad} need{'s' if bad == 1 else ''} attention"
                  + ("" if args.repair or not bad else "; run with --repair for the safe "
                                                        "repairs"))
    return int(any(c.state in ("damaged", "torn") and not c.repaired for c in checks))


def migrate(ctx: Context, args: argparse.Namespace) -> int:
    """``migrate --to URL | --from URL``: copy every session between the JSON files of the
    memory directory and a PostgreSQL store, verifying each copy.

    Running it again copies nothing twice. The database is reached first, even when
    there is nothing to copy ("nothing to migrate" then says so). Exit code 1 when the
    database cannot be reached, a session could not be read or a copy differs from its
    source (the text names them), else 0.
    """
    from jupyter_agent.store.migrate import migrate_sessions
    from jupyter_agent.store.postgres.url import check_store_url, redact_url

    url = args.to_url or args.from_url  # the parser requires exactly one
    try:
        check_store_url(url)
    except ValueError as err:
        raise JupyterAgentError(str(err)) from None
    team = ctx.team_store(url)
    source, target = (ctx.files, team) if args.to_url else (team, ctx.files)
    team.list_sessions(include_archived=True, limit=1)  # connects: an error says so now
    total = len(source.list_sessions(include_archived=True))
    where = redact_url(url)
    if total == 0 and not ctx.json:
        empty = str(ctx.memory_dir) if args.to_url else f"the database at {where}"
        ctx.print(f"Nothing to migrate: no sessions in {empty}"
                  + (f" (the database at {where} answers)." if args.to_url else "."))
        return 0
    bar = ctx.progress("sessions", "session")
    ticks = iter(bar(range(total), total))

    def step(session_id: str, outcome: str) -> None:
        next(ticks, None)

    result = migrate_sessions(source, target, on_session=step)
    for _ in ticks:  # let the bar finish
        pass
    if ctx.json:
        ctx.emit_json({"from": str(ctx.memory_dir) if args.to_url else where,
                       "to": where if args.to_url else str(ctx.memory_dir),
                       "copied": list(result.copied), "skipped": list(result.skipped),
                       "conflicts": list(result.conflicts),
                       "mismatched": list(result.mismatched),
                       "unreadable": [sid for sid, _ in result.unreadable],
                       "verified": result.verified, "ok": result.ok})
    else:
        ctx.print(result.summary())
    return 0 if result.ok else 1
