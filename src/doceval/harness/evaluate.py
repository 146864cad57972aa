"""`evaluate(cfg)`: replay a golden split through the DocChat agent and score it. Pure apart from file reads,
the agent's journal and its LLM cache; the CLI and the DVC stage are thin wrappers around it.

Per-entry scores come first (every summary metric is the mean of the entries' column of the same name, NaN
meaning "does not apply"), aggregates second.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

RETRIEVAL_KEYS = ("hit_rate", "recall", "mrr", "ndcg")
ANSWER_KEYS = ("answer_accuracy", "version_correctness", "refusal_rate", "overrefusal_rate")
METRIC_KEYS = (*RETRIEVAL_KEYS, "refused_correctly", *ANSWER_KEYS)


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
    run_dir: Path | None = None  # where the agent journal lives (resumable runs)


def _split_of(cfg: Mapping[str, Any], options: EvalOptions) -> str | None:
    if options.split != "__config__":
        return options.split
    return cfg["split"]["name"]


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


def evaluate(cfg: Mapping[str, Any], options: EvalOptions | None = None) -> dict[str, Any]:
    """Score one configuration on one split. Returns ``{"metrics", "config", "entries"}``."""
    from doceval.scoring.judge import make_judge
    from doceval.system.docchat.answerers import make_answerer
    from doceval.system.docchat.runner import run_agent
    from doceval.system.docchat.types import Passage, Probe, SearchResult

    options = options or EvalOptions()
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

    # Retrieval: per-entry scores from the cached candidates, floors and cut at k.
    ranked = [cands.ranked[e.id] for e in entries]
    matrix = build_matrix(ranked, [set(e.relevant_ids) for e in entries])
    floor_vec = floors.vector(entries)
    in_r = cut(matrix, floor_vec, k)
    per = retrieval_scores(matrix, floor_vec, k)
    out_of_scope = np.array([e.out_of_scope for e in entries], dtype=bool)
    retrieved: dict[str, list[tuple[str, float]]] = {}
    for i, e in enumerate(entries):
        cols = np.flatnonzero(in_r[i])
        retrieved[e.id] = [(matrix.doc_ids[i][j], float(matrix.scores[i, j])) for j in cols]

    # The agent: router -> search tool (the same floors and k as above) -> memory -> answerer -> judge.
    first_chunk = corpus.first_chunks
    by_id = {e.id: e for e in entries}

    def search(probe: Probe) -> SearchResult:
        reason = cands.routed.get(probe.id)
        if reason:
            return SearchResult([], True, reason)
        hits = retrieved[probe.id]
        if not hits:
            return SearchResult(
                [], True, f"search: no passage cleared the floor {floors.of(by_id[probe.id].library)}"
            )
        return SearchResult([Passage(d, s, first_chunk.get(d, d)) for d, s in hits], False, None)

    answerer_cfg = dict(cfg["answerer"])
    judge_cfg = {"name": "none"} if options.no_judge else dict(cfg["judge"])
    answerer = make_answerer(answerer_cfg)
    judge = make_judge(judge_cfg)
    warm = options.warm_memory or not bool(cfg.get("memory", {}).get("isolate", True))
    probes = [Probe(e.id, e.question, e.library, e.version, e.reference_answer) for e in entries]
    key = run_key(
        {
            "golden": golden_md5,
            "split": split,
            "limit": limit,
            "k": k,
            "floors": floors.as_dict(),
            "retriever": cfg["retriever"],
            "answerer": answerer_cfg,
            "judge": judge_cfg,
            "warm": warm,
            "code": source_hash("system/docchat", "scoring/judge.py", "llm", "prompts"),
        }
    )
    run_dir = options.run_dir or Path(cfg["paths"]["runs"]) / "eval" / key
    # The journal makes LLM runs resumable; an offline, unjudged run costs milliseconds to redo, and fsyncing
    # every entry would dominate a sweep point.
    offline = answerer_cfg.get("name") == "extractive" and judge is None
    outcome = run_agent(
        probes,
        search,
        answerer,
        judge,
        warm_memory=warm,
        journal_path=None if offline else run_dir / "journal.jsonl",
        max_concurrency=int(answerer_cfg.get("max_concurrency", 1)),
        budget_usd=answerer_cfg.get("budget_usd"),
        progress=options.progress,
    )
    records = outcome.records
    missing = [e.id for e in entries if e.id not in records]
    if missing:
        why = (
            f"the budget answerer.budget_usd={answerer_cfg.get('budget_usd')} would be exceeded; raise it and"
            if outcome.stopped_reason == "budget"
            else f"LLM calls failed ({'; '.join(list(outcome.errors.values())[:2]) or outcome.stopped_reason});"
        )
        raise UsageError(
            f"the agent stopped before answering {len(missing)} of {len(entries)} entries: {why} rerun the "
            f"same command to resume from {run_dir / 'journal.jsonl'} (finished entries are not redone)"
        )
    rec = [records[e.id] for e in entries]
    ans = answer_scores(
        out_of_scope,
        np.array([r.refused for r in rec], dtype=bool),
        [r.answer for r in rec],
        [list(e.expected_apis) for e in entries],
        [list(e.forbidden_apis) for e in entries],
        [r.verdict for r in rec],
        judge_ran=judge is not None,  # no judge: answer_accuracy is "not judged" (null), never 0
    )

    per_entry: dict[str, np.ndarray] = {m: per[m] for m in RETRIEVAL_KEYS}
    per_entry["refused_correctly"] = np.where(out_of_scope, per["refused"].astype(np.float64), np.nan)
    per_entry.update({m: ans[m] for m in ANSWER_KEYS})

    entry_rows = []
    for i, e in enumerate(entries):
        r = rec[i]
        entry_rows.append(
            {
                "id": e.id,
                "split": e.split,
                "library": e.library,
                "version": e.version,
                "kind": e.kind,
                "question": e.question,
                "out_of_scope": e.out_of_scope,
                "relevant_ids": list(e.relevant_ids),
                "retrieved": [[d, round(s, 6)] for d, s in retrieved[e.id]],
                "refused": r.refused,
                "refusal_reason": r.refusal_reason,
                "answer": r.answer,
                "verdict": r.verdict,
                "verdict_reason": r.verdict_reason,
                "judge_error": r.judge_error,
                "memory_used": r.memory_used,
                "scores": {m: _none_if_nan(per_entry[m][i]) for m in METRIC_KEYS},
            }
        )

    metrics = aggregate(
        entry_rows, METRIC_KEYS, seed=int(cfg.get("seed", 0)), n_boot=int(cfg.get("bootstrap", 1000))
    )
    metrics["counts"].update(
        {
            "n_judged": int(sum(r.verdict is not None for r in rec)),
            "judge_errors": int(sum(r.judge_error is not None for r in rec)),
            "n_refused": int(sum(r.refused for r in rec)),
            "n_router_refused": int(sum(bool(cands.routed.get(e.id)) for e in entries)),
        }
    )
    metrics["not_judged"] = judge is None
    # Cost of the whole run, entries taken from the journal included; this invocation's share apart.
    usage = {
        "by_role": outcome.total_usage(),
        "this_invocation": outcome.usage,
        "cache": outcome.cache,
        "resumed": outcome.resumed,
    }
    config = {
        "split": split,
        "k": k,
        "limit": limit,
        "retriever": dict(cfg["retriever"]),
        "floors": floors.as_dict(),
        "answerer": _public(answerer_cfg),
        "judge": _public(judge_cfg),
        "memory": {"isolate": not warm},
        "golden": {"path": str(golden_path), "md5": golden_md5},
        "candidates": {
            k2: cands.meta.get(k2) for k2 in ("candidates_k", "index_hash", "corpus_hash", "live")
        },
        "corpus_hash": corpus.manifest.get("content_hash"),
        "run_key": key,
        "usage": usage,
        "provenance": provenance(),
    }
    return {"metrics": metrics, "config": config, "entries": entry_rows}


def _none_if_nan(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _public(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A config block safe to store: names of key variables stay, values of anything secret-looking go."""
    return {k: ("<redacted>" if "key" in k.lower() and not k.endswith("_env") else v) for k, v in cfg.items()}
