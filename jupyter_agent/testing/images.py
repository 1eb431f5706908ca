"""The image parts of a request, as the scripted server sees them.

Pure functions, no I/O. :func:`image_parts` finds every image a Chat Completions or
Responses request carries -- ``image_url`` parts of message contents, ``input_image``
parts of input messages and of ``function_call_output`` outputs -- and describes each as
an :class:`ImagePart`: where it is, its media type, size in bytes and pixels (decoded from
its ``data:`` URL), its ``detail`` and its estimated token cost. The server records them
on every exchange, counts their tokens in the prompt estimate, and can refuse them the
way a text-only model does (:func:`refusal`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jupyter_agent.images import decode_data_url, image_size, image_tokens
from jupyter_agent.testing.rejections import RequestRejected, error_body

__all__ = ["ImagePart", "image_parts", "image_tokens_of", "refusal"]

_UNKNOWN_TOKENS = 85
"""Tokens counted for an image whose size cannot be told (a URL, not data)."""


@dataclass(frozen=True)
class ImagePart:
    """One image of a request.

    Attributes
    ----------
    where : str
        Its place, e.g. ``"messages[5].content[2]"`` or ``"input[7].output[1]"``.
    url_chars : int
        Length of its URL (a ``data:`` URL holds the whole image, base64-encoded).
    media_type : str
        From a ``data:`` URL ("" for another URL).
    bytes : int
        Size of the decoded image (0 for another URL).
    width, height : int or None
        Pixels, when they can be told.
    detail : str
        As requested ("auto" when not given).
    tokens : int
        Estimated prompt tokens (:func:`~jupyter_agent.images.image_tokens`).
    """

    where: str
    url_chars: int
    media_type: str
    bytes: int
    width: int | None
    height: int | None
    detail: str
    tokens: int


def _describe(where: str, url: object, detail: object) -> ImagePart:
    text = url if isinstance(url, str) else ""
    decoded = decode_data_url(text)
    media_type, size, dims = "", 0, None
    if decoded is not None:
        data, media_type = decoded
        size, dims = len(data), image_size(data, media_type)
    tokens = image_tokens(*dims) if dims else _UNKNOWN_TOKENS
    return ImagePart(where, len(text), media_type, size, dims[0] if dims else None,
                     dims[1] if dims else None, str(detail or "auto"), tokens)


def _parts(content: Any, where: str) -> list[ImagePart]:
    found = []
    for j, part in enumerate(content if isinstance(content, list) else ()):
        if not isinstance(part, dict):
            continue
        if part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            detail = image.get("detail") if isinstance(image, dict) else None
            found.append(_describe(f"{where}[{j}]", url, detail))
        elif part.get("type") == "input_image":
            found.append(_describe(f"{where}[{j}]", part.get("image_url"), part.get("detail")))
    return found


def image_parts(body: Any) -> list[ImagePart]:
    """Every image a request body carries, in order (``[]`` for anything else)."""
    if not isinstance(body, dict):
        return []
    found: list[ImagePart] = []
    for i, message in enumerate(body.get("messages") or ()):
        if isinstance(message, dict):
            found += _parts(message.get("content"), f"messages[{i}].content")
    items = body.get("input")
    for i, item in enumerate(items if isinstance(items, list) else ()):
        if isinstance(item, dict):
            found += _parts(item.get("content"), f"input[{i}].content")
            found += _parts(item.get("output"), f"input[{i}].output")
    return found


def image_tokens_of(body: Any) -> int:
    """The estimated prompt tokens of a request's images."""
    return sum(part.tokens for part in image_parts(body))


def refusal(body: Any, *, responses: bool) -> RequestRejected | None:
    """The 400 a text-only model answers a request with images with (``None`` when the
    request carries none), worded like OpenAI's."""
    parts = image_parts(body)
    if not parts:
        return None
    if responses:
        message = "Invalid input: this model does not support image inputs."
    else:
        message = "Invalid content type. image_url is only supported by certain models."
    param = parts[0].where.replace("[", ".[")
    return RequestRejected(400, error_body(400, message, param=param))
