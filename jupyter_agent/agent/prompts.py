"""The texts the harness sends the model: the system prompt and the summarizing request,
and the notes that go into a new session's system prompt."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jupyter_agent.errors import TooLargeError, UnsafeFileError

if TYPE_CHECKING:
    from jupyter_agent.store import Store
    from jupyter_agent.store.notes import NoteKind

__all__ = ["DEFAULT_SYSTEM_PROMPT", "NOTES_CAP", "SHORT_NOTES_CHARS", "SHORT_SYSTEM_PROMPT",
           "SUMMARIZER_PROMPT", "NotesRead", "build_system_prompt", "format_bytes",
           "read_session_notes", "short_system_prompt"]

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
"""The system prompt sent instead of :data:`DEFAULT_SYSTEM_PROMPT` to a small context
window."""

SHORT_NOTES_CHARS = 600
"""With a small context window each notes section is cut to this many code points."""

SUMMARIZER_PROMPT = """\
You compact a conversation between a user and an AI assistant working in a Jupyter \
notebook. Write a concise summary that lets the assistant continue the work without \
the original messages: the user's goals and latest request, what was done and found \
(key numbers, variable names, file names), decisions and their reasons, errors met \
and how they were handled, and what remains to do. Use short bullet points. Do not \
invent anything that is not in the conversation."""


def build_system_prompt(base: str, *, project_notes: str = "", user_notes: str = "") -> str:
    """The system message of a new session: ``base`` plus the non-empty notes.

    Notes (``project.md``, ``user.md``) are kept apart from sessions and are
    put into the system prompt of every new session.
    """
    parts = [base.rstrip()]
    if project_notes.strip():
        parts.append("## Project notes (project.md)\n" + project_notes.strip())
    if user_notes.strip():
        parts.append("## User preferences (user.md)\n" + user_notes.strip())
    return "\n\n".join(parts)


def format_bytes(size: int) -> str:
    """``312 bytes``, ``1.2 KiB``, ``5.0 MiB``."""
    if size < 1024:
        return f"{size} byte{'s' if size != 1 else ''}"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


@dataclass
class NotesRead:
    """The notes a new session's system prompt got, and those left out.

    Attributes
    ----------
    used : dict
        ``{"project": text, "user": text}`` for the non-empty notes put in.
    left_out : list of str
        One line per note left out (over the cap, or a file that may not be read).
    """

    used: dict[str, str] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)


def read_session_notes(store: Store | None, cap: int = NOTES_CAP) -> NotesRead:
    """Read the notes for a new session's system prompt; never raises for a note that is
    too large or not a private regular file (it is left out, with one line saying so).

    Parameters
    ----------
    store : Store or None
        ``None``: no notes.
    cap : int
        Bytes (UTF-8) a note may have.

    Raises
    ------
    UnsafeDirectoryError, OSError
        From the store when the memory directory itself cannot be used.
    """
    read = NotesRead()
    if store is None:
        return read
    kinds: tuple[NoteKind, ...] = ("project", "user")
    for kind in kinds:
        name = f"{kind}.md"
        try:
            text = store.notes.read(kind)
        except TooLargeError as err:
            read.left_out.append(f"{name} ({format_bytes(err.size)}) left out of this session: "
                                 f"over the {format_bytes(err.cap)} notes cap "
                                 "(the most AgentMagics.max_notes_kib allows)")
            continue
        except UnsafeFileError as err:
            read.left_out.append(f"{name} left out of this session: {err.path} is a "
                                 f"{err.kind}, not a private regular file")
            continue
        size = len(text.encode("utf-8", errors="replace"))
        if size > cap:
            read.left_out.append(f"{name} ({format_bytes(size)}) left out of this session: "
                                 f"over the {format_bytes(cap)} notes cap "
                                 "(AgentMagics.max_notes_kib raises it)")
        elif text.strip():
            read.used[kind] = text
    return read


_NOTES_HEADINGS = ("## Project notes (project.md)\n", "## User preferences (user.md)\n")


def short_system_prompt(system: str) -> str:
    """The system message of a request to a small context window.

    The default prompt at its start becomes :data:`SHORT_SYSTEM_PROMPT` and each notes
    section is cut to :data:`SHORT_NOTES_CHARS` code points; a system prompt the user
    chose is kept, only its notes are cut. The saved session keeps the full message.
    """
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
