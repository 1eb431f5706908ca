"""Figures as images for the model: what each request carries.

The working context keeps figure references on tool messages, never image bytes.
:class:`RequestView` sends the messages without them plus, with vision on, the newest
``max_images`` figures (PNG, JPEG), downscaled, as ``data:`` URLs: for Chat Completions
a user message after the batch's results, for the Responses API inside the tool result.
The view is incremental and returns the same message objects while nothing changes.
:class:`VisionModel` applies the ``vision`` setting: "auto" resends a refused request
without images and remembers for the session that the endpoint takes none.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from jupyter_agent.agent.adapters import Model, ModelReply, PartialReply, TextCallback
from jupyter_agent.agent.config import AgentConfig, TokenUsage
from jupyter_agent.agent.events import EventCallback, Notice
from jupyter_agent.agent.working_context import (
    CHARS_PER_TOKEN,
    estimate_tokens,
    message_chars,
    request_index,
)
from jupyter_agent.errors import JupyterAgentError, ModelError
from jupyter_agent.images import RASTER_TYPES, data_url, downscale, image_tokens
from jupyter_agent.store import FigureData, SessionState

IMAGES_CAPTION = "[jupyter-agent] The figures made by the code above:"

_ENCODED_KEPT = 32

ReadFigure = Callable[[str], FigureData]


def refused_key(model: Model) -> str:
    """How a session remembers which model and endpoint refused images."""
    return f"{model.name} at {model.base_url}" if model.base_url else model.name


class RequestView:
    """What a request carries, from the working context (see the module docstring)."""

    def __init__(self, read_figure: ReadFigure) -> None:
        self.read_figure = read_figure
        self._source: list[dict[str, Any]] | None = None
        self._last: dict[str, Any] | None = None
        self._plain: list[dict[str, Any]] = []
        self._with_figures: list[int] = []  # positions of tool messages with references
        self._encoded: OrderedDict[str, tuple[str, int] | None] = OrderedDict()
        self._parts: dict[Any, dict[str, Any]] = {}

    # ---- the messages without references
    def plain(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` without their ``figures`` keys (a list this view owns: do not
        change it). Only messages added since the last call are looked at."""
        seen = len(self._plain)
        same = (messages is self._source and len(messages) >= seen
                and (seen == 0 or messages[seen - 1] is self._last))
        if not same:
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

    # ---- images
    def _image(self, ref: dict[str, Any]) -> tuple[str, int] | None:
        figure_id = str(ref["id"])
        if figure_id in self._encoded:
            self._encoded.move_to_end(figure_id)
            return self._encoded[figure_id]
        encoded: tuple[str, int] | None = None
        try:
            found = self.read_figure(figure_id)
            if found.media_type in RASTER_TYPES:
                data, (width, height) = downscale(found.data, found.media_type)
                encoded = (data_url(data, found.media_type), image_tokens(width, height))
        except (JupyterAgentError, OSError, ValueError):
            encoded = None  # a figure that cannot be read is named in text only
        self._encoded[figure_id] = encoded
        while len(self._encoded) > _ENCODED_KEPT:
            self._encoded.popitem(last=False)
        return encoded

    def chosen(self, max_images: int) -> list[tuple[int, dict[str, Any], tuple[str, int]]]:
        """The newest figures that can be sent: ``(position, reference, (url, tokens))``,
        at most ``max_images``, oldest first."""
        picked: list[tuple[int, dict[str, Any], tuple[str, int]]] = []
        source = self._source or []
        for index in reversed(self._with_figures):
            if len(picked) >= max_images:
                break
            refs = source[index].get("figures") if index < len(source) else None
            for ref in reversed(refs if isinstance(refs, list) else []):
                if len(picked) >= max_images:
                    break
                if not isinstance(ref, dict) or ref.get("media_type") not in RASTER_TYPES \
                        or not isinstance(ref.get("id"), str):
                    continue
                image = self._image(ref)
                if image is not None:
                    picked.append((index, ref, image))
        return picked[::-1]

    def with_images(self, max_images: int, api: str) -> tuple[list[dict[str, Any]], int]:
        """The last :meth:`plain` list with the newest figures as images."""
        picked = self.chosen(max_images) if max_images > 0 else []
        if not picked:
            return self._plain, 0
        tokens = sum(image[1] for _, _, image in picked)
        out = list(self._plain)
        by_message: dict[int, list[tuple[dict[str, Any], tuple[str, int]]]] = {}
        for index, ref, image in picked:
            by_message.setdefault(index, []).append((ref, image))
        used: dict[Any, dict[str, Any]] = {}  # what this request uses; the rest is let go
        if api == "responses":
            for index, figures in by_message.items():
                out[index] = self._tool_with_images(self._plain[index], figures, used)
        else:
            batches: dict[int, list[tuple[dict[str, Any], tuple[str, int]]]] = {}
            for index, figures in by_message.items():
                end = index
                while end + 1 < len(out) and out[end + 1].get("role") == "tool":
                    end += 1
                batches.setdefault(end, []).extend(figures)
            for end in sorted(batches, reverse=True):
                out.insert(end + 1, self._images_message(batches[end], used))
        self._parts = used
        return out, tokens

    def _tool_with_images(self, message: dict[str, Any],
                          figures: list[tuple[dict[str, Any], tuple[str, int]]],
                          used: dict[Any, dict[str, Any]]) -> dict[str, Any]:
        key = (id(message), *(str(ref["id"]) for ref, _ in figures))
        made = self._parts.get(key)
        if made is None:
            text = message.get("content")
            parts: list[dict[str, Any]] = [{"type": "text", "text": text if isinstance(
                text, str) else str(text or "")}]
            parts += [_image_part(image[0]) for _, image in figures]
            made = {**message, "content": parts}
        used[key] = made
        return made

    def _images_message(self, figures: list[tuple[dict[str, Any], tuple[str, int]]],
                        used: dict[Any, dict[str, Any]]) -> dict[str, Any]:
        key = tuple(str(ref["id"]) for ref, _ in figures)
        made = self._parts.get(key)
        if made is None:
            parts: list[dict[str, Any]] = [{"type": "text", "text": IMAGES_CAPTION}]
            for ref, image in figures:
                parts.append({"type": "text", "text": f"figure {ref.get('n', '?')}:"})
                parts.append(_image_part(image[0]))
            made = {"role": "user", "content": parts}
        used[key] = made
        return made


def _image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url, "detail": "auto"}}


def _may_be_images(err: ModelError) -> bool:
    text = str(err).lower()
    if any(word in text for word in ("image", "vision", "multimodal", "multi-modal")):
        return err.context_window is None
    status = err.status_code
    return (status is not None and 400 <= status < 500
            and status not in (401, 403, 404, 408, 409, 429)
            and err.context_window is None)


class VisionModel:
    """A :class:`~jupyter_agent.agent.adapters.Model` that sends figures as images (see the
    module docstring); everything else is the wrapped model's."""

    def __init__(self, model: Model, view: RequestView, config: AgentConfig,
                 state: SessionState, emit: EventCallback, *, system: str | None = None,
                 note: tuple[dict[str, Any] | None, str] | None = None) -> None:
        self.model = model
        self._system = system
        self._note = note
        self.api, self.name, self.base_url = model.api, model.name, model.base_url
        self._view, self._config, self._state, self._emit = view, config, state, emit
        self.last_image_tokens = 0

    def respond(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]], *,
                stream: bool, partial: PartialReply,
                on_text: TextCallback | None = None) -> ModelReply:
        """Send one request, with the newest figures as images when they may go."""
        plain = self._noted(self._view.plain(messages))
        mode, key = self._config.vision, refused_key(self.model)
        request, tokens = plain, 0
        if mode == "on" or (mode == "auto" and self._state.images_refused != key):
            request, tokens = self._view.with_images(self._config.max_images, self.api)
            request = self._noted(request)
        self.last_image_tokens = tokens
        if self._system is not None and plain and plain[0].get("role") == "system":
            system = {**plain[0], "content": self._system}
            plain = [system, *plain[1:]]
            request = plain if not tokens else [system, *request[1:]]
        try:
            reply = self.model.respond(request, tools, stream=stream, partial=partial,
                                       on_text=on_text)
        except ModelError as err:
            if not tokens or partial.received or not _may_be_images(err):
                raise
            if mode == "on":
                raise ModelError(f"{err} (the request carried images of figures: if this "
                                 "model cannot read images, use %agent_resume --vision off "
                                 "or --vision auto)", err.status_code, err.code) from err
            reply = self.model.respond(plain, tools, stream=stream, partial=partial,
                                       on_text=on_text)
            self._refused(err, key)
            tokens = self.last_image_tokens = 0
        return _with_usage(reply, plain, tokens)

    def _noted(self, request: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self._note is None:
            return request
        index = request_index(request, self._note[0])
        if index is None or not isinstance(request[index].get("content"), str):
            return request
        noted = list(request)
        noted[index] = {**request[index],
                        "content": f"{request[index]['content']}\n\n{self._note[1]}"}
        return noted

    def _refused(self, err: ModelError, key: str) -> None:
        self._state.images_refused = key
        status = f"{err.status_code}: " if err.status_code else ""
        reason = clip_reason(err.detail or str(err))
        self._emit(Notice(f"the model endpoint refused the images of figures ({status}"
                          f"{reason}), so {self.name} is told about figures in text only "
                          "for the rest of this session; --vision on (always send images) "
                          "or --vision off (never) with %agent_new or %agent_resume "
                          "changes this"))


_PAIRS = {")": "(", "]": "[", "}": "{"}


def clip_reason(text: str, limit: int = 100) -> str:
    """``text`` on one line, at most about ``limit`` characters, cut at a word boundary."""
    text = " ".join(text.split())
    cut = text
    if len(text) > limit:
        cut = text[: limit + 1]
        cut = cut[: cut.rfind(" ")] if " " in cut else cut[:limit]
    kept: list[str] = []
    opened: list[int] = []
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


def _with_usage(reply: ModelReply, plain: Sequence[dict[str, Any]], image_tokens: int
                ) -> ModelReply:
    if reply.usage is not None or not image_tokens:
        return reply
    completion = message_chars({"content": reply.text, "tool_calls": reply.tool_calls})
    return replace(reply, usage=TokenUsage(estimate_tokens(plain) + image_tokens,
                                           completion // CHARS_PER_TOKEN))
