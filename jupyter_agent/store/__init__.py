"""Persistence: the memory directory, saved sessions and their leases.

``from jupyter_agent.store import SessionStore`` is the usual entry point (the JSON-file
backend of the :class:`Store` protocol in ``base.py``). ``json_store.py`` describes the
layout of a memory directory, ``journal.py`` the files of a session, ``records.py`` the
record and its one-file form, ``files.py`` how every file is opened and written,
``leases.py`` the session locks. Importing this package does no I/O.
"""

from __future__ import annotations

from jupyter_agent.store.base import NoteKind, Store
from jupyter_agent.store.figures import FigureData
from jupyter_agent.store.ids import new_session_id, validate_session_id
from jupyter_agent.store.json_store import SessionStore
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
    dump_record,
    parse_record,
)

__all__ = [
    "SCHEMA_VERSION",
    "Compaction",
    "FigureData",
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
    "dump_record",
    "new_session_id",
    "parse_record",
    "to_message_dict",
    "validate_session_id",
]
