"""Figures as images for the model: what each request carries.

The working context keeps figure references on tool messages, never image bytes.
:class:`RequestView` sends the messages without them plus, with vision on, the newest
``max_images`` figures (PNG, JPEG), downscaled, as ``data:`` URLs: for Chat Completions
a user message after the batch's results, for the Responses API inside the tool result.
The view is incremental and returns the same message objects while nothing changes.
:func:`respond` applies the ``vision`` setting: "auto" resends a refused request
without images and remembers for the session that the endpoint takes none.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from jupyter_agent.agent.adapters import Model, ModelReply, PartialReply, TextCallback
from jupyter_agent.agent.config import AgentConfig, checked_usage
from jupyter_agent.agent.events import EventCallback, Notice
from jupyter_agent.agent.working_context import estimate_tokens, shaped
from jupyter_agent.errors import JupyterAgentError, ModelError
from jupyter_agent.images import RASTER_TYPES, data_url, downscale, image_tokens
from jupyter_agent.store import FigureData, SessionState
from jupyter_agent.store.messages import figure_refs

IMAGES_CAPTION = "[jupyter-agent] The figures made by the code above:"
_ENCODED_KEPT = 32  # figures kept encoded between requests

Picked = tuple[dict[str, Any], str]  # a figure reference and its data: URL


@dataclass
class RequestView:
    """What a request carries, from the working context (see the module docstring)."""

    read_figure: Callable[[str], FigureData]
    _source: list[dict[str, Any]] | None = None
    _last: dict[str, Any] | None = None
    _plain: list[dict[str, Any]] = field(default_factory=list)
    _with_figures: list[int] = field(default_factory=list)  # tool messages with references
    _parts: dict[Any, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._image = functools.lru_cache(maxsize=_ENCODED_KEPT)(self._encode)

    def plain(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` without their ``figures`` keys (a list this view owns: do not
        change it). Only messages added since the last call are looked at."""
        seen = len(self._plain)
        if not (messages is self._source and len(messages) >= seen
                and (seen == 0 or messages[seen - 1] is self._last)):
            self._source = messages if isinstance(messages, list) else None
            self._plain, self._with_figures, self._parts = [], [], {}
            seen = 0
        for index in range(seen, len(messages)):
            message = messages[index]
            if "figures" in message:
                if message.get("role") == "tool" and message["figures"]:
                    self._with_figures.append(index)
                message = {k: v for k, v in message.items() if k != "figures"}
            self._plain.append(message)
        self._last = messages[-1] if len(messages) else None
        return self._plain

    def _encode(self, figure_id: str) -> tuple[str, int] | None:
        """A figure as a ``data:`` URL and its tokens (None: it cannot be read or sent)."""
        with contextlib.suppress(JupyterAgentError, OSError, ValueError):
            found = self.read_figure(figure_id)
            if found.media_type in RASTER_TYPES:
                data, (width, height) = downscale(found.data, found.media_type)
                return data_url(data, found.media_type), image_tokens(width, height)
        return None

    def with_images(self, max_images: int, api: str) -> tuple[list[dict[str, Any]], int]:
        """The last :meth:`plain` list with the newest ``max_images`` figures that can be
        sent as images, and their estimated tokens."""
        by_message: dict[int, list[Picked]] = {}
        tokens = count = 0
        source = self._source or []
        for index in reversed(self._with_figures):
            for ref in reversed(list(figure_refs(source[index:index + 1]))):
                if count >= max_images:
                    break
                if ref.get("media_type") not in RASTER_TYPES:
                    continue
                image = self._image(ref["id"])
                if image is not None:
                    by_message.setdefault(index, []).insert(0, (ref, image[0]))
                    tokens, count = tokens + image[1], count + 1
        if not by_message:
            return self._plain, 0
        out = list(self._plain)
        used: dict[Any, dict[str, Any]] = {}  # what this request uses; the rest is let go
        # each made message stays the same object while nothing changes
        if api == "responses":  # inside the tool result
            for index, figures in by_message.items():
                message = self._plain[index]
                key = (id(message), *(r["id"] for r, _ in figures))
                out[index] = used[key] = self._parts.get(key) or {**message, "content": [
                    {"type": "text", "text": str(message.get("content") or "")},
                    *(_image_part(url) for _, url in figures)]}
        else:  # a user message after the batch's results
            batches: dict[int, list[Picked]] = {}
            for index in sorted(by_message):
                end = index
                while end + 1 < len(out) and out[end + 1].get("role") == "tool":
                    end += 1
                batches.setdefault(end, []).extend(by_message[index])
            for end in sorted(batches, reverse=True):
                key = tuple(r["id"] for r, _ in batches[end])
                used[key] = self._parts.get(key) or {"role": "user", "content": [
                    {"type": "text", "text": IMAGES_CAPTION},
                    *(part for ref, url in batches[end] for part in (
                        {"type": "text", "text": f"figure {ref.get('n', '?')}:"},
                        _image_part(url)))]}
                out.insert(end + 1, used[key])
        self._parts = used
        return out, tokens


def _image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url, "detail": "auto"}}


def _may_be_images(err: ModelError) -> bool:
    if err.context_window is not None:
        return False
    text, status = str(err).lower(), err.status_code
    return (any(word in text for word in ("image", "vision", "multimodal", "multi-modal"))
            or (status is not None and 400 <= status < 500
                and status not in (401, 403, 404, 408, 409, 429)))


def respond(view: RequestView, model: Model, messages: Sequence[dict[str, Any]],
            tools: Sequence[dict[str, Any]], config: AgentConfig, state: SessionState,
            emit: EventCallback, *, partial: PartialReply, on_text: TextCallback | None = None,
            system: str | None = None, note: tuple[dict[str, Any] | None, str] | None = None
            ) -> ModelReply:
    """Send one request to ``model`` through ``view``, with the newest figures as images
    when they may go; ``system`` replaces the system message's text, ``note`` is a
    ``(message, text)`` whose text is sent after that message."""
    plain = shaped(view.plain(messages), system, note)
    mode, name = config.vision, model.name
    key = f"{name} at {model.base_url}" if model.base_url else name
    request, tokens = plain, 0
    if config.max_images > 0 and (
            mode == "on" or (mode == "auto" and state.images_refused != key)):
        request, tokens = view.with_images(config.max_images, model.api)
        request = shaped(request, system, note) if tokens else plain
    try:
        reply = model.respond(request, tools, stream=config.stream, partial=partial,
                              on_text=on_text)
    except ModelError as err:
        if not tokens or partial.received or not _may_be_images(err):
            raise
        if mode == "on":
            raise ModelError(f"{err} (the request carried images of figures: if this "
                             "model cannot read images, use %agent_resume --vision off "
                             "or --vision auto)", err.status_code, err.code) from err
        reply = model.respond(plain, tools, stream=config.stream, partial=partial,
                              on_text=on_text)
        state.images_refused, tokens = key, 0
        status = f"{err.status_code}: " if err.status_code else ""
        emit(Notice(f"the model endpoint refused the images of figures ({status}"
                    f"{clip_reason(err.detail or str(err))}), so {name} is told "
                    "about figures in text only for the rest of this session; "
                    "--vision on (always send images) or --vision off (never) with "
                    "%agent_new or %agent_resume changes this"))
    if reply.usage is not None or not tokens:
        return reply
    return replace(reply, usage=checked_usage(  # the images' estimate, not the server's
        None, lambda: estimate_tokens(plain) + tokens, reply.text, reply.tool_calls))


_PAIRS = {")": "(", "]": "[", "}": "{"}


def clip_reason(text: str, limit: int = 100) -> str:
    """``text`` on one line, at most about ``limit`` characters, cut at a word boundary."""
    text = cut = " ".join(text.split())
    if len(text) > limit:
        cut = text[: limit + 1]
        cut = cut[: cut.rfind(" ")] if " " in cut else cut[:limit]
    kept: list[str] = []
    opened: list[int] = []  # where each bracket still open is
    for char in cut:
        if char in "([{":
            opened.append(len(kept))
        elif char in _PAIRS:
            if not opened or kept[opened[-1]] != _PAIRS[char]:
                continue
            opened.pop()
        kept.append(char)
    shortened = cut != text
    if opened:
        kept, shortened = kept[: opened[0]], True
    clipped = "".join(kept).rstrip(" ,;:-")
    return clipped.rstrip(".") + "…" if shortened else clipped
