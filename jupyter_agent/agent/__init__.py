"""The agent loop, composed: a model, a conversation, a config, tools.

``Agent(ChatModel(openai.OpenAI(), "gpt-4o-mini"), store=store, session_id=...)`` (or
``ResponsesModel(...)`` for the Responses API) runs
turns with ``agent.run(prompt, on_event=...)``: model calls, tool batches, save points
and checkpoints through the :class:`~jupyter_agent.store.Store` protocol, limits,
compaction and fallback summaries. The agent holds the session's lease from
construction until ``agent.close()`` (or the end of a ``with Agent(...)`` block).
Importing this package does nothing else.
"""

from __future__ import annotations

from jupyter_agent.agent.builtin_tools import BUILTIN_TOOL_NAMES, BuiltinTools
from jupyter_agent.agent.chat import ChatModel
from jupyter_agent.agent.config import AgentConfig, ApprovalPolicy
from jupyter_agent.agent.conversation import Conversation
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
from jupyter_agent.agent.model import Model, ModelReply, PartialReply, TokenUsage
from jupyter_agent.agent.responses import ResponsesModel
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
    "AgentConfig",
    "AgentEvent",
    "ApprovalPolicy",
    "BuiltinTools",
    "ChatModel",
    "Conversation",
    "EventCallback",
    "Limits",
    "MemoryContext",
    "Model",
    "ModelReply",
    "Notice",
    "PartialReply",
    "ResponsesModel",
    "TextDelta",
    "TokenUsage",
    "Tool",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolError",
    "ToolRegistry",
    "UsageUpdate",
    "configure_memory",
    "context_window_for",
    "price_call",
    "tool_from_function",
]
