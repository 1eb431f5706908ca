"""Contract: a session's figures are kept with it, read back, listed and deleted with it
(design notes "Figures")."""

from __future__ import annotations

import io

import pytest

from jupyter_agent.errors import (
    FigureNotFoundError,
    InvalidFigureError,
    InvalidSessionIdError,
    SessionNotFoundError,
)
from jupyter_agent.store import Store, holding

SYSTEM = {"role": "system", "content": "You analyse data."}
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30"><rect/></svg>'


def png(width: int = 64, height: int = 48) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


def test_saved_figures_read_back_byte_for_byte(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    data = png()
    with holding(store, sid):
        store.save_figure(sid, "fig_a", data, "image/png")
        store.save_figure(sid, "fig-b", SVG, "image/svg+xml")
    assert store.figure_ids(sid) == ["fig-b", "fig_a"]
    first = store.read_figure(sid, "fig_a")
    assert (first.data, first.media_type) == (data, "image/png")
    assert store.read_figure(sid, "fig-b").media_type == "image/svg+xml"


def test_a_figure_of_an_id_is_replaced_and_can_be_deleted(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    with holding(store, sid):
        store.save_figure(sid, "f1", png(10, 10), "image/png")
        store.save_figure(sid, "f1", png(20, 10), "image/png")
        assert store.read_figure(sid, "f1").data == png(20, 10)
        assert store.delete_figure(sid, "f1") is True
        assert store.delete_figure(sid, "f1") is False
    assert store.figure_ids(sid) == []
    with pytest.raises(FigureNotFoundError):
        store.read_figure(sid, "f1")


@pytest.mark.parametrize(("figure_id", "data", "media_type"), [
    ("../x", b"", "image/png"),
    ("a b", b"", "image/png"),
    ("ok", b"not an image", "image/png"),
    ("ok", SVG, "image/png"),
    ("ok", b"\x89PNG\r\n\x1a\n", "image/gif"),
])
def test_bad_figures_are_refused_before_anything_is_written(
        store: Store, figure_id: str, data: bytes, media_type: str) -> None:
    sid = store.create_session([SYSTEM])
    with holding(store, sid), pytest.raises(InvalidFigureError):
        store.save_figure(sid, figure_id, data or png(), media_type)
    assert store.figure_ids(sid) == []


def test_figures_of_unknown_or_invalid_sessions(store: Store) -> None:
    with pytest.raises(InvalidSessionIdError):
        store.read_figure("../x", "f1")
    with pytest.raises((FigureNotFoundError, SessionNotFoundError)):
        store.read_figure("nope", "f1")
    assert store.figure_ids("nope") == []


def test_figures_are_deleted_with_their_session(store: Store) -> None:
    sid = store.create_session([SYSTEM])
    other = store.create_session([SYSTEM])
    with holding(store, sid):
        store.save_figure(sid, "f1", png(), "image/png")
    with holding(store, other):
        store.save_figure(other, "f1", png(8, 8), "image/png")
    store.delete_session(sid)
    assert store.figure_ids(sid) == []
    assert store.read_figure(other, "f1").data == png(8, 8)


def test_another_store_object_reads_the_figures(store_factory) -> None:  # type: ignore[no-untyped-def]
    writer, reader = store_factory(), store_factory()
    sid = writer.create_session([SYSTEM])
    with holding(writer, sid):
        writer.save_figure(sid, "f1", png(), "image/png")
    assert reader.read_figure(sid, "f1").data == png()
