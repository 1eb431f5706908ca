"""Copying every session from one store to another (files <-> PostgreSQL, or any two).

Safe to run again: a session the target has with the same content is *skipped*, with
different content a *conflict* (never overwritten); every copy is read back and compared
(*mismatched* otherwise); a session the source cannot read is *unreadable*. The source is
read without leases (a session in use is copied as it was when read). Notes are not copied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jupyter_agent.errors import CorruptSessionError, SessionLockedError, SessionNotFoundError
from jupyter_agent.store.engine import Store
from jupyter_agent.store.records import SessionRecord


@dataclass(frozen=True)
class MigrationResult:
    """What :func:`migrate_sessions` did; each field lists session IDs in listing order."""

    copied: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    mismatched: tuple[str, ...] = ()
    unreadable: tuple[tuple[str, str], ...] = ()
    source_count: int = 0

    @property
    def verified(self) -> int:
        """Sessions now identical in both stores (copied and checked, or skipped)."""
        return len(self.copied) - len(self.mismatched) + len(self.skipped)

    @property
    def ok(self) -> bool:
        """True when every session of the source is identical in the target."""
        return self.verified == self.source_count

    def summary(self) -> str:
        """One line for people, e.g. ``copied 12, skipped 3, verified 15 of 15``."""
        parts = [f"copied {len(self.copied)}", f"skipped {len(self.skipped)}",
                 f"verified {self.verified} of {self.source_count}"]
        if self.conflicts:
            parts.append(f"{len(self.conflicts)} differ in the target and were left alone: "
                         + ", ".join(self.conflicts))
        if self.mismatched:
            parts.append("read back differently: " + ", ".join(self.mismatched))
        if self.unreadable:
            parts.append("not copied: " + "; ".join(f"{sid} ({why})"
                                                     for sid, why in self.unreadable))
        return ", ".join(parts)


def _same(a: SessionRecord, b: SessionRecord) -> bool:
    return a.model_dump(exclude={"schema_version"}) == b.model_dump(exclude={"schema_version"})


def migrate_sessions(source: Store, target: Store, *,
                     on_session: Callable[[str, str], None] | None = None) -> MigrationResult:
    """Copy every session of ``source`` (archived ones included) into ``target``;
    ``on_session(id, outcome)`` is told each outcome. On ``StoreUnavailableError`` what was
    copied stays copied: run again to go on."""
    found: dict[str, list[str]] = {"copied": [], "skipped": [], "conflict": [], "mismatched": []}
    unreadable: list[tuple[str, str]] = []
    listing = source.list_sessions(include_archived=True)
    for entry in listing:
        sid = entry.id
        try:
            record = source.load_session(sid)
            existing = target.load_session(sid) if target.exists(sid) else None
            if existing is None:
                target.create_session(record=record)
        except (CorruptSessionError, SessionNotFoundError, SessionLockedError,
                FileExistsError) as err:
            unreadable.append((sid, str(err)))
            outcome = "unreadable"
        else:
            if existing is not None:
                outcome = "skipped" if _same(existing, record) else "conflict"
            else:
                outcome = "copied" if _same(target.load_session(sid), record) else "mismatched"
                if outcome == "mismatched":
                    found["copied"].append(sid)
            found[outcome].append(sid)
        if on_session is not None:
            on_session(sid, outcome)
    return MigrationResult(copied=tuple(found["copied"]), skipped=tuple(found["skipped"]),
                           conflicts=tuple(found["conflict"]),
                           mismatched=tuple(found["mismatched"]), unreadable=tuple(unreadable),
                           source_count=len(listing))
