"""fp32 against bf16 (autocast, `embedder=minilm_bf16`) for the bundled all-MiniLM-L6-v2, side by side.

    .venv/bin/python benchmarks/bench_embed_precision.py [--sample 600]

Speed: the same seeded sample of corpus chunks encoded by each (after a warm-up). Agreement: the cosine
between each text's two vectors. Quality: every chunk of the corpus embedded both ways (fp32 from the
pipeline's embedding cache when it has them), exact cosine search per golden question over its pin's chunks
(best chunk per document), and the golden set's test-split retrieval metrics at k=5 with no floor; the quality
bar is every metric within 0.01 of fp32.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np

from doceval.config.compose import load_params
from doceval.index.embed import MiniLMEmbedder, make_embedder
from doceval.inputs.corpus import load_corpus
from doceval.inputs.golden import parse_golden, select_split
from doceval.scoring.metrics import build_matrix, retrieval_scores

METRICS = ("hit_rate", "recall", "mrr", "ndcg")


def _search(
    vectors: dict[str, np.ndarray], corpus: object, entries: list, query_vecs: np.ndarray, k: int
) -> list:
    ranked = []
    for e, q in zip(entries, query_vecs, strict=True):
        pin = f"{e.library}@{e.version}"
        part = corpus.partitions.get(pin)  # type: ignore[attr-defined]
        if part is None:
            ranked.append([])
            continue
        scores = vectors[pin] @ q
        best: dict[str, float] = {}
        for d, s in zip(part.doc_ids, scores, strict=True):
            if s > best.get(d, -2.0):
                best[d] = float(s)
        ranked.append(sorted(best.items(), key=lambda kv: -kv[1])[: 10 * k])
    return ranked


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=600)
    args = ap.parse_args()
    params = load_params()
    corpus = load_corpus(Path(params["paths"]["docs"]))
    texts = [t for p in corpus.partitions.values() for t in p.texts]
    sample = random.Random(0).sample(texts, min(args.sample, len(texts)))
    models = {p: MiniLMEmbedder(batch_size=64, precision=p) for p in ("fp32", "bf16")}
    timings = {}
    vecs = {}
    for p, m in models.items():
        m.encode(sample[:64])  # warm-up
        t0 = time.perf_counter()
        vecs[p] = m.encode(sample)
        timings[p] = time.perf_counter() - t0
    cos = np.sum(vecs["fp32"] * vecs["bf16"], axis=1)
    print(f"{len(sample)} corpus chunks, 2 cores:")
    for p in models:
        print(f"  {p}: {timings[p]:6.2f} s = {len(sample) / timings[p]:6.1f} chunks/s")
    print(f"  bf16 speed-up: {timings['fp32'] / timings['bf16']:.2f}x; cosine(fp32, bf16): min {cos.min():.5f}, "
          f"mean {cos.mean():.5f}")  # fmt: skip

    cache = Path(params["paths"]["cache"]) / "embeddings.sqlite"
    golden = select_split(parse_golden(Path(params["golden"])), "test", Path(params["golden"]))
    k = int(params["k"])
    results = {}
    for p in ("fp32", "bf16"):
        embedder = make_embedder({"name": "minilm", "batch_size": 64, "precision": p}, cache)
        t0 = time.perf_counter()
        vectors = {pin: embedder.encode(part.texts) for pin, part in corpus.partitions.items()}
        queries = embedder.encode([e.question for e in golden])
        seconds = time.perf_counter() - t0
        ranked = _search(vectors, corpus, golden, queries, k)
        matrix = build_matrix(
            ranked, [e.grades for e in golden], int((params.get("relevance") or {}).get("threshold", 2))
        )
        oos = np.array([e.out_of_scope for e in golden])
        per = retrieval_scores(matrix, np.full(len(golden), -np.inf), k)
        results[p] = {m: float(np.nanmean(per[m][~oos])) for m in METRICS}
        print(f"  {p}: corpus + questions embedded in {seconds:.1f} s (fp32 from the cache where present)")
    print(f"golden set test split, dense exact search, k={k}, no floor:")
    worst = 0.0
    for m in METRICS:
        diff = results["bf16"][m] - results["fp32"][m]
        worst = max(worst, abs(diff))
        print(f"  {m:9s} fp32 {results['fp32'][m]:.4f}  bf16 {results['bf16'][m]:.4f}  change {diff:+.4f}")
    print(f"quality bar (every metric within 0.01 of fp32): {'met' if worst <= 0.01 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
