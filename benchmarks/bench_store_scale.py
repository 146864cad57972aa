"""Store scale: qdrant_local (qdrant-client local mode) against Qdrant Edge exact and Edge HNSW, in one run.

    .venv/bin/python benchmarks/bench_store_scale.py [--points 100000] [--queries 10000] [--local-queries 200] [--local-points 20000]

The embedding is not what is measured: the points are deterministic synthetic unit vectors (384-d, seeded
normal draws, normalised) and the queries noisy copies of stored points (so each has a true nearest
neighbour). One partition of ``--points`` points (the worst case: doceval partitions by pin). Per store: build
time (upsert; Edge adds its HNSW build), queries/s over top-10 searches, and the evaluate wall time of the whole
query set. Local mode answers only ``--local-queries`` of them (its per-query time is linear in the points, a
brute-force scan in Python): its wall time for the whole set is extrapolated from that subset, and said so.
Edge exact must return local mode's ranked ids on that subset (ties aside). ``--golden`` (default) also checks
the golden set: every chunk and question vector from the pipeline's embedding cache, searched per pin in both
stores, ranked ids compared.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from doceval.config import schema
from doceval.config.compose import compose
from doceval.index.store import VectorStore

DIM = 384
PIN = "scale@1.0"


def unit_vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def queries_near(points: np.ndarray, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = points[rng.integers(0, len(points), size=n)]
    q = base + 0.05 * rng.normal(size=base.shape).astype(np.float32)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def build(store_cfg: schema.Store, path: Path, vectors: np.ndarray) -> tuple[VectorStore, float]:
    ids = [f"{PIN}:c{i}#0" for i in range(len(vectors))]
    t0 = time.perf_counter()
    store = VectorStore(store_cfg, path=path)
    store.recreate(PIN, DIM)
    store.upsert(PIN, ids, [c.split("#")[0] for c in ids], vectors, batch=2048)
    store.finish(PIN)
    return store, time.perf_counter() - t0


def run_queries(
    store: VectorStore, queries: np.ndarray, exact: bool | None = None
) -> tuple[list[list[str]], float]:
    t0 = time.perf_counter()
    out = [[h[0] for h in store.search(PIN, q, 10, exact=exact)] for q in queries]
    return out, time.perf_counter() - t0


def same_ids(a: list[list[str]], b: list[list[str]]) -> int:
    return sum(x == y for x, y in zip(a, b, strict=True))


def golden_check() -> str:
    """Edge exact vs local mode on the golden set, from the embedding cache (no model call when it is warm)."""
    from doceval.config.compose import load_params
    from doceval.index.embed import make_embedder
    from doceval.inputs.corpus import load_corpus
    from doceval.inputs.golden import parse_golden

    params = load_params(Path("params.yaml"))
    corpus = load_corpus(Path(params.paths.docs))
    entries = [
        e
        for e in parse_golden(Path(params.golden), corpus_ids=corpus.doc_ids())
        if e.pin in corpus.partitions
    ]
    embedder = make_embedder(params.embedder, Path(params.paths.cache) / "embeddings.sqlite")
    tmp = Path(tempfile.mkdtemp(prefix="golden-stores-"))
    edge = VectorStore(compose(["store=qdrant_edge"]).store, path=tmp / "edge")
    local = VectorStore(compose(["store=qdrant_local"]).store, path=tmp / "qdrant")
    try:
        for pin in corpus.pins:
            part = corpus.partitions[pin]
            vectors = embedder.encode(part.texts)
            for store in (edge, local):
                store.recreate(pin, embedder.dim)
                store.upsert(pin, part.chunk_ids, part.doc_ids, vectors, texts=part.texts)
                store.finish(pin)
        same = ties = 0
        for e in entries:
            q = embedder.encode([e.question])[0]
            a, b = edge.search(e.pin, q, 100), local.search(e.pin, q, 100)
            if [h[0] for h in a] == [h[0] for h in b]:
                same += 1
            elif np.allclose([h[2] for h in a], [h[2] for h in b], atol=1e-5):
                ties += 1  # the same scores in the same order: ids differ only among equal scores
        return (
            f"golden set: {same}/{len(entries)} routed questions get the same top-100 chunk ids from Edge exact as "
            f"from local mode ({ties} more differ only among tied scores); embedding cache hits {embedder.hits}, "
            f"misses {embedder.misses}"
        )
    finally:
        edge.close()
        local.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument(
        "--local-queries", type=int, default=200, help="local mode answers this many (extrapolated)"
    )
    parser.add_argument(
        "--local-points",
        type=int,
        default=20_000,
        help="local mode holds this many points (linear extrapolation)",
    )
    parser.add_argument("--hnsw-ef", type=int, default=64)
    parser.add_argument("--no-golden", action="store_true")
    args = parser.parse_args()
    points = unit_vectors(args.points, seed=0)
    queries = queries_near(points, args.queries, seed=1)
    sub = queries[: args.local_queries]
    tmp = Path(tempfile.mkdtemp(prefix="store-scale-"))
    rows = []
    try:
        # Local mode's upsert and scan are linear in the points: a subset, scaled up (exact ids checked on it).
        n_local = min(args.local_points, args.points)
        scale = args.points / n_local
        local, local_build = build(compose(["store=qdrant_local"]).store, tmp / "qdrant", points[:n_local])
        local_ids, local_s = run_queries(local, sub)
        local.close()
        per_q = local_s / len(sub) * scale
        how = (
            f"extrapolated from {n_local:,} points x {len(sub)} queries"
            if scale > 1
            else f"{len(sub)} queries"
        )
        rows.append(("qdrant_local", local_build * scale, 1 / per_q, per_q * len(queries), how))
        edge_small, _ = build(compose(["store=qdrant_edge"]).store, tmp / "e1", points[:n_local])
        small_ids, _ = run_queries(edge_small, sub, exact=True)
        edge_small.close()
        edge_cfg = compose(["store=qdrant_edge", f"store.search.hnsw_ef={args.hnsw_ef}"]).store
        edge, edge_build = build(edge_cfg, tmp / "edge", points)
        exact_ids, exact_s = run_queries(edge, queries, exact=True)
        rows.append(("qdrant_edge exact", edge_build, len(queries) / exact_s, exact_s, "measured"))
        hnsw_ids, hnsw_s = run_queries(edge, queries, exact=False)
        rows.append((f"qdrant_edge HNSW (m=16, ef_construct=100, hnsw_ef={args.hnsw_ef})", edge_build,
                     len(queries) / hnsw_s, hnsw_s, "measured"))  # fmt: skip
        edge.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.points:,} synthetic 384-d unit vectors in one partition; {args.queries:,} queries (top-10); "
          f"local mode answered {len(sub)} of them.")  # fmt: skip
    print()
    print("| store | build s | queries/s | evaluate wall s (all queries) | |")
    print("|---|---|---|---|---|")
    for name, build_s, qps, wall, how in rows:
        print(f"| {name} | {build_s:.1f} | {qps:,.1f} | {wall:,.1f} | {how} |")
    print()
    print(
        f"Edge exact vs local mode on the same {n_local:,} points, same ranked top-10 ids: "
        f"{same_ids(small_ids, local_ids)}/{len(sub)}"
    )
    recall = np.mean([len(set(h) & set(e)) / 10 for h, e in zip(hnsw_ids, exact_ids, strict=True)])
    print(f"HNSW recall@10 against exact: {recall:.4f}")
    print(
        f"Edge exact / local queries/s: {rows[1][2] / rows[0][2]:.0f}x; HNSW / local: {rows[2][2] / rows[0][2]:.0f}x"
    )
    if not args.no_golden:
        print(golden_check())


if __name__ == "__main__":
    main()
