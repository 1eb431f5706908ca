"""Persistence: the memory directory, saved sessions and their leases.

``from jupyter_agent.store import SessionStore`` is the usual entry point; see
``memory.py`` for the directory layout, ``records.py`` for the file format,
``files.py`` for atomic writes and locks and ``sessions.py`` for the invariants.
Importing this package does no I/O.
"""

from __future__ import annotations

from jupyter_agent.store.base import NoteKind, Store
from jupyter_agent.store.ids import new_session_id, validate_session_id
from jupyter_agent.store.memory import MemoryStore
from jupyter_agent.store.messages import to_message_dict
from jupyter_agent.store.records import (
    SCHEMA_VERSION,
    Compaction,
    ForkOrigin,
    LeaseHolder,
    SessionInfo,
    SessionListing,
    SessionRecord,
    SessionState,
    TodoItem,
    Usage,
)
from jupyter_agent.store.sessions import SessionStore

__all__ = [
    "SCHEMA_VERSION",
    "Compaction",
    "ForkOrigin",
    "LeaseHolder",
    "MemoryStore",
    "NoteKind",
    "SessionInfo",
    "SessionListing",
    "SessionRecord",
    "SessionState",
    "SessionStore",
    "Store",
    "TodoItem",
    "Usage",
    "new_session_id",
    "to_message_dict",
    "validate_session_id",
]
