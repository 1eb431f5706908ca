"""Session ID validation (design notes "Sessions and session IDs") and generation."""

from __future__ import annotations

import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_agent.errors import InvalidSessionIdError
from jupyter_agent.store import (
    FileStore,
    ensure_summary,
    holding,
    new_session_id,
    validate_session_id,
)

ALLOWED = set(string.ascii_letters + string.digits + "_-")

INVALID = [
    "../x",
    "..",
    "",
    "a" * 129,
    "a/b",
    "a.b",
    "é",
    "café",
    "ab\n",
    " a",
    "a b",
    "a\x00",
    "İd",
]


def is_valid(value: str) -> bool:
    return 1 <= len(value) <= 128 and all(c in ALLOWED for c in value)


@pytest.mark.parametrize("value", ["a", "z7Pq3hM4kA", "A_b-9", "-", "_", "x" * 128])
def test_valid_ids_are_returned_unchanged(value: str) -> None:
    assert validate_session_id(value) == value


@pytest.mark.parametrize("value", [*INVALID, None, 5, b"abc"])
def test_invalid_ids_raise_a_value_error(value: Any) -> None:
    with pytest.raises(InvalidSessionIdError) as info:
        validate_session_id(value)
    assert isinstance(info.value, ValueError)
    assert info.value.session_id == value


OPERATIONS: list[Callable[[FileStore, str], object]] = [
    lambda s, i: s.create_session([], session_id=i),
    lambda s, i: s.load_session(i),
    lambda s, i: s.exists(i),
    lambda s, i: s.save(i, []),
    lambda s, i: s.compact(i, [], summary="x"),
    lambda s, i: s.save(i, state={}),
    lambda s, i: s.update(i, summary="x"),
    lambda s, i: ensure_summary(s, i),
    lambda s, i: s.update(i, title="x"),
    lambda s, i: s.update(i, archived=True),
    lambda s, i: s.delete_session(i),
    lambda s, i: s.acquire_lease(i),
    lambda s, i: s.release_lease(i),
    lambda s, i: s.holds_lease(i),
    lambda s, i: s.session_path(i),
    lambda s, i: s.lock_path(i),
]


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("value", ["../x", "", "a" * 129, "a/b", "a.b", "é"])
def test_invalid_ids_are_rejected_before_any_file_access(
    tmp_path: Path, operation: Callable[[FileStore, str], object], value: str
) -> None:
    base = tmp_path / "base"
    base.mkdir()
    store = FileStore(base / "deep" / "mem")
    with pytest.raises(InvalidSessionIdError):
        operation(store, value)
    with pytest.raises(InvalidSessionIdError), holding(store, value):
        pass  # pragma: no cover
    assert list(base.iterdir()) == []  # nothing created, not even outside the root


def test_new_ids_are_ten_random_alphanumerics() -> None:
    ids = {new_session_id() for _ in range(2000)}
    assert len(ids) == 2000
    for value in ids:
        assert len(value) == 10
        assert set(value) <= set(string.ascii_letters + string.digits)
        assert validate_session_id(value) == value
    # all 62 characters show up: drawn from the whole alphabet
    assert set("".join(ids)) == set(string.ascii_letters + string.digits)


@pytest.mark.slow
@settings(max_examples=300)
@given(st.text(max_size=140) | st.from_regex(r"[A-Za-z0-9_-]{1,130}", fullmatch=True))
def test_validation_property(value: str) -> None:
    if is_valid(value):
        assert validate_session_id(value) == value
    else:
        with pytest.raises(InvalidSessionIdError):
            validate_session_id(value)
