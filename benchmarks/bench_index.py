"""Indexing speed: the whole index stage against bare `model.encode` on the same texts, in one run.

    python benchmarks/bench_index.py [--limit N]

Reports chunks/s for both and their ratio (target: index stage <= 1.15x bare encode), then a warm rebuild
(every embedding cached) to show that nothing is embedded twice. Needs the built corpus (`dvc repro docs`).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from doceval.config import schema
from doceval.config.compose import compose
from doceval.index.build import build_index
from doceval.index.embed import CachedEmbedder, EmbeddingCache, MiniLMEmbedder
from doceval.inputs.corpus import Partition, load_corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", default="data/docs")
    parser.add_argument(
        "--limit", type=int, default=None, help="first N chunks of every partition, in proportion"
    )
    args = parser.parse_args()
    corpus = load_corpus(Path(args.docs))
    if args.limit:
        total = sum(len(p.chunk_ids) for p in corpus.partitions.values())
        share = min(1.0, args.limit / total)
        for pin, part in list(corpus.partitions.items()):
            n = max(1, int(len(part.chunk_ids) * share))
            corpus.partitions[pin] = Partition(pin, part.chunk_ids[:n], part.doc_ids[:n], part.texts[:n])
    texts = [t for pin in corpus.pins for t in corpus.partitions[pin].texts]
    n = len(texts)
    block = compose(["embedder=minilm"]).embedder  # the index stage's embedder, as conf/ configures it
    assert isinstance(block, schema.EmbedderMiniLM)
    model = MiniLMEmbedder(batch_size=block.batch_size, device=block.device, precision=block.precision)
    model.encode(texts[:64])  # warm up kernels so neither side pays first-call costs

    t0 = time.perf_counter()
    for pin in corpus.pins:  # the same per-partition calls the index stage makes
        model.encode(corpus.partitions[pin].texts)
    bare = time.perf_counter() - t0

    store = compose(["store=qdrant_local"]).store
    with tempfile.TemporaryDirectory() as tmp:
        cache = EmbeddingCache(Path(tmp) / "emb.sqlite")
        t0 = time.perf_counter()
        build_index(corpus, CachedEmbedder(model, cache), store, Path(tmp) / "index", progress=False)
        cold = time.perf_counter() - t0
        warm_embedder = CachedEmbedder(model, cache)
        t0 = time.perf_counter()
        build_index(corpus, warm_embedder, store, Path(tmp) / "index", progress=False)
        warm = time.perf_counter() - t0

    print(f"machine: {platform.platform()}, {os.cpu_count()} cpus, python {platform.python_version()}")
    print(f"chunks: {n} across {len(corpus.pins)} partitions")
    print(f"{'step':<34}{'seconds':>9}{'chunks/s':>10}")
    print(f"{'bare model.encode':<34}{bare:>9.1f}{n / bare:>10.1f}")
    print(f"{'index stage, cold cache':<34}{cold:>9.1f}{n / cold:>10.1f}")
    print(f"{'index stage, warm cache':<34}{warm:>9.1f}{n / warm:>10.1f}")
    print(
        f"ratio index/bare: {cold / bare:.3f} (target <= 1.15); warm rebuild embedded {warm_embedder.misses} texts"
    )


if __name__ == "__main__":
    main()
