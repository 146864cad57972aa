"""MiniLM encode throughput per precision on each CPU class, in one run: AVX2-only, AVX-512, AVX-512 BF16, AMX.

    python benchmarks/bench_embed_isa.py [--sample 400] [--rounds 3] [--batches 16,32,64,128]

A better CPU is made to behave like a lesser one (torch's ATEN_CPU_CAPABILITY, oneDNN's ONEDNN_MAX_CPU_ISA, MKL's
MKL_ENABLE_INSTRUCTIONS), one fresh interpreter per class, so each row is what a machine of that class runs. In
each, the same seeded sample of corpus chunks is encoded by fp32, bf16 autocast and bf16 weights with their
conf/embedder batch sizes (after a warm-up), in interleaved rounds; the figure is the median. A class above what
this CPU has is "not measured here". Then, uncapped, fp32 at other batch sizes and thread counts (the portable
default's own speed knobs), each with the largest difference of its vectors from batch 64's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from bench_embed_precision import conf_variants

from doceval.index.hardware import ISA_CAPS, capped_env

VARIANTS = conf_variants()  # precision -> conf/embedder/minilm*.yaml's batch size
CLASSES = {
    "AVX2": ISA_CAPS["avx2"],
    "AVX-512": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"},
    "AVX-512 BF16": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"},
    "AMX": {},
}  # fmt: skip


def _sample(n: int) -> list[str]:
    from doceval.config.compose import load_params
    from doceval.inputs.corpus import load_corpus

    corpus = load_corpus(Path(load_params().paths.docs))
    texts = [t for p in corpus.partitions.values() for t in p.texts]
    return random.Random(0).sample(texts, min(n, len(texts)))


def worker(sample_n: int, rounds: int) -> None:
    """In the capped interpreter: the class torch sees, then chunks/s per precision (median of rounds)."""
    from doceval.index.embed import MiniLMEmbedder
    from doceval.index.hardware import cpu_capability

    sample = _sample(sample_n)
    models = {p: MiniLMEmbedder(batch_size=b, device="cpu", precision=p) for p, b in VARIANTS.items()}
    for m in models.values():
        m.encode(sample[:32])  # warm-up
    times: dict[str, list[float]] = {p: [] for p in models}
    for _ in range(rounds):
        for p, m in models.items():
            t0 = time.perf_counter()
            m.encode(sample)
            times[p].append(time.perf_counter() - t0)
    rates = {p: len(sample) / sorted(t)[len(t) // 2] for p, t in times.items()}
    print(json.dumps({"class": cpu_capability().machine_class, "rates": rates}))


def knobs(sample_n: int, batches: list[int]) -> None:
    """Uncapped fp32: batch sizes and thread counts, side by side, and how far their vectors are from batch 64's."""
    import numpy as np
    import torch

    from doceval.index.embed import MiniLMEmbedder

    sample = _sample(sample_n)
    model = MiniLMEmbedder(batch_size=64, device="cpu", precision="fp32")
    model.encode(sample[:32])
    ref = model.encode(sample)
    print(f"fp32 speed knobs (uncapped, {len(sample)} chunks; vectors compared with batch 64, 2 threads):")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for batch in batches:
            model.batch_size = batch
            t0 = time.perf_counter()
            vecs = model.encode(sample)
            rate = len(sample) / (time.perf_counter() - t0)
            print(f"  threads {threads} batch {batch:3d}: {rate:6.1f} chunks/s, max |diff| "
                  f"{float(np.max(np.abs(vecs - ref))):.1e}")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", default="16,32,64,128")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.sample, args.rounds)
        return 0
    from doceval.index.hardware import cpu_capability

    best = cpu_capability()
    order = list(CLASSES)
    print(f"this CPU: {best.describe()}; {os.cpu_count()} cpus; {args.sample} chunks, {args.rounds} rounds")
    print(
        f"| CPU class | {' | '.join(f'{p} (batch {b})' for p, b in VARIANTS.items())} | bf16_weights vs fp32 |"
    )
    print(f"|---|{'---:|' * (len(VARIANTS) + 1)}")
    for name in order:
        if order.index(name) > order.index(best.machine_class):
            print(f"| {name} | not measured here | | | |")
            continue
        env = capped_env(CLASSES[name])
        out = subprocess.run(
            [sys.executable, __file__, "--worker", "--sample", str(args.sample), "--rounds", str(args.rounds)],
            env=env, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        row = json.loads(out.strip().splitlines()[-1])
        rates = row["rates"]
        cells = " | ".join(f"{rates[p]:.1f}/s" for p in VARIANTS)
        ratio = rates["bf16_weights"] / rates["fp32"]
        print(f"| {name} (ran as {row['class']}) | {cells} | {ratio:.2f}x |")
    knobs(args.sample, [int(b) for b in args.batches.split(",")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
