"""Session IDs: validation before an ID becomes a file name, and generation.

A session ID names the files ``sessions/<id>.json``, ``<id>.jsonl`` and ``<id>.lock``, so
it is checked against a strict pattern *before* any path is built from it, which is
what prevents path traversal. New IDs are 10 characters drawn with
:mod:`secrets` from ``[A-Za-z0-9]``, like ``z7Pq3hM4kA``.
"""

from __future__ import annotations

import re
import secrets
import string

from jupyter_agent.errors import InvalidSessionIdError

__all__ = [
    "ID_ALPHABET",
    "NEW_ID_LENGTH",
    "SESSION_ID_PATTERN",
    "new_session_id",
    "validate_session_id",
]

#: The full pattern a session ID must match (ASCII only; no ``.``, ``/`` or spaces).
SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,128}")

#: Characters of generated IDs.
ID_ALPHABET = string.ascii_letters + string.digits

#: Length of generated IDs.
NEW_ID_LENGTH = 10


def validate_session_id(session_id: object) -> str:
    """Check that a value is a usable session ID and return it.

    Parameters
    ----------
    session_id : object
        The candidate ID. Must be a ``str`` of 1-128 ASCII letters, digits, ``_``
        or ``-``.

    Returns
    -------
    str
        The same ID, unchanged.

    Raises
    ------
    InvalidSessionIdError
        (a ``ValueError``) for anything else: non-strings, the empty string, 129+
        characters, ``.``, ``/``, whitespace, non-ASCII letters, a trailing newline.
    """
    if not isinstance(session_id, str) or SESSION_ID_PATTERN.fullmatch(session_id) is None:
        raise InvalidSessionIdError(session_id)
    return session_id


def new_session_id() -> str:
    """Return a fresh random session ID.

    Returns
    -------
    str
        10 characters from ``[A-Za-z0-9]`` chosen with :func:`secrets.choice`
        (about 59.5 bits of randomness). Uniqueness against existing files is
        checked by :meth:`SessionStore.create_session`, not here.
    """
    return "".join(secrets.choice(ID_ALPHABET) for _ in range(NEW_ID_LENGTH))
