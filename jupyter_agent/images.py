"""Images of figures, pure functions over bytes. A figure is PNG, JPEG or SVG; only PNG and
JPEG can be sent to a model as images (an SVG figure is named in text).
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import re
import struct
from collections.abc import Mapping

MEDIA_TYPES: Mapping[str, str] = {"image/png": "png", "image/jpeg": "jpg", "image/svg+xml": "svg"}
FORMAT_NAMES: Mapping[str, str] = {"image/png": "PNG", "image/jpeg": "JPEG", "image/svg+xml": "SVG"}
RASTER_TYPES = ("image/png", "image/jpeg")
MAX_IMAGE_SIDE = 1024  # pixels, of an image sent to a model
# larger raster images are neither kept nor decoded (a tiny PNG can claim 20000x20000 px)
MAX_IMAGE_PIXELS = 40_000_000

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_SVG_LENGTH = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(px|pt)?\s*$")


def sniff_media_type(data: bytes) -> str | None:
    """PNG, JPEG, SVG or ``None``, by the bytes."""
    if data.startswith(_PNG_MAGIC):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    head = data[:1024].lstrip().lower()
    if head.startswith((b"<?xml", b"<svg", b"<!--", b"<!doctype svg")) and b"<svg" in data[:4096]:
        return "image/svg+xml"
    return None


def image_size(data: bytes, media_type: str) -> tuple[int, int] | None:
    """Width and height in pixels, or ``None`` when they cannot be told (an SVG's from
    its ``width``/``height``, ``pt`` at 96 dpi, or ``viewBox``)."""
    if media_type == "image/png":
        if len(data) >= 24 and data.startswith(_PNG_MAGIC) and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            return int(width), int(height)
        return None
    if media_type != "image/svg+xml":
        try:
            # Pillow is imported when first used here and below: ~34 ms (measured)
            from PIL import Image

            with Image.open(io.BytesIO(data)) as image:
                return int(image.size[0]), int(image.size[1])
        except Exception:  # not an image Pillow reads (or a bomb it refuses): size unknown
            return None
    root = re.search(r"<svg\b[^>]*>", data[:8192].decode("utf-8", "replace"), re.S)
    if root is None:
        return None
    attrs = dict(re.findall(r'([\w:-]+)\s*=\s*["\']([^"\']*)["\']', root.group(0)))
    found = [_SVG_LENGTH.match(attrs.get(key, "")) for key in ("width", "height")]
    sizes = [round(float(m.group(1)) * (4 / 3 if m.group(2) == "pt" else 1)) for m in found if m]
    if len(sizes) == 2:
        return sizes[0], sizes[1]
    box = attrs.get("viewBox", "").replace(",", " ").split()
    try:
        return round(float(box[2])), round(float(box[3]))
    except (IndexError, ValueError):
        return None


def pixel_problem(data: bytes, media_type: str) -> str | None:
    """Why a raster image is too large to decode, or ``None``; only headers are read."""
    if media_type not in RASTER_TYPES:
        return None
    size = image_size(data, media_type)
    if size is not None and size[0] * size[1] > MAX_IMAGE_PIXELS:
        return (f"{size[0]}×{size[1]} px is over the {MAX_IMAGE_PIXELS:,}-pixel cap "
                f"(too large to decode)")
    if size is None and media_type == "image/jpeg":
        from PIL import Image

        try:
            Image.open(io.BytesIO(data)).close()
        except Image.DecompressionBombError:
            return f"a decompression bomb (over the {MAX_IMAGE_PIXELS:,}-pixel cap)"
        except Exception:  # unreadable: the decoder says so later
            return None
    return None


def image_tokens(width: int, height: int) -> int:
    """Estimated prompt tokens of an image of ``width`` x ``height`` pixels, by OpenAI's
    rule for detailed images (fit 2048 px, shorter side 768 px, 170 per 512-px tile + 85)."""
    w, h = float(max(width, 1)), float(max(height, 1))
    scale = min(1.0, 2048 / max(w, h))
    w, h = w * scale, h * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def downscale(data: bytes, media_type: str) -> tuple[bytes, tuple[int, int]]:
    """A PNG or JPEG image with its longer side at most :data:`MAX_IMAGE_SIDE` pixels, in its
    own format (``data`` itself if small enough), and its size; ``ValueError`` if Pillow
    cannot read it or it is over :data:`MAX_IMAGE_PIXELS`."""
    problem = pixel_problem(data, media_type)
    if problem:
        raise ValueError(f"{FORMAT_NAMES.get(media_type, media_type)} image not sent: {problem}")
    size = image_size(data, media_type)
    if size is not None and max(size) <= MAX_IMAGE_SIDE:
        return data, size
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.thumbnail((MAX_IMAGE_SIDE, MAX_IMAGE_SIDE), Image.Resampling.LANCZOS)
            out = io.BytesIO()
            if media_type == "image/jpeg":
                image.convert("RGB").save(out, format="JPEG", quality=85)
            else:
                image.save(out, format="PNG", optimize=True)
            return out.getvalue(), (int(image.size[0]), int(image.size[1]))
    except (OSError, SyntaxError, Image.DecompressionBombError) as err:  # unreadable
        raise ValueError(f"not a readable {FORMAT_NAMES.get(media_type, media_type)} image: "
                         f"{err}") from None


def data_url(data: bytes, media_type: str) -> str:
    """About 4/3 of ``data``'s bytes."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def decode_data_url(url: str) -> tuple[bytes, str] | None:
    """``None`` for anything but a base64 ``data:`` URL."""
    if not url.startswith("data:"):
        return None
    head, sep, payload = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    try:
        return base64.b64decode(payload, validate=True), head[: -len(";base64")]
    except (binascii.Error, ValueError):
        return None
