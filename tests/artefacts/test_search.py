"""Search: titles, summaries and first prompts from the listing index; transcripts with
``deep``; case-insensitive, with an excerpt of where the text was found."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jupyter_agent.artefacts.search import compile_query, excerpt, search_sessions
from jupyter_agent.store import FileStore, SessionRecord


def make(store: FileStore, title: str, prompt: str, *, summary: str = "",
         later: list[dict[str, Any]] | None = None) -> str:
    system = {"role": "system", "content": "You know about flippers and penguins."}
    sid = store.create_session([system], title=title)
    store.save(sid, [system, {"role": "user", "content": prompt}, *(later or [])])
    if summary:
        store.update(sid, summary=summary)
    return sid


@pytest.fixture
def sessions(store: FileStore) -> dict[str, str]:
    return {
        "title": make(store, "Flipper study", "Load the data"),
        "summary": make(store, "Islands", "Count penguins per island",
                        summary="Goal: compare islands.\nCompleted: the flipper   LENGTH "
                                "correlation on each island."),
        "prompt": make(store, "", "How does flipper length relate to body mass?"),
        "deep": make(store, "Plots", "Make a scatter plot", later=[
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": "c1", "type": "function", "function": {
                    "name": "run_python",
                    "arguments": json.dumps(
                        {"code": 'df.plot.scatter("flipper_length_mm", "bill")'})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "<Axes>"},
            {"role": "assistant", "content": "Longer flippers go with heavier birds."},
        ]),
        "none": make(store, "Weather", "Rain in Bergen"),
    }


def ids(hits: list[Any]) -> set[str]:
    return {h.session.id for h in hits}


def test_default_search_uses_titles_summaries_and_first_prompts(
    store: FileStore, sessions: dict[str, str]
) -> None:
    hits = search_sessions(store, "FLIPPER")
    assert ids(hits) == {sessions["title"], sessions["summary"], sessions["prompt"]}
    where = {h.session.id: h.matches[0] for h in hits}
    assert where[sessions["title"]].field == "title"
    assert where[sessions["summary"]].field == "summary"
    assert where[sessions["prompt"]].field == "first prompt"
    summary = where[sessions["summary"]]
    assert summary.excerpt == "… islands. Completed: the flipper LENGTH correlation on each island."
    assert summary.excerpt[summary.start:summary.end] == "flipper"
    phrase = search_sessions(store, "flipper length")  # words in order, any whitespace
    assert ids(phrase) == {sessions["summary"], sessions["prompt"]}
    assert search_sessions(store, "length flipper") == []


def test_deep_search_reads_transcripts_but_not_system_messages(
    store: FileStore, sessions: dict[str, str]
) -> None:
    assert sessions["deep"] not in ids(search_sessions(store, "flipper_length_mm"))
    hits = search_sessions(store, "flipper_length_mm", deep=True)
    assert ids(hits) == {sessions["deep"]}
    match = hits[0].matches[0]
    assert match.field == "message 3 (assistant)"  # the run_python call's code
    assert match.excerpt == '… df.plot.scatter("flipper_length_mm", "bill")'
    heavier = search_sessions(store, "heavier birds", deep=True)
    assert [m.field for m in heavier[0].matches] == ["message 5 (assistant)"]
    # the system message of every session mentions penguins: it is not searched
    assert ids(search_sessions(store, "know about", deep=True)) == set()
    deep = search_sessions(store, "flipper", deep=True)
    assert ids(deep) == {sessions[k] for k in ("title", "summary", "prompt", "deep")}
    counts = {h.session.id: h.count for h in deep}
    assert counts[sessions["deep"]] == 2  # the code and the reply ("flippers")


def test_archived_sessions_only_when_asked(store: FileStore,
                                           sessions: dict[str, str]) -> None:
    store.update(sessions["title"], archived=True)
    assert sessions["title"] not in ids(search_sessions(store, "flipper"))
    assert sessions["title"] in ids(search_sessions(store, "flipper", include_archived=True))


def test_empty_query_lists_everything(store: FileStore, sessions: dict[str, str]) -> None:
    hits = search_sessions(store, "  ", deep=True)
    assert ids(hits) == set(sessions.values()) and all(h.where == "" for h in hits)


def test_default_search_never_reads_a_transcript(store: FileStore,
                                                 sessions: dict[str, str]) -> None:
    class NoLoads(FileStore):
        def load_session(self, session_id: str) -> SessionRecord:
            raise AssertionError("the default search must not load a session")

    assert len(search_sessions(NoLoads(store.root), "flipper")) == 3


def test_excerpt_cuts_long_text_around_the_match() -> None:
    text = "x" * 500 + " the Flipper length\n\n relates to body mass " + "y" * 500
    pattern = compile_query("flipper length")
    assert pattern is not None
    found = excerpt(text, pattern.search(text))  # type: ignore[arg-type]
    assert found.excerpt.startswith("…x") and found.excerpt.endswith("y…")
    assert found.excerpt[found.start:found.end] == "Flipper length"
    assert " the Flipper length relates to body mass " in found.excerpt
    assert len(found.excerpt) <= 90
