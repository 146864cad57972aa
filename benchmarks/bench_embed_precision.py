"""fp32 against bf16 autocast (`embedder=minilm_bf16`) and bf16 weights (`embedder=minilm_bf16_weights`) for the
bundled all-MiniLM-L6-v2, side by side.

    .venv/bin/python benchmarks/bench_embed_precision.py [--sample 600] [--rounds 3]

Speed: the same seeded sample of corpus chunks encoded by each variant with its conf/embedder batch size (after a
warm-up), in interleaved rounds (fp32, bf16, bf16_weights, fp32, ...) so a machine shared with other work slows
all of them alike; the speed-up is the median over rounds of fp32's time over the variant's in the same round.
Agreement: the cosine between each text's fp32 and variant vectors. Quality: every chunk of the corpus embedded
each way (from the pipeline's embedding cache when it has them), exact cosine search per golden question over
its pin's chunks (best chunk per document), and the golden set's test-split retrieval metrics at k=5 with no
floor; the quality bar is every metric within 0.01 of fp32.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np

from doceval.config import schema
from doceval.config.compose import compose, load_params
from doceval.index.embed import MiniLMEmbedder, make_embedder
from doceval.inputs.corpus import load_corpus
from doceval.inputs.golden import parse_golden, select_split
from doceval.scoring.metrics import build_matrix
from doceval.scoring.registry import retrieval_scores

METRICS = ("hit_rate", "recall", "mrr", "ndcg")
MINILM_OPTIONS = ("minilm", "minilm_bf16", "minilm_bf16_weights")


def conf_variants() -> dict[str, int]:
    """precision -> batch size, as conf/embedder/minilm*.yaml set them (composed, never restated here)."""
    blocks = [compose([f"embedder={option}"]).embedder for option in MINILM_OPTIONS]
    return {b.precision: b.batch_size for b in blocks if isinstance(b, schema.EmbedderMiniLM)}


VARIANTS = conf_variants()


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
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    params = load_params()
    corpus = load_corpus(Path(params.paths.docs))
    texts = [t for p in corpus.partitions.values() for t in p.texts]
    sample = random.Random(0).sample(texts, min(args.sample, len(texts)))
    models = {p: MiniLMEmbedder(batch_size=b, device="cpu", precision=p) for p, b in VARIANTS.items()}
    vecs = {}
    for p, m in models.items():
        m.encode(sample[:64])  # warm-up
        vecs[p] = m.encode(sample)
    timings: dict[str, list[float]] = {p: [] for p in models}
    for _ in range(args.rounds):
        for p, m in models.items():
            t0 = time.perf_counter()
            m.encode(sample)
            timings[p].append(time.perf_counter() - t0)
    base = np.array(timings["fp32"])
    print(f"{len(sample)} corpus chunks, 2 cores, {args.rounds} interleaved rounds:")
    for p in models:
        ratios = base / np.array(timings[p])
        cos = np.sum(vecs["fp32"] * vecs[p], axis=1)
        print(f"  {p:12s} batch {VARIANTS[p]:2d}: {len(sample) / np.median(timings[p]):6.1f} chunks/s, speed-up "
              f"{np.median(ratios):.2f}x (rounds {', '.join(f'{r:.2f}' for r in ratios)}); cosine to fp32: "
              f"min {cos.min():.5f}, mean {cos.mean():.5f}")  # fmt: skip

    cache = Path(params.paths.cache) / "embeddings.sqlite"
    golden = select_split(parse_golden(Path(params.golden)), "test", Path(params.golden))
    k = params.k
    results = {}
    for p, b in VARIANTS.items():
        block = compose(["embedder=minilm", f"embedder.batch_size={b}", f"embedder.precision={p}"]).embedder
        embedder = make_embedder(block, cache)
        t0 = time.perf_counter()
        vectors = {pin: embedder.encode(part.texts) for pin, part in corpus.partitions.items()}
        queries = embedder.encode([e.question for e in golden])
        seconds = time.perf_counter() - t0
        ranked = _search(vectors, corpus, golden, queries, k)
        matrix = build_matrix(ranked, [e.grades for e in golden], params.relevance.threshold)
        oos = np.array([e.out_of_scope for e in golden])
        per = retrieval_scores(matrix, np.full(len(golden), -np.inf), k)
        results[p] = {m: float(np.nanmean(per[m][~oos])) for m in METRICS}
        print(f"  {p}: corpus + questions embedded in {seconds:.1f} s (from the cache where present)")
    print(f"golden set test split, dense exact search, k={k}, no floor:")
    for p in VARIANTS:
        if p == "fp32":
            continue
        worst = 0.0
        for m in METRICS:
            diff = results[p][m] - results["fp32"][m]
            worst = max(worst, abs(diff))
            print(f"  {m:9s} fp32 {results['fp32'][m]:.4f}  {p} {results[p][m]:.4f}  change {diff:+.4f}")
        print(
            f"  {p} quality bar (every metric within 0.01 of fp32): {'met' if worst <= 0.01 else 'NOT met'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
