"""A user's assistant behind HTTP on 127.0.0.1 for the tests, with programmable faults per question."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def reply_for(question: str) -> dict[str, Any]:
    return {
        "answer": f"answer to {question}",
        "sources": ["pydantic@2.8.2:a", {"id": "pydantic@2.8.2:b", "score": 0.5}],
        "refused": False,
        "usage": {"total_tokens": 7},
        "trace_id": f"t-{question}",
    }


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet test handler (no access log): :meth:`reply` gets each POST's JSON body."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.reply(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))

    def reply(self, body: dict[str, Any]) -> None:
        raise NotImplementedError


class FakeAgent:
    """An HTTP agent on 127.0.0.1:<free port>. ``faults[question]`` is consumed one per request; ``always``
    applies to every request for a question (``score=TEXT``: the first source's score as raw JSON text). It
    records each request's body and Authorization header."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self.faults: dict[str, list[str]] = {}
        self.always: dict[str, str] = {}
        self.delay_s = 0.0
        self.in_flight = 0
        self.peak = 0
        agent = self

        class Handler(JsonHandler):
            def reply(self, body: dict[str, Any]) -> None:
                with agent.lock:
                    agent.requests.append(body)
                    agent.auth.append(self.headers.get("Authorization"))
                    queue = agent.faults.get(body["question"], [])
                    fault = queue.pop(0) if queue else agent.always.get(body["question"])
                    agent.in_flight += 1
                    agent.peak = max(agent.peak, agent.in_flight)
                # The request stops counting as in flight before its reply is written: a client that sends
                # its next request the moment it reads this reply must not be seen as overlapping it.
                try:
                    time.sleep(agent.delay_s)
                finally:
                    with agent.lock:
                        agent.in_flight -= 1
                with contextlib.suppress(OSError):  # the client timed out and hung up
                    self.respond(body, fault)

            def respond(self, body: dict[str, Any], fault: str | None) -> None:
                status, headers, payload = 200, {}, reply_for(body["question"])
                if fault == "500":
                    status = 500
                elif fault == "404":
                    status = 404
                elif fault == "429":
                    status, headers = 429, {"Retry-After": "7"}
                elif fault == "slow":
                    time.sleep(1.0)
                elif fault == "no_refused":
                    del payload["refused"]
                elif fault == "bad_sources":
                    payload["sources"] = "pydantic@2.8.2:a"
                data = b"{not json" if fault == "bad_json" else json.dumps(payload).encode()
                if fault == "deep":  # valid JSON nested 100k levels deep (json.loads: RecursionError)
                    data = data[:-1] + b', "debug": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
                if fault is not None and fault.startswith("score="):
                    # The first source's score written as raw JSON text: NaN, -Infinity, 1e400 (what other
                    # JSON encoders emit), which json.dumps cannot produce from a number.
                    payload["sources"] = [{"id": "pydantic@2.8.2:a", "score": "@SCORE@"}]
                    data = json.dumps(payload).replace('"@SCORE@"', fault[len("score=") :]).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/ask"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def count(self, question: str) -> int:
        return sum(1 for r in self.requests if r["question"] == question)


@contextmanager
def running_agent() -> Iterator[FakeAgent]:
    srv = FakeAgent()
    srv.thread.start()
    try:
        yield srv
    finally:
        srv.server.shutdown()
        srv.server.server_close()


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    """Answer one request of a test server with ``payload`` as JSON."""
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    """A threading HTTP server on 127.0.0.1:<free port> for the length of the block, stopped by its own thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
