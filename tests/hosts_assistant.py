"""A user's assistant behind HTTP, run as its own process on a host of tests/ray_hosts.py:

    python hosts_assistant.py HOST PORT LOG

It answers every POST from the user package's scoring (the same answers as ``hostsuser.systems.assistant``, less
the host) and appends one JSON line per request to LOG: the question and the address of the caller, so a test
can tell which host each call came from.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hostsuser.systems import DOCS, _scored


def main(host: str, port: int, log: Path) -> None:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            question = body["question"]
            with lock, log.open("a", encoding="utf-8") as out:
                out.write(json.dumps({"question": question, "client": self.client_address[0]}) + "\n")
            hits = _scored(question, 3)
            reply = {"answer": " ".join(DOCS[d] for d, _ in hits) or None, "refused": not hits,
                     "sources": [{"id": d, "score": s} for d, s in hits]}  # fmt: skip
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    print("serving", flush=True)
    server.serve_forever(poll_interval=0.1)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]))
