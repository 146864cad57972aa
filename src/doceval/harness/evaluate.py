"""`evaluate(cfg)`: replay a golden split through the DocChat agent and score it. Pure apart from file reads,
the journals and the LLM cache; the CLI and the DVC stage are thin wrappers around it.

The steps, in order: :func:`plan_run` (what is evaluated), :func:`score_retrieval`, :func:`prepare_agent`
and :func:`open_ledger` (how the LLM work runs), :func:`run_system` (the agent answers),
:func:`score_answers` (the judge grades, then the answer metrics), :func:`build_summary`. Per-entry scores
come first (every summary metric is the mean of the entries' column of the same name, NaN meaning "does not
apply"), aggregates second; the metrics themselves come from :mod:`doceval.scoring.registry`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from doceval.common.io import md5_file
from doceval.common.provenance import provenance, source_hash
from doceval.errors import UsageError
from doceval.harness.candidates import CandidateSet, check_candidates, compute_candidates, load_candidates
from doceval.harness.floors import Floors, check_floors, resolve_floors
from doceval.inputs.corpus import Corpus, load_corpus
from doceval.inputs.golden import GoldenEntry, parse_golden, select_split
from doceval.scoring.aggregate import aggregate
from doceval.scoring.metrics import answer_scores, build_matrix, cut, retrieval_scores
from doceval.scoring.registry import ANSWER_NAMES, AT_K_NAMES, METRIC_NAMES, RETRIEVAL_NAMES
from doceval.seam import Probe, sum_usage

if TYPE_CHECKING:  # the LLM client is imported only when the agent runs
    from doceval.llm import Ledger
    from doceval.scoring.judge import Judge
    from doceval.scoring.judging import JudgeRecord, JudgingOutcome
    from doceval.system.docchat.answerers import Answerer
    from doceval.system.docchat.types import RunOutcome


@dataclass
class EvalOptions:
    """What the CLI flags add on top of the composed config (never written back into it)."""

    golden: Path | None = None
    split: str | None = "__config__"
    limit: int | None = None
    score_floor: float | None = None
    floor_flags: dict[str, float] = field(default_factory=dict)
    no_judge: bool = False
    warm_memory: bool = False
    progress: bool = True
    candidates: CandidateSet | None = None  # reuse a loaded cache (sweeps)
    floors: Floors | None = None  # explicit floors (the calibrate stage scoring its own split)
    run_dir: Path | None = None  # where the agent's and the judge's journals live (resumable runs)


def _split_of(cfg: Mapping[str, Any], options: EvalOptions) -> str | None:
    if options.split != "__config__":
        return options.split
    name = cfg["split"]["name"]
    return None if name is None else str(name)


def load_inputs(cfg: Mapping[str, Any], options: EvalOptions) -> tuple[Corpus, list[GoldenEntry], Path, str]:
    corpus = load_corpus(Path(cfg["paths"]["docs"]))
    golden_path = options.golden or Path(cfg["golden"])
    entries = parse_golden(golden_path, corpus_ids=corpus.doc_ids())
    return corpus, entries, golden_path, md5_file(golden_path)


def candidates_for(
    cfg: Mapping[str, Any],
    options: EvalOptions,
    corpus: Corpus,
    all_entries: Sequence[GoldenEntry],
    golden_path: Path,
    golden_md5: str,
    k: int,
) -> CandidateSet:
    """The cached candidates when they match this golden set and retriever; otherwise retrieve live."""
    if options.candidates is not None:
        check_candidates(options.candidates, all_entries, golden_md5, cfg["retriever"], k)
        return options.candidates
    runs = Path(cfg["paths"]["runs"])
    if (runs / "candidates" / "meta.json").is_file():
        cached = load_candidates(runs)
        try:
            check_candidates(cached, all_entries, golden_md5, cfg["retriever"], k)
            return cached
        except UsageError:
            pass  # another retriever or golden set: retrieve live below, leaving the cache alone
    live = {**cfg, "candidates_k": max(int(cfg["candidates_k"]), k)}
    return compute_candidates(live, corpus, all_entries, golden_path, golden_md5, options.progress)


def run_key(parts: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunPlan:
    """What one evaluation covers: the cut-off, the entries of the split and the inputs they are scored on."""

    k: int
    limit: int | None
    split: str | None
    corpus: Corpus
    golden_path: Path
    golden_md5: str
    entries: list[GoldenEntry]
    floors: Floors
    candidates: CandidateSet

    def probes(self) -> list[Probe]:
        """The entries as the system sees them: the question and its library version, no labels."""
        return [Probe(e.id, e.question, e.library, e.version) for e in self.entries]


def plan_run(cfg: Mapping[str, Any], options: EvalOptions) -> RunPlan:
    """Resolve k, limit and split, load the corpus and the golden set, and pick the floors and candidates
    (checked against each other). Every bad input is a UsageError here, before any model is called."""
    k = int(cfg["k"])
    if k < 1:
        raise UsageError(f"k={k}: must be at least 1")
    limit = options.limit if options.limit is not None else cfg.get("limit")
    if limit is not None and int(limit) < 1:
        raise UsageError(f"--limit {limit}: must be at least 1 (or omit it for every entry)")
    split = _split_of(cfg, options)
    corpus, all_entries, golden_path, golden_md5 = load_inputs(cfg, options)
    entries = select_split(all_entries, split, golden_path)
    if limit is not None:
        entries = entries[: int(limit)]
    floors = options.floors or resolve_floors(
        cfg["floors"], split, options.score_floor, options.floor_flags, retriever=cfg["retriever"]
    )
    cands = candidates_for(cfg, options, corpus, all_entries, golden_path, golden_md5, k)
    check_floors(floors, corpus.libraries, cands.meta["score_range"], str(cfg["retriever"]["name"]))
    return RunPlan(k, limit, split, corpus, golden_path, golden_md5, entries, floors, cands)


@dataclass(frozen=True)
class RetrievalScores:
    per_entry: dict[str, np.ndarray]  # every retrieval metric of the registry, NaN where it does not apply
    retrieved: dict[str, list[tuple[str, float]]]  # R per entry id (after floors and k), in rank order


def score_retrieval(plan: RunPlan) -> RetrievalScores:
    """Per-entry retrieval scores from the cached candidates, the floors and the cut at k. R is also what the
    agent's search tool returns, so retrieval and answers are scored on the same passages."""
    entries = plan.entries
    ranked = [plan.candidates.ranked[e.id] for e in entries]
    matrix = build_matrix(ranked, [set(e.relevant_ids) for e in entries])
    floor_vec = plan.floors.vector(entries)
    out_of_scope = np.array([e.out_of_scope for e in entries], dtype=bool)
    per = retrieval_scores(matrix, floor_vec, plan.k, out_of_scope=out_of_scope)
    in_r = cut(matrix, floor_vec, plan.k)
    retrieved = {
        e.id: [(matrix.doc_ids[i][j], float(matrix.scores[i, j])) for j in np.flatnonzero(in_r[i])]
        for i, e in enumerate(entries)
    }
    return RetrievalScores({m: per[m] for m in RETRIEVAL_NAMES}, retrieved)


# The code the journals' answers and verdicts depend on: a change to it starts a new run directory.
AGENT_CODE = ("seam.py", "system/docchat", "scoring/judge.py", "scoring/judging.py", "common/journal.py")


@dataclass(frozen=True)
class AgentSetup:
    """How the LLM work of a run is done: the answerer and judge, memory, the run's budget and concurrency
    (both shared by answering and judging), and the journals that make it resumable (None: not journaled)."""

    answerer_cfg: dict[str, Any]  # the configured blocks, as recorded in the summary
    judge_cfg: dict[str, Any]
    answerer: Answerer
    judge: Judge | None  # None: not judged (answer_accuracy null)
    warm: bool
    budget_usd: float | None
    max_concurrency: int
    key: str
    agent_journal: Path | None
    judge_journal: Path | None


def _run_settings(cfg: Mapping[str, Any], answerer_cfg: Mapping[str, Any]) -> tuple[float | None, int]:
    """(budget_usd, max_concurrency) from the ``run`` block; a config without one (or without the key) keeps
    the older places, ``answerer.budget_usd`` and ``answerer.max_concurrency``."""
    run = cfg.get("run") or {}
    budget = run["budget_usd"] if "budget_usd" in run else answerer_cfg.get("budget_usd")
    conc = run.get("max_concurrency")
    conc = answerer_cfg.get("max_concurrency", 1) if conc is None else conc
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int | float) or budget < 0):
        raise UsageError(f"run.budget_usd: {budget!r} must be a non-negative number or null")
    if isinstance(conc, bool) or not isinstance(conc, int) or conc < 1:
        raise UsageError(f"run.max_concurrency: {conc!r} must be an integer >= 1")
    return None if budget is None else float(budget), conc


def prepare_agent(cfg: Mapping[str, Any], options: EvalOptions, plan: RunPlan) -> AgentSetup:
    """Build the answerer and judge (a bad model config fails here, before anything is spent) and the run key
    naming the journals' directory: what changes an answer or a verdict, not the budget (raising it resumes)."""
    from doceval.scoring.judge import make_judge
    from doceval.system.docchat.answerers import make_answerer

    answerer_cfg = dict(cfg["answerer"])
    judge_cfg = {"name": "none"} if options.no_judge else dict(cfg["judge"])
    budget, conc = _run_settings(cfg, answerer_cfg)
    model_cfg = {k: v for k, v in answerer_cfg.items() if k != "budget_usd"}  # a run setting, not the model's
    answerer, judge = make_answerer(model_cfg), make_judge(judge_cfg)
    warm = options.warm_memory or not bool(cfg.get("memory", {}).get("isolate", True))
    key = run_key(
        {
            "golden": plan.golden_md5,
            "split": plan.split,
            "limit": plan.limit,
            "k": plan.k,
            "floors": plan.floors.as_dict(),
            "retriever": cfg["retriever"],
            "answerer": model_cfg,
            "judge": judge_cfg,
            "warm": warm,
            "code": source_hash(*AGENT_CODE, "llm", "prompts"),
        }
    )
    run_dir = options.run_dir or Path(cfg["paths"]["runs"]) / "eval" / key
    # The journals make LLM runs resumable; an offline, unjudged run costs milliseconds to redo, and fsyncing
    # every entry would dominate a sweep point.
    offline = answerer_cfg.get("name") == "extractive" and judge is None
    journals = (None, None) if offline else (run_dir / "journal.jsonl", run_dir / "judge.jsonl")
    return AgentSetup(answerer_cfg, judge_cfg, answerer, judge, warm, budget, conc, key, *journals)


def open_ledger(setup: AgentSetup, plan: RunPlan) -> Ledger:
    """The run's one ledger: answering and judging share its budget, and what earlier invocations spent on
    this run's entries (both journals) counts against it."""
    from doceval.llm import Ledger
    from doceval.scoring.judging import load_verdicts
    from doceval.system.docchat.runner import load_journal

    ids = {e.id for e in plan.entries}
    spent = 0.0
    if setup.agent_journal is not None:
        spent += sum(r.cost_usd for i, r in load_journal(setup.agent_journal).items() if i in ids)
    if setup.judge_journal is not None:
        spent += sum(r.cost_usd for i, r in load_verdicts(setup.judge_journal).items() if i in ids)
    return Ledger(setup.budget_usd, spent_usd=spent)


def _stopped(what: str, why: str, journal: Path | None) -> UsageError:
    return UsageError(
        f"the {what}: {why} rerun the same command to resume from {journal} (finished entries are not redone)"
    )


def run_system(
    plan: RunPlan, retrieval: RetrievalScores, setup: AgentSetup, ledger: Ledger, progress: bool
) -> RunOutcome:
    """The DocChat agent over the probes: router -> search tool (the floors and R scored as retrieval) ->
    memory -> answerer. A run that stops before answering every entry is a UsageError saying how to resume."""
    from doceval.system.docchat.runner import run_agent
    from doceval.system.docchat.search import PrecomputedSearch

    search = PrecomputedSearch(
        plan.candidates.routed, retrieval.retrieved, plan.corpus.first_chunks, plan.floors.of
    )
    outcome = run_agent(
        plan.probes(),
        search,
        setup.answerer,
        warm_memory=setup.warm,
        journal_path=setup.agent_journal,
        max_concurrency=setup.max_concurrency,
        ledger=ledger,
        progress=progress,
    )
    missing = [e.id for e in plan.entries if e.id not in outcome.records]
    if missing:
        why = (
            f"the budget run.budget_usd={setup.budget_usd} would be exceeded; raise it and"
            if outcome.stopped_reason == "budget"
            else f"LLM calls failed ({'; '.join(list(outcome.errors.values())[:2]) or outcome.stopped_reason});"
        )
        what = f"agent stopped before answering {len(missing)} of {len(plan.entries)} entries"
        raise _stopped(what, why, setup.agent_journal)
    return outcome


@dataclass(frozen=True)
class AnswerScores:
    per_entry: dict[str, np.ndarray]  # every answer metric of the registry, NaN where it does not apply
    verdicts: dict[str, JudgeRecord]  # judged entries only
    judging: JudgingOutcome | None  # None: no judge configured


def score_answers(
    plan: RunPlan, setup: AgentSetup, outcome: RunOutcome, ledger: Ledger, progress: bool
) -> AnswerScores:
    """Judge the agent's answers (only those it gave: refusals are never judged), then the per-entry answer
    metrics. A judge error stays a verdict of None, excluded from answer_accuracy."""
    from doceval.scoring.judging import judge_answers

    entries, records = plan.entries, outcome.records
    judging = None
    if setup.judge is not None:
        judging = judge_answers(
            plan.probes(),
            records,
            {e.id: e.reference_answer for e in entries},
            setup.judge,
            ledger=ledger,
            journal_path=setup.judge_journal,
            max_concurrency=setup.max_concurrency,
            progress=progress,
        )
        if judging.stopped_reason == "budget":
            what = f"judge stopped before judging {judging.todo - len(judging.verdicts)} of {judging.todo} answers"
            why = f"the budget run.budget_usd={setup.budget_usd} would be exceeded; raise it and"
            raise _stopped(what, why, setup.judge_journal)
    verdicts = judging.verdicts if judging is not None else {}
    rec = [records[e.id] for e in entries]
    per = answer_scores(
        np.array([e.out_of_scope for e in entries], dtype=bool),
        np.array([r.refused for r in rec], dtype=bool),
        [r.answer for r in rec],
        [list(e.expected_apis) for e in entries],
        [list(e.forbidden_apis) for e in entries],
        [v.verdict if (v := verdicts.get(e.id)) is not None else None for e in entries],
        judge_ran=setup.judge is not None,  # no judge: answer_accuracy is "not judged" (null), never 0
    )
    return AnswerScores({m: per[m] for m in ANSWER_NAMES}, verdicts, judging)


def build_summary(
    cfg: Mapping[str, Any],
    plan: RunPlan,
    setup: AgentSetup,
    retrieval: RetrievalScores,
    outcome: RunOutcome,
    answers: AnswerScores,
    ledger: Ledger,
) -> dict[str, Any]:
    """``{"metrics", "config", "entries"}``: one row per entry with its scores, the aggregates over the rows
    (means, counts, intervals, breakdowns) with k next to the metrics it applies to, and the effective
    configuration with the whole run's LLM usage."""
    per_entry = {**retrieval.per_entry, **answers.per_entry}
    entry_rows = []
    for i, e in enumerate(plan.entries):
        r, v = outcome.records[e.id], answers.verdicts.get(e.id)
        row = {
            "id": e.id,
            "split": e.split,
            "library": e.library,
            "version": e.version,
            "kind": e.kind,
            "question": e.question,
            "out_of_scope": e.out_of_scope,
            "relevant_ids": list(e.relevant_ids),
            "retrieved": [[d, round(s, 6)] for d, s in retrieval.retrieved[e.id]],
            "refused": r.refused,
            "refusal_reason": r.refusal_reason,
            "answer": r.answer,
            "verdict": v.verdict if v else None,
            "verdict_reason": v.verdict_reason if v else None,
            "judge_error": v.judge_error if v else None,
            "memory_used": r.memory_used,
            "scores": {m: _none_if_nan(per_entry[m][i]) for m in METRIC_NAMES},
        }
        entry_rows.append(row)

    verdicts = answers.verdicts.values()
    seed, n_boot = int(cfg.get("seed", 0)), int(cfg.get("bootstrap", 1000))
    metrics = aggregate(entry_rows, METRIC_NAMES, seed=seed, n_boot=n_boot)
    metrics["counts"].update(
        {
            "n_judged": int(sum(v.verdict is not None for v in verdicts)),
            "judge_errors": int(sum(v.judge_error is not None for v in verdicts)),
            "n_refused": int(sum(r.refused for r in outcome.records.values())),
            "n_router_refused": int(sum(bool(plan.candidates.routed.get(e.id)) for e in plan.entries)),
        }
    )
    metrics["not_judged"] = setup.judge is None
    metrics["cutoffs"] = {name: plan.k for name in AT_K_NAMES}
    judging = answers.judging
    # Cost of the whole run, entries taken from the journals included; this invocation's share apart.
    usage = {
        "by_role": sum_usage(outcome.total_usage(), judging.total_usage() if judging else {}),
        "this_invocation": ledger.snapshot(),
        "cache": ledger.cache_stats(),
        "resumed": outcome.resumed,
        "resumed_verdicts": judging.resumed if judging else 0,
    }
    meta = plan.candidates.meta
    config = {
        "split": plan.split,
        "k": plan.k,
        "limit": plan.limit,
        "retriever": dict(cfg["retriever"]),
        "floors": plan.floors.as_dict(),
        "answerer": _public(setup.answerer_cfg),
        "judge": _public(setup.judge_cfg),
        "run": {"budget_usd": setup.budget_usd, "max_concurrency": setup.max_concurrency},
        "memory": {"isolate": not setup.warm},
        "golden": {"path": str(plan.golden_path), "md5": plan.golden_md5},
        "candidates": {k2: meta.get(k2) for k2 in ("candidates_k", "index_hash", "corpus_hash", "live")},
        "corpus_hash": plan.corpus.manifest.get("content_hash"),
        "run_key": setup.key,
        "usage": usage,
        "provenance": provenance(),
    }
    return {"metrics": metrics, "config": config, "entries": entry_rows}


def evaluate(cfg: Mapping[str, Any], options: EvalOptions | None = None) -> dict[str, Any]:
    """Score one configuration on one split. Returns ``{"metrics", "config", "entries"}``."""
    options = options or EvalOptions()
    plan = plan_run(cfg, options)
    retrieval = score_retrieval(plan)
    setup = prepare_agent(cfg, options, plan)
    ledger = open_ledger(setup, plan)
    outcome = run_system(plan, retrieval, setup, ledger, options.progress)
    answers = score_answers(plan, setup, outcome, ledger, options.progress)
    return build_summary(cfg, plan, setup, retrieval, outcome, answers, ledger)


def _none_if_nan(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _public(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A config block safe to store: names of key variables stay, values of anything secret-looking go."""
    return {k: ("<redacted>" if "key" in k.lower() and not k.endswith("_env") else v) for k, v in cfg.items()}
