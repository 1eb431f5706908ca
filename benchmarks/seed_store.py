"""The seed design's store, re-implemented for comparison: one JSON file per session.

What the seed design did, and nothing more: a session is
``sessions/<id>.json`` holding ``messages`` (the working context) and ``transcript``; every
save rewrites the whole file atomically (temporary file, flush, ``fsync``, ``os.replace``);
messages and checkpoint are two separate saves; listing parses every file. Locks are left
out (they cost the same in every design).
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


class SeedStore:
    """One JSON file per session, rewritten on every save."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.sessions = Path(root) / "sessions"

    def _path(self, session_id: str) -> Path:
        return self.sessions / f"{session_id}.json"

    def _write(self, record: dict[str, Any]) -> None:
        self.sessions.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.sessions, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self._path(record["id"]))

    def create_session(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        now = datetime.now(UTC).isoformat()
        self._write({"id": session_id, "created_at": now, "updated_at": now, "summary": "",
                     "title": "", "archived": False, "messages": list(messages),
                     "transcript": list(messages), "compactions": [], "state": {}})

    def load_session(self, session_id: str) -> dict[str, Any]:
        with self._path(session_id).open(encoding="utf-8") as handle:
            record: dict[str, Any] = json.load(handle)
        return record

    def save_messages(self, session_id: str, messages: list[dict[str, Any]]) -> None:
        record = self.load_session(session_id)
        saved = record["messages"]
        if messages[: len(saved)] != saved:
            raise ValueError("the incoming context does not extend the saved one")
        record["transcript"].extend(messages[len(saved):])
        record["messages"] = list(messages)
        record["updated_at"] = datetime.now(UTC).isoformat()
        self._write(record)

    def save_state(self, session_id: str, state: dict[str, Any]) -> None:
        record = self.load_session(session_id)
        record["state"] = state
        record["updated_at"] = datetime.now(UTC).isoformat()
        self._write(record)

    def list_sessions(self) -> list[dict[str, Any]]:
        out = []
        for path in self.sessions.glob("*.json"):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            out.append({"id": record["id"], "updated_at": record["updated_at"],
                        "summary": record.get("summary", ""), "title": record.get("title", ""),
                        "archived": record.get("archived", False)})
        out.sort(key=lambda r: r["updated_at"], reverse=True)
        return out
