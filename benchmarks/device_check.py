"""A GPU against the portable default: encode speed, agreement and rankings of MiniLM on CUDA vs CPU fp32.

    python benchmarks/device_check.py [--sample 2000] [--precision fp32,bf16_weights]

A manual check, outside CI (there is no GPU there). It needs the corpus (`dvc repro docs`) and a CUDA build of
torch (docs/gpu.md). On a machine where torch sees no GPU it says so and exits 0.

1. Speed: the same seeded sample of corpus chunks encoded by CPU fp32 (the committed headline's embedder) and by
   each device precision, after a warm-up; chunks per second and the speed-up.
2. Agreement: the cosine between each chunk's CPU fp32 vector and its device vector (smallest and mean).
3. Rankings: every chunk of the corpus embedded on the device (CPU fp32 vectors come from the pipeline's
   embedding cache when it has them), exact cosine search per golden question over its pin, documents ranked by
   the pipeline's rule (score at 6 decimals, then document id); the share of questions whose top-5 ids equal
   CPU fp32's.
A run on a machine with a GPU is another cache key (`:cuda`) and never the committed headline (design.md 2.3).
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np

K = 5


def _top_k(
    chunks: dict[str, np.ndarray], corpus: object, entries: list, queries: np.ndarray
) -> list[list[str]]:
    out = []
    for entry, q in zip(entries, queries, strict=True):
        part = corpus.partitions.get(entry.pin)  # type: ignore[attr-defined]
        if part is None:
            out.append([])
            continue
        best: dict[str, float] = {}
        for doc, s in zip(part.doc_ids, chunks[entry.pin] @ q, strict=True):
            best[doc] = max(best.get(doc, -2.0), float(s))
        out.append([d for d, _ in sorted(best.items(), key=lambda kv: (-round(kv[1], 6), kv[0]))[:K]])
    return out


def _speed(embedder: object, sample: list[str]) -> tuple[np.ndarray, float]:
    embedder.encode(sample[:64])  # type: ignore[attr-defined]  # warm-up (CUDA context, kernels)
    t0 = time.perf_counter()
    vectors = embedder.encode(sample)  # type: ignore[attr-defined]
    return vectors, len(sample) / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=2000, help="chunks for the speed and agreement figures")
    ap.add_argument("--precision", default="fp32,bf16_weights", help="device precisions, comma-separated")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print(f"no GPU: torch {torch.__version__} sees no CUDA device (the CPU build never does; docs/gpu.md"
              " says how to install a CUDA build); nothing to check")  # fmt: skip
        return 0
    from doceval.config.compose import compose, load_params
    from doceval.index.embed import MiniLMEmbedder, make_embedder
    from doceval.inputs.corpus import load_corpus
    from doceval.inputs.golden import parse_golden

    params = load_params()
    corpus = load_corpus(Path(params.paths.docs))
    entries = [e for e in parse_golden(Path(params.golden)) if not e.out_of_scope]
    texts = [t for p in corpus.partitions.values() for t in p.texts]
    sample = random.Random(0).sample(texts, min(args.sample, len(texts)))
    print(f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; {len(sample)} chunks sampled")

    cpu = MiniLMEmbedder(batch_size=64, precision="fp32", device="cpu")
    cpu_vecs, cpu_rate = _speed(cpu, sample)
    print(f"  cpu fp32            {cpu_rate:8.1f} chunks/s ({torch.get_num_threads()} threads)")
    cpu_fp32 = compose(
        ["embedder=minilm", "embedder.batch_size=64", "embedder.precision=fp32", "embedder.device=cpu"]
    )
    cached = make_embedder(cpu_fp32.embedder, Path(params.paths.cache) / "embeddings.sqlite")
    ref_chunks = {pin: cached.encode(p.texts) for pin, p in corpus.partitions.items()}
    ref_top = _top_k(ref_chunks, corpus, entries, cached.encode([e.question for e in entries]))
    for precision in args.precision.split(","):
        gpu = MiniLMEmbedder(batch_size=256, precision=precision, device="cuda")
        vecs, rate = _speed(gpu, sample)
        cos = np.sum(cpu_vecs * vecs, axis=1)
        t0 = time.perf_counter()
        chunks = {pin: gpu.encode(p.texts) for pin, p in corpus.partitions.items()}
        whole = time.perf_counter() - t0
        top = _top_k(chunks, corpus, entries, gpu.encode([e.question for e in entries]))
        same = sum(a == b for a, b in zip(top, ref_top, strict=True))
        print(f"  cuda {precision:14s} {rate:8.1f} chunks/s ({rate / cpu_rate:.1f}x cpu fp32); cosine to cpu fp32 "
              f"min {cos.min():.6f}, mean {cos.mean():.6f}; whole corpus ({len(texts)} chunks) {whole:.1f} s; "
              f"top-{K} ids identical to cpu fp32 for {same}/{len(entries)} in-scope questions "
              f"({same / len(entries):.1%})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
