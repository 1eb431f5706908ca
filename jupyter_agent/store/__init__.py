"""Persistence: saved sessions, their leases and the notes of the memory directory.

``FileStore`` keeps sessions as JSON files (``file_store.py`` describes the layout);
``store.postgres.PostgresStore`` in a team's database. Both run on the session engine
(``engine.py``) and satisfy its :class:`Store`. Importing does no I/O.
"""

from __future__ import annotations

from jupyter_agent.store.engine import Store as Store
from jupyter_agent.store.engine import ensure_summary as ensure_summary
from jupyter_agent.store.engine import holding as holding
from jupyter_agent.store.file_store import FileStore as FileStore
from jupyter_agent.store.messages import to_message_dict as to_message_dict
from jupyter_agent.store.records import SCHEMA_VERSION as SCHEMA_VERSION
from jupyter_agent.store.records import Compaction as Compaction
from jupyter_agent.store.records import FigureData as FigureData
from jupyter_agent.store.records import ForkOrigin as ForkOrigin
from jupyter_agent.store.records import LeaseHolder as LeaseHolder
from jupyter_agent.store.records import SessionListing as SessionListing
from jupyter_agent.store.records import SessionRecord as SessionRecord
from jupyter_agent.store.records import SessionState as SessionState
from jupyter_agent.store.records import TodoItem as TodoItem
from jupyter_agent.store.records import Usage as Usage
from jupyter_agent.store.records import dump_record as dump_record
from jupyter_agent.store.records import new_session_id as new_session_id
from jupyter_agent.store.records import parse_record as parse_record
from jupyter_agent.store.records import validate_session_id as validate_session_id
