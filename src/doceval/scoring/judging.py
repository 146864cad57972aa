"""Judge a system's recorded answers, after the system has run: bounded concurrency, one shared budget, and a
resumable journal of verdicts.

Only answers the system gave are judged (not refused, with an answer); the metrics score a refusal without a
judge. Every verdict is appended to a JSONL journal (flushed and fsync'd, :mod:`doceval.common.journal`)
before it counts, so a run killed while judging resumes without asking the judge again about entries it
already graded. A journaled verdict is reused only for the same answer and reference.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from doceval.common.io import escape_surrogates
from doceval.common.journal import Journal, dataclass_from_record, load_records
from doceval.common.progress import Progress
from doceval.llm import BudgetExceeded, Ledger, iter_concurrent, usage_scope
from doceval.scoring.judge import Judge
from doceval.seam import Probe, Reply, sum_usage, usage_cost

log = logging.getLogger(__name__)

__all__ = ["JudgeRecord", "JudgingOutcome", "judge_answers", "load_verdicts", "needs_judging"]


@dataclass
class JudgeRecord:
    """One entry's verdict (one journal line). A judge error has verdict None and ``judge_error`` set."""

    id: str
    input_sha: str  # what was judged (answer + reference); a journaled verdict is reused only for the same
    verdict: bool | None
    verdict_reason: str | None
    judge_error: str | None
    usage: dict[str, dict[str, float]]  # this entry's judge calls only
    # When the judge was asked and for how long (Unix seconds): the entry trace's judge span (design 6.7)
    timing: dict[str, float] = field(default_factory=dict)

    @property
    def cost_usd(self) -> float:
        return usage_cost(self.usage)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JudgeRecord:
        """Inverse of :meth:`to_json`; raises KeyError/TypeError on a record of another shape."""
        rec = dataclass_from_record(cls, {"timing": {}, **data})  # a record journaled before timing: none
        if not isinstance(rec.id, str) or not isinstance(rec.input_sha, str):
            raise TypeError("id and input_sha must be strings")
        if rec.verdict is not None and not isinstance(rec.verdict, bool):
            raise TypeError("verdict must be a boolean or null")
        return rec


@dataclass
class JudgingOutcome:
    """What :func:`judge_answers` returns: verdicts in probe order (judged entries only, resumed included)."""

    verdicts: dict[str, JudgeRecord]
    stopped_reason: str | None  # None (finished) or "budget"
    resumed: int
    todo: int  # entries that needed a verdict (judged now, resumed, or left by a budget stop)

    def total_usage(self) -> dict[str, dict[str, float]]:
        """Per-role sum of every verdict's usage (resumed entries included)."""
        return sum_usage(*(rec.usage for rec in self.verdicts.values()))


def needs_judging(answer: Reply | None) -> bool:
    """Only an answer the system actually gave is judged; a refusal is scored without a judge."""
    return answer is not None and not answer.refused and answer.answer is not None


def input_sha(answer: str, reference: str) -> str:
    return hashlib.sha256(json.dumps([answer, reference]).encode()).hexdigest()[:16]


def load_verdicts(path: Path) -> dict[str, JudgeRecord]:
    """Verdicts already in the journal (last one wins per id)."""
    return {r.id: r for r in load_records(path, JudgeRecord.from_json, "a judge journal record")}


def judge_answers(
    probes: Sequence[Probe],
    answers: Mapping[str, Reply],
    references: Mapping[str, str],
    judge: Judge,
    *,
    ledger: Ledger | None = None,
    journal_path: Path | None = None,
    max_concurrency: int = 1,
    progress: bool = True,
) -> JudgingOutcome:
    """Grade every answer that :func:`needs_judging`, against ``references[probe.id]``.

    - ``ledger`` is the run's ledger, shared with answering so one budget covers both (it must already count
      what earlier invocations spent); None: a fresh ledger without a budget.
    - At most ``max_concurrency`` entries are judged at once; the judge's client bounds its own requests too.
    - A judge error (malformed reply, failed call) is a verdict of None with ``judge_error`` set: journaled
      and counted like any verdict, and excluded from answer_accuracy by the metrics.
    - The budget stops judging cleanly before a call that could exceed it (``stopped_reason="budget"``), with
      the verdicts finished so far journaled.
    """
    todo_all = [p for p in probes if needs_judging(answers.get(p.id))]
    shas = {p.id: input_sha(str(answers[p.id].answer), references[p.id]) for p in todo_all}
    previous = load_verdicts(journal_path) if journal_path is not None else {}
    done = {i: previous[i] for i, sha in shas.items() if i in previous and previous[i].input_sha == sha}
    if ledger is None:
        ledger = Ledger()
    attach = getattr(judge, "use_ledger", None)
    if attach is not None:
        attach(ledger)

    records: dict[str, JudgeRecord] = dict(done)
    lock = threading.Lock()
    journal = Journal(journal_path)

    def process(probe: Probe) -> str | None:
        """None when judged (and journaled), else the budget message."""
        with usage_scope() as scope:
            start, clock = time.time(), time.perf_counter()
            try:
                # A lone surrogate in a reply is kept in the summary, but no model or tokenizer takes one.
                verdict, reason, error = judge.judge(
                    probe, escape_surrogates(str(answers[probe.id].answer)), references[probe.id]
                )
            except BudgetExceeded as exc:
                return str(exc)
            timing = {"judge_start": start, "judge_s": time.perf_counter() - clock}
            usage = {role: u.as_dict() for role, u in sorted(scope.items())}
        rec = JudgeRecord(probe.id, shas[probe.id], verdict, reason, error, usage, timing)
        journal.append(rec.to_json())
        with lock:
            records[probe.id] = rec
        return None

    todo = [p for p in todo_all if p.id not in done]
    stopped_reason: str | None = None
    bar = Progress(len(todo_all), "judge", "entry", enabled=progress, initial=len(done))
    try:
        with contextlib.closing(iter_concurrent(process, todo, max(1, max_concurrency))) as results:
            for _, budget_message in results:
                if budget_message is not None:
                    log.warning("stopping: %s", budget_message)
                    stopped_reason = "budget"
                    break
                bar.update(1)
    finally:
        # Every verdict recorded counts, the ones in flight when the budget stopped the loop too: the line says
        # what was judged, never 0 of N after some were.
        bar.update(len(records) - bar.n)
        bar.close()
        journal.close()

    ordered = {p.id: records[p.id] for p in todo_all if p.id in records}
    return JudgingOutcome(ordered, stopped_reason, resumed=len(done), todo=len(todo_all))
