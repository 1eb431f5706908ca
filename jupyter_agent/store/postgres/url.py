"""Database URLs of the team store: which one is selected, checked, and shown without secrets.

A team store is selected by a ``postgresql://`` (or ``postgres://``) URL, from the
``AgentMagics.store_url`` setting, else ``$JUPYTER_AGENT_STORE_URL``; empty means the
JSON files of the memory directory. Anything that shows a URL -- error
messages, ``repr`` of a store, ``%config AgentMagics``, session records -- shows
:func:`redact_url` of it: the credentials it holds (the password of the authority, the
``password=`` and ``sslpassword=`` parameters) never appear. Parameters that name files
(``passfile``, ``sslkey``, ``sslcert``) are shown: a path is not a secret, and what those
files hold is read by libpq alone, never shown. Nothing here imports
``psycopg``, so a URL can be checked where the driver is not installed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit

__all__ = [
    "SCHEMES",
    "STORE_URL_ENV",
    "StoreURL",
    "check_store_url",
    "redact_url",
    "resolve_store_url",
    "scrub",
    "url_secrets",
]

#: Environment variable naming the team store when the setting is empty.
STORE_URL_ENV = "JUPYTER_AGENT_STORE_URL"
#: URL schemes of a PostgreSQL store (both spellings libpq accepts).
SCHEMES = ("postgresql", "postgres")
_HIDDEN = "***"
#: Query parameters whose values are credentials.
SECRET_PARAMETERS = frozenset({"password", "sslpassword"})


def _split(url: str) -> tuple[str, str, str, str, str] | None:
    if "://" not in url:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return parts.scheme, parts.netloc, parts.path, parts.query, parts.fragment


def redact_url(url: str) -> str:
    """``url`` with its credentials (see the module docstring) replaced by ``***``.

    Parameters
    ----------
    url : str

    Returns
    -------
    str
        E.g. ``postgresql://alice:***@db.example.org:5432/agents?sslpassword=***``. A
        value that does not parse as a URL at all is shown as ``<unparsable URL>`` (it
        might hold a password in a form this function cannot find).
    """
    parts = _split(url)
    if parts is None:
        return "<unparsable URL>"
    scheme, netloc, path, query, fragment = parts
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}:{_HIDDEN}@{hostport}"
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(key in SECRET_PARAMETERS for key, _ in pairs):
            query = urlencode([(k, _HIDDEN if k in SECRET_PARAMETERS else v) for k, v in pairs],
                              safe="*/:")
    return (f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")
            + (f"#{fragment}" if fragment else ""))


def url_secrets(url: str) -> list[str]:
    """The credentials in ``url``: the authority's password and the values of
    :data:`SECRET_PARAMETERS` (empty ones left out)."""
    from urllib.parse import unquote

    parts = _split(url)
    if parts is None:
        return []
    found = []
    userinfo, at, _ = parts[1].rpartition("@")
    if at and ":" in userinfo:
        found.append(unquote(userinfo.split(":", 1)[1]))
    found += [value for key, value in parse_qsl(parts[3], keep_blank_values=True)
              if key in SECRET_PARAMETERS]
    return [secret for secret in found if secret]


def scrub(text: str, url: str) -> str:
    """``text`` with every credential of ``url`` (raw or percent-encoded) replaced by ``***``."""
    from urllib.parse import quote, quote_plus

    for secret in sorted(url_secrets(url), key=len, reverse=True):
        for form in {secret, quote(secret, safe=""), quote_plus(secret)}:
            text = text.replace(form, _HIDDEN)
    return text


class StoreURL(str):
    """A store URL whose ``repr`` leaves the password out.

    The value itself is the URL as given (the driver needs the password); only what
    displays a value -- ``repr``, so ``%config AgentMagics``, the echo of a cell, a
    dataclass's ``repr`` -- shows :func:`redact_url` of it.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(redact_url(self)) if self else "''"


def check_store_url(value: str) -> str:
    """Return ``value`` if it is ``""`` or a PostgreSQL URL, else raise ``ValueError``.

    Parameters
    ----------
    value : str
        ``""`` (the JSON files) or ``postgresql://[user[:password]@][host][:port]/dbname``
        with optional libpq query parameters (``?sslmode=require``, ...).

    Returns
    -------
    StoreURL
        ``value``, as a string whose ``repr`` hides the password.

    Raises
    ------
    ValueError
        Naming the problem; the message shows the URL without its password.
    """
    if value == "":
        return StoreURL(value)
    parts = _split(value)
    if parts is None or parts[0].lower() not in SCHEMES:
        raise ValueError(
            "store_url must be empty (the JSON files) or a PostgreSQL URL such as "
            f"postgresql://user@db.example.org/agents (got {redact_url(value)!r})"
        )
    if not parts[1] and not parts[2].strip("/") and "host=" not in parts[3]:
        raise ValueError(
            f"store_url names no server and no database (got {redact_url(value)!r}); "
            "e.g. postgresql://user@db.example.org/agents"
        )
    return StoreURL(value)


def resolve_store_url(setting: str | None = None, *,
                      environ: Mapping[str, str] | None = None) -> str:
    """The team store's URL: the setting if not empty, else ``$JUPYTER_AGENT_STORE_URL``.

    Parameters
    ----------
    setting : str, optional
        ``AgentMagics.store_url``.
    environ : mapping, optional
        Where :data:`STORE_URL_ENV` is read; :data:`os.environ` at call time by default.

    Returns
    -------
    str
        The URL, or ``""`` for the JSON files of the memory directory.

    Raises
    ------
    ValueError
        If the environment variable holds something that is not a PostgreSQL URL.
    """
    if setting:
        return StoreURL(setting)
    env = os.environ if environ is None else environ
    value = env.get(STORE_URL_ENV, "").strip()
    try:
        return check_store_url(value)
    except ValueError as err:
        raise ValueError(f"${STORE_URL_ENV}: {err}") from None
