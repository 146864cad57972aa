"""The same headline on every x86-64 CPU: clean-clone `dvc repro` runs under lowered instruction sets and thread
counts, compared with each other (vectors, scores, rankings, metrics), and Qdrant Edge's scores against exact
float64 ones.

    python benchmarks/bench_repro.py --isa best --threads 2 --save runs/best-2     # and the other settings
    python benchmarks/bench_isa.py runs/best-2 runs/avx2-2 runs/default-2 ...       # the first is the reference
    python benchmarks/bench_isa.py --edge                                           # this checkout's index

Each saved run (bench_repro.py --save) holds eval/metrics.json, the candidates, the index manifest and the
embedding cache. Vectors are compared by cache key (same embedder fingerprint, same text); candidates entry by
entry (ranked document ids, all 100 and the top k; scores as stored, 6 decimals); metrics.json byte for byte.
The margin line says how far the reference's decisions are from flipping: the smallest gap between the k-th
and (k+1)-th candidate score, next to the largest score change seen across settings.

``--edge`` recomputes every golden question's ranking in float64 numpy from the cached vectors (the embedder's
question vector, every chunk of its pin, best chunk per document) and compares it with the candidates the Edge
store returned: Edge's SIMD distance code cannot be capped from outside, so its scores are checked against
exact arithmetic instead.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path

import numpy as np

K = 5


def _vectors(run: Path) -> dict[str, np.ndarray]:
    db = sqlite3.connect(str(run / "data/cache/embeddings.sqlite"))
    return {
        key: np.frombuffer(blob, dtype=np.float32) for key, blob in db.execute("SELECT key, vec FROM emb")
    }


def _candidates(run: Path) -> dict[str, list[tuple[str, float]]]:
    out = {}
    for line in (run / "data/runs/candidates/candidates.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out[rec["id"]] = [(str(d), float(s)) for d, s in rec["candidates"]]
    return out


def _compare(ref: Path, other: Path) -> str:
    va, vb = _vectors(ref), _vectors(other)
    common = sorted(set(va) & set(vb))
    a = np.stack([va[k] for k in common]).astype(np.float64)
    b = np.stack([vb[k] for k in common]).astype(np.float64)
    cos = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    ca, cb = _candidates(ref), _candidates(other)
    same_all = sum(1 for e in ca if [d for d, _ in ca[e]] == [d for d, _ in cb[e]])
    same_k = sum(1 for e in ca if [d for d, _ in ca[e][:K]] == [d for d, _ in cb[e][:K]])
    score_diff = max(
        (abs(s - dict(cb[e]).get(d, s)) for e in ca for d, s in ca[e]),
        default=0.0,
    )
    metrics_same = (ref / "eval/metrics.json").read_bytes() == (other / "eval/metrics.json").read_bytes()
    return (
        f"{_label(other):34s} vectors {len(common)}/{len(va)} shared keys, identical {np.mean(np.all(a == b, axis=1)):.1%}, "
        f"max |diff| {np.max(np.abs(a - b)):.2e}, largest cosine difference {np.max(1 - cos):.2e}; "
        f"rankings identical {same_all}/{len(ca)} (top-{K} {same_k}/{len(ca)}), max stored-score change "
        f"{score_diff:.1e}; metrics.json byte-identical: {metrics_same}"
    )  # fmt: skip


def _label(run: Path) -> str:
    cap = run / "capability.txt"
    return cap.read_text().strip() if cap.is_file() else run.name


def _margin(ref: Path) -> str:
    cands = _candidates(ref)
    gaps = [c[K - 1][1] - c[K][1] for c in cands.values() if len(c) > K]
    ties = sum(1 for c in cands.values() for x, y in zip(c, c[1:], strict=False) if x[1] == y[1])
    return (
        f"reference: smallest stored gap between rank {K} and {K + 1}: {min(gaps):.6f}; equal stored scores in "
        f"adjacent ranks (broken by document id): {ties}"
    )


def _edge_vs_exact() -> str:
    """Edge's candidates against float64 recomputation from the same cached vectors (this checkout's run)."""
    from doceval.config.compose import load_params
    from doceval.index.embed import make_embedder
    from doceval.inputs.corpus import load_corpus
    from doceval.inputs.golden import parse_golden

    params = load_params()
    corpus = load_corpus(Path(params.paths.docs))
    embedder = make_embedder(params.embedder, Path(params.paths.cache) / "embeddings.sqlite")
    cands = _candidates(Path("."))
    worst, same, compared = 0.0, 0, 0
    pins: dict[str, np.ndarray] = {}
    for entry in parse_golden(Path(params.golden)):
        part = corpus.partitions.get(entry.pin)
        if part is None or not cands.get(entry.id):
            continue
        if entry.pin not in pins:
            pins[entry.pin] = embedder.encode(part.texts).astype(np.float64)
        chunks = pins[entry.pin]
        scores = chunks @ embedder.encode([entry.question])[0].astype(np.float64)
        best: dict[str, float] = {}
        for doc, s in zip(part.doc_ids, scores, strict=True):
            best[doc] = max(best.get(doc, -2.0), float(s))
        exact = sorted(best.items(), key=lambda kv: (-round(kv[1], 6), kv[0]))[: len(cands[entry.id])]
        compared += 1
        same += [d for d, _ in exact] == [d for d, _ in cands[entry.id]]
        worst = max(
            worst, max(abs(round(s, 6) - t) for (_, s), (_, t) in zip(exact, cands[entry.id], strict=True))
        )
    return (
        f"Edge exact search vs float64 numpy over the same vectors: rankings identical {same}/{compared}; "
        f"largest stored-score difference {worst:.1e} (scores are stored to 6 decimals)"
    )  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "runs", nargs="*", type=Path, help="bench_repro.py --save folders; the first is the reference"
    )
    ap.add_argument(
        "--edge", action="store_true", help="check this checkout's Edge candidates against float64"
    )
    args = ap.parse_args()
    if args.runs:
        print(f"reference: {_label(args.runs[0])}")
        print(_margin(args.runs[0]))
        for other in args.runs[1:]:
            print(_compare(args.runs[0], other))
    if args.edge:
        print(_edge_vs_exact())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
