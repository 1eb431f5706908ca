"""Keeping secrets out of exports: each secret found is replaced by :data:`REDACTED`.

A session holds no API key, but code may have printed the environment or a user pasted
a token. The scan runs on *decoded* text (JSON tool arguments are decoded first, so an
escaped secret is found as the exported cell shows it) and on the text of SVG figures.
Secrets are: the values of environment variables named as secrets (``*KEY``, ``*TOKEN``,
``*SECRET``, ``*PASSWORD``, ``*PASSWD``, ``*PAT``, ``*DSN``, ``*CREDENTIALS``, a ``*_URL``
or ``*_URI`` carrying a password, and the names the caller adds), flag values excepted,
values under 12 characters only as whole words; what detect-secrets' regular-expression
plugins find (nothing is sent anywhere), including quoted base64-like strings over 4.5
bits of entropy per character; and ``sk-``, ``AIza``, ``github_pat_`` and ``hf_`` keys.
Hexadecimal strings are not judged by entropy: analyses are full of hashes and IDs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, cast

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

from jupyter_agent.store import FigureData, SessionRecord
from jupyter_agent.store.messages import encode_json

REDACTED = "[redacted]"


class _ModelKeyDetector(RegexBasedDetector):
    # key families detect-secrets does not cover (its OpenAI rule knows only T3BlbkFJ keys)

    secret_type = "Model or cloud API key"
    denylist = (
        re.compile(r"\bsk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
        re.compile(r"\bAIza[0-9A-Za-z_-]{35}"),
        re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
        re.compile(r"\bhf_[A-Za-z0-9]{30,}"),
    )


class _PrivateKeyBlockDetector(RegexBasedDetector):
    # a whole PEM private key (PrivateKeyDetector reports its first line only); a block
    # cut short (a clipped output) is redacted to the end of the text

    secret_type = "Private key block"
    denylist = (re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
                           r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"),)


#: detect-secrets' plugins but those judging entropy (base64 runs apart, hexadecimal not at
#: all) and the one finding public IP addresses (no secrets)
_LIBRARY: Mapping[str, type[BasePlugin]] = get_mapping_from_secret_type_to_class()
_PLUGINS: list[type[BasePlugin]] = [_PrivateKeyBlockDetector, _ModelKeyDetector, *(
    plugin for plugin in _LIBRARY.values()
    if plugin.__name__ not in ("Base64HighEntropyString", "HexHighEntropyString",
                               "IPPublicDetector"))]
_ENTROPY_LIMIT = 4.5
# Words (any case) each of a plugin's patterns holds: text without them skips the plugin,
# as most text of an analysis does the slow keyword-led detectors.
_KEYWORDS = ("key", "pw", "pass", "token", "secret", "contrase")
_NEEDS: dict[str, tuple[str, ...]] = {
    "KeywordDetector": _KEYWORDS, "CloudantDetector": _KEYWORDS,
    "IbmCloudIamDetector": _KEYWORDS, "IbmCosHmacDetector": ("secret",),
    "SoftlayerDetector": _KEYWORDS, "MailchimpDetector": ("-us",),
    "_ModelKeyDetector": ("sk-", "aiza", "github_pat_", "hf_"),
}

_SECRET_NAME = re.compile(r"(?:^|_)(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PAT|DSN|CREDENTIALS?)$",
                          re.IGNORECASE)
_URL_NAME = re.compile(r"(?:^|_)UR[LI]$", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"://[^/\s:@]*:([^/\s@]+)@")
_FLAGS = frozenset({"", "0", "1", "true", "false", "yes", "no", "on", "off", "none", "null"})
_WHOLE_WORD = 12  # shorter secrets are replaced only as whole words
_SHORTEST = 4  # what a plugin finds must be this long (`secret = "x"` is no secret)
_IDENTITY = frozenset({"schema_version", "id", "created_at", "updated_at", "parent"})


def secrets_from_environ(environ: Mapping[str, str], names: Iterable[str] = ()) -> list[str]:
    """The secret values of ``environ``, longest first: those of secret-named variables and
    of ``names`` (flag values such as ``1`` or ``true`` left out), and of a ``*_URL`` or
    ``*_URI`` with a password, the URL and the password."""
    wanted = set(names)
    values: set[str] = set()
    for name, value in environ.items():
        if name in wanted or _SECRET_NAME.search(name):
            values.add(value.strip())
        elif _URL_NAME.search(name):
            found = _URL_PASSWORD.search(value)
            if found:
                values.update((value.strip(), found.group(1)))
    return sorted((v for v in values if v.lower() not in _FLAGS), key=len, reverse=True)


class Redactor:
    """Replaces secrets, ``secrets`` being exact values besides those found by shape;
    ``found`` holds the distinct values replaced so far."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._exact = sorted({s for s in secrets if s}, key=len, reverse=True)
        # (plugin, the words it needs, its patterns when it only runs them: read here)
        self._plugins: list[tuple[BasePlugin, tuple[str, ...] | None, Any]] = []
        for kind in _PLUGINS:
            plugin = kind()
            plain = issubclass(kind, RegexBasedDetector) \
                and kind.analyze_string is RegexBasedDetector.analyze_string
            self._plugins.append((plugin, _NEEDS.get(kind.__name__),
                                  cast(RegexBasedDetector, plugin).denylist if plain else None))
        self._entropy = Base64HighEntropyString(limit=_ENTROPY_LIMIT)
        self.found: set[str] = set()
        self._clean: dict[str, str] = {}  # a text seen again (the working context) is not rescanned

    def text(self, text: str) -> str:
        if text not in self._clean:
            self._clean[text] = self._scan(text)
        return self._clean[text]

    def _scan(self, text: str) -> str:
        values = {v for v in self._exact if v in text}
        lowered = text.lower()
        for plugin, needs, denylist in self._plugins:
            if needs is not None and not any(word in lowered for word in needs):
                continue
            if denylist is None:
                values.update(v for v in plugin.analyze_string(text) if len(v) >= _SHORTEST)
                continue
            # detect-secrets yields a pattern's first group when it has one: the secret
            # after its context (a URL's password), or only the prefix of a token
            # ("ghp" of "ghp_..."); a group where the match starts is such a prefix
            for regex in denylist:
                for match in regex.finditer(text):
                    group = 1 if regex.groups and match.start(1) > match.start() else 0
                    if len(match.group(group)) >= _SHORTEST:
                        values.add(match.group(group))
        values.update(v for v in self._entropy.analyze_string(text)
                      if self._entropy.calculate_shannon_entropy(v) > _ENTROPY_LIMIT)
        for value in sorted(values, key=len, reverse=True):
            if len(value) >= _WHOLE_WORD:
                replaced = text.replace(value, REDACTED)
            else:
                replaced = re.sub(rf"(?<![\w-]){re.escape(value)}(?![\w-])", REDACTED, text)
            if replaced != text:
                self.found.add(value)
                text = replaced
        return text

    def arguments(self, raw: str) -> str:
        """A tool call's JSON arguments with the secrets of their *decoded* strings
        replaced (re-encoded only when something was found; else scanned as text)."""
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            return self.text(raw)
        clean = self.value(value)
        return raw if clean == value else encode_json(clean).decode("utf-8")

    def value(self, value: Any) -> Any:
        """A copy of a JSON value with the secrets of every string replaced (tool calls'
        ``arguments`` decoded first); recursion-free, so any depth that loads works."""
        root: list[Any] = [value]
        stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
        while stack:
            parent, key, item = stack.pop()
            if isinstance(item, str):
                parent[key] = self.arguments(item) if key == "arguments" else self.text(item)
            elif isinstance(item, list | dict):
                copy = parent[key] = type(item)(item)
                pairs = copy.items() if isinstance(copy, dict) else enumerate(copy)
                stack.extend((copy, k, v) for k, v in pairs)
        return root[0]

    def figure(self, figure: FigureData) -> FigureData:
        """An SVG figure with the secrets of its text replaced; other figures as they are."""
        if figure.media_type != "image/svg+xml":
            return figure
        text = figure.data.decode("utf-8", "replace")
        clean = self.text(text)
        return figure if clean == text else FigureData(clean.encode("utf-8"), figure.media_type)


def redact_record(record: SessionRecord, redactor: Redactor) -> SessionRecord:
    """``record`` with the secrets of all its strings replaced (``redactor.found`` grows), or
    itself if none; its identity (ID, timestamps, parent) is kept, the endpoint scanned."""
    dumped = record.model_dump(mode="json")
    clean = {name: value if name in _IDENTITY else redactor.value(value)
             for name, value in dumped.items()}
    return record if clean == dumped else type(record).model_validate(clean)
