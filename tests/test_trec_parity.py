"""Per-query parity of doceval's retrieval metrics with trec_eval (via pytrec_eval).

Mapping: hit_rate@k = success_k, recall@k = recall_k, ndcg@k = ndcg_cut_k (binary qrels), mrr = recip_rank.
trec_eval's recip_rank has no cutoff, so it is checked two exact ways: against our mrr with k = the full list
length on the full run, and against our mrr@k on a run truncated to its top k documents.
"""

from __future__ import annotations

import numpy as np
import pytest

from doceval.scoring.metrics import build_matrix, retrieval_scores

pytrec_eval = pytest.importorskip("pytrec_eval")

CUTOFFS = (1, 3, 5, 10)
MEASURES = {f"{m}.{','.join(map(str, CUTOFFS))}" for m in ("success", "recall", "ndcg_cut")} | {"recip_rank"}
TOL = 1e-9


Ranked = list[list[tuple[str, float]]]
Qrels = dict[str, dict[str, int]]
TrecRun = dict[str, dict[str, float]]


def random_runs(seed: int, n_queries: int = 60, pool: int = 80) -> tuple[Ranked, list[set[str]], Qrels]:
    """Seeded runs: distinct scores in descending list order (so trec_eval's sort-by-score reproduces the
    list order), 1-6 relevant docs per query of which some are usually not retrieved, judged non-relevant
    docs in the qrels too, and list lengths from 1 to 20 (shorter and longer than the cutoffs)."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i:03d}" for i in range(pool)]
    ranked: Ranked = []
    relevant: list[set[str]] = []
    qrels: Qrels = {}
    for q in range(n_queries):
        length = int(rng.integers(1, 21))
        picked = rng.choice(pool, size=length, replace=False)
        # Distinct scores by construction: sampled without replacement from a grid, then sorted descending.
        scores = np.sort(rng.choice(10**6, size=length, replace=False))[::-1] / 1e6
        ranked.append([(docs[d], float(s)) for d, s in zip(picked, scores, strict=True)])
        rel = {docs[d] for d in rng.choice(pool, size=int(rng.integers(1, 7)), replace=False)}
        relevant.append(rel)
        nonrel = {docs[d] for d in rng.choice(pool, size=5, replace=False)} - rel
        qrels[f"q{q}"] = {d: 1 for d in rel} | {d: 0 for d in nonrel}
    return ranked, relevant, qrels


def to_run(ranked: Ranked, floors: np.ndarray | None = None, top: int | None = None) -> TrecRun:
    """trec run dict, optionally dropping docs below the entry's floor and keeping only the first `top`."""
    run: TrecRun = {}
    for q, lst in enumerate(ranked):
        kept = [(d, s) for d, s in lst if floors is None or s >= floors[q]]
        if top is not None:
            kept = kept[:top]
        if kept:  # trec_eval cannot represent an empty ranking; the caller expects 0 for those queries
            run[f"q{q}"] = dict(kept)
    return run


def trec(qrels: Qrels, run: TrecRun, measures: set[str] = MEASURES) -> dict[str, dict[str, float]]:
    result: dict[str, dict[str, float]] = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    return result


def assert_parity(
    ours: dict[str, np.ndarray], theirs: dict[str, dict[str, float]], k: int, n: int, with_rr: bool
) -> None:
    pairs = {"hit_rate": f"success_{k}", "recall": f"recall_{k}", "ndcg": f"ndcg_cut_{k}"}
    if with_rr:
        pairs["mrr"] = "recip_rank"
    for q in range(n):
        for our_key, trec_key in pairs.items():
            # A query absent from the run (everything below its floor) scores 0 in trec_eval -c terms.
            expected = theirs[f"q{q}"][trec_key] if f"q{q}" in theirs else 0.0
            assert ours[our_key][q] == pytest.approx(expected, abs=TOL), (q, our_key, k)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_parity_without_floors(seed: int) -> None:
    ranked, relevant, qrels = random_runs(seed)
    m = build_matrix(ranked, relevant)
    no_floor = np.full(m.n, -np.inf)
    # Sanity: the generator does produce relevant docs that are never retrieved.
    assert (m.relevant.sum(axis=1) < m.n_relevant).any()
    full = trec(qrels, to_run(ranked))
    for k in CUTOFFS:
        assert_parity(retrieval_scores(m, no_floor, k), full, k, m.n, with_rr=False)
        # mrr@k == recip_rank on the run truncated to the top k docs.
        assert_parity(retrieval_scores(m, no_floor, k), trec(qrels, to_run(ranked, top=k)), k, m.n, True)
    # Uncut mrr == recip_rank on the full run.
    uncut = retrieval_scores(m, no_floor, m.width)
    for q in range(m.n):
        assert uncut["mrr"][q] == pytest.approx(full[f"q{q}"]["recip_rank"], abs=TOL)


@pytest.mark.parametrize("seed", [10, 11])
def test_parity_with_per_entry_floors(seed: int) -> None:
    # Same run filtered by a per-query floor before trec_eval sees it; some floors empty a query's run.
    ranked, relevant, qrels = random_runs(seed)
    m = build_matrix(ranked, relevant)
    floors = np.random.default_rng(seed).uniform(0.0, 1.1, m.n)
    assert any(max(s for _, s in lst) < f for lst, f in zip(ranked, floors, strict=True))
    for k in CUTOFFS:
        theirs = trec(qrels, to_run(ranked, floors=floors, top=k))
        assert_parity(retrieval_scores(m, floors, k), theirs, k, m.n, with_rr=True)
