"""Offline, scripted models for tests, demos and notebooks.

``ScriptedModelServer`` speaks the Chat Completions and Responses protocols over real
HTTP on loopback and answers from a script, so the real ``openai`` client parses real
responses without a network or an API key. Run it from a shell with
``python -m jupyter_agent.testing --script FILE``. ``ScriptedModel`` answers from the
same scripts in process, implementing the agent's ``Model`` protocol, for unit tests.
Importing this package only defines classes: no sockets, files or environment are
touched.
"""

from __future__ import annotations

from jupyter_agent.testing.handler import Exchange
from jupyter_agent.testing.model import ScriptedModel
from jupyter_agent.testing.protocol import estimate_completion_tokens, estimate_prompt_tokens
from jupyter_agent.testing.script import (
    ErrorSpec,
    ScriptError,
    Step,
    StepLike,
    ToolCallSpec,
    UsageSpec,
    load_script,
    parse_step,
    parse_steps,
)
from jupyter_agent.testing.server import ScriptedModelServer

__all__ = [
    "ErrorSpec",
    "Exchange",
    "ScriptError",
    "ScriptedModel",
    "ScriptedModelServer",
    "Step",
    "StepLike",
    "ToolCallSpec",
    "UsageSpec",
    "estimate_completion_tokens",
    "estimate_prompt_tokens",
    "load_script",
    "parse_step",
    "parse_steps",
]
