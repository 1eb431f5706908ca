"""Plain text for the magics, the panel, the renderers and the ``jupyter agent`` command.

Text is cut by code points (``str`` indices). An error is said as the fact, then what to
do next (a magic to run, a button to press), never naming an exception class.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from jupyter_agent.artefacts.steps import (
    Call,
    Marker,
    Reply,
    Request,
    Step,
    call_code,
    format_call,
    steps,
    tool_result_sections,
)
from jupyter_agent.errors import (
    ContextMismatchError,
    CorruptSessionError,
    JupyterAgentError,
    LimitExceededError,
    SessionLockedError,
    SessionNotFoundError,
)
from jupyter_agent.settings import LIMITS
from jupyter_agent.settings import option as settings_option
from jupyter_agent.store.records import Usage
from jupyter_agent.text import (
    excerpt,
    format_bytes,
    format_cost,
    format_tokens,
    one_line,
    plural,
    relative_time,
    shorten,
)

if TYPE_CHECKING:
    from jupyter_agent.agent.config import Limits
    from jupyter_agent.artefacts.export import Exported
    from jupyter_agent.artefacts.fork import Forked
    from jupyter_agent.artefacts.search import SearchHit
    from jupyter_agent.controller import Resumed, SessionChange, UsageReport
    from jupyter_agent.store import Compaction, LeaseHolder, SessionListing, TodoItem


# --------------------------------------------------------------------------- usage and limits
def limits_left(limits: Limits, usage: Usage, tool_calls: int) -> str:
    """E.g. ``"3 tool calls, $0.45 left; 10 model calls per turn"``, or ``"no limits"``."""
    parts = []
    if limits.max_tool_calls is not None:
        parts.append(plural(max(limits.max_tool_calls - tool_calls, 0), "tool call"))
    if limits.max_cost_usd is not None:
        parts.append(f"${max(limits.max_cost_usd - usage.cost_usd, 0):.4f}")
    text = ", ".join(parts) + " left" if parts else ""
    if limits.max_iterations is not None:
        per_turn = plural(limits.max_iterations, "model call") + " per turn"
        text = f"{text}; {per_turn}" if text else per_turn
    return text or "no limits"


_WINDOW_SOURCE = {"setting": "set", "server": "server", "refusal": "server",
                  "genai-prices": "known", "default": "assumed"}


def format_footer(result: UsageReport) -> str:
    """The line under a turn: its tokens, cost (USD) and tool calls, the session's, the context
    estimate against the window (tokens, and where the window came from) and the limits left."""
    session, window = result.session_usage, result.window
    context = "" if window is None else (
        f"context ~{result.context_tokens:,}/{window.tokens:,} "
        f"({_WINDOW_SOURCE.get(window.source, window.source)})")
    return (
        f"── {format_tokens(result.turn_usage)} · {format_cost(result.turn_usage)} · "
        f"{plural(result.turn_tool_calls, 'tool call')} │ session: "
        f"{session.input_tokens + session.output_tokens:,} tokens · {format_cost(session)} · "
        f"{plural(result.session_tool_calls, 'tool call')} │ "
        + (f"{context} │ " if context else "")
        + f"{limits_left(result.limits, session, result.session_tool_calls)}"
    )


def limit_message(result: UsageReport) -> str:
    """Which limit ended the turn and how to go on: ``%agent_resume --max-...`` when the
    session's options set it (options beat the settings), else also ``%config``."""
    limit = result.stop_reason or ""
    maximum = getattr(result.limits, limit, None)
    option = settings_option(limit).flag if limit in LIMITS else ""
    how = f"%agent_resume {option} N"
    if limit not in result.limits_from_options:
        how += f" or %config AgentMagics.{limit} = N"
    value = (result.session_usage.cost_usd if limit == "max_cost_usd"
             else result.session_tool_calls)
    reached = str(LimitExceededError(limit, value, maximum or 0))
    if limit == "max_iterations":
        return f"{reached}; send another prompt to continue, or raise it with {how}"
    return f"{reached}; raise it with {how}, then send another prompt"


#: What each ``context_privacy`` lets go to the model.
_PRIVACY_MEANING = {
    "schema": "names, types, shapes, dtypes, columns, cell code and tracebacks go to the "
              "model; values only with your approval",
    "preview": "also a few rows and short reprs of values go to the model",
    "none": "nothing from the kernel goes to the model but what you type",
}


def format_usage(report: UsageReport) -> str:
    """``%agent_usage`` as lines: tokens, cost (USD), model and tool calls, the context estimate
    against the window (tokens), the limits left and what kernel data is sent."""
    u, window = report.session_usage, report.window
    return "\n".join([
        f"session {report.session_id}",
        f"tokens:      {format_tokens(u)}",
        f"cost:        {format_cost(u)}",
        f"model calls: {u.calls:,}",
        f"tool calls:  {report.session_tool_calls:,}",
        *([f"context:     ~{report.context_tokens:,} of {window.tokens:,} tokens; the window "
           f"is {window.origin}"] if window else []),
        f"limits:      {limits_left(report.limits, u, report.session_tool_calls)}",
        f"kernel data: {report.context_privacy} — "
        + _PRIVACY_MEANING.get(report.context_privacy, ""),
    ])


_STATUS_MARK = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]", "failed": "[!]"}


def format_todos(todos: Sequence[TodoItem]) -> str:
    """One line per todo, ``"[ ] 1. text — pending"`` (retries when any), or ``"no todos"``."""
    if not todos:
        return "no todos"
    return "\n".join(f"{_STATUS_MARK.get(t.status, '[?]')} {t.id}. {t.text} — {t.status}"
                     + (f" (retries: {t.retries})" if t.retries else "") for t in todos)


# --------------------------------------------------------------------------- tool calls
def result_preview(text: str) -> list[str]:
    """The first 10 lines of a tool result, each cut to 160, then a line saying how many
    were left out; ``["(no output)"]`` for an empty result."""
    lines = [line.rstrip() for line in text.lstrip("\n").rstrip().splitlines()]
    if not lines:
        return ["(no output)"]
    shown = [shorten(line, 160) for line in lines[:10]]
    if len(lines) > 10:
        shown.append(f"… ({plural(len(lines) - 10, 'more line')})")
    return shown


#: The label shown before each part of a tool result, by kind (both renderers).
RESULT_LABELS = {"output": "→", "result": "→ result", "stderr": "stderr", "error": "✗ error",
                 "message": "✗", "refused": "⊘ refused:"}


def one_line_result(result: str, ok: bool) -> str:
    """``→ text``, ``✗ why`` or ``⊘ refused: why`` (a refusal or failure up to 400)."""
    kind, body = tool_result_sections(result, ok)[0]
    limit = 120 if kind not in ("refused", "message") else 400
    text = shorten(" ".join(body.split()), limit) or "(no output)"
    if kind == "refused":
        return f"⊘ refused: {text}"
    return f"{'→' if ok else '✗'} {text}"


def section_text(kind: str, body: str) -> str:
    """One section of a tool result (:func:`tool_result_sections`) as a terminal shows it:
    its label, then the text (output and values cut by :func:`result_preview`)."""
    label = RESULT_LABELS[kind]
    if kind in ("refused", "message"):
        return f"  {label} {body}"
    lines = result_preview(body) if kind in ("output", "result", "stderr") else (
        body.splitlines() or [""])
    return "\n".join([f"  {label} {lines[0]}", *(f"    {line}" for line in lines[1:])])


def call_head(name: str, code: str) -> str:
    """``▶ name`` over the indented ``code`` of a call (cut to 2000)."""
    lines = shorten(code.rstrip(), 2000).splitlines()
    return "\n".join([f"▶ {name}", *("    " + line for line in lines)])


# --------------------------------------------------------------------------- saved sessions
def format_step(step: Step, cells: frozenset[str] = frozenset()) -> str:
    """A step of a saved session as the live turn showed it: each call with its result;
    ``cells``: IDs of the calls handed out as cells (marked)."""
    if isinstance(step, Request | Reply):
        return f"[{'user' if isinstance(step, Request) else 'assistant'}]\n{step.text}"
    if isinstance(step, Marker):
        c = step.compaction
        return (f"═══ compaction at {c.at.isoformat(timespec='seconds')}: {c.replaced} "
                f"messages replaced by a summary ═══\n{shorten(c.summary, 1000)}")
    code, ok = call_code(step.arguments), step.outcome == "ok"
    result = "not executed: no result was saved" if step.result is None else step.result
    if code is None:
        text = f"▸ {format_call(step.name, step.arguments)} {one_line_result(result, ok)}"
    else:
        text = "\n".join([call_head(step.name, code), *(
            section_text(kind, body) for kind, body in tool_result_sections(result, ok))])
    if step.id in cells:
        text += "\n    ↳ handed out as a cell (%agent_cell)"
    return text


def transcript_blocks(messages: Sequence[dict[str, Any]], compactions: Sequence[Compaction] = (),
                      *, cells: frozenset[str] = frozenset()
                      ) -> list[tuple[str, tuple[dict[str, Any], ...]]]:
    """The steps of ``messages`` (a transcript or a working context) as ``(text, figure
    references)`` blocks, a compaction marker where each happened (see :func:`format_step`)."""
    return [(format_step(step, cells), step.figures if isinstance(step, Call) else ())
            for step in steps(messages, compactions)]


def format_transcript(messages: Sequence[dict[str, Any]], compactions: Sequence[Compaction] = (),
                      *, cells: frozenset[str] = frozenset()) -> str:
    """:func:`transcript_blocks` joined by blank lines, or ``"(no messages)"``."""
    return "\n\n".join(t for t, _ in transcript_blocks(messages, compactions, cells=cells)) \
        or "(no messages)"


def format_resumed_line(resumed: Resumed) -> str:
    """``Resumed ‘Title’ (ID) — it is this kernel's active session; ...`` (the panel)."""
    record = resumed.record
    name = f"‘{record.title}’ ({record.id})" if record.title else f"session {record.id}"
    unarchived = " (taken out of the archive)" if resumed.unarchived else ""
    note = f". {resumed.endpoint_note}" if resumed.endpoint_note else ""
    return (f"Resumed {name}{unarchived} — it is this kernel's active session; "
            f"continue with %%agent{note}")


def format_change(change: SessionChange) -> str:
    """One line, e.g. ``"Archived session ‘Penguins’ (X); it was this kernel's active
    session, so none is active now: ..."`` (the title made one inert line)."""
    sid = change.session_id
    name = f"‘{one_line(change.title, 60)}’ ({sid})" if change.title.strip() else sid
    text = f"{change.action.capitalize()} session {name}"
    if not change.was_active:
        return text + "."
    back = "" if change.action == "deleted" else f", %agent_resume {sid} takes it back"
    return (f"{text}; it was this kernel's active session, so none is active now: the "
            f"next %agent starts a new one{back}.")


def format_owner(user: str, host: str, role: str = "", shared: Sequence[str] = ()) -> str:
    """``"alice on node-3 as analyst, shared with bob, team"``; "" when no owner is
    recorded (the JSON files of one user)."""
    user, host, role = one_line(user, 40), one_line(host, 40), one_line(role, 40)
    text = f"{user} on {host}" if user and host else user or host
    if role and role != user:
        text = f"{text} as {role}" if text else role
    if shared:
        text += f", shared with {one_line(', '.join(shared), 80)}"
    return text


def _table(rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widths; the last column is not padded."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join((" ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True))
                      + " " + r[-1]).rstrip() for r in rows)


#: The name of a session with neither a title nor a prompt.
UNTITLED = "(untitled, no prompt yet)"


class RowText(NamedTuple):
    """The texts of one session in the sessions table and in the panel's rows."""

    name: str
    updated: str
    status: str
    messages: str
    cost: str
    holder: str = ""
    owner: str = ""


def format_messages(count: int) -> str:
    """``"6 messages"``, or ``"no messages yet"``: the system prompt is never counted."""
    return plural(count, "message") if count else "no messages yet"


def format_row(listing: SessionListing, now: datetime | None = None) -> RowText:
    """The texts of one row: ``name`` is the title, else the first prompt's first words,
    else :data:`UNTITLED`; ``holder`` who holds a session in use elsewhere; ``owner``
    whose it is in a team store."""
    return RowText(
        name=one_line(listing.title or excerpt(listing.first_prompt, 60) or UNTITLED, 60),
        updated=relative_time(listing.updated_at, now),
        status=listing.status + (", archived" if listing.archived else ""),
        messages=format_messages(max(listing.message_count - 1, 0)),  # the system prompt
        cost=format_cost(Usage(cost_usd=listing.cost_usd)),
        holder=describe_holder(listing.holder) if listing.status == "in use" else "",
        owner=format_owner(listing.owner_user, listing.owner_host, listing.owner_role,
                           listing.shared_with),
    )


def format_sessions_table(listings: Sequence[SessionListing], *,
                          active_id: str | None = None) -> str:
    """One row per session (:func:`format_row`), ``*`` marking the active one; an ``OWNER``
    column when the store records owners (a team store)."""
    if not listings:
        return "no sessions"
    texts = [format_row(s) for s in listings]
    team = any(t.owner for t in texts)
    rows = [("", "ID", "UPDATED", "STATUS", "MESSAGES", "COST", *(("OWNER",) if team else ()),
             "TITLE / FIRST PROMPT")]
    for s, t in zip(listings, texts, strict=True):
        name = t.name if s.parent is None else (
            f"{one_line(t.name, 30)} ↳ fork of {one_line(s.parent.session_id, 16)}")
        rows.append(("*" if s.id == active_id else "", s.id, t.updated, t.status, t.messages,
                     t.cost, *((t.owner,) if team else ()), name))
    return _table(rows)


def format_search_results(hits: Sequence[SearchHit], *, query: str,
                          active_id: str | None = None) -> str:
    """ID, last update, name and where the text was found, ``*`` marking ``active_id``."""
    if not hits:
        return f'no sessions match "{query}"'
    rows = [("", "ID", "UPDATED", "TITLE / FIRST PROMPT", "FOUND IN")]
    for hit in hits:
        s = hit.session
        where = one_line(hit.where, 100) + (f" (+{hit.count - 1} more)" if hit.count > 1 else "")
        rows.append(("*" if s.id == active_id else "", s.id, relative_time(s.updated_at),
                     one_line(s.title or s.first_prompt, 40) or "(empty)", where))
    verb = "matches" if len(hits) == 1 else "match"
    return f'{plural(len(hits), "session")} {verb} "{query}":\n' + _table(rows)


def format_forked(forked: Forked, *, active: bool = True) -> str:
    """The fork, its parent and where it was cut; ``active``: the fork became this
    kernel's active session (the magic), else it was only saved (the command line)."""
    record, origin = forked.record, forked.record.parent
    assert origin is not None  # a fork names its parent
    parent = origin.session_id
    cut = (f" after turn {origin.turn} of {forked.parent_turns}" if origin.turn is not None
           else f" ({plural(forked.turns, 'turn')})")
    title = f" — {record.title}" if record.title else ""
    lines = [f"Forked session {parent}{cut} into session {record.id}{title}."]
    if forked.rebuilt:
        lines.append("Its working context is the full transcript up to that turn (the parent's "
                     "was compacted later); it is compacted again if it is too long.")
    if active:
        lines.append(f"It is this kernel's active session now; {parent} is unchanged. "
                     "Continue with %%agent.")
    else:
        lines.append(f"{parent} is unchanged. Resume the fork with %agent_resume {record.id}.")
    return "\n".join(lines)


_KINDS = {"ipynb": "a notebook", "md": "Markdown", "json": "JSON"}


def format_exported(done: Exported) -> str:
    """Where and how big (:func:`~jupyter_agent.text.format_bytes`), what was redacted."""
    text = (f"Exported session {done.session_id} as {_KINDS.get(done.format, done.format)} "
            f"to {done.path} ({format_bytes(done.size)}).")
    if done.redacted:
        what = "secret" if done.redacted == 1 else "distinct secrets"
        text += f" {done.redacted} {what} (keys, tokens, passwords) became [redacted]."
    return text


# --------------------------------------------------------------------------- errors
_log = logging.getLogger("jupyter_agent")


def describe_holder(holder: LeaseHolder | None, *, pid: int | None = None) -> str:
    """``"the kernel of analysis.ipynb (pid 4242, since 14:05)"``, ``"process 4242 on host
    gpu-1"``, ``"another process"``; ``pid`` when the store records no holder."""
    label, host, since = (holder.label, holder.host, holder.since) if holder else ("", "", None)
    pid = holder.pid if holder and holder.pid else pid
    where = "" if host in ("", socket.gethostname()) else f" on host {host}"
    details = [f"pid {pid}"] if pid is not None else []
    if since is not None:
        details.append(f"since {since.astimezone():%Y-%m-%d %H:%M}")
    extra = f" ({', '.join(details)})" if details else ""
    if label:  # a notebook's kernel, a kernel without a notebook, a terminal, a command
        kernel = "the kernel of " if label.endswith(".ipynb") else ""
        return f"{kernel}{label}{where}{extra}"
    if pid is not None:
        return f"process {pid}{where}" + (f" (since {since.astimezone():%H:%M})" if since else "")
    return f"another process{where}"


def error_message(err: BaseException) -> str:
    """One line about ``err`` (a library error, or anything a panel button raised); an
    unexpected error is also logged with its traceback on the ``jupyter_agent`` logger."""
    if isinstance(err, SessionLockedError):
        sid = err.session_id
        return (f"session {sid} is in use by {describe_holder(err.holder, pid=err.pid)}; to "
                f"use it here, stop that kernel (or run %agent_new or %agent_resume of another "
                f"session there), then %agent_resume {sid}; the lease is freed as soon as "
                f"that kernel exits, crashed or not")
    if isinstance(err, SessionNotFoundError):
        return f"{err}; %agent_sessions --all lists the saved sessions"
    if isinstance(err, CorruptSessionError):
        return (f"{err}; move that file out of the sessions folder (or restore it from a "
                "backup): the other sessions are not affected")
    if isinstance(err, ContextMismatchError):
        return (f"{err}; another process changed this session: %agent_resume "
                f"{err.session_id} reloads it as saved")
    if isinstance(err, JupyterAgentError):
        return str(err)
    if isinstance(err, OSError):
        return f"could not read or write the session files: {err}"
    _log.error("jupyter-agent: unexpected error", exc_info=err)
    detail = str(err) or "no details"
    return f"something unexpected went wrong ({detail}); the kernel's log has the details"
