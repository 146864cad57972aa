"""Retrieval scores of one run: every retrieval metric of the registry per entry, and R (after floors and k),
from doceval's candidates (:func:`score_retrieval`) or from the sources a user's assistant returned
(:func:`score_sources`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from doceval.harness.plan import RunPlan
from doceval.scoring.metrics import build_matrix, cut
from doceval.scoring.registry import RETRIEVAL_NAMES, retrieval_scores
from doceval.seam import Reply


@dataclass(frozen=True)
class RetrievalScores:
    per_entry: dict[str, np.ndarray]  # every retrieval metric of the registry, NaN where it does not apply
    retrieved: dict[str, list[tuple[str, float | None]]]  # R per entry id (after floors and k), rank order


def _score(
    plan: RunPlan, ranked: list[list[tuple[str, float]]]
) -> tuple[dict[str, np.ndarray], list[list[tuple[str, float]]]]:
    """The registry's retrieval metrics over ranked lists, and R (after floors and k) per entry."""
    entries = plan.entries
    matrix = build_matrix(ranked, [e.grades for e in entries], plan.threshold)
    floor_vec = plan.floors.vector(entries)
    if plan.signal != "score" and plan.signal_values is not None:
        # lazy: start-up (the trade-off and floor search, ~35 ms, load only for a per-question signal)
        from doceval.harness.tradeoff import signal_floor_vector

        values = np.array([plan.signal_values[e.id] for e in entries])
        floor_vec = signal_floor_vector(plan.signal, values, floor_vec)
    out_of_scope = np.array([e.out_of_scope for e in entries], dtype=bool)
    per = retrieval_scores(matrix, floor_vec, plan.k, out_of_scope=out_of_scope)
    in_r = cut(matrix, floor_vec, plan.k)
    rows = [
        [(matrix.doc_ids[i][j], float(matrix.scores[i, j])) for j in np.flatnonzero(in_r[i])]
        for i in range(len(entries))
    ]
    return {m: per[m] for m in RETRIEVAL_NAMES}, rows


def score_retrieval(plan: RunPlan) -> RetrievalScores:
    """Per-entry retrieval scores from the candidates, the floors and the cut at k. R is also what the agent's
    search tool returns, so retrieval and answers are scored on the same passages."""
    assert plan.candidates is not None
    per, rows = _score(plan, [plan.candidates.ranked[e.id] for e in plan.entries])
    # A retriever that returns bare ids has no scores to show: its rank-keeping stand-ins are not reported.
    keep = plan.scored
    retrieved = {e.id: [(d, s if keep else None) for d, s in rows[i]] for i, e in enumerate(plan.entries)}
    return RetrievalScores(per, retrieved)


def score_sources(plan: RunPlan, replies: Mapping[str, Reply]) -> RetrievalScores:
    """Retrieval scores from the sources an assistant returned, in its order, cut at k (no floors: it applies
    its own). Scores it did not give are kept as None; ranks stand in for them inside the matrix."""
    ranked = []
    for e in plan.entries:
        sources = replies[e.id].sources
        ranked.append([(s.id, float(len(sources) - i)) for i, s in enumerate(sources)])
    per, rows = _score(plan, ranked)
    given = {e.id: {s.id: s.score for s in replies[e.id].sources} for e in plan.entries}
    retrieved = {e.id: [(d, given[e.id].get(d)) for d, _ in rows[i]] for i, e in enumerate(plan.entries)}
    return RetrievalScores(per, retrieved)
