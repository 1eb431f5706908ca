"""Contract: the notes of a memory directory, whichever backend keeps the sessions
(design notes "The memory directory and notes")."""

from __future__ import annotations

import threading

import pytest

from tests.store_contract.conftest import StoreFactory


def test_notes(store_factory: StoreFactory) -> None:
    store = store_factory()
    assert store.notes.read("project") == ""
    store.notes.write("project", "uses pandas\n")
    store.notes.append("project", "plots  with\nseaborn")
    store.notes.append("user", "likes short answers")
    assert store.notes.read("project") == "uses pandas\n- plots with seaborn\n"
    assert store.notes.read("user") == "- likes short answers\n"
    assert store_factory().notes.read("user") == "- likes short answers\n"
    with pytest.raises(ValueError):
        store.notes.read("team")  # type: ignore[arg-type]


def test_notes_appended_at_once_are_all_kept(store_factory: StoreFactory) -> None:
    stores = [store_factory() for _ in range(4)]

    def append(k: int) -> None:
        for i in range(10):
            stores[k].notes.append("project", f"note {k}-{i}")

    threads = [threading.Thread(target=append, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = stores[0].notes.read("project").splitlines()
    assert sorted(lines) == sorted(f"- note {k}-{i}" for k in range(4) for i in range(10))
