"""Keeping API keys out of exports (design §17).

jupyter-agent never writes an API key into a session (design §6), but a session can
still hold one: the agent's code may have printed the environment, or a user pasted a
key into a prompt. An export is made to be shared, so every string of the exported
record is checked and each key found is replaced by :data:`REDACTED`:

* the value of every environment variable whose name says it holds a secret (ends in
  ``KEY``, ``TOKEN``, ``SECRET`` or ``PASSWORD``, e.g. ``OPENAI_API_KEY``), when it is
  at least 12 characters without spaces -- plus the values of any variables named by
  the caller (the ``api_key_env`` setting);
* strings shaped like well-known API keys and tokens (OpenAI and Anthropic ``sk-...``,
  AWS access key IDs, Google ``AIza...``, GitHub, Hugging Face and Slack tokens).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from jupyter_agent.store import SessionRecord

__all__ = ["KEY_PATTERN", "REDACTED", "redact_record", "redact_text", "secrets_from_environ"]

REDACTED = "[redacted]"

KEY_PATTERN = re.compile(
    r"""
      \bsk-[A-Za-z0-9_-]{20,}               # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
    | \bAKIA[0-9A-Z]{16}\b                  # AWS access key ID
    | \bAIza[0-9A-Za-z_-]{35}               # Google API key
    | \bgh[pousr]_[A-Za-z0-9]{30,}          # GitHub tokens
    | \bgithub_pat_[A-Za-z0-9_]{22,}
    | \bhf_[A-Za-z0-9]{30,}                 # Hugging Face
    | \bxox[abprs]-[A-Za-z0-9-]{10,}        # Slack
    """,
    re.VERBOSE,
)
"""Strings shaped like API keys or access tokens."""

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
_MIN_SECRET = 12
_IDENTITY = frozenset({"schema_version", "id", "created_at", "updated_at", "parent"})


def secrets_from_environ(environ: Mapping[str, str], names: Iterable[str] = ()) -> list[str]:
    """The secret values of an environment, longest first.

    Parameters
    ----------
    environ : mapping
        Variable name -> value (e.g. :data:`os.environ`).
    names : iterable of str
        Further variables to treat as secret whatever their name (e.g. the
        ``api_key_env`` setting).

    Returns
    -------
    list of str
        Values of at least 12 characters without whitespace.
    """
    wanted = set(names)
    values = {
        value for name, value in environ.items()
        if (name in wanted or _SECRET_NAME.search(name))
        and len(value) >= _MIN_SECRET and not any(ch.isspace() for ch in value)
    }
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, secrets: Iterable[str] = ()) -> tuple[str, set[str]]:
    """``text`` with every secret and key-shaped string replaced by :data:`REDACTED`.

    Returns
    -------
    (str, set of str)
        The text, and the distinct values that were replaced.
    """
    found: set[str] = set()
    for secret in secrets:
        if secret in text:
            found.add(secret)
            text = text.replace(secret, REDACTED)
    found.update(KEY_PATTERN.findall(text))
    return KEY_PATTERN.sub(REDACTED, text), found


def redact_record(record: SessionRecord, secrets: Iterable[str] = ()) -> tuple[SessionRecord, int]:
    """A copy of ``record`` with every key in any of its strings redacted.

    The session's identity (ID, timestamps, parent) is kept as it is.

    Parameters
    ----------
    record : SessionRecord
        Not modified.
    secrets : iterable of str
        Exact values to remove (see :func:`secrets_from_environ`).

    Returns
    -------
    (SessionRecord, int)
        ``record`` itself when nothing was found, else a redacted copy; and how many
        distinct keys were replaced (wherever and however often each appeared).
    """
    known = [s for s in secrets if s]
    found: set[str] = set()

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            text, values = redact_text(value, known)
            found.update(values)
            return text
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    data = record.model_dump(mode="json")
    data.update({k: walk(v) for k, v in data.items() if k not in _IDENTITY})
    if not found:
        return record, 0
    return SessionRecord.model_validate(data), len(found)
