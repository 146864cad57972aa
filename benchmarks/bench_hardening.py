"""What issue 27's hardening costs per call and per summary, side by side in one run.

- A user's function behind a deadline (``retriever.timeout_s`` / ``agent.timeout_s``): called inline, through
  doceval's ``DeadlineCaller`` (a reused daemon worker thread), and through a persistent worker subprocess (a
  pipe round trip: the alternative the issue allowed "if it costs little").
- The scrubber: ``scrub_data`` over a run summary with no secret registered and with a dozen registered.

    python benchmarks/bench_hardening.py [--calls 20000] [--summary eval/summary.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from doceval.common.concurrency import DeadlineCaller  # noqa: E402
from doceval.common.redact import forget_secrets, register_secret, scrub_data  # noqa: E402


def retrieve(question: str, k: int) -> list[str]:
    """A user's retriever that costs nothing: what is measured is the call's overhead."""
    return [f"lib@1.0:doc{i}" for i in range(k)]


def _serve(conn: Connection) -> None:
    while True:
        message = conn.recv()
        if message is None:
            return
        conn.send(retrieve(*message))


def per_call_us(call: Callable[[], object], calls: int, repeats: int = 3) -> float:
    """Median over ``repeats`` of the mean cost of one call, in microseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def bench_calls(calls: int) -> list[tuple[str, float]]:
    caller = DeadlineCaller("bench")
    parent, child = mp.Pipe()
    worker = mp.get_context("spawn").Process(target=_serve, args=(child,), daemon=True)
    worker.start()

    def through_subprocess() -> object:
        parent.send(("how do I dump a model?", 5))
        return parent.recv()

    through_subprocess()  # the worker has started and imported before the clock runs
    rows = [
        ("inline (timeout_s: null)", per_call_us(lambda: retrieve("how do I dump a model?", 5), calls)),
        ("DeadlineCaller (timeout_s: 120)", per_call_us(lambda: caller.call(lambda: retrieve("q", 5), 120.0), calls)),
        ("worker subprocess, pipe round trip", per_call_us(through_subprocess, calls)),
    ]  # fmt: skip
    parent.send(None)
    worker.join(5)
    return rows


def bench_scrub(summary: dict[str, object], repeats: int = 5) -> list[tuple[str, float]]:
    def timed() -> float:
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            scrub_data(summary)
            best = min(best, time.perf_counter() - start)
        return best * 1e3

    forget_secrets()
    empty = timed()
    for i in range(12):  # a header token, its Basic form, URL credentials, kwargs: a busy run's registry
        register_secret(f"sk-bench-secret-{i:02d}-{'x' * 24}")
    full = timed()
    forget_secrets()
    return [("nothing registered", empty), ("12 secrets registered", full)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--summary", type=Path, default=ROOT / "eval" / "summary.json")
    args = parser.parse_args()

    rows = bench_calls(args.calls)
    inline = rows[0][1]
    print(f"A user's function, {args.calls} calls (median of 3 runs)")
    print(f"{'how it is called':36} {'us/call':>9} {'vs inline':>10}")
    for name, us in rows:
        print(f"{name:36} {us:9.1f} {us / inline:9.1f}x")

    summary = json.loads(args.summary.read_text(encoding="utf-8"))
    n = len(summary.get("entries") or [])
    print(f"\nscrub_data over {args.summary.relative_to(ROOT)} ({n} entries, best of 5)")
    print(f"{'registry':36} {'ms':>9} {'us/entry':>10}")
    for name, ms in bench_scrub(summary):
        print(f"{name:36} {ms:9.2f} {ms * 1e3 / max(n, 1):10.1f}")


if __name__ == "__main__":
    main()
