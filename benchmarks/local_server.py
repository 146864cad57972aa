"""The local OpenAI-compatible test server (tests/openai_server.py) in a child process, for the benchmarks that
call an LLM: its request handling does not compete with the measured client for the GIL."""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import sys
import urllib.request
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _serve(latency: float, conn: Connection) -> None:
    from openai_server import FakeOpenAI

    with FakeOpenAI(latency_s=latency) as server:
        conn.send(server.base_url)
        conn.recv()  # block until the parent says stop


@contextlib.contextmanager
def local_server(latency: float) -> Iterator[str]:
    """The server's ``/v1`` base URL while the block runs."""
    parent, child = mp.Pipe()
    proc = mp.Process(target=_serve, args=(latency, child), daemon=True)
    proc.start()
    try:
        yield str(parent.recv())
    finally:
        parent.send("stop")
        proc.join(timeout=5)


def server_requests(base_url: str) -> int:
    """Requests the server has answered so far (its /stats)."""
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=5) as resp:
        return int(json.load(resp)["requests"])
