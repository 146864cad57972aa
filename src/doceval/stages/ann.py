"""ANN vs exact: the configured (approximate) search against exact search on the same index and split.

The retrieve stage caches both candidate lists when the search is approximate (``exact.jsonl`` beside
``candidates.jsonl``); this scores the exact list with the same plan (floors, k, entries), pairs it with the run entry by
entry (``doceval.results.comparison.compare``: paired 95% intervals, nothing new), and adds the mean top-k
overlap of the two rankings. Cheap: no retrieval, one more scoring pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.harness.candidate_cache import load_candidates
from doceval.harness.candidate_set import EXACT
from doceval.harness.evaluate import evaluate
from doceval.harness.plan import EvalOptions, RunPlan, variant
from doceval.results.comparison import compare
from doceval.scoring.registry import names
from doceval.summary import Summary

if TYPE_CHECKING:
    from doceval.config.schema import Config

METRICS = names("ann")


def top_k_overlap(ann: list[str], exact: list[str], k: int) -> float | None:
    """Share of the exact top-k that the approximate top-k also holds (None when exact found nothing)."""
    reference = exact[:k]
    if not reference:
        return None
    return len(set(ann[:k]) & set(reference)) / len(reference)


def ann_vs_exact(cfg: Config, summary: Summary, plan: RunPlan) -> dict[str, Any]:
    """``{"search", "k", "exact": true}`` when the configured search is exact; otherwise also ``rows`` (one per
    metric: exact, configured, change, ci95 or ci_note (why there is none), p, n) and ``overlap_at_k`` (mean over entries, and n). ``plan``:
    the run's (its candidates are the configured search's); only the exact twin is loaded here."""
    search, k = summary.settings.candidates.search, summary.settings.k
    assert k is not None  # a run of doceval's agent records its k
    out: dict[str, Any] = {"search": search, "k": k, "split": summary.settings.split}
    if search is None:
        return {**out, "exact": None, "note": "the retriever does not search the index"}
    if search.get("exact", True):
        return {**out, "exact": True}
    assert plan.candidates is not None
    ann, exact = plan.candidates, load_candidates(Path(cfg.paths.runs), EXACT)
    exact_plan = variant(cfg, plan, candidates=exact)
    exact_summary = evaluate(cfg, EvalOptions(progress=False, candidates=exact), exact_plan)
    result = compare(
        exact_summary,
        summary,
        n_boot=cfg.bootstrap,
        seed=cfg.seed,
        base_label="exact",
        new_label="configured",
    )
    overlaps = [
        top_k_overlap([d for d, _ in ann.ranked.get(e.id, [])], [d for d, _ in exact.ranked.get(e.id, [])], k)
        for e in summary.entries
    ]
    found = [o for o in overlaps if o is not None]
    rows = [
        {
            "metric": r.metric,
            "exact": r.base,
            "configured": r.new,
            "change": r.change,
            "ci95": list(r.ci) if r.ci else None,
            "ci_note": r.ci_note,
            "p": r.p_value,
            "n": r.n_paired,
        }
        for r in result.rows
        if r.metric in METRICS
    ]
    return {
        **out,
        "exact": False,
        "rows": rows,
        "overlap_at_k": {"mean": sum(found) / len(found) if found else None, "n": len(found)},
    }
