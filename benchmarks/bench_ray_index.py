"""The index stage's embedding on Ray Data (engine=ray) against engine=local, in one run.

    python benchmarks/bench_ray_index.py [--docs data/docs] [--chunks 2000] [--actors 2] [--num-cpus 2]

Both build the same index from fresh, empty embedding caches (so every chunk is embedded): engine=local in this
process, then engine=ray with ``--actors`` embedder actors on a Ray started for the run with ``--num-cpus``
CPUs. Prints wall times and the ratio ray/local with and without Ray's start-up (ray.init and the probe of the
actors' embedder count as start-up), and checks that the two indexes have the same content hash.
``--chunks N`` takes a seeded sample of N chunks (0: the whole corpus). Needs the built corpus
(`dvc repro docs`).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from doceval.config import schema
from doceval.config.compose import compose
from doceval.engine import engine_session
from doceval.index.build import build_index
from doceval.index.embed import CachedEmbedder, EmbeddingCache, make_embedder
from doceval.inputs.corpus import Corpus, Partition, load_corpus


def sample(corpus: Corpus, n: int, seed: int) -> Corpus:
    """A seeded sample of ``n`` chunks across every partition (each keeps its chunks in corpus order)."""
    every = [(pin, i) for pin in corpus.pins for i in range(len(corpus.partitions[pin].chunk_ids))]
    if not n or n >= len(every):
        return corpus
    keep = set(random.Random(seed).sample(every, n))
    for pin in corpus.pins:
        part = corpus.partitions[pin]
        idx = [i for i in range(len(part.chunk_ids)) if (pin, i) in keep]
        corpus.partitions[pin] = Partition(
            pin,
            [part.chunk_ids[i] for i in idx],
            [part.doc_ids[i] for i in idx],
            [part.texts[i] for i in idx],
        )
    return corpus


def run_local(cfg: schema.Config, corpus: Corpus, tmp: Path) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    embedder = make_embedder(cfg.embedder, tmp / "local.sqlite")  # the model load counts, as in the stage
    manifest = build_index(corpus, embedder, cfg.store, tmp / "index-local", progress=False)
    return time.perf_counter() - t0, manifest


def run_ray(cfg: schema.Config, corpus: Corpus, tmp: Path) -> tuple[float, float, dict[str, Any]]:
    # lazy: imports ray (about a second), after the local run so that run never pays for it
    from doceval.engine.embedding import RayEmbedder

    assert isinstance(cfg.engine, schema.EngineRay)
    t0 = time.perf_counter()
    with engine_session(cfg.engine):
        inner = RayEmbedder(cfg.engine, cfg.embedder)  # asks a worker what the actors' embedder is
        t1 = time.perf_counter()
        embedder = CachedEmbedder(inner, EmbeddingCache(tmp / "ray.sqlite"))
        manifest = build_index(corpus, embedder, cfg.store, tmp / "index-ray", False, inner.record())
        t2 = time.perf_counter()
    return t2 - t0, t2 - t1, manifest


def cpu_model() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    names = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")]
    return names[0] if names else platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--docs", default="data/docs")
    parser.add_argument("--chunks", type=int, default=2000, help="seeded sample of N chunks (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--num-cpus", type=int, default=2)
    args = parser.parse_args()
    corpus = sample(load_corpus(Path(args.docs)), args.chunks, args.seed)
    n = sum(len(p.chunk_ids) for p in corpus.partitions.values())
    local_cfg = compose(["engine=local"])
    ray_cfg = compose(
        [
            "engine=ray",
            "engine.address=local",
            f"engine.actors={args.actors}",
            f"engine.num_cpus={args.num_cpus}",
        ]
    )
    with tempfile.TemporaryDirectory() as tmp:
        local_s, local_m = run_local(local_cfg, corpus, Path(tmp))
        ray_s, ray_work_s, ray_m = run_ray(ray_cfg, corpus, Path(tmp))
    assert local_m["content_hash"] == ray_m["content_hash"], "the two indexes differ"
    # Hits are texts repeated across pins (the same docstring in two versions), embedded once by both.
    assert local_m["embedding_cache"] == ray_m["embedding_cache"], (
        local_m["embedding_cache"],
        ray_m["embedding_cache"],
    )
    print(f"machine: {cpu_model()}, {os.cpu_count()} cpus, python {platform.python_version()}")
    cache = local_m["embedding_cache"]
    print(
        f"chunks: {n} across {len(corpus.pins)} partitions (seed {args.seed}); empty caches for both: "
        f"{cache['misses']} embedded, {cache['hits']} repeated texts"
    )
    print(f"{'run':<46}{'seconds':>9}{'chunks/s':>10}")
    print(f"{'engine=local (model load included)':<46}{local_s:>9.1f}{n / local_s:>10.1f}")
    label = f"engine=ray, {args.actors} actors, num_cpus={args.num_cpus}, with start-up"
    print(f"{label:<46}{ray_s:>9.1f}{n / ray_s:>10.1f}")
    print(f"{'engine=ray, without start-up':<46}{ray_work_s:>9.1f}{n / ray_work_s:>10.1f}")
    print(f"ratio ray/local: {ray_s / local_s:.2f} with Ray's start-up, {ray_work_s / local_s:.2f} without")


if __name__ == "__main__":
    main()
