"""The agent loop on the ``openai`` Chat Completions client.

``Agent(client, model, store=..., session_id=...)`` runs turns with
``agent.run(prompt, on_event=...)``: model calls, tool batches, save points and
checkpoints in a :class:`~jupyter_agent.store.SessionStore`, limits, compaction and
fallback summaries (issue 3). With a store, the agent holds the session's lease
from construction until ``agent.close()`` (or the end of a ``with Agent(...)``
block). Importing this package does nothing else.
"""

from __future__ import annotations

from jupyter_agent.agent.builtin_tools import BUILTIN_TOOL_NAMES, ApprovalPolicy, BuiltinTools
from jupyter_agent.agent.client import make_client
from jupyter_agent.agent.events import (
    AgentEvent,
    EventCallback,
    Notice,
    TextDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageUpdate,
)
from jupyter_agent.agent.limits import Limits
from jupyter_agent.agent.loop import Agent
from jupyter_agent.agent.tools import (
    MemoryContext,
    Tool,
    ToolError,
    ToolRegistry,
    configure_memory,
    tool_from_function,
)
from jupyter_agent.agent.usage import context_window_for, price_call

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "Agent",
    "AgentEvent",
    "ApprovalPolicy",
    "BuiltinTools",
    "EventCallback",
    "Limits",
    "MemoryContext",
    "Notice",
    "TextDelta",
    "Tool",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolError",
    "ToolRegistry",
    "UsageUpdate",
    "configure_memory",
    "context_window_for",
    "make_client",
    "price_call",
    "tool_from_function",
]
