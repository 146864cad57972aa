"""The whole refusal trade-off, for the evaluate stage and the report: per library and pooled, the refusal
curve (refused_correctly against overrefusal_rate as the floor moves) on the calibration and test splits with
the chosen point, the AUROC of each answerability signal with its bootstrap interval, and the test-split
effect of per-library floors against one global floor (paired intervals).

Answerability signals (per question; docs/design.md section 5.5): ``top_score`` (the retriever's best
candidate score: what a floor on scores decides), ``margin`` (top-1 minus top-2 score), ``agreement`` (share
of the dense top 5 that bm25's top 5 also holds) and ``fused`` (the best reciprocal-rank-fusion score of the
dense and bm25 rankings, as the hybrid retriever fuses them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from doceval.common.plotting import panel_grid
from doceval.errors import UsageError
from doceval.harness.candidate_set import CandidateSet
from doceval.harness.candidates import bm25_rankings, score_range_of
from doceval.harness.floor_search import sweep
from doceval.inputs.corpus import Corpus
from doceval.inputs.golden import GoldenEntry
from doceval.scoring.answerability import auroc, auroc_interval
from doceval.scoring.metrics import build_matrix
from doceval.scoring.registry import names, retrieval_scores

SIGNALS = ("top_score", "margin", "agreement", "fused")
RRF_K = 60  # as the hybrid retriever
AGREEMENT_DEPTH = 5


def signals(
    entries: Sequence[GoldenEntry], cands: CandidateSet, bm25: Mapping[str, list[str]]
) -> dict[str, np.ndarray]:
    """Every signal per entry, ``-inf`` when the retriever returned nothing (never answerable)."""
    low = score_range_of(cands.meta)[0]
    out = {name: np.full(len(entries), -np.inf) for name in SIGNALS}
    for i, e in enumerate(entries):
        ranked = cands.ranked.get(e.id) or []
        if not ranked:
            continue
        scores = [s for _, s in ranked]
        out["top_score"][i] = scores[0]
        out["margin"][i] = scores[0] - (scores[1] if len(scores) > 1 else low)
        dense_top = {d for d, _ in ranked[:AGREEMENT_DEPTH]}
        out["agreement"][i] = len(dense_top & set(bm25.get(e.id, [])[:AGREEMENT_DEPTH])) / AGREEMENT_DEPTH
        bm25_rank = {d: r for r, d in enumerate(bm25.get(e.id, []), start=1)}
        fused = [
            1 / (RRF_K + r) + (1 / (RRF_K + bm25_rank[d]) if d in bm25_rank else 0.0)
            for r, (d, _) in enumerate(ranked, start=1)
        ]
        out["fused"][i] = max(fused)
    return out


FLOOR_SIGNALS = (
    "score",
    *SIGNALS[1:],
)  # floors.signal: score = per document (the default); others per question


def signal_floor_vector(signal: str, values: np.ndarray, floors: np.ndarray) -> np.ndarray:
    """Per-entry floors on the candidates' scores that implement a floor on a per-question signal: an entry
    whose signal reaches its floor keeps its top k (floor -inf), the others get nothing (floor +inf)."""
    if signal == "score":
        return floors
    return np.where(values >= floors, -np.inf, np.inf)


def entry_signal(
    signal: str, entries: Sequence[GoldenEntry], cands: CandidateSet, corpus: Corpus | None
) -> np.ndarray:
    """The per-question signal ``floors.signal`` names, per entry (bm25 is run only for the signals that need it)."""
    if signal not in FLOOR_SIGNALS[1:]:
        raise ValueError(signal)
    need_bm25 = signal in ("agreement", "fused")
    if need_bm25 and corpus is None:
        raise UsageError(
            f"floors.signal={signal}: needs the doceval corpus (bm25 ranks); use score or margin"
        )
    bm25 = bm25_rankings(entries, corpus, int(cands.depth)) if need_bm25 and corpus is not None else {}
    return signals(entries, cands, bm25)[signal]


def _auroc_block(values: np.ndarray, oos: np.ndarray, seed: int) -> dict[str, Any]:
    a = auroc(values[~oos], values[oos])
    ci = auroc_interval(values[~oos], values[oos], seed=seed)
    return {
        "auroc": a,
        "ci95": list(ci) if ci else None,
        "n_answerable": int((~oos).sum()),
        "n_out_of_scope": int(oos.sum()),
    }


def analyse(
    splits: Mapping[str, Sequence[GoldenEntry]],
    cands: CandidateSet,
    bm25: Mapping[str, list[str]],
    floors_of: Mapping[str, float],
    global_floor: float,
    k: int,
    threshold: int,
    seed: int = 0,
    grid_points: int = 101,
) -> dict[str, Any]:
    """Curves, chosen points and AUROCs per library and pooled, on each split; the signals side by side."""
    groups: dict[str, dict[str, list[GoldenEntry]]] = {}
    for split, entries in splits.items():
        routed = [e for e in entries if not cands.routed.get(e.id)]  # a router refusal never meets a floor
        for e in routed:
            groups.setdefault(e.library, {}).setdefault(split, []).append(e)
            groups.setdefault("(pooled)", {}).setdefault(split, []).append(e)
    all_scores = [
        s for entries in splits.values() for e in entries for _, s in (cands.ranked.get(e.id) or [])[:1]
    ]
    lo, hi = (min(all_scores), max(all_scores)) if all_scores else (0.0, 1.0)
    grid = np.linspace(lo - 1e-9, hi + 1e-9, grid_points)
    out: dict[str, Any] = {"grid": grid.tolist(), "libraries": {}, "signals": {}}
    for name, by_split in sorted(groups.items()):
        block: dict[str, Any] = {
            "floor": global_floor if name == "(pooled)" else floors_of.get(name, global_floor)
        }
        for split, entries in by_split.items():
            matrix = build_matrix(
                [cands.ranked[e.id] for e in entries], [e.grades for e in entries], threshold
            )
            oos = np.array([e.out_of_scope for e in entries], dtype=bool)
            curve = sweep(matrix, oos, grid, k)
            used = np.array([floors_of.get(e.library, global_floor) for e in entries])
            chosen = sweep_at(matrix, oos, used, k)
            sig = signals(entries, cands, bm25)
            block[split] = {
                "curve": {
                    m: [None if v != v else float(v) for v in curve[m]] for m in names("tradeoff_curve")
                },
                "chosen": chosen,
                "top_score": _auroc_block(sig["top_score"], oos, seed),
            }
            if name == "(pooled)":
                out["signals"][split] = {s: _auroc_block(sig[s], oos, seed) for s in SIGNALS}
        out["libraries"][name] = block
    return out


def sweep_at(matrix: Any, oos: np.ndarray, floors: np.ndarray, k: int) -> dict[str, float | None]:
    """refused_correctly, overrefusal_rate and hit_rate at per-entry floors (the operating point used)."""
    per = retrieval_scores(matrix, floors, k)
    refused = per["refused"].astype(np.float64)
    hits = per["hit_rate"][~oos]
    return {
        "refused_correctly": float(refused[oos].mean()) if oos.any() else None,
        "overrefusal_rate": float(refused[~oos].mean()) if (~oos).any() else None,
        "hit_rate": float(np.nanmean(hits)) if len(hits) and not np.all(np.isnan(hits)) else None,
    }


def plot(data: Mapping[str, Any], path: Path) -> None:
    """One panel per library and pooled: refused_correctly against overrefusal_rate as the floor moves,
    calibration (solid) and test (dashed), the operating point used marked on each."""
    names = list(data["libraries"])
    title = "Refusal trade-off as the floor moves (dots: the floors used)"
    with panel_grid(len(names), path, title, panel_height=3.6) as axes:
        for ax, name in zip(axes, names, strict=True):
            _panel(ax, name, data["libraries"][name])


def _panel(ax: Any, name: str, block: Mapping[str, Any]) -> None:
    for split, style, color in (("calibration", "-", "tab:blue"), ("test", "--", "tab:orange")):
        if split not in block:
            continue
        c = block[split]["curve"]
        x = [np.nan if v is None else v for v in c["overrefusal_rate"]]
        y = [np.nan if v is None else v for v in c["refused_correctly"]]
        a = block[split]["top_score"]["auroc"]
        ax.plot(x, y, style, color=color, label=f"{split} (AUROC {a:.2f})" if a is not None else split)
        p = block[split]["chosen"]
        if p["overrefusal_rate"] is not None and p["refused_correctly"] is not None:
            ax.plot([p["overrefusal_rate"]], [p["refused_correctly"]], "o", color=color, ms=6)
    ax.set_title(name, fontsize=9)
    ax.set_xlabel("overrefusal_rate (answerable refused)")
    ax.set_ylabel("refused_correctly")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=7, loc="lower right")
