"""Judging apart from answering: validate a judge against labelled answers (`doceval judge validate`; the
offline judge's calibration is in doceval.harness.reference_calibration), and re-judge a recorded run
(`doceval judge rescore`) without calling the system under test again.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from doceval.common.journal import journal_lock
from doceval.common.redact import scrub, secret_values
from doceval.config import schema
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.harness.judge_evidence import evidence_for
from doceval.harness.reference_calibration import component_verdicts, strings_of
from doceval.inputs.golden import GoldenEntry
from doceval.inputs.judge_labels import LabelledAnswer
from doceval.scoring.agreement import agreement, paired_kappa_difference, rater_figures, repeat_stability
from doceval.scoring.failures import failure_stage, refusal_cause
from doceval.scoring.reference_judge import version_strings
from doceval.scoring.repeats import combine, repeat_summaries, seeded
from doceval.seam import Probe, Reply
from doceval.summary import RunSettings, Summary, as_summary

if TYPE_CHECKING:
    from doceval.config.schema import Config
    from doceval.llm import Ledger
    from doceval.scoring.judge import Judge
    from doceval.scoring.judging import JudgingOutcome

REPEAT_SEED_NOTE = (
    "repeat 0 asks as a single validation does; repeat r >= 1 with seed = (judge.seed or 0) + r, "
    "so each repeat has its own cache entries"
)


def _repeat_cfg(judge_cfg: schema.Judge, r: int) -> schema.Judge:
    """Repeat r's judge: repeat 0 is the configured one (the single validation's identity and cache)."""
    return seeded(judge_cfg, r)


class _RepeatJudges:
    """One judge per repeat behind one interface, so every repeat's rows share one bounded pool (no idle tail
    between passes): a probe id ``ROW#r`` goes to repeat r's judge with the row's own id."""

    def __init__(self, judges: Sequence[Any]) -> None:
        self.judges = list(judges)

    def use_ledger(self, ledger: Any) -> None:
        for j in self.judges:
            attach = getattr(j, "use_ledger", None)
            if attach is not None:
                attach(ledger)

    def judge(self, probe: Probe, answer: str, reference: str) -> tuple[bool | None, str | None, str | None]:
        row, _, r = probe.id.rpartition("#r")
        own = Probe(row, probe.question, probe.library, probe.version)
        result: tuple[bool | None, str | None, str | None] = self.judges[int(r)].judge(own, answer, reference)
        return result

    def close(self) -> None:
        for j in self.judges:
            close = getattr(j, "close", None)
            if close is not None:
                close()


def judge_passes(
    rows: Sequence[LabelledAnswer],
    judge_cfg: schema.Judge,
    repeats: int,
    *,
    ledger: Any,
    max_concurrency: int,
    progress: bool,
) -> list[list[bool | None]]:
    """``repeats`` verdicts per row (None: a judge error): passes[r][i] for row i, repeat r."""
    # lazy: start-up (the judge and LLM stack, ~70 ms: `judge calibrate` loads this module without it)
    from doceval.index.embed import judge_encoder
    from doceval.scoring.judge import make_judge
    from doceval.scoring.judging import judge_answers

    judges = [make_judge(_repeat_cfg(judge_cfg, r), strings_of(rows), judge_encoder) for r in range(repeats)]
    if judges[0] is None:
        raise UsageError("judge=none: nothing to validate; choose a judge (judge=openai, judge=reference)")
    combined = _RepeatJudges(judges)
    keys = [(r, row) for r in range(repeats) for row in rows]
    probes = [
        Probe(f"{row.id}#r{r}", row.entry.question, row.entry.library, row.entry.version) for r, row in keys
    ]
    answers = {p.id: Reply(p.id, row.candidate) for p, (_, row) in zip(probes, keys, strict=True)}
    references = {p.id: row.entry.reference_answer for p, (_, row) in zip(probes, keys, strict=True)}
    try:
        outcome = judge_answers(
            probes,
            answers,
            references,
            combined,
            ledger=ledger,
            max_concurrency=max_concurrency,
            progress=progress,
        )
    finally:
        combined.close()
    verdicts = {p.id: (outcome.verdicts[p.id].verdict if p.id in outcome.verdicts else None) for p in probes}
    return [[verdicts[f"{row.id}#r{r}"] for row in rows] for r in range(repeats)]


def figures(
    human: Sequence[bool],
    verdicts: Sequence[bool | None],
    categories: Sequence[str],
    parts: Mapping[str, Sequence[bool]],
    seed: int = 0,
) -> dict[str, Any]:
    """The judge's agreement with ``human`` and, on the rows it scored, each component alone (``parts``, version
    strings among them) and the paired bootstrap of kappa(judge) - kappa(version strings)."""
    scored = [i for i, v in enumerate(verdicts) if v is not None]
    h = [human[i] for i in scored]
    j = [bool(verdicts[i]) for i in scored]
    alone = {name: rater_figures(h, [v[i] for i in scored], seed=seed) for name, v in parts.items()}
    strings = [parts["version_strings"][i] for i in scored]
    return {
        "agreement": agreement(human, verdicts, categories, seed=seed),
        "version_strings_alone": alone["version_strings"],
        "components": alone,
        "beats_strings": paired_kappa_difference(h, j, strings, seed=seed),
    }


def validate(
    rows: Sequence[LabelledAnswer],
    judge_cfg: schema.Judge,
    *,
    repeats: int = 1,
    max_concurrency: int = 8,
    progress: bool = False,
    seed: int = 0,
    files: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, Any]:
    """The judge's agreement with the labels over ``rows``: pass 0's figures, the stability across ``repeats``
    passes, version_correctness alone on the same rows as the baseline any judge must beat (with the paired
    bootstrap of the difference) and, for the reference judge, each of its components alone. ``files`` (label
    file -> its rows' indexes), when there are several, adds the same figures per file under ``by_file``."""
    # lazy: start-up (the judge and LLM stack, ~70 ms: `judge calibrate` loads this module without it)
    from doceval.llm import Ledger
    from doceval.scoring.judge import judge_hash, judge_identity

    if repeats < 1:
        raise UsageError(f"--repeats {repeats}: must be at least 1")
    ledger = Ledger()
    passes = judge_passes(
        rows, judge_cfg, repeats, ledger=ledger, max_concurrency=max_concurrency, progress=progress
    )
    human = [r.correct for r in rows]
    categories = [r.category for r in rows]
    parts = component_verdicts(rows, judge_cfg)
    identity = judge_identity(judge_cfg)
    report: dict[str, Any] = {
        "judge": {"hash": judge_hash(identity), "identity": identity},
        "n_rows": len(rows),
        **figures(human, passes[0], categories, parts, seed=seed),
        "rows": [
            {
                "id": r.id,
                "entry_id": r.entry.id,
                "category": r.category,
                "human": r.correct,
                "judge": [p[i] for p in passes],
                **{name: v[i] for name, v in parts.items()},
            }
            for i, r in enumerate(rows)
        ],
        "usage": {"by_role": ledger.snapshot(), "cache": ledger.cache_stats()},
    }
    if files and len(files) > 1:
        report["by_file"] = {
            name: {
                "n_rows": len(idx),
                **figures(
                    [human[i] for i in idx],
                    [passes[0][i] for i in idx],
                    [categories[i] for i in idx],
                    {k: [v[i] for i in idx] for k, v in parts.items()},
                    seed=seed,
                ),
            }
            for name, idx in files.items()
        }
    if repeats > 1:
        stability = repeat_stability(passes, human)
        stability["flipped_rows"] = [rows[i].id for i in stability["flipped_rows"]]
        stability["seeds"] = REPEAT_SEED_NOTE
        report["repeats"] = stability
    return report


# ------------------------------------------------------------------------------------------------ rescore


def _recorded_replies(entries: Sequence[Mapping[str, Any]]) -> dict[str, Reply]:
    """Each recorded entry's reply, as the judge reads it (the answer, whether and why it refused)."""
    return {
        e["id"]: Reply(
            e["id"],
            e["answer"],
            bool(e["refused"]),
            refusal_cause(e) if e["refused"] else None,
            e.get("refusal_reason"),
        )
        for e in entries
    }


def rescore(
    summary: Mapping[str, Any],
    summary_path: Path,
    golden: Mapping[str, GoldenEntry],
    golden_md5: str,
    judge_cfg: schema.Judge,
    *,
    cfg: Config,
    progress: bool = False,
    repeat: int | None = None,
) -> Summary:
    """A new summary, typed: the recorded answers of ``summary`` judged by ``judge_cfg``, the answer metrics recomputed
    from them, everything else (answers, retrieval scores, refusals) as recorded. A ``--repeats`` summary has
    every repeat's answers re-judged (repeat r with repeat r's judge seed) and is combined again: the entry
    means, the spread and the flaky list under the new judge. ``repeat``: which repeat this one is (its journal)."""
    # lazy: start-up (the judge and LLM stack, ~70 ms: `judge calibrate` loads this module without it)
    from doceval.index.embed import judge_encoder
    from doceval.llm import Ledger
    from doceval.scoring.judge import judge_id, make_judge

    answered = as_summary(summary)  # the answering run
    if answered.repeats is not None and repeat is None:
        return _rescore_repeats(
            answered, summary_path, golden, golden_md5, judge_cfg, cfg=cfg, progress=progress
        )
    unmeasured = answered.metrics.values.get("answer_accuracy")
    if unmeasured is not None and unmeasured.not_measured is not None:
        raise UsageError(
            f"{summary_path}: its answers were not measured ({unmeasured.not_measured}): there is nothing to judge"
        )
    entries = _recorded_answers(answered, summary_path, golden, golden_md5)
    recorded = answered.settings
    todo = [e for e in entries if e.get("system_error") is None]
    order = [golden[e["id"]] for e in todo]
    judge = make_judge(judge_cfg, version_strings(order), judge_encoder)
    if judge is None:
        raise UsageError("judge=none: choose the judge to rescore with (judge=openai, judge=reference)")

    new_id = judge_id(judge_cfg)
    key = _key(
        {
            "rescore_of": recorded.run_key,
            "summary": _sha256(summary_path),
            "judge": new_id,
            **({"repeat": repeat} if repeat else {}),
        }
    )
    journal = Path(cfg.paths.runs) / "rescore" / key / "judge.jsonl"
    ledger = Ledger(cfg.run.budget_usd)
    outcome = _judge_recorded(judge, order, todo, journal, ledger, cfg, progress)
    rows = [copy.deepcopy(dict(e.recorded)) for e in answered.entries]
    _rejudge_entries(rows, todo, order, outcome.verdicts)
    new = answered.to_dict()
    # An incomplete rescore (exit 4): the unjudged answers stay unscored.
    if outcome.stopped_reason == "budget":
        new["complete"] = False
        new["incomplete"] = {
            "reason": f"the budget run.budget_usd={cfg.run.budget_usd} was reached: {len(outcome.verdicts)} of "
            f"{outcome.todo} answers judged; raise it and rerun to resume from {journal}",
            "entries_scored": len(entries),
            "entries_in_split": len(entries),
        }
    new["entries"] = rows
    new["metrics"] = _rescored_metrics(rows, answered.metrics.recorded, outcome.verdicts, cfg)
    # The answering run's settings with the new judge, in their recorded order (changed keys keep their place).
    new["config"] = {
        **recorded.recorded,
        **_rescored_config(recorded, summary_path, judge_cfg, cfg),
        "usage": {
            "judge": outcome.total_usage(),
            "this_invocation": ledger.snapshot(),
            "cache": ledger.cache_stats(),
            "answering": recorded.recorded.get("usage"),
        },
    }
    return Summary.from_mapping(new)


def _judge_recorded(
    judge: Judge,
    order: list[GoldenEntry],
    todo: list[dict[str, Any]],
    journal: Path,
    ledger: Ledger,
    cfg: Config,
    progress: bool,
) -> JudgingOutcome:
    """The recorded answers (``todo``, of the entries ``order``) judged, journaled in ``journal`` so an
    interrupted rescore resumes; the judge is closed after."""
    # lazy: start-up (the judge and LLM stack, ~70 ms: `judge calibrate` loads this module without it)
    from doceval.scoring.judging import judge_answers

    # Out-of-scope answers are not judged (no metric reads their verdict), as in `doceval eval`.
    probes = [Probe(g.id, g.question, g.library, g.version) for g in order if not g.out_of_scope]
    answers = _recorded_replies(todo)
    try:
        with journal_lock(journal.parent):  # one rescore at a time writes this journal
            return judge_answers(
                probes,
                answers,
                {g.id: g.reference_answer for g in order},
                judge,
                ledger=ledger,
                journal_path=journal,
                max_concurrency=cfg.run.max_concurrency,
                progress=progress,
            )
    finally:
        close = getattr(judge, "close", None)
        if close is not None:
            close()


def _rescored_config(
    recorded: RunSettings, summary_path: Path, judge_cfg: schema.Judge, cfg: Config
) -> dict[str, Any]:
    """What a rescore changes in the config block: the answering run it came from, the new judge (scrubbed), its
    identity and its evidence (design 4.4)."""
    # lazy: start-up (the judge and LLM stack, ~70 ms: `judge calibrate` loads this module without it)
    from doceval.scoring.judge import judge_id

    judge_record = config_dict(judge_cfg)
    new_id = judge_id(judge_cfg)
    return {
        "rescored_from": {
            "path": str(summary_path),
            "sha256": _sha256(summary_path),
            "run_key": recorded.recorded.get("run_key"),
            "judge": recorded.recorded.get("judge"),
            "judge_id": recorded.recorded.get("judge_id"),
        },
        "judge": scrub(judge_record, secret_values(judge_record), drop_secret_keys=False),
        "judge_id": new_id,
        "judge_evidence": evidence_for(new_id, cfg.paths.eval),
    }


def _rescore_repeats(
    answered: Summary,
    summary_path: Path,
    golden: Mapping[str, GoldenEntry],
    golden_md5: str,
    judge_cfg: schema.Judge,
    *,
    cfg: Config,
    progress: bool,
) -> Summary:
    """Every repeat of a ``--repeats`` summary re-judged (repeat r asks with the judge seed of repeat r, as
    `eval --repeats` did), then combined again; refused for a summary that kept only repeat 0's answers."""
    block = answered.repeats or {}
    if not block.get("answers"):
        raise UsageError(
            f"{summary_path}: a --repeats summary written before every repeat's answers were kept (no "
            "repeats.answers): rescoring repeat 0 alone would mix judges; rerun `doceval eval --repeats N`"
        )
    rescored = [
        rescore(
            one,
            summary_path,
            golden,
            golden_md5,
            _repeat_cfg(judge_cfg, r),
            cfg=cfg,
            progress=progress,
            repeat=r,
        )
        for r, one in enumerate(repeat_summaries(answered))
    ]
    return Summary.from_mapping(combine(rescored, str(block.get("seeds") or "")))


def _recorded_answers(
    answered: Summary, summary_path: Path, golden: Mapping[str, GoldenEntry], golden_md5: str
) -> list[dict[str, Any]]:
    """The summary's entries (rows as recorded), once it records answers, was answered against this golden set
    (same md5) and every entry is in it; otherwise a UsageError saying what to rerun."""
    entries = [dict(e.recorded) for e in answered.entries]
    if not entries or not all("answer" in e for e in entries):
        raise UsageError(
            f"{summary_path}: records no answers (entries without an `answer` field): only a summary written by "
            "`doceval eval` or the evaluate stage can be re-judged; rerun it"
        )
    recorded_md5 = answered.settings.golden.md5
    if recorded_md5 != golden_md5:
        raise UsageError(
            f"{summary_path}: was answered against golden md5 {recorded_md5}, but the golden set now has md5 "
            f"{golden_md5}: its reference answers may differ. Rescore against the same labels (check out that "
            "golden set) or rerun `doceval eval`"
        )
    missing = [e["id"] for e in entries if e["id"] not in golden]
    if missing:
        raise UsageError(f"{summary_path}: entries {', '.join(missing[:3])} are not in the golden set")
    return entries


def _rejudge_entries(
    rows: list[dict[str, Any]],
    todo: Sequence[Mapping[str, Any]],
    order: Sequence[GoldenEntry],
    verdicts: Mapping[str, Any],
) -> None:
    """Each judged row (``todo``, in the order of ``order``) gets its new verdict, answer scores and failure
    stage, in place; a row with a system error is scored by no metric and stays as recorded."""
    # lazy: start-up (the answer metrics, only a rescore needs them: `judge validate` and `calibrate` load this
    # module without them)
    from doceval.scoring.registry import ANSWER_NAMES, answer_scores

    per = answer_scores(
        np.array([g.out_of_scope for g in order], dtype=bool),
        np.array([bool(e["refused"]) for e in todo], dtype=bool),
        [e["answer"] for e in todo],
        [list(g.expected_apis) for g in order],
        [list(g.forbidden_apis) for g in order],
        [v.verdict if (v := verdicts.get(g.id)) is not None else None for g in order],
        judge_ran=True,
        expected_any=[[list(x) for x in g.expected_any] for g in order],
    )
    index = {e["id"]: i for i, e in enumerate(todo)}
    for row in rows:
        i = index.get(row["id"])
        if i is None:
            continue  # a system error: scored by no metric, as recorded
        v = verdicts.get(row["id"])
        row.update(
            verdict=v.verdict if v else None,
            verdict_reason=v.verdict_reason if v else None,
            judge_error=v.judge_error if v else None,
        )
        for m in ANSWER_NAMES:
            value = float(per[m][i])
            row["scores"][m] = None if np.isnan(value) else value
        row["stage"] = failure_stage(row)


def _rescored_metrics(
    rows: Sequence[Mapping[str, Any]],
    old_metrics: Mapping[str, Any],
    verdicts: Mapping[str, Any],
    cfg: Config,
) -> dict[str, Any]:
    """The metrics aggregated again over the re-judged rows (the recorded interval method), the recorded
    counts updated with the new judged and judge-error counts, and the recorded cutoffs."""
    # lazy: start-up (the aggregates, only a rescore needs them: `judge validate` and `calibrate` load this
    # module without them)
    from doceval.scoring.aggregate import aggregate
    from doceval.scoring.registry import METRIC_NAMES

    intervals = old_metrics.get("intervals") or {}
    metrics: dict[str, Any] = aggregate(
        rows,
        METRIC_NAMES,
        seed=cfg.seed,
        n_boot=cfg.bootstrap,
        binary_method=str(intervals.get("binary", "midp")),
    )
    counts = dict(old_metrics.get("counts") or {})
    counts.update(metrics["counts"])
    counts["n_judged"] = int(sum(v.verdict is not None for v in verdicts.values()))
    counts["judge_errors"] = int(sum(v.judge_error is not None for v in verdicts.values()))
    metrics["counts"] = counts
    metrics["not_judged"] = False
    metrics["cutoffs"] = old_metrics.get("cutoffs")
    return metrics


def _key(parts: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
