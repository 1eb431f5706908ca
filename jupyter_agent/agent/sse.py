"""Reading a streamed model answer: server-sent events to JSON objects.

The models read their streams through the ``openai`` client's *streaming response*
(``client...with_streaming_response.create``): the client still builds and sends the
request, retries, and raises its errors for error statuses, but the body is read here,
line by line, to the very end. Two reasons:

- reading to the end lets the client put the connection back in its pool; the client's
  own typed stream stops at ``data: [DONE]`` and closes the connection, so every streamed
  request would open a new one (a new TLS handshake, against a real endpoint);
- each event becomes a plain dict with one ``json.loads``, instead of a tree of typed
  objects built per chunk.

:func:`events` follows the server-sent events format: ``event:`` and ``data:`` fields,
comment lines, an event per blank line, several ``data:`` lines joined by newlines.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["DONE", "Event", "events"]

DONE = "[DONE]"
"""The data of the event that ends a Chat Completions stream."""


@dataclass(frozen=True)
class Event:
    """One server-sent event.

    Attributes
    ----------
    name : str
        The ``event:`` field ("" when absent).
    data : str
        The ``data:`` lines, joined by newlines.
    """

    name: str
    data: str

    def json(self) -> Any:
        """The data parsed as JSON.

        Raises
        ------
        ValueError
            When it is not JSON.
        """
        return json.loads(self.data)


def events(lines: Iterable[str]) -> Iterator[Event]:
    """The events of a stream's lines (line endings already removed).

    Parameters
    ----------
    lines : iterable of str
        E.g. ``response.iter_lines()``; consumed to the end.

    Yields
    ------
    Event
        Each event that has data, in order.
    """
    name, data = "", list[str]()
    for line in lines:
        if not line:
            if data:
                yield Event(name, "\n".join(data))
            name, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
    if data:
        yield Event(name, "\n".join(data))
