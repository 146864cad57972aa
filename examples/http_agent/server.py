"""A small handbook assistant behind HTTP: the "user's system" that `doceval eval agent=http` evaluates.

Standard library only, and nothing from doceval: it stands for any service you already run.

    python examples/http_agent/server.py [--host 127.0.0.1] [--port 0]

prints the URL it listens on (``http://127.0.0.1:PORT``) as its first line, then serves until SIGTERM or
Ctrl-C. One endpoint:

    POST /ask  {"question": str, "library": str|null, "version": str|null, "session_id": str|null}
    -> 200     {"answer": str|null, "sources": [{"id": str, "score": float}, ...], "refused": bool,
                "usage": {"prompt_tokens": int}, "followup": bool}

Retrieval: lightly stemmed content words (stop words dropped) shared between the question and each passage of
examples/askdocs/handbook.jsonl; a passage needs at least 2 shared words (the bar). Nothing clears the bar:
a refusal (answer null, no sources).

Memory: the server remembers the questions of each ``session_id``. When a question clears nothing on its
own, it is read as a follow-up and retried together with that session's earlier questions (``"followup":
true``). That is helpful in a real conversation and exactly why doceval sends a fresh session_id per entry:
in a shared session an unanswerable question inherits the earlier questions' passages instead of being
refused (try ``doceval eval --warm-memory ...``).
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

HANDBOOK = Path(__file__).resolve().parents[1] / "askdocs" / "handbook.jsonl"
BAR = 2  # shared content words a passage needs to count as evidence
MAX_SOURCES = 5  # doceval cuts the list at its own k
MEMORY_TURNS = 5  # earlier questions kept per session

STOP_WORDS = frozenset({
    "a", "about", "an", "and", "any", "are", "as", "at", "be", "by", "can", "could", "do", "does",
    "for", "from", "get", "has", "have", "how", "i", "if", "in", "is", "it", "its", "me", "my", "no",
    "not", "of", "on", "or", "our", "should", "so", "than", "that", "the", "their", "them", "then",
    "there", "they", "this", "to", "up", "us", "was", "we", "what", "when", "where", "which", "who",
    "why", "will", "with", "would", "you", "your"
})  # fmt: skip


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    return {_stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP_WORDS}


class Assistant:
    """Retrieval, an extractive answer and per-session memory; thread-safe."""

    def __init__(self, handbook: Path = HANDBOOK) -> None:
        with handbook.open(encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        self.passages = [(row["id"], row["text"], content_words(row["text"])) for row in rows]
        self.memory: dict[str, list[str]] = defaultdict(list)
        self._lock = threading.Lock()

    def search(self, words: set[str]) -> list[tuple[str, str, int]]:
        scored = [(pid, text, len(words & bag)) for pid, text, bag in self.passages]
        kept = [hit for hit in scored if hit[2] >= BAR]
        kept.sort(key=lambda hit: (-hit[2], hit[0]))
        return kept[:MAX_SOURCES]

    def ask(self, question: str, session_id: str | None) -> dict[str, Any]:
        with self._lock:
            earlier = list(self.memory[session_id]) if session_id else []
            if session_id:
                self.memory[session_id] = (earlier + [question])[-MEMORY_TURNS:]
        hits = self.search(content_words(question))
        followup = False
        if not hits and earlier:  # maybe a follow-up ("and for members?"): read it with the conversation
            hits = self.search(content_words(" ".join([*earlier, question])))
            followup = bool(hits)
        prompt = [question, *(earlier if followup else []), *(text for _, text, _ in hits[:2])]
        return {
            "answer": " ".join(text for _, text, _ in hits[:2]) if hits else None,
            "sources": [{"id": pid, "score": float(score)} for pid, _, score in hits],
            "refused": not hits,
            "usage": {"prompt_tokens": sum(len(part.split()) for part in prompt)},
            "followup": followup,
        }


class Handler(BaseHTTPRequestHandler):
    assistant: Assistant  # set on the subclass made by serve()

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        if self.path.rstrip("/") != "/ask":
            self._reply(404, {"error": f"no such endpoint {self.path}; POST /ask"})
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
        except (ValueError, UnicodeDecodeError):
            self._reply(400, {"error": "the body is not JSON"})
            return
        if not isinstance(body, dict) or not isinstance(body.get("question"), str):
            self._reply(400, {"error": 'expected {"question": str, "session_id": str, ...}'})
            return
        session = body.get("session_id")
        self._reply(200, self.assistant.ask(body["question"], session if isinstance(session, str) else None))

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: one line per request is noise here
        pass


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 (default): any free port")
    args = parser.parse_args(argv)
    handler = type("BoundHandler", (Handler,), {"assistant": Assistant()})
    server = ThreadingHTTPServer((args.host, args.port), handler)
    for signum in (signal.SIGTERM, signal.SIGINT):  # SIGINT too: a shell starts background jobs ignoring it
        signal.signal(signum, _stop)
    try:  # a signal may arrive as soon as the URL is out: be inside the try by then
        print(f"http://{args.host}:{server.server_port}", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
