"""The run summary (docs/design.md section 4.1) from what :func:`doceval.harness.evaluate.evaluate` measured: one
row per entry with its scores (a system error is scored by no metric), the aggregates over the rows, and the
effective configuration, scrubbed (doceval.common.redact) before it leaves the harness."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from doceval.common.naming import OWN_AGENT
from doceval.common.provenance import provenance
from doceval.common.redact import scrub, scrub_data, secret_values
from doceval.config.objects import config_dict
from doceval.harness.judge_evidence import evidence_for
from doceval.inputs.qrels import qrels_path, read_pool
from doceval.scoring.aggregate import aggregate
from doceval.scoring.conversations import ClusterSettings, conversation_metrics
from doceval.scoring.failures import failure_stage
from doceval.scoring.judge import judge_id
from doceval.scoring.registry import AT_K_NAMES, METRIC_NAMES, names
from doceval.seam import sum_usage
from doceval.summary import Summary

if TYPE_CHECKING:
    from doceval.config import schema
    from doceval.config.schema import Config
    from doceval.harness.plan import RunPlan
    from doceval.harness.retrieval_scores import RetrievalScores
    from doceval.harness.run_parts import AgentSetup, AnswerScores, SystemRun
    from doceval.llm import Ledger

__all__ = ["answerer_record", "build_summary", "pipeline_record", "public_block", "ran_on", "system_block"]


def system_block(cfg: Config, plan: RunPlan) -> dict[str, Any]:
    """What was evaluated, for the summary, MLflow and the report: doceval's agent with its retriever (a
    user's function named by target, kwargs and source hash), or the user's assistant."""
    if plan.agent is not None:
        return {"agent": plan.agent.describe()}
    meta = plan.candidates.meta if plan.candidates is not None else {}
    retriever = meta.get("system") or {"retriever": cfg.retriever.name}
    return {"agent": {"name": OWN_AGENT}, "retriever": retriever}


def answerer_record(answerer: schema.Answerer | None, plan: RunPlan) -> dict[str, Any]:
    """The answerer as the run key and the summary record it: the configured block (doceval's agent), or the
    user's assistant by its kind (``{"name": "function"}``)."""
    return {"name": plan.system} if answerer is None else config_dict(answerer)


def _scores(per_entry: Mapping[str, np.ndarray], i: int, error: str | None) -> dict[str, float | None]:
    # A system error is neither right nor wrong: the entry is scored by no metric.
    return {m: None if error is not None else _none_if_nan(per_entry[m][i]) for m in METRIC_NAMES}


def build_summary(
    cfg: Config,
    plan: RunPlan,
    setup: AgentSetup,
    retrieval: RetrievalScores,
    run: SystemRun,
    answers: AnswerScores,
    ledger: Ledger,
    total_entries: int,
    *,
    unmeasured: str | None,
    journal: Mapping[str, Any],
) -> Summary:
    """The typed summary of ``{"metrics", "config", "entries", "complete"}``, typed once here: one row per entry with its scores, the aggregates over
    the rows (means, counts, intervals, breakdowns) with k next to the metrics it applies to, and the
    effective configuration with the system under test and the whole run's LLM usage. ``unmeasured``: why the
    answer-text metrics could not be measured (None: they were); ``journal``: where the run's journal was and
    how it was reused (``usage.journal``)."""
    routed = plan.candidates.routed if plan.candidates is not None else {}
    entry_rows = _entry_rows(plan, retrieval, run, answers, routed)
    verdicts = answers.verdicts.values()
    metrics = aggregate(
        entry_rows, METRIC_NAMES, seed=cfg.seed, n_boot=cfg.bootstrap, binary_method=cfg.intervals.binary
    )
    metrics["counts"].update(
        {
            "n_judged": int(sum(v.verdict is not None for v in verdicts)),
            "judge_errors": int(sum(v.judge_error is not None for v in verdicts)),
            "n_refused": int(sum(r.refused for r in run.replies.values() if r.error is None)),
            "n_router_refused": int(sum(bool(routed.get(e.id)) for e in plan.entries)),
            "system_errors": int(sum(r.error is not None for r in run.replies.values())),
        }
    )
    metrics["not_judged"] = setup.judge is None
    metrics["cutoffs"] = {name: plan.k for name in AT_K_NAMES}
    # Only a run with conversation turns gains the block: a single-question summary stays as it was.
    conversations = conversation_metrics(
        entry_rows, ClusterSettings(n_boot=cfg.bootstrap, seed=cfg.seed, binary_method=cfg.intervals.binary)
    )
    if conversations is not None:
        metrics["conversations"] = conversations
    if unmeasured is not None:
        # Null metrics that say why: the headline, compare, the gate and the report read this.
        metrics["not_measured"] = {m: unmeasured for m in names("answer_text")}
    recorded = public_block(_config_block(cfg, plan, setup, run, answers, ledger))
    # Beside usage.resumed / resumed_verdicts (how many came from a journal): why, and from where.
    recorded["usage"]["journal"] = dict(journal)
    # Every block (a user's retriever kwargs and URLs included), not only the model blocks, is stored scrubbed;
    # the entries (answers, errors, extras a system echoed) lose every registered secret.
    summary: dict[str, Any] = {
        "metrics": metrics,
        "config": recorded,
        "entries": scrub_data(entry_rows),
    }
    summary["complete"] = not (run.stopped or answers.stopped)
    if run.stopped or answers.stopped:
        summary["incomplete"] = {
            "reason": run.stop_reason or answers.stopped or f"stopped after {run.n_errors} system errors",
            "entries_scored": len(plan.entries),
            "entries_in_split": total_entries,
        }
    return Summary.from_mapping(summary)


def _entry_rows(
    plan: RunPlan,
    retrieval: RetrievalScores,
    run: SystemRun,
    answers: AnswerScores,
    routed: Mapping[str, str | None],
) -> list[dict[str, Any]]:
    per_entry = {**retrieval.per_entry, **answers.per_entry}
    rows = []
    for i, e in enumerate(plan.entries):
        r, v = run.replies[e.id], answers.verdicts.get(e.id)
        row: dict[str, Any] = {
            "id": e.id,
            "split": e.split,
            "library": e.library,
            "version": e.version,
            "kind": e.kind,
            "question": e.question,
            "out_of_scope": e.out_of_scope,
            "relevant_ids": list(e.relevant_ids),
            # The version strings the answer was checked against: the report can explain a 0, a rescore redo it.
            "expected_apis": list(e.expected_apis),
            "expected_any": [list(g) for g in e.expected_any],
            "forbidden_apis": list(e.forbidden_apis),
            "retrieved": [[d, None if s is None else round(s, 6)] for d, s in retrieval.retrieved[e.id]],
            "refused": r.refused,
            "refusal_reason": r.refusal_reason,
            "answer": r.answer,
            "verdict": v.verdict if v else None,
            "verdict_reason": v.verdict_reason if v else None,
            "judge_error": v.judge_error if v else None,
            "memory_used": r.memory_used,
            "system_error": r.error,
            # When the system was called and for how long (docs/design.md 6.7): the trace's span durations.
            "timing": {**r.timing, **(v.timing if v else {})},  # the judge's after the system's call
            "scores": _scores(per_entry, i, r.error),
            # For the entry's trace (docs/design.md 6.7): the label's reference, the router's refusal (None:
            # routed), and this entry's LLM usage per role (an external system's own accounting as "system").
            "reference_answer": e.reference_answer,
            "router_refusal": routed.get(e.id),
            "usage": sum_usage(r.usage, v.usage if v else {})
            if plan.agent is None
            else {**({"system": dict(r.usage)} if r.usage else {}), **(v.usage if v else {})},
        }
        if e.conversation is not None:
            # A conversation's turn (docs/design.md 4.1): metrics per turn, position and conversation come from
            # the summary alone. Single-question rows stay as they were, so their headline does not move.
            row.update(conversation=e.conversation, turn=e.turn, needs_memory=e.needs_memory)
        if plan.agent is not None:
            row.update(session_id=r.session_id, sources=[[s.id, s.score] for s in r.sources], extra=r.extra)
        # Why it failed (or ok), docs/design.md section 4.5: a refusal by the reply's typed cause.
        row["stage"] = failure_stage(row, r.refusal_cause)
        rows.append(row)
    return rows


def _config_block(
    cfg: Config,
    plan: RunPlan,
    setup: AgentSetup,
    run: SystemRun,
    answers: AnswerScores,
    ledger: Ledger,
) -> dict[str, Any]:
    judging = answers.judging
    # Cost of the whole run, entries taken from the journals included; this invocation's share apart.
    usage = {
        "by_role": sum_usage(run.usage_by_role, judging.total_usage() if judging else {}),
        "this_invocation": ledger.snapshot(),
        "cache": ledger.cache_stats(),
        "resumed": run.resumed,
        "resumed_verdicts": judging.resumed if judging else 0,
    }
    meta = plan.candidates.meta if plan.candidates is not None else {}
    return {
        "name": cfg.name,  # what the user calls the system (null: derived from it, doceval.common.naming)
        "split": plan.split,
        "k": plan.k,
        "limit": plan.limit,
        "system": system_block(cfg, plan),
        "retriever": config_dict(cfg.retriever) if plan.agent is None else {"name": f"agent:{plan.system}"},
        "floors": {**plan.floors.as_dict(), "signal": plan.signal},
        "answerer": public_block(answerer_record(setup.answerer_cfg, plan)),
        "judge": public_block(config_dict(setup.judge_cfg)),
        # Names the judge (model, endpoint, template hash, temperature, seed; or the offline rule): two
        # answer_accuracy figures with different hashes are not comparable.
        "judge_id": (named := judge_id(setup.judge_cfg)),
        # What the recorded validations (eval/judge/) say of that judge: every surface that prints its
        # answer_accuracy labels it "heuristic" or "unvalidated" unless it cleared the bar (docs/design.md 4.4).
        "judge_evidence": evidence_for(named, cfg.paths.eval),
        # Where the system was called (engine=local threads, or engine=ray actors): the figures do not depend
        # on it, the timings do.
        "engine": public_block(config_dict(cfg.engine)),
        "run": {
            "budget_usd": setup.budget_usd,
            "max_concurrency": setup.max_concurrency,
            "max_abandoned": setup.max_abandoned,
        },
        "memory": {
            "isolate": not setup.warm,
            # The replay memory benefit compares against; absent on an ordinary run.
            **({"reset": setup.reset_mode} if setup.reset_mode else {}),
            # How doceval's agent retrieves a follow-up (memory.rewrite); a user's assistant keeps its own.
            **({"rewrite": cfg.memory.rewrite} if plan.agent is None else {}),
        },
        # The pins its out-of-scope labels were checked against: another corpus makes them mean other things.
        "golden": {
            "path": str(plan.golden_path),
            "md5": plan.golden_md5,
            "corpus_pins": plan.corpus.pins if plan.corpus is not None else None,
            # The *_rel1 metrics can differ from the grade-2 ones (a grade 1 judged, relevant means grade 2):
            # tables show their rows only then (doceval.results.summaries.shown_metrics).
            "graded": plan.threshold == 2 and any(1 in e.grades.values() for e in plan.entries),
            # What judged_share is read against: graded judgments (qrels) or relevant ids only, and the pool.
            "qrels": qrels_path(plan.golden_path).is_file(),
            "pool": read_pool(plan.golden_path),
            # Unreviewed entries scored (docs/design.md 3.5): allowed only with allow_drafts=true.
            "allow_drafts": cfg.allow_drafts,
            "drafts": sum(e.draft for e in plan.entries),
        },
        "candidates": {
            k2: meta.get(k2)
            for k2 in ("candidates_k", "index_hash", "corpus_hash", "live", "search", "embedder")
        },
        "corpus_hash": plan.corpus.manifest.get("content_hash") if plan.corpus is not None else None,
        "run_key": setup.key,
        "usage": usage,
        "provenance": provenance(),
    }


def _none_if_nan(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def public_block(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """A config block as recorded (``config_dict``), safe to store (doceval.common.redact): names of key
    variables stay; values of secret-named keys are ``<redacted>``, URL credentials ``***`` and key variables'
    contents ``<redacted>``."""
    public: dict[str, Any] = scrub(recorded, secret_values(recorded), drop_secret_keys=False)
    return public


def pipeline_record(summary: Summary | Mapping[str, Any]) -> dict[str, Any]:
    """``summary`` as a pipeline stage writes it (eval/summary.json, eval/calibration/, eval/conversations/):
    without what changes from one run of the same inputs to the next (each entry's timing, the git commit
    and dirty flag, Python and the platform, this invocation's usage, cache and journal counts), because
    dvc.lock hashes these files and report.md quotes them, so a fresh clone must reproduce them byte for byte.
    The run's MLflow record keeps all of it (the stage logs the whole summary)."""
    summary = summary.to_dict() if isinstance(summary, Summary) else summary
    recorded = dict(summary["config"])
    versions = (recorded.get("provenance") or {}).get("versions")
    recorded["provenance"] = {"versions": versions}  # pinned with the code: the same in every clone
    recorded["usage"] = {"by_role": (recorded.get("usage") or {}).get("by_role") or {}}
    entries = [{k: v for k, v in e.items() if k != "timing"} for e in summary["entries"]]
    return {**summary, "config": recorded, "entries": entries}


def ran_on(summary: Mapping[str, Any], node: Any) -> Summary:
    """``summary`` (the JSON a Ray worker sent) as the driver records a sweep point it ran, typed: the driver's
    provenance with the node that ran it in place of the worker's (key order kept)."""
    recorded = {**summary["config"], "provenance": {**provenance(), "node": node}}
    return Summary.from_mapping({**summary, "config": recorded})
