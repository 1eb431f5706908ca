"""The texts the harness sends the model: the system prompt and the summarizing request."""

from __future__ import annotations

__all__ = ["DEFAULT_SYSTEM_PROMPT", "SUMMARIZER_PROMPT", "build_system_prompt"]

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

SUMMARIZER_PROMPT = """\
You compact a conversation between a user and an AI assistant working in a Jupyter \
notebook. Write a concise summary that lets the assistant continue the work without \
the original messages: the user's goals and latest request, what was done and found \
(key numbers, variable names, file names), decisions and their reasons, errors met \
and how they were handled, and what remains to do. Use short bullet points. Do not \
invent anything that is not in the conversation."""


def build_system_prompt(base: str, *, project_notes: str = "", user_notes: str = "") -> str:
    """The system message of a new session: ``base`` plus the non-empty notes.

    Design §2: notes (``project.md``, ``user.md``) are kept apart from sessions and are
    put into the system prompt of every new session.
    """
    parts = [base.rstrip()]
    if project_notes.strip():
        parts.append("## Project notes (project.md)\n" + project_notes.strip())
    if user_notes.strip():
        parts.append("## User preferences (user.md)\n" + user_notes.strip())
    return "\n\n".join(parts)
