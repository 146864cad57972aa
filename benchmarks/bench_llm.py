"""Throughput of doceval.llm against a local OpenAI-compatible server with a fixed reply latency.

    .venv/bin/python benchmarks/bench_llm.py [--latency 0.1] [--requests 128] [--concurrency 1 8 32]

For each concurrency level it sends distinct prompts (cold cache) through ``ChatClient`` +
``map_concurrent`` and prints achieved requests/s against the ideal ``concurrency / latency`` (target ratio
>= 0.8). It then replays every request on the warm cache and checks that none reached the server.

The server runs in a child process so its request handling does not compete with the client for the GIL.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from local_server import local_server, server_requests

from doceval.config.compose import llm_settings  # noqa: E402
from doceval.llm import ChatClient, map_concurrent  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=0.1, help="server reply latency in seconds")
    ap.add_argument("--requests", type=int, default=128, help="requests per concurrency level")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--min-ratio", type=float, default=0.8, help="exit 1 if any level falls below this")
    args = ap.parse_args()

    worst = 1.0
    with local_server(args.latency) as base_url, tempfile.TemporaryDirectory() as tmp:
        print(
            f"server latency {args.latency * 1000:.0f} ms, {args.requests} requests per level "
            "(at least 16 rounds of the concurrency, so connection set-up does not dominate)"
        )
        # cpu ms/req: client-process CPU per request; cpu cap: the req/s that CPU alone allows (the GIL
        # serialises it), the ceiling at high concurrency on a small or busy machine.
        print(
            f"{'concurrency':>11} {'req/s':>9} {'ideal':>9} {'ratio':>6} {'wall s':>7} "
            f"{'cpu ms/req':>10} {'cpu cap':>10}"
        )
        runs = []
        for c in args.concurrency:
            # Level 1 is slow by construction (1 / latency req/s); fewer requests give the same rate.
            # Steady state: at least 16 full rounds; a 4-round burst mostly measures opening 32 connections.
            n = min(args.requests, 64) if c == 1 else max(args.requests, 16 * c)
            cfg = llm_settings(
                "answerer",
                model="bench",
                base_url=base_url,
                max_concurrency=c,
                cache_path=str(Path(tmp) / "llm.sqlite"),
            )
            client = ChatClient(cfg, "answerer")
            # Warm-up (untimed): open the pool's c connections and the server's handler threads, so the
            # figure is steady-state throughput rather than connection setup.
            warm = [[{"role": "user", "content": f"warm-up {c} {i}"}] for i in range(c)]
            map_concurrent(client.complete, warm, c)
            prompts = [[{"role": "user", "content": f"level {c} request {i}"}] for i in range(n)]
            t0, cpu0 = time.perf_counter(), time.process_time()
            out = map_concurrent(client.complete, prompts, c)
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            assert not any(r.cached for r in out)
            rate, ideal = n / wall, c / args.latency
            worst = min(worst, rate / ideal)
            print(
                f"{c:>11} {rate:>9.1f} {ideal:>9.1f} {rate / ideal:>6.2f} {wall:>7.2f} "
                f"{cpu / n * 1000:>10.2f} {n / cpu if cpu else float('inf'):>10.0f}"
            )
            runs.append((client, prompts, c))

        before = server_requests(base_url)
        t0 = time.perf_counter()
        total = 0
        for client, prompts, c in runs:
            out = map_concurrent(client.complete, prompts, c)
            assert all(r.cached for r in out)
            total += len(out)
        wall = time.perf_counter() - t0
        reached = server_requests(base_url) - before
        hits = sum(client.ledger.cache_stats()["hits"] for client, _, _ in runs)
        print(
            f"warm cache: {total} requests replayed in {wall:.3f} s ({total / wall:.0f} req/s), "
            f"{hits} cache hits, {reached} reached the server"
        )
        for client, _, _ in runs:
            client.close()
    ok = worst >= args.min_ratio and reached == 0
    print(f"worst ratio {worst:.2f} (target >= {args.min_ratio}); {'OK' if ok else 'BELOW TARGET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
