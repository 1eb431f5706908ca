"""``python -m jupyter_agent.testing``: prints the base URL on stdout, flushed, then serves
until SIGINT or SIGTERM and exits 0; a bad script exits 2, an unbindable port 1.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

from jupyter_agent.testing import ScriptedModelServer
from jupyter_agent.testing.handler import PLAYS


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
    parser.add_argument("--model", action="append", dest="model_ids", metavar="ID",
                        help="model id listed by GET /v1/models (repeatable; default: scripted)")
    parser.add_argument("--log", action="store_true", dest="log_requests",
                        help="print one line per request on stderr")
    parser.add_argument("--no-images", action="store_false", dest="accept_images",
                        help="refuse requests that carry images (400), like a text-only model")
    parser.add_argument("--play", choices=PLAYS, default=None,
                        help="play a local server: report --context-window its way and refuse "
                             "(Ollama: silently truncate) chat requests past it")
    parser.add_argument("--context-window", type=int, default=4096, metavar="N",
                        help="the played server's context window in tokens (default: 4096)")
    parser.add_argument("--truncate", action=argparse.BooleanOptionalAction, default=None,
                        help="past the window, drop the oldest messages instead of refusing "
                             "(--no-truncate: refuse, even when playing Ollama; default: as "
                             "the played server does)")
    options = vars(parser.parse_args(argv))
    options["model_ids"] = options["model_ids"] or ("scripted",)
    try:
        server = ScriptedModelServer.from_file(options.pop("script"), **options)
    except ValueError as err:  # ScriptError too
        parser.error(str(err))
    stopping = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stopping)  # before the server's threads start
    try:
        server.start()
    except OSError as err:
        print(f"cannot serve on {options['host']}:{options['port']}: {err}", file=sys.stderr)
        return 1
    print(server.base_url, flush=True)
    signal.sigwait(stopping)
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
