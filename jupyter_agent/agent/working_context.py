"""The working context as the model sees it: size estimates, tool-pair repair, where
compaction may cut, the system prompts with their notes, and what each request carries.

Invariants: every assistant tool call is followed by exactly one ``tool`` result before
the next other message; an orphan result is dropped from the working context (the
transcript keeps it); compaction cuts only before a user or assistant message.

The working context keeps figure references, never image bytes; :class:`RequestView` adds
the newest figures as images (docs/design.md, "Figures": the request view).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from jupyter_agent.agent.config import TokenUsage
from jupyter_agent.errors import JupyterAgentError, TooLargeError, UnsafeFileError
from jupyter_agent.images import RASTER_TYPES, data_url, downscale, image_tokens
from jupyter_agent.store import FigureData, Store
from jupyter_agent.store.engine import NoteKind
from jupyter_agent.store.messages import figure_refs
from jupyter_agent.text import format_bytes

SUMMARY_MARKER = "[jupyter-agent] Summary of earlier conversation"

CHARS_PER_TOKEN = 4

_PER_MESSAGE_TOKENS = 4


def message_chars(message: dict[str, Any]) -> int:
    """Characters of a message that count toward the prompt (content, tool calls)."""
    content = message.get("content")
    n = len(content if isinstance(content, str) else
            json.dumps(content, ensure_ascii=False) if isinstance(content, list) else "")
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        n += len(function.get("name") or "") + len(function.get("arguments") or "") + 24
    return n


def message_tokens(message: dict[str, Any]) -> int:
    """Estimated tokens of one message: ~4 characters a token, plus 4 for its framing."""
    return message_chars(message) // CHARS_PER_TOKEN + _PER_MESSAGE_TOKENS


def estimate_tokens(messages: Sequence[dict[str, Any]], *, base_tokens: int | None = None,
                    base_len: int = 0) -> int:
    """Estimated prompt size of ``messages`` in tokens: ``base_tokens`` (reported for
    ``messages[:base_len]``; None: estimate all) plus :func:`message_tokens` of the rest."""
    rest = messages[base_len if base_tokens is not None else 0:]
    return (base_tokens or 0) + sum(map(message_tokens, rest))


def estimate_schema_tokens(schemas: Sequence[dict[str, Any]]) -> int:
    """Estimated tokens of a request's tool schemas (~1 per 4 characters of their JSON)."""
    return len(json.dumps(list(schemas), ensure_ascii=False)) // CHARS_PER_TOKEN if schemas else 0


def checked_usage(reported: TokenUsage | None, prompt_estimate: Callable[[], int],
                  text: str, calls: list[dict[str, Any]]) -> TokenUsage:
    """The usage to count for one call: each plausible reported count, else an estimate
    (``prompt_estimate()`` is called only then)."""
    completion_estimate = message_chars({"content": text, "tool_calls": calls}) // CHARS_PER_TOKEN
    if reported is None:
        return TokenUsage(prompt_estimate(), completion_estimate)
    prompt, completion = reported.input_tokens, reported.output_tokens
    if prompt <= 0:  # no request has an empty prompt
        prompt = prompt_estimate()
    if completion < 0 or (completion == 0 and (text or calls)):
        completion = completion_estimate
    cached = reported.cached_tokens if 0 <= reported.cached_tokens <= prompt else 0
    return TokenUsage(prompt, completion, cached)


def synthetic_result(call_id: str, reason: str) -> dict[str, Any]:
    """A tool message answering ``call_id`` that says the call did not run."""
    return {"role": "tool", "tool_call_id": call_id, "content": f"[jupyter-agent] {reason}"}


@dataclass(frozen=True)
class RepairReport:
    """What :func:`repair_tool_pairs` changed."""

    added: tuple[str, ...] = ()
    dropped: int = 0
    appended_only: bool = True

    @property
    def changed(self) -> bool:
        return bool(self.added or self.dropped)

    def describe(self) -> str:
        """One line for the store's compaction log and for notices."""
        parts = [f"{len(self.added)} unanswered tool call(s) given a synthetic result"
                 ] if self.added else []
        if self.dropped:
            parts.append(f"{self.dropped} orphan tool result(s) dropped from the working context")
        return "repaired tool pairs: " + "; ".join(parts) if parts else "no repair needed"


def repair_tool_pairs(messages: Sequence[dict[str, Any]],
                      reason: str = "not executed (the run was interrupted)", *,
                      start: int = 0) -> tuple[list[dict[str, Any]], RepairReport]:
    """Give every assistant tool call exactly one result; drop orphan results.
    ``messages[:start]`` are known to be in order (from the batch that opened there on)."""
    start = max(0, min(start, len(messages)))
    while start > 0 and messages[start - 1].get("role") == "tool":
        start -= 1
    start = max(0, start - 1)  # the message that opened the batch (or any other)
    if start:
        tail, report = repair_tool_pairs(messages[start:], reason)
        if not report.changed:
            return (messages if isinstance(messages, list) else list(messages)), report
        return [*messages[:start], *tail], report
    out: list[dict[str, Any]] = []
    added: list[str] = []
    dropped, inside, i, n = 0, False, 0, len(messages)  # inside: a result added before the end
    while i < n:
        message = messages[i]
        i += 1
        if message.get("role") == "tool":  # not directly after a batch: orphan
            dropped += 1
            continue
        out.append(message)
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        pending = [c.get("id") for c in calls or ()]
        while calls and i < n and messages[i].get("role") == "tool":
            if messages[i].get("tool_call_id") in pending:
                pending.remove(messages[i].get("tool_call_id"))
                out.append(messages[i])
            else:
                dropped += 1
            i += 1
        for call_id in pending:
            added.append(str(call_id))
            out.append(synthetic_result(str(call_id), reason))
        inside = inside or (bool(pending) and i < n)
    return out, RepairReport(tuple(added), dropped, appended_only=dropped == 0 and not inside)


def choose_cut(messages: Sequence[dict[str, Any]], *, keep_tokens: int, keep_turns: int = 2,
               keep_from: int | None = None) -> int | None:
    """Where ``messages[1:cut]`` are summarized: the last ``keep_turns`` user turns stay if
    they fit ``keep_tokens``, else the longest fitting tail, else the shortest;
    ``messages[keep_from:]`` always stay. None when nothing is worth summarizing."""
    n = len(messages)
    last = n - 1 if keep_from is None else min(keep_from, n - 1)
    candidates = [i for i in range(2, last + 1)
                  if messages[i].get("role") in ("user", "assistant")]
    if not candidates:
        return None
    # suffix[i]: the tokens of messages[i:]
    suffix = [*itertools.accumulate(map(message_tokens, reversed(messages)))][::-1]
    user_starts = [i for i in candidates if messages[i].get("role") == "user"]
    fitting_turns = [i for i in user_starts[-keep_turns:] if suffix[i] <= keep_tokens]
    fitting = fitting_turns or [i for i in candidates if suffix[i] <= keep_tokens]
    cut = fitting[0] if fitting else candidates[-1]
    # Summarizing only user messages (a lone prompt, an earlier summary) gains nothing.
    return cut if any(m.get("role") in ("assistant", "tool") for m in messages[1:cut]) else None


def render_for_summary(messages: Sequence[dict[str, Any]], *, max_chars: int,
                       per_message: int = 4_000) -> str:
    """A plain-text rendering of ``messages`` for the summarizing call, each message cut
    to ``per_message`` and the whole (its newest part) to ``max_chars`` code points."""
    lines: list[str] = []
    for m in messages:
        role, content = str(m.get("role", "?")).upper(), m.get("content")
        text = "" if content is None else content if isinstance(content, str) else json.dumps(
            content, ensure_ascii=False)
        if role == "TOOL":
            role = f"TOOL RESULT ({m.get('tool_call_id', '')})"
        if len(text) > per_message:
            text = text[:per_message] + f" ... [{len(text) - per_message:,} more characters]"
        if text:
            lines.append(f"{role}: {text}")
        for call in m.get("tool_calls") or ():
            function = call.get("function") or {}
            args = str(function.get("arguments") or "")[:per_message]
            lines.append(f"TOOL CALL {call.get('id', '')}: {function.get('name')}({args})")
    rendered = "\n\n".join(lines)
    if len(rendered) > max_chars:
        rendered = "[... earliest part omitted ...]\n" + rendered[-max_chars:]
    return rendered


#: Notes larger than this (bytes, UTF-8) are left out of a new session's system prompt.
NOTES_CAP = 64 * 1024

DEFAULT_SYSTEM_PROMPT = """\
You are an AI assistant working inside the user's Jupyter notebook.
You can run Python in the user's kernel with run_python (variables are shared with \
the notebook), inspect variables with list_variables and describe_variable, keep \
working notes with the scratchpad tools, track multi-step work with the todo tools, \
record a session summary with write_summary, and save durable facts or preferences \
for future sessions with remember.
Prefer small, verifiable steps. Look at the data before drawing conclusions. When a \
tool call is refused or fails, read the message and adapt instead of repeating it. \
Before you finish a substantial piece of work, call write_summary."""

SHORT_SYSTEM_PROMPT = """\
You are an assistant in the user's Jupyter notebook. run_python runs code in the \
user's kernel. Work in small steps; check the data before concluding."""

SHORT_NOTES_CHARS = 600

SUMMARIZER_PROMPT = """\
You compact a conversation between a user and an AI assistant working in a Jupyter \
notebook. Write a concise summary that lets the assistant continue the work without \
the original messages: the user's goals and latest request, what was done and found \
(key numbers, variable names, file names), decisions and their reasons, errors met \
and how they were handled, and what remains to do. Use short bullet points. Do not \
invent anything that is not in the conversation."""


_NOTES_HEADINGS = ("## Project notes (project.md)\n", "## User preferences (user.md)\n")


def build_system_prompt(base: str, *, project_notes: str = "", user_notes: str = "") -> str:
    """The system message of a new session: ``base`` plus the non-empty notes."""
    return "\n\n".join([base.rstrip(), *(heading + notes.strip() for heading, notes in zip(
        _NOTES_HEADINGS, (project_notes, user_notes), strict=True) if notes.strip())])


@dataclass
class NotesRead:
    """The notes a new session's system prompt got, and those left out."""

    used: dict[str, str] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)


def read_session_notes(store: Store | None, cap: int = NOTES_CAP) -> NotesRead:
    """Read the notes for a new session's system prompt; never raises for a note that is
    too large or not a private regular file (it is left out, with one line saying so)."""
    read = NotesRead()
    if store is None:
        return read
    for kind in typing.get_args(NoteKind):
        name = f"{kind}.md"
        try:
            text = store.notes.read(kind)
        except TooLargeError as err:
            size, limit, hint = err.size, err.cap, "the most AgentMagics.max_notes_kib allows"
        except UnsafeFileError as err:
            read.left_out.append(f"{name} left out of this session: {err.path} is a "
                                 f"{err.kind}, not a private regular file")
            continue
        else:
            size, limit, hint = len(text.encode("utf-8", errors="replace")), cap, (
                "AgentMagics.max_notes_kib raises it")
            if size <= cap:
                if text.strip():
                    read.used[kind] = text
                continue
        read.left_out.append(f"{name} ({format_bytes(size)}) left out of this session: "
                             f"over the {format_bytes(limit)} notes cap ({hint})")
    return read


def short_system_prompt(system: str) -> str:
    """The system message of a request to a small context window."""
    if system.startswith(DEFAULT_SYSTEM_PROMPT):
        system = SHORT_SYSTEM_PROMPT + system[len(DEFAULT_SYSTEM_PROMPT):]
    parts = system.split("\n\n## ")
    out = [parts[0]]
    for part in parts[1:]:
        section = "## " + part
        if section.startswith(_NOTES_HEADINGS) and len(section) > SHORT_NOTES_CHARS:
            section = (section[:SHORT_NOTES_CHARS].rstrip()
                       + " [... notes cut: small context window]")
        out.append(section)
    return "\n\n".join(out)


NOT_RUN_PREFIXES = ("[jupyter-agent] not executed", "error: refused:")


def tool_calls_run(transcript: Sequence[dict[str, Any]]) -> int:
    """How many tool calls of ``transcript`` ran or may have run."""
    results: dict[str, str] = {}
    for message in transcript:
        if message.get("role") == "tool":
            content = message.get("content")
            results.setdefault(str(message.get("tool_call_id")),
                               content if isinstance(content, str) else "")
    found = (results.get(str(call.get("id")) if isinstance(call, dict) else "")
             for message in transcript if message.get("role") == "assistant"
             for call in message.get("tool_calls") or ())
    return sum(1 for result in found if result is None or not result.startswith(NOT_RUN_PREFIXES))


def request_index(messages: Sequence[dict[str, Any]], request: dict[str, Any] | None) -> int | None:
    """Where ``request`` (the turn's user message) is in ``messages``: the last equal one."""
    found = (i for i in range(len(messages) - 1, -1, -1)
             if request is not None and (messages[i] is request or messages[i] == request))
    return next(found, None)


def shaped(request: list[dict[str, Any]], system: str | None,
           note: tuple[dict[str, Any] | None, str] | None = None) -> list[dict[str, Any]]:
    """``request`` with the text ``system`` in its system message and ``note``'s text after
    its message."""
    if system is not None and request and request[0].get("role") == "system":
        request = [{**request[0], "content": system}, *request[1:]]
    index = None if note is None else request_index(request, note[0])
    if note is None or index is None or not isinstance(request[index].get("content"), str):
        return request
    noted = list(request)
    noted[index] = {**request[index], "content": f"{request[index]['content']}\n\n{note[1]}"}
    return noted


IMAGES_CAPTION = "[jupyter-agent] The figures made by the code above:"
_ENCODED_KEPT = 32  # figures kept encoded between requests

Picked = tuple[dict[str, Any], str]  # a figure reference and its data: URL


@dataclass
class RequestView:
    """What a request carries, from the working context; the same objects while unchanged."""

    read_figure: Callable[[str], FigureData]
    _source: list[dict[str, Any]] | None = None
    _last: dict[str, Any] | None = None
    _plain: list[dict[str, Any]] = field(default_factory=list)
    _with_figures: list[int] = field(default_factory=list)  # tool messages with references
    _parts: dict[Any, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._image = functools.lru_cache(maxsize=_ENCODED_KEPT)(self._encode)

    def plain(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` without their ``figures`` keys (a list this view owns: do not
        change it). Only messages added since the last call are looked at."""
        seen = len(self._plain)
        if not (messages is self._source and len(messages) >= seen
                and (seen == 0 or messages[seen - 1] is self._last)):
            self._source = messages if isinstance(messages, list) else None
            self._plain, self._with_figures, self._parts = [], [], {}
            seen = 0
        for index in range(seen, len(messages)):
            message = messages[index]
            if "figures" in message:
                if message.get("role") == "tool" and message["figures"]:
                    self._with_figures.append(index)
                message = {k: v for k, v in message.items() if k != "figures"}
            self._plain.append(message)
        self._last = messages[-1] if len(messages) else None
        return self._plain

    def _encode(self, figure_id: str) -> tuple[str, int] | None:
        """A figure as a ``data:`` URL and its tokens (None: it cannot be read or sent)."""
        with contextlib.suppress(JupyterAgentError, OSError, ValueError):
            found = self.read_figure(figure_id)
            if found.media_type in RASTER_TYPES:
                data, (width, height) = downscale(found.data, found.media_type)
                return data_url(data, found.media_type), image_tokens(width, height)
        return None

    def with_images(self, max_images: int, api: str) -> tuple[list[dict[str, Any]], int]:
        """The last :meth:`plain` list with the newest ``max_images`` figures that can be
        sent as images, and their estimated tokens."""
        by_message: dict[int, list[Picked]] = {}
        tokens = count = 0
        source = self._source or []
        for index in reversed(self._with_figures):
            for ref in reversed(list(figure_refs(source[index:index + 1]))):
                if count >= max_images:
                    break
                if ref.get("media_type") not in RASTER_TYPES:
                    continue
                image = self._image(ref["id"])
                if image is not None:
                    by_message.setdefault(index, []).insert(0, (ref, image[0]))
                    tokens, count = tokens + image[1], count + 1
        if not by_message:
            return self._plain, 0
        out = list(self._plain)
        used: dict[Any, dict[str, Any]] = {}  # what this request uses; the rest is let go
        if api == "responses":  # inside the tool result
            for index, figures in by_message.items():
                message = self._plain[index]
                key = (id(message), *(r["id"] for r, _ in figures))
                out[index] = used[key] = self._parts.get(key) or {**message, "content": [
                    {"type": "text", "text": str(message.get("content") or "")},
                    *(_image_part(url) for _, url in figures)]}
        else:  # a user message after the batch's results
            batches: dict[int, list[Picked]] = {}
            for index in sorted(by_message):
                end = index
                while end + 1 < len(out) and out[end + 1].get("role") == "tool":
                    end += 1
                batches.setdefault(end, []).extend(by_message[index])
            for end in sorted(batches, reverse=True):
                key = tuple(r["id"] for r, _ in batches[end])
                used[key] = self._parts.get(key) or {"role": "user", "content": [
                    {"type": "text", "text": IMAGES_CAPTION},
                    *(part for ref, url in batches[end] for part in (
                        {"type": "text", "text": f"figure {ref.get('n', '?')}:"},
                        _image_part(url)))]}
                out.insert(end + 1, used[key])
        self._parts = used
        return out, tokens


def _image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url, "detail": "auto"}}


_PAIRS = {")": "(", "]": "[", "}": "{"}


def clip_reason(text: str, limit: int = 100) -> str:
    """``text`` on one line, at most about ``limit`` characters, cut at a word boundary."""
    text = cut = " ".join(text.split())
    if len(text) > limit:
        cut = text[: limit + 1]
        cut = cut[: cut.rfind(" ")] if " " in cut else cut[:limit]
    kept: list[str] = []
    opened: list[int] = []  # where each bracket still open is
    for char in cut:
        if char in "([{":
            opened.append(len(kept))
        elif char in _PAIRS:
            if not opened or kept[opened[-1]] != _PAIRS[char]:
                continue
            opened.pop()
        kept.append(char)
    shortened = cut != text
    if opened:
        kept, shortened = kept[: opened[0]], True
    clipped = "".join(kept).rstrip(" ,;:-")
    return clipped.rstrip(".") + "…" if shortened else clipped
