"""DVC stage `evaluate`: the held-out split with the calibrated floors -> eval/summary.json + eval/metrics.json."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval import tracking
from doceval.common.io import atomic_dir, check_writable, write_json_atomic
from doceval.common.naming import is_own_agent
from doceval.harness import tradeoff
from doceval.harness.candidate_cache import load_candidates
from doceval.harness.candidate_set import CandidateSet
from doceval.harness.candidates import bm25_rankings
from doceval.harness.evaluate import EvalOptions, evaluate
from doceval.harness.floors import Floors
from doceval.harness.plan import (
    RunPlan,
    load_inputs,
    plan_run,
    retrieve_live,
    uses_function_retriever,
    variant,
)
from doceval.harness.summary import pipeline_record
from doceval.inputs.configured import refuse_stage_overlap
from doceval.inputs.corpus import Corpus
from doceval.inputs.golden import GoldenEntry, select_split
from doceval.results.comparison import compare
from doceval.scoring.registry import METRIC_NAMES, names
from doceval.stages.ann import ann_vs_exact
from doceval.summary import Summary, as_summary

if TYPE_CHECKING:
    from doceval.config.schema import Config

ANN_VS_EXACT = "ann_vs_exact.json"  # the report's "ANN vs exact" (doceval.stages.ann)


def headline_metrics(summary: Summary | Mapping[str, Any]) -> dict[str, Any]:
    """The DVC metrics file: headline values and counts, flat enough for `dvc metrics diff`."""
    typed = as_summary(summary)
    return {
        **{k: typed.metrics.value(k) for k in METRIC_NAMES},
        **typed.metrics.counts,
        "split": typed.settings.split,
        "k": typed.settings.k,
    }


def run(cfg: Config, progress: bool = True) -> tuple[Summary, RunPlan]:
    """The summary and the one plan every section shares: the golden set, the corpus and the candidates are
    loaded once, and the system is asked once per entry (docs/design.md, "Plan once, run once")."""
    out = Path(cfg.paths.eval)
    # Outputs and the tracking store are checked before any work: a run must not be lost at the end.
    fix = f"make {out} writable, or set paths.eval to a writable folder (conf/, then `doceval params`)"
    for name in ("summary.json", "metrics.json", ANN_VS_EXACT):
        check_writable(out / name, str(out / name), fix)
    names = ("summary.json", "metrics.json", ANN_VS_EXACT, "tradeoff")
    refuse_stage_overlap(cfg, [("the evaluate stage's output (paths.eval)", out / n) for n in names])
    tracking.check_configured(cfg)
    options = EvalOptions(progress=progress)
    # A user's retriever runs here, once: the comparisons below reuse its candidates.
    plan = retrieve_live(cfg, options, plan_run(cfg, options))
    summary = evaluate(cfg, options, plan)
    write_json_atomic(out / "summary.json", pipeline_record(summary))  # MLflow gets the whole summary
    write_json_atomic(out / "metrics.json", headline_metrics(summary))
    if is_own_agent(cfg.agent.name):
        write_json_atomic(out / ANN_VS_EXACT, ann_vs_exact(cfg, summary, plan))
    if plan.floors.source.startswith("calibrated") and is_own_agent(cfg.agent.name):
        trade_off(cfg, summary, plan, out / "tradeoff")
    return summary, plan


TRADEOFF_METRICS = names("tradeoff_effect")


def trade_off(cfg: Config, summary: Summary, plan: RunPlan, folder: Path) -> None:
    """eval/tradeoff: the refusal curves, AUROCs and signals (doceval.harness.tradeoff) and the test-split
    effect of the per-library floors against the global floor alone, with paired intervals."""
    floors = plan.floors  # the floors the run used, resolved by its plan
    corpus, entries, golden_path, cands = _tradeoff_inputs(cfg, plan)
    splits = {
        "calibration": select_split(entries, cfg.calibration.split, golden_path),
        "test": select_split(entries, plan.split, golden_path),
    }
    bm25 = _bm25(cfg, [e for es in splits.values() for e in es], corpus, cands)
    data = tradeoff.analyse(
        splits,
        cands,
        bm25,
        dict(floors.per_library),
        floors.global_floor,
        cfg.k,
        cfg.relevance.threshold,
        seed=cfg.seed,
    )
    # One global floor for every library, on the same test entries: is the per-library choice worth it?
    # The provenance as the summary records it (the calibrated ids shortened to their count).
    pooled = Floors(
        floors.global_floor,
        {},
        source=f"{floors.source} (global floor only)",
        provenance=floors.as_dict()["provenance"],
    )
    single = evaluate(cfg, EvalOptions(progress=False, floors=pooled), variant(cfg, plan, floors=pooled))
    result = compare(single, summary, n_boot=cfg.bootstrap, seed=cfg.seed)
    data["per_library_vs_global"] = {
        "global_floor": floors.global_floor,
        "rows": [
            {
                "metric": r.metric,
                "global": r.base,
                "per_library": r.new,
                "change": r.change,
                "ci95": list(r.ci) if r.ci else None,
                "ci_note": r.ci_note,
                "p": r.p_value,
                "p_holm": r.p_holm,
                "n": r.n_paired,
            }
            for r in result.rows
            if r.metric in TRADEOFF_METRICS
        ],
    }
    with atomic_dir(folder) as tmp:
        write_json_atomic(tmp / "tradeoff.json", data)
        tradeoff.plot(data, tmp / "tradeoff.png")


def _tradeoff_inputs(cfg: Config, plan: RunPlan) -> tuple[Corpus, list[GoldenEntry], Path, CandidateSet]:
    """The corpus (bm25's second ranking), every golden entry and the candidates of both splits: the plan's,
    when a built-in retriever's cache gave them. A user's retriever ran live on the test split only, and
    brings no doceval corpus: its calibration-split candidates are the retrieve stage's cache."""
    if plan.corpus is not None and not uses_function_retriever(cfg, EvalOptions()):
        assert plan.candidates is not None
        return plan.corpus, plan.all_entries, plan.golden_path, plan.candidates
    corpus, entries, golden_path, _ = load_inputs(cfg, EvalOptions(progress=False))
    assert corpus is not None
    return corpus, entries, golden_path, load_candidates(Path(cfg.paths.runs))


def _bm25(
    cfg: Config, entries: Sequence[GoldenEntry], corpus: Corpus, cands: CandidateSet
) -> dict[str, list[str]]:
    """bm25's ranking per entry: the retrieve stage's, cached with the candidates at the same depth, or built."""
    depth = cfg.candidates_k
    cached = cands.bm25
    if cached is not None and cands.depth == depth and all(e.id in cached for e in entries):
        return {e.id: cached[e.id] for e in entries}
    return bm25_rankings(entries, corpus, depth)


def track(cfg: Config, summary: Summary, plan: RunPlan | None = None) -> str | None:
    """Log the run; the traces' document texts come from the plan's corpus (already loaded) when it has one."""
    texts = plan.corpus.first_chunks if plan is not None and plan.corpus is not None else None
    return tracking.log_configured_run(
        cfg, summary, {}, run_name=None, tags={"stage": "evaluate"}, doc_texts=texts
    )
