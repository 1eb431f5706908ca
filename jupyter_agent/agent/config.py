"""What an :class:`~jupyter_agent.agent.Agent` runs with, in one small frozen object.

The front end builds it from the settings table
(:meth:`jupyter_agent.settings.Settings.agent_config`); Python users build it directly.
It can be swapped between turns (``agent.config = ...``): limits and approval always
come from the current config, never from the saved session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from jupyter_agent.agent.limits import Limits
from jupyter_agent.notebook import PRIVACY_LEVELS, Privacy

__all__ = ["APPROVALS", "VISION_MODES", "AgentConfig", "ApprovalPolicy", "Limits", "Privacy",
           "Vision"]

ApprovalPolicy = Literal["auto", "ask", "deny"]
"""Running code for the agent: ask the user each time, run, or refuse."""
APPROVALS: tuple[ApprovalPolicy, ...] = ("auto", "ask", "deny")

Vision = Literal["auto", "on", "off"]
"""Sending figures to the model as images: try and go on without them
where the endpoint refuses images, always, or never."""
VISION_MODES: tuple[Vision, ...] = ("auto", "on", "off")


@dataclass(frozen=True)
class AgentConfig:
    """How an agent runs its turns.

    Attributes
    ----------
    approve : {"ask", "auto", "deny"}
        Policy for ``run_python``: ask the user (on stdin), run, or refuse.
    stream : bool
        Stream replies (text arrives as it is generated).
    context_window : int, optional
        The model's context window in tokens; ``None``: what the endpoint reports or
        refuses with, else known for common models (``genai-prices``), else a default
        (:mod:`~jupyter_agent.agent.window`).
    compact_at : float
        Compact when the estimated context exceeds this fraction of the window (0-1].
    keep_turns : int
        Recent user turns compaction keeps verbatim when they fit.
    max_output_chars : int
        Tool results are cut to this many code points (both ends kept).
    limits : Limits
        Tool calls and spend per session, model calls per prompt.
    prices : mapping
        ``{model: (usd_per_million_input, usd_per_million_output)}``, overriding the
        bundled ``genai-prices`` data.
    system_prompt : str, optional
        Replaces the default system prompt of a *new* session (a resumed session keeps
        its saved system message).
    vision : {"auto", "on", "off"}
        Send the figures the agent's code makes to the model as images.
    max_images : int
        At most this many images in one model request: the newest figures of the
        working context (0: none).
    context_privacy : {"schema", "preview", "none"}
        What of the kernel's data the notebook and variable tools and ``@`` references
        send (see :mod:`jupyter_agent.notebook`).

    Raises
    ------
    ValueError
        For an unknown approval policy or vision mode, ``compact_at`` outside (0, 1], or
        a negative ``max_images``.
    """

    approve: ApprovalPolicy = "ask"
    stream: bool = True
    context_window: int | None = None
    compact_at: float = 0.8
    keep_turns: int = 2
    max_output_chars: int = 10_000
    limits: Limits = field(default_factory=Limits)
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    system_prompt: str | None = None
    vision: Vision = "auto"
    max_images: int = 3
    context_privacy: Privacy = "schema"

    def __post_init__(self) -> None:
        if self.approve not in APPROVALS:
            raise ValueError(f"approve must be 'auto', 'ask' or 'deny', not {self.approve!r}")
        if self.vision not in VISION_MODES:
            raise ValueError(f"vision must be 'auto', 'on' or 'off', not {self.vision!r}")
        if self.context_privacy not in PRIVACY_LEVELS:
            raise ValueError("context_privacy must be 'schema', 'preview' or 'none', not "
                             f"{self.context_privacy!r}")
        if self.max_images < 0:
            raise ValueError(f"max_images must be 0 or more, not {self.max_images!r}")
        if not 0 < self.compact_at <= 1:
            raise ValueError(f"compact_at must be in (0, 1], not {self.compact_at!r}")
