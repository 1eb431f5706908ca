"""Secrets never reach an export: each kind, in each format, as the reader of the file will
see it (cells and strings decoded), figure text included; ordinary analysis text stays.

The secrets are made up and built at run time, so that this file holds none literally.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest

from jupyter_agent.artefacts.export import export_record
from jupyter_agent.artefacts.redact import REDACTED, Redactor, secrets_from_environ
from jupyter_agent.store import FileStore

ALNUM = "A1b2C3d4E5f6G7h8J9k0"
SECRETS = {
    "AWS access key": "AKIA" + "IOSFODNN7EXAMPLQ",
    "AWS session key": "ASIA" + "Y34FZKBOKMUTVV7A",
    "JWT": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0."
           + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "GitHub token": "ghp_" + ALNUM + "K1m2N3o4P5q6R7s8",
    "GitHub fine-grained token": "github_pat_" + ALNUM + "_" + ALNUM,
    "GitLab token": "glpat-" + ALNUM,
    "Stripe live key": "sk_live_" + ALNUM + "XyZw",
    "OpenAI project key": "sk-proj-" + ALNUM * 2,
    "Slack token": "xoxb-" + "1234567890-" + "abcdefghij0123",
}
PASSWORD_IN_URL = "Tr0ub4dor-3"
PEM_BODY = "MIIEowIBAAKCAQEA7bq" + ALNUM * 3
PRIVATE_KEY = (f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n{ALNUM}==\n"
               "-----END RSA PRIVATE KEY-----")
HIGH_ENTROPY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
ASSIGNED = "hunter2!"
# environment: a value with a quote and a non-ASCII character (JSON escapes both in the
# model's arguments: \" and \u03a9), short values, a URL with a password, a DSN
ENVIRON = {
    "WAREHOUSE_PASSWORD": 's3cr"et-Ω-x',
    "GITHUB_PAT": "pat42",
    "DATABASE_URL": f"postgresql://analyst:{PASSWORD_IN_URL}@db.internal:5432/sales",
    "SENTRY_DSN": "https://abc123@o1.ingest.example/7",
    "SERVICE_URL": "https://api.example.com/v1",  # no credentials: not a secret
    "DEBUG_TOKEN": "1",  # a flag, not a secret
    "HOME": "/home/analyst",
}
ORDINARY = [
    "5d41402abc4b2a76b9719d911017c592",  # an md5 hash
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",  # sha256
    "123e4567-e89b-12d3-a456-426614174000",  # a UUID
    "customer_lifetime_value_usd",
    "https://api.example.com/v1",
    "revenue_by_region_2023",
]
SVG_SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0" + "P9o8N7m6L5k4J3h2"


def session_with_secrets(store: FileStore) -> str:
    """A session whose prompt, code (JSON-escaped arguments), output, reply, figure and
    saved endpoint hold every kind of secret, next to ordinary analysis text."""
    kinds = "\n".join(f"{name}: {value}" for name, value in SECRETS.items())
    code = (f"import os\nprint('''{kinds}''')\nkey = '''{PRIVATE_KEY}'''\n"
            f"pw = '{ENVIRON['WAREHOUSE_PASSWORD']}'\ntoken = \"{HIGH_ENTROPY}\"\n"
            f'password = "{ASSIGNED}"\nurl = "{ENVIRON["DATABASE_URL"]}"\n'
            f"github = '{ENVIRON['GITHUB_PAT']}'\ndsn = '{ENVIRON['SENTRY_DSN']}'\n"
            f"ordinary = {ORDINARY!r}\n")
    arguments = json.dumps({"code": code})  # ensure_ascii: \" and \u03a9 escapes
    assert '\\"et-\\u03a9-x' in arguments
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30">'
           f"<text>{SVG_SECRET}</text></svg>").encode()
    sid = store.create_session([{"role": "system", "content": "s"}])
    fid = "svgfigure"
    store.save_figure(sid, fid, svg, "image/svg+xml")
    store.save(sid, [
        {"role": "system", "content": "s"},
        {"role": "user", "content": f"connect with {ENVIRON['DATABASE_URL']} and {kinds}"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "run_python", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c1",
         "content": f"{kinds}\n{PRIVATE_KEY}\n[figure 1: SVG, 40×30 px, shown to the user]",
         "figures": [{"id": fid, "n": 1, "media_type": "image/svg+xml", "width": 40,
                      "height": 30, "bytes": len(svg), "shown": True}]},
        {"role": "assistant", "content": f"Done; {' '.join(ORDINARY)}."},
    ])
    state = store.load_session(sid).state.model_copy(
        update={"base_url": f"https://proxy-user:{PASSWORD_IN_URL}@llm.example/v1"})
    store.save(sid, state=state)
    return sid


def strings(value: Any) -> list[str]:
    """Every string of a JSON value, tool-call arguments decoded too."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            if item.startswith("{"):
                with contextlib.suppress(ValueError):
                    stack.append(json.loads(item))
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return out


def decoded(fmt: str, data: bytes) -> str:
    """What a reader of the export sees: decoded cells and strings, embedded SVG text."""
    if fmt == "json":
        return "\n".join(strings(json.loads(data)))
    if fmt == "ipynb":
        return "\n".join(strings(nbformat.reads(data.decode("utf-8"), as_version=4)))
    text = data.decode("utf-8")
    svgs = re.findall(r"data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)", text)
    return "\n".join([text, *(base64.b64decode(s).decode("utf-8") for s in svgs)])


@pytest.mark.parametrize("fmt", ["ipynb", "md", "json"])
def test_no_secret_of_any_kind_reaches_an_export(store: FileStore, tmp_path: Path,
                                                 fmt: str) -> None:
    sid = session_with_secrets(store)
    secrets = secrets_from_environ(ENVIRON, ["MY_KEY_VAR"])
    done = export_record(store.load_session(sid), fmt, tmp_path / f"s.{fmt}", secrets=secrets,
                         figures=lambda fid: store.read_figure(sid, fid))
    seen = decoded(fmt, done.path.read_bytes())
    leaked = {name: value for name, value in {
        **SECRETS, "password in a URL": PASSWORD_IN_URL, "private key": PEM_BODY,
        "high-entropy string": HIGH_ENTROPY, "password in code": ASSIGNED,
        "quoted, escaped variable": ENVIRON["WAREHOUSE_PASSWORD"],
        "short variable": ENVIRON["GITHUB_PAT"], "DSN": ENVIRON["SENTRY_DSN"],
    }.items() if value in seen}
    if fmt != "json":
        leaked.update({"SVG text": SVG_SECRET} if SVG_SECRET in seen else {})
    assert leaked == {}
    assert REDACTED in seen and done.redacted >= len(SECRETS)
    for text in ORDINARY:  # hashes, IDs, names and plain URLs are analysis, not secrets
        assert text in seen, text
    if fmt == "json":  # the saved endpoint keeps its host, loses its password
        endpoint = json.loads(done.path.read_bytes())["state"]["base_url"]
        assert endpoint == f"https://proxy-user:{REDACTED}@llm.example/v1"


def test_the_svg_figure_text_is_redacted_in_the_notebook(store: FileStore) -> None:
    from jupyter_agent.artefacts.export import render

    sid = session_with_secrets(store)
    data, _ = render(store.load_session(sid), "ipynb",
                     figures=lambda fid: store.read_figure(sid, fid))
    outputs = [o for c in nbformat.reads(data.decode(), as_version=4).cells
               for o in c.get("outputs", ()) if "image/svg+xml" in o.get("data", {})]
    (svg,) = [o["data"]["image/svg+xml"] for o in outputs]
    assert SVG_SECRET not in svg and f"<text>{REDACTED}</text>" in svg
    assert store.read_figure(sid, "svgfigure").data.count(SVG_SECRET.encode()) == 1  # kept


def test_environment_rule() -> None:
    found = secrets_from_environ(ENVIRON, ["CUSTOM"])
    assert set(found) == {ENVIRON["WAREHOUSE_PASSWORD"], ENVIRON["GITHUB_PAT"],
                          ENVIRON["DATABASE_URL"], PASSWORD_IN_URL, ENVIRON["SENTRY_DSN"]}
    assert secrets_from_environ({"CUSTOM": "abc"}, ["CUSTOM"]) == ["abc"]
    # a short secret is replaced as a whole word only
    assert Redactor(["pat42"]).text("pat42 and compat42x") == f"{REDACTED} and compat42x"
    clean = Redactor()
    assert clean.text("no keys here, sk-short") == "no keys here, sk-short" and not clean.found
