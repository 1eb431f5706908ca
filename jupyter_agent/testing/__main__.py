"""Command line: ``python -m jupyter_agent.testing --script FILE [--port N]``.

Prints the base URL (``http://127.0.0.1:PORT/v1``) on stdout, flushed, then
serves until SIGINT (Ctrl-C) or SIGTERM, and exits 0. A bad script exits 2 with
the validation message on stderr; an unbindable port exits 1.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

from jupyter_agent.testing import ScriptedModelServer
from jupyter_agent.testing.handler import PLAYS
from jupyter_agent.testing.script import ScriptError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_agent.testing",
        description="Serve an OpenAI-compatible API (Chat Completions and Responses) on"
        " loopback that answers from a JSON script of steps.",
    )
    parser.add_argument("--script", required=True, metavar="FILE",
                        help="JSON file holding a list of steps")
    parser.add_argument("--port", type=int, default=0,
                        help="TCP port (default: a free ephemeral port)")
    parser.add_argument("--host", default="127.0.0.1", help="IPv4 address (default: 127.0.0.1)")
    parser.add_argument("--require-api-key", metavar="KEY", default=None,
                        help="answer 401 unless requests send 'Authorization: Bearer KEY'")
    parser.add_argument("--model", action="append", dest="models", metavar="ID",
                        help="model id listed by GET /v1/models (repeatable; default: scripted)")
    parser.add_argument("--log", action="store_true", help="print one line per request on stderr")
    parser.add_argument("--no-images", action="store_true",
                        help="refuse requests that carry images (400), like a text-only model")
    parser.add_argument("--play", choices=PLAYS, default=None,
                        help="play a local server: report --context-window its way and refuse "
                             "(Ollama: silently truncate) chat requests past it")
    parser.add_argument("--context-window", type=int, default=4096, metavar="N",
                        help="the played server's context window in tokens (default: 4096)")
    parser.add_argument("--truncate", action="store_true", default=None,
                        help="past the window, drop the oldest messages instead of refusing "
                             "(default: as the played server does)")
    parser.add_argument("--no-truncate", action="store_false", dest="truncate",
                        help="past the window, refuse (even when playing Ollama)")
    args = parser.parse_args(argv)
    try:
        server = ScriptedModelServer.from_file(
            args.script, port=args.port, host=args.host, require_api_key=args.require_api_key,
            model_ids=args.models or ("scripted",), log_requests=args.log,
            accept_images=not args.no_images, play=args.play,
            context_window=args.context_window, truncate=args.truncate)
    except (ScriptError, ValueError) as err:
        parser.error(str(err))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: stop.set())
    try:
        server.start()
    except OSError as err:
        print(f"cannot serve on {args.host}:{args.port}: {err}", file=sys.stderr)
        return 1
    print(server.base_url, flush=True)
    try:
        while not stop.wait(0.2):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
