"""Copying every session from one store to another (JSON files <-> PostgreSQL, or any two).

:func:`migrate_sessions` works on the store protocol only (``list_sessions``,
``load_session``, ``exists``, ``import_session``), so it copies between any two
backends, and it is safe to run again:

* a session the target already has with the same content is *skipped* (running twice
  copies nothing twice);
* a session the target has with *different* content is a *conflict*: it is left as it
  is in both stores and reported, never overwritten;
* every copied session is read back from the target and compared with the source
  record, field by field (working context, transcript, compactions, checkpoint,
  summary, title, archived flag, parent, timestamps): a difference is reported as
  *mismatched*;
* a session the source cannot read is reported as *unreadable* with the reason (the
  JSON store's listing already leaves out files it cannot parse).

Sessions are copied whole (``import_session``: one write in the target, under the
target's lease). The source is only read, without leases, so a session in use can be
copied -- as it was when read; running the migration again later reports it as a
conflict if it changed since. Notes (``project.md``, ``user.md``) are files in the
memory directory for both backends and are not copied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from jupyter_agent.errors import CorruptSessionError, SessionLockedError, SessionNotFoundError
from jupyter_agent.store.base import Store
from jupyter_agent.store.records import SessionRecord

__all__ = ["MigrationResult", "migrate_sessions"]


@dataclass(frozen=True)
class MigrationResult:
    """What :func:`migrate_sessions` did; each field lists session IDs in listing order.

    Attributes
    ----------
    copied : tuple of str
        Copied into the target by this run (and verified there, unless also in
        ``mismatched``).
    skipped : tuple of str
        Already in the target with the same content.
    conflicts : tuple of str
        In the target with different content; left alone in both stores.
    mismatched : tuple of str
        Copied, but what the target returns differs from the source record.
    unreadable : tuple of (str, str)
        Session ID and reason, for sessions the source could not read, or the target
        could not accept (e.g. its lease was held).
    source_count : int
        Sessions the source listed (archived included).
    """

    copied: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    mismatched: tuple[str, ...] = ()
    unreadable: tuple[tuple[str, str], ...] = field(default=())
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
    """Copy every session of ``source`` (archived ones included) into ``target``.

    Parameters
    ----------
    source, target : Store
        Any two stores, e.g. a :class:`~jupyter_agent.store.SessionStore` and a
        :class:`~jupyter_agent.store.postgres.PostgresStore`.
    on_session : callable, optional
        Called as ``on_session(session_id, outcome)`` after each session, with outcome
        ``"copied"``, ``"skipped"``, ``"conflict"``, ``"mismatched"`` or ``"unreadable"``
        (for progress output).

    Returns
    -------
    MigrationResult
        Counts and session IDs of each outcome; ``result.ok`` tells whether the target
        now holds every session of the source, identical.

    Raises
    ------
    StoreUnavailableError
        A database store cannot be reached (what was copied so far stays copied; run
        again to go on).
    OSError
        The JSON files cannot be read or written.
    """
    copied: list[str] = []
    skipped: list[str] = []
    conflicts: list[str] = []
    mismatched: list[str] = []
    unreadable: list[tuple[str, str]] = []
    listing = source.list_sessions(include_archived=True)

    def note(session_id: str, outcome: str) -> None:
        if on_session is not None:
            on_session(session_id, outcome)

    for entry in listing:
        sid = entry.id
        try:
            record = source.load_session(sid)
        except (CorruptSessionError, SessionNotFoundError) as err:
            unreadable.append((sid, str(err)))
            note(sid, "unreadable")
            continue
        try:
            if target.exists(sid):
                existing = target.load_session(sid)
                same = _same(existing, record)
                (skipped if same else conflicts).append(sid)
                note(sid, "skipped" if same else "conflict")
                continue
            target.create_session(record=record)
        except (CorruptSessionError, SessionLockedError, FileExistsError) as err:
            unreadable.append((sid, str(err)))
            note(sid, "unreadable")
            continue
        copied.append(sid)
        if _same(target.load_session(sid), record):
            note(sid, "copied")
        else:
            mismatched.append(sid)
            note(sid, "mismatched")
    return MigrationResult(copied=tuple(copied), skipped=tuple(skipped),
                           conflicts=tuple(conflicts), mismatched=tuple(mismatched),
                           unreadable=tuple(unreadable), source_count=len(listing))
