"""Text for the front end: pure formatting functions.

Every ``format_*`` function is a pure function of its arguments (plain text, one
concept each) so the magics, the panel, the live renderers
(:mod:`jupyter_agent.ui.render`) and the tests share them. How tool calls show lives in
:mod:`jupyter_agent.ui.calls`; its functions are importable from here too.

Text is cut by code points (Python ``str`` indices), never inside a character.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jupyter_agent.store.messages import message_text
from jupyter_agent.ui.calls import (
    format_call,
    format_tool_call,
    is_code_call,
    result_preview,
    tool_result_sections,
)
from jupyter_agent.ui.figures import figure_label, last_figure

if TYPE_CHECKING:
    from jupyter_agent.active import Resumed, SessionChange, TurnResult, UsageReport
    from jupyter_agent.agent import Limits
    from jupyter_agent.agent.window import ContextWindow
    from jupyter_agent.store import Compaction, SessionListing, SessionRecord, TodoItem, Usage

__all__ = [
    "INTERRUPTED_MESSAGE",
    "format_call",
    "format_change",
    "format_cost",
    "format_footer",
    "format_history",
    "format_owner",
    "format_recap",
    "format_recap_usage",
    "format_resumed",
    "format_resumed_line",
    "format_sessions_table",
    "format_todos",
    "format_tool_call",
    "format_transcript",
    "format_usage",
    "history_blocks",
    "is_code_call",
    "limit_message",
    "limits_left",
    "message_count_text",
    "messages_of",
    "one_line",
    "plural",
    "relative_time",
    "result_preview",
    "shorten",
    "terminal_text",
    "tool_result_sections",
    "transcript_blocks",
]


# --------------------------------------------------------------------------- small helpers
#: Terminal escape sequences (CSI, OSC such as hyperlinks and window titles, DCS, and
#: the rest), 7-bit and 8-bit, each to its end if it has one.
_ESCAPES = re.compile(
    r"\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x9d[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?|[\x90\x98\x9e\x9f][^\x1b\x9c]*(?:\x1b\\|\x9c)?"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?|\x1b[ -/]*[0-~]?")
#: What is left that a terminal would act on or that reorders text: C0 controls but
#: tab and newline, DEL, C1 controls, bidirectional embeddings, overrides and isolates.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: str) -> str:
    """``text`` from outside made safe to print on a terminal: escape sequences (colours,
    screen clears, OSC 8 hyperlinks, window titles) removed, a carriage return made a line
    break, and every other control character and bidirectional override replaced by
    ``\ufffd`` (so that it shows it was there). Tab and newline are kept."""
    text = _ESCAPES.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    return _CONTROLS.sub("\ufffd", text)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` code points, ending with ``…`` when cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def one_line(text: str, limit: int = 80) -> str:
    """``text`` with all whitespace runs collapsed to one space and control characters
    made inert (:func:`terminal_text`), then :func:`shorten`."""
    return shorten(" ".join(terminal_text(text).split()), limit)


def relative_time(when: datetime, now: datetime | None = None) -> str:
    """How long ago ``when`` was, e.g. ``"just now"``, ``"5 min ago"``, ``"3 h ago"``,
    ``"2 days ago"``, else the date in the kernel's local time zone, as the clock on the
    wall says (``"2026-01-31"``). Naive datetimes are taken as UTC. A time further ahead
    of ``now`` than :data:`~jupyter_agent.store.records.CLOCK_SKEW` is not believed:
    its date, ``"(in the future)"``, never ``"just now"``."""
    from jupyter_agent.store.records import CLOCK_SKEW

    now = now or datetime.now(UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = (now - when).total_seconds()
    if -seconds > CLOCK_SKEW.total_seconds():
        return f"{when.date().isoformat()} (in the future)"
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    days = int(seconds // 86400)
    if days < 30:
        return "yesterday" if days == 1 else f"{days} days ago"
    return when.astimezone().date().isoformat()


def format_cost(usage: Usage) -> str:
    """``"$0.0123"``, or ``"price unknown"`` when no call could be priced."""
    if usage.price_unknown and usage.cost_usd == 0:
        return "price unknown"
    text = f"${usage.cost_usd:.4f}"
    return text + " + price unknown" if usage.price_unknown else text


def plural(n: int | float, word: str) -> str:
    """``"1 tool call"``, ``"2 tool calls"``, ``"1,200 tokens"``: ``n`` and ``word``, plural
    unless ``n`` is 1."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def limits_left(limits: Limits, usage: Usage, tool_calls: int) -> str:
    """What the session's limits leave, e.g. ``"3 tool calls, $0.45 left; 10 model calls
    per turn"``, or ``"no limits"``."""
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


def _tokens(usage: Usage) -> str:
    total = usage.input_tokens + usage.output_tokens
    return f"{plural(total, 'token')} ({usage.input_tokens:,} in / {usage.output_tokens:,} out)"


_WINDOW_SOURCE = {"setting": "set", "server": "server", "refusal": "server",
                  "genai-prices": "known", "default": "assumed"}


def context_figure(tokens: int, window: ContextWindow | None) -> str:
    """``"context ~1,234/4,096 (server)"``: the working context against the window and
    where the window came from ("" without a window)."""
    if window is None:
        return ""
    return (f"context ~{tokens:,}/{window.tokens:,} "
            f"({_WINDOW_SOURCE.get(window.source, window.source)})")


def format_footer(result: TurnResult) -> str:
    """The one-line footer after a turn: tokens, cost, tool calls, the context against
    its window, what the limits leave."""
    session = result.session_usage
    context = context_figure(result.context_tokens, result.window)
    return (
        f"── {_tokens(result.turn_usage)} · {format_cost(result.turn_usage)} · "
        f"{plural(result.turn_tool_calls, 'tool call')} │ session: "
        f"{session.input_tokens + session.output_tokens:,} tokens · {format_cost(session)} · "
        f"{plural(result.session_tool_calls, 'tool call')} │ "
        + (f"{context} │ " if context else "")
        + f"{limits_left(result.limits, session, result.session_tool_calls)}"
    )


#: Printed when Ctrl-C interrupts a turn (the agent saved the session before re-raising).
INTERRUPTED_MESSAGE = ("[jupyter-agent] interrupted — the session is saved; "
                       "send another prompt to go on.")

_LIMIT_OPTION = {"max_tool_calls": "--max-tool-calls", "max_cost_usd": "--max-cost",
                 "max_iterations": "--max-iterations"}


def limit_message(result: TurnResult) -> str:
    """The one-line error after a turn that a limit ended: which limit, how to go on.

    A per-turn limit (``max_iterations``) only needs another prompt; a per-session limit
    (``max_tool_calls``, ``max_cost_usd``) must be raised first -- with
    ``%agent_resume --max-...`` when the session's options set it (options beat the
    settings), else with ``%config AgentMagics.<limit>``.
    """
    limit = result.stop_reason or ""
    maximum = getattr(result.limits, limit, None)
    option = _LIMIT_OPTION.get(limit, "")
    how = f"%agent_resume {option} N"
    if limit not in result.limits_from_options:
        how += f" or %config AgentMagics.{limit} = N"
    if limit == "max_iterations":
        return (f"limit reached: max_iterations = {plural(maximum or 0, 'model call')} per "
                f"prompt; send another prompt to continue, or raise it with {how}")
    if limit == "max_tool_calls":
        reached = (f"max_tool_calls = {plural(maximum or 0, 'tool call')} per session "
                   f"({result.session_tool_calls:,} made)")
    elif limit == "max_cost_usd":
        reached = (f"max_cost_usd = ${maximum or 0:.4f} per session "
                   f"(${result.session_usage.cost_usd:.4f} spent)")
    else:
        reached = f"{limit} = {maximum}"
    return f"limit reached: {reached}; raise it with {how}, then send another prompt"


def format_usage(report: UsageReport) -> str:
    """``%agent_usage``: the session's cumulative usage and what its limits leave."""
    u = report.usage
    window = report.window
    return "\n".join([
        f"session {report.session_id}",
        f"tokens:      {_tokens(u)}",
        f"cost:        {format_cost(u)}",
        f"model calls: {u.calls:,}",
        f"tool calls:  {report.tool_calls:,}",
        *([f"context:     ~{report.context_tokens:,} of {window.tokens:,} tokens; the window "
           f"is {window.origin}"] if window else []),
        f"limits:      {limits_left(report.limits, u, report.tool_calls)}",
        f"kernel data: {report.context_privacy} — "
        + PRIVACY_MEANING.get(report.context_privacy, ""),
    ])


#: What each ``context_privacy`` lets go to the model, as ``%agent_usage`` says it.
PRIVACY_MEANING = {
    "schema": "names, types, shapes, dtypes, columns, cell code and tracebacks go to the "
              "model; values only with your approval",
    "preview": "also a few rows and short reprs of values go to the model",
    "none": "nothing from the kernel goes to the model but what you type",
}


_STATUS_MARK = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]", "failed": "[!]"}


def format_todos(todos: Sequence[TodoItem], *, open_only: bool = False) -> str:
    """One line per todo item: mark, id, text, status and retries; ``"no todos"`` if none."""
    rows = [t for t in todos if not open_only or t.status in ("pending", "in_progress")]
    if not rows:
        return "no open todos" if open_only else "no todos"
    lines = []
    for t in rows:
        retries = f" (retries: {t.retries})" if t.retries else ""
        lines.append(f"{_STATUS_MARK.get(t.status, '[?]')} {t.id}. {t.text} — {t.status}{retries}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- messages
#: After a ``run_python`` call that ``%agent_cell`` handed out as a cell.
CELL_MARK = "    ↳ handed out as a cell (%agent_cell)"


def _format_message(message: dict[str, Any], cells: frozenset[str] = frozenset()) -> str:
    role = message.get("role", "?")
    text = message_text(message)
    if role == "tool":
        return f"[tool result {message.get('tool_call_id', '')}]\n{shorten(text, 500)}"
    lines = [f"[{role}]"]
    if text:
        lines.append(text if role != "system" else shorten(text, 500))
    for call in message.get("tool_calls") or []:
        fn = call.get("function", {})
        lines.append(format_tool_call(fn.get("name", "?"), fn.get("arguments", "")))
        if call.get("id") in cells:
            lines.append(CELL_MARK)
    return "\n".join(lines)


def history_blocks(messages: Iterable[dict[str, Any]], *, cells: frozenset[str] = frozenset()
                   ) -> list[tuple[str, dict[str, Any] | None]]:
    """The working context as ``(text, message)`` blocks, one per message (see
    :func:`format_history`); a front end shows a message's figures after its block.
    ``cells``: IDs of the calls handed out as cells (marked)."""
    return [(_format_message(m, cells), m) for m in messages]


def format_history(messages: Iterable[dict[str, Any]], *,
                   cells: frozenset[str] = frozenset()) -> str:
    """The working context, message by message (system messages shortened; calls whose
    ID is in ``cells`` marked as handed out)."""
    return "\n\n".join(text for text, _ in history_blocks(messages, cells=cells)) \
        or "(no messages)"


def transcript_blocks(transcript: Sequence[dict[str, Any]], compactions: Sequence[Compaction],
                      *, cells: frozenset[str] = frozenset()
                      ) -> list[tuple[str, dict[str, Any] | None]]:
    """The full transcript as ``(text, message)`` blocks, with a compaction marker
    (message ``None``) where each compaction happened (see :func:`format_transcript`)."""
    marks: dict[int, list[Compaction]] = {}
    for c in compactions:
        marks.setdefault(c.transcript_length, []).append(c)
    blocks: list[tuple[str, dict[str, Any] | None]] = []
    for i in range(len(transcript) + 1):
        for c in marks.get(i, []):
            blocks.append((
                f"═══ compaction at {c.at.isoformat(timespec='seconds')}: {c.replaced} "
                f"messages replaced by a summary ═══\n{shorten(c.summary, 1000)}", None))
        if i < len(transcript):
            blocks.append((_format_message(transcript[i], cells), transcript[i]))
    return blocks


def format_transcript(transcript: Sequence[dict[str, Any]],
                      compactions: Sequence[Compaction], *,
                      cells: frozenset[str] = frozenset()) -> str:
    """The full transcript, with a marker where each compaction happened.

    A compaction's marker goes before transcript message ``transcript_length`` (the
    transcript's length when it was recorded), so it sits between the turns it summarised
    and the ones that came after.
    """
    return "\n\n".join(t for t, _ in transcript_blocks(transcript, compactions, cells=cells)) \
        or "(no messages)"


def format_recap_usage(record: SessionRecord) -> str:
    """The usage line of a recap: ``updated 5 min ago · 30 messages · <tokens> · $0.0023 ·
    18 tool calls``."""
    state = record.state
    return (f"updated {relative_time(record.updated_at)} · "
            f"{plural(len(record.transcript), 'message')} · {_tokens(state.usage)} · "
            f"{format_cost(state.usage)} · {plural(state.tool_calls, 'tool call')}")


def format_recap(record: SessionRecord, *, unarchived: bool = False,
                 endpoint_note: str = "") -> str:
    """The recap shown by ``%agent_resume``: title, summary, usage, open todos, last exchange
    (and, with ``unarchived``, that the session was taken out of the archive; the
    ``endpoint_note`` of :class:`~jupyter_agent.active.Resumed` as its own line)."""
    state = record.state
    lines = [
        f"Resumed session {record.id}" + (f" — {record.title}" if record.title else ""),
        format_recap_usage(record),
    ]
    if endpoint_note:
        lines.append(endpoint_note)
    if unarchived:
        lines.append("unarchived: the session was archived; resuming took it out of the archive")
    if record.summary:
        lines.append("summary: " + shorten(record.summary.strip(), 600))
    if any(t.status in ("pending", "in_progress") for t in state.todos):
        lines.append("open todos:\n" + format_todos(state.todos, open_only=True))
    last_user = next((m for m in reversed(record.messages) if m.get("role") == "user"), None)
    last_reply = next((m for m in reversed(record.messages)
                       if m.get("role") == "assistant" and message_text(m)), None)
    if last_user is not None:
        lines.append("last prompt: " + one_line(message_text(last_user), 300))
    if last_reply is not None:
        lines.append("last reply:  " + one_line(message_text(last_reply), 300))
    figure = last_figure(record.transcript)
    if figure is not None:
        lines.append(f"last figure: {figure_label(figure)} (%agent_history shows it)")
    return "\n".join(lines)


def format_resumed(resumed: Resumed) -> str:
    """:func:`format_recap` of what :meth:`AgentController.resume` returned."""
    return format_recap(resumed.record, unarchived=resumed.unarchived,
                        endpoint_note=resumed.endpoint_note)


def format_resumed_line(resumed: Resumed) -> str:
    """One line after resuming from the panel: ``Resumed ‘Title’ (ID) — it is this
    kernel's active session; continue with %%agent``."""
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
    """Whose a session is, for people: ``"alice on node-3"``, ``"alice"``, ``"node-3"``,
    then the database role when it is another name (``"alice on node-3 as analyst"``) and
    the roles it is shared with (``", shared with bob, team"``); "" when the store
    records no owner (the JSON files of one user)."""
    user, host, role = one_line(user, 40), one_line(host, 40), one_line(role, 40)
    text = f"{user} on {host}" if user and host else user or host
    if role and role != user:
        text = f"{text} as {role}" if text else role
    if shared:
        text += f", shared with {one_line(', '.join(shared), 80)}"
    return text


def messages_of(count: int) -> int:
    """The messages a listing's ``message_count`` (the transcript's length) stands for:
    without the system prompt the transcript starts with."""
    return max(count - 1, 0)


def message_count_text(count: int) -> str:
    """``"3 msgs"`` for a listing's ``message_count`` (the transcript's length, which
    includes the system prompt): the system prompt is not counted, and a session with
    nothing else says ``"no messages yet"``."""
    shown = messages_of(count)
    if shown == 0:
        return "no messages yet"
    return f"{shown} msg" + ("" if shown == 1 else "s")


def format_sessions_table(listings: Sequence[SessionListing], *, active_id: str | None = None,
                          now: datetime | None = None) -> str:
    """``%agent_sessions`` in a terminal: one row per session (``*`` marks the active one).

    An ``OWNER`` column (``alice on node-3``) is shown when the store records owners (a
    team store); the JSON files of one user leave it out.
    """
    if not listings:
        return "no sessions"
    owners = [format_owner(s.owner_user, s.owner_host, s.owner_role, s.shared_with)
              for s in listings]
    team = any(owners)
    header = ("", "ID", "UPDATED", "STATUS", "MSGS", "COST", *(("OWNER",) if team else ()),
              "TITLE / FIRST PROMPT")
    rows = [header]
    for s, owner in zip(listings, owners, strict=True):
        name = s.title or one_line(s.first_prompt, 50) or "(empty)"
        parent = getattr(s, "parent", None)  # the fork's origin, where the listing has it
        if parent is not None:
            name = f"{one_line(name, 30)} ↳ fork of {one_line(parent.session_id, 16)}"
        status = s.status + (" (archived)" if s.archived else "")
        rows.append(("*" if s.id == active_id else "", s.id, relative_time(s.updated_at, now),
                     status, str(messages_of(s.message_count)), f"${s.cost_usd:.4f}",
                     *((owner,) if team else ()), one_line(name, 64 if parent else 50)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    return "\n".join(
        " ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + " " + r[-1]
        for r in rows
    ).rstrip()
