"""A small OpenAI-compatible HTTP server for tests and benchmarks (real sockets, no mocks of ``openai``).

It implements ``POST /v1/chat/completions`` and ``POST /v1/embeddings`` with deterministic replies:

- answer mode: the reply names the API identifiers found in the prompt's ``<passages>`` and ``<memory>``
  sections (so a memory leak shows up in the answer); with no identifier in either it replies
  ``I don't know``.
- rewrite mode (the prompt has a ``<rewrite>`` section, the drafter's phrasing prompt): ``Quick question: ``
  and the section's text, so a test can tell a rephrased question from the template;
- judge mode (the prompt mentions ``"verdict"``): ``correct`` when every identifier of ``<reference>`` appears
  in ``<answer>``; ``judge_mode = "malformed"`` makes it reply prose instead of JSON, ``"seeded"`` flips about one
  verdict in two depending on the request's ``seed`` (an unstable judge).

Faults are programmable (next N requests answer 429 / 500 / a malformed body / a slow reply), and the server
counts requests and the peak number of requests in flight at once, so tests can check retries, concurrency
bounds and cache hits from the server's side.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# API identifiers as the answer prompt shows them: dotted names followed by a call, e.g. `.dict()`,
# `BaseModel.model_dump(`; backticked spans count too.
_IDENT = re.compile(r"`([^`]+)`|(\.?[A-Za-z_]\w*(?:\.\w+)*)\(")
_SECTION = "<{0}>(.*?)</{0}>"
REFUSAL = "I don't know"


def identifiers(text: str) -> list[str]:
    """Identifiers in order of first appearance, each as ``name()``."""
    seen: dict[str, None] = {}
    for m in _IDENT.finditer(text):
        name = m.group(1) or m.group(2) + "()"
        seen.setdefault(name, None)
    return list(seen)


def section(text: str, tag: str) -> str:
    m = re.search(_SECTION.format(tag), text, flags=re.S)
    return m.group(1) if m else ""


class _QuietServer(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: a burst of 32 new connections would queue behind it.
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out (or was killed) hangs up mid-reply; that is expected, not a server bug.
        pass


@dataclass
class Fault:
    kind: str  # "429" | "500" | "malformed" | "slow"
    seconds: float = 0.0


class FakeOpenAI:
    """Start with ``with FakeOpenAI() as server:``; ``server.base_url`` is the ``/v1`` root."""

    def __init__(self, latency_s: float = 0.0) -> None:
        self.latency_s = latency_s
        self.judge_mode = "rule"  # or "malformed", "seeded"
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self.requests = 0
        self.chat_requests = 0
        self.embedding_requests = 0
        self.inflight = 0
        self.peak_inflight = 0
        self.bodies: list[dict[str, Any]] = []
        self.auth_headers: set[str] = set()  # lets a secret-scan test prove the key really was sent
        self.status_counts: Counter[int] = Counter()
        self._httpd = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ programming
    def fail_next(self, n: int, status: int = 429) -> None:
        with self._lock:
            self._faults += [Fault(str(status)) for _ in range(n)]

    def malformed_next(self, n: int) -> None:
        with self._lock:
            self._faults += [Fault("malformed") for _ in range(n)]

    def slow_next(self, n: int, seconds: float) -> None:
        with self._lock:
            self._faults += [Fault("slow", seconds) for _ in range(n)]

    def reset_stats(self) -> None:
        with self._lock:
            self.requests = self.chat_requests = self.embedding_requests = 0
            self.peak_inflight = 0
            self.bodies.clear()
            self.status_counts.clear()

    def questions_requested(self) -> Counter[str]:
        """How many chat requests carried each ``<question>`` (answer prompts only)."""
        with self._lock:
            bodies = list(self.bodies)
        out: Counter[str] = Counter()
        for body in bodies:
            text = _prompt_text(body)
            if '"verdict"' not in text:
                out[section(text, "question").strip()] += 1
        return out

    # ------------------------------------------------------------------ replies
    def _next_fault(self) -> Fault | None:
        with self._lock:
            return self._faults.pop(0) if self._faults else None

    def chat_reply(self, body: dict[str, Any]) -> str:
        text = _prompt_text(body)
        if '"verdict"' in text:
            if self.judge_mode == "malformed":
                return "The answer looks fine to me."
            ref = identifiers(section(text, "reference"))
            ans = section(text, "answer").lower()
            ok = all(r.lower() in ans for r in ref)
            missing = [r for r in ref if r.lower() not in ans]
            reason = "all reference APIs present" if ok else f"missing {', '.join(missing)}"
            if self.judge_mode == "seeded":
                # A judge that is not stable across seeds: about one verdict in two flips with the seed.
                digest = hashlib.sha256(f"{ans}|{body.get('seed')}".encode()).digest()
                if digest[0] % 2 == 0:
                    ok, reason = not ok, f"flipped by seed {body.get('seed')}"
            return json.dumps({"verdict": "correct" if ok else "incorrect", "reason": reason})
        rewrite = section(text, "rewrite").strip()
        if rewrite:
            return f"Quick question: {rewrite}"
        names = identifiers(section(text, "passages")) + identifiers(section(text, "memory"))
        names = list(dict.fromkeys(names))
        return f"Use {', '.join(names)}." if names else REFUSAL

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the openai client's pool expects
            # Headers and body go out in separate writes; with Nagle on, delayed ACKs add ~40 ms per reply.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                pass

            def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)
                with server._lock:
                    server.status_counts[status] += 1

            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                # Counters for a client in another process (the benchmark runs the server in a child).
                if self.path != "/stats":
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                with server._lock:
                    stats = {
                        "requests": server.requests,
                        "chat_requests": server.chat_requests,
                        "embedding_requests": server.embedding_requests,
                        "peak_inflight": server.peak_inflight,
                    }
                self._send(200, json.dumps(stats).encode())

            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with server._lock:
                    server.auth_headers.add(self.headers.get("Authorization", ""))
                    server.requests += 1
                    server.inflight += 1
                    server.peak_inflight = max(server.peak_inflight, server.inflight)
                try:
                    self._handle(raw)
                finally:
                    with server._lock:
                        server.inflight -= 1

            def _handle(self, raw: bytes) -> None:
                body = json.loads(raw or b"{}")
                fault = server._next_fault()
                delay = server.latency_s + (fault.seconds if fault and fault.kind == "slow" else 0.0)
                if delay:
                    time.sleep(delay)
                if fault and fault.kind in ("429", "500"):
                    status = int(fault.kind)
                    err = {"error": {"message": f"injected {status}", "type": "test", "code": status}}
                    self._send(status, json.dumps(err).encode(), {"Retry-After": "0"})
                    return
                if fault and fault.kind == "malformed":
                    self._send(200, b'{"id": "x", "choices": [ {"message": ')
                    return
                if self.path == "/v1/chat/completions":
                    with server._lock:
                        server.chat_requests += 1
                        server.bodies.append(body)
                    self._send(200, json.dumps(_chat_payload(body, server.chat_reply(body))).encode())
                elif self.path == "/v1/embeddings":
                    with server._lock:
                        server.embedding_requests += 1
                    self._send(200, json.dumps(_embedding_payload(body)).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

        return Handler


def _prompt_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def _chat_payload(body: dict[str, Any], reply: str) -> dict[str, Any]:
    prompt_tokens = len(_prompt_text(body).split())
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "test"),
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(reply.split()),
            "total_tokens": prompt_tokens + len(reply.split()),
        },
    }


EMBED_DIM = 16


def embed_vector(text: str) -> list[float]:
    """Bag of hashed words, deliberately not normalised (the client must normalise)."""
    vec = [0.0] * EMBED_DIM
    for word in text.lower().split():
        h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
        vec[h % EMBED_DIM] += 1.0 + (h >> 8) % 3
    if not any(vec):
        vec[0] = 1.0
    return vec


def _embedding_payload(body: dict[str, Any]) -> dict[str, Any]:
    inputs = body.get("input", [])
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    data = [{"object": "embedding", "index": i, "embedding": embed_vector(t)} for i, t in enumerate(inputs)]
    data.reverse()  # real servers may return any order; the client must sort by index
    n = sum(len(str(t).split()) for t in inputs)
    return {
        "object": "list",
        "data": data,
        "model": body.get("model"),
        "usage": {"prompt_tokens": n, "total_tokens": n},
    }


@pytest.fixture
def openai_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server
