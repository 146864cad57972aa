"""Run the agent over probes: search -> memory -> answerer -> judge, journaled and resumable.

Every finished entry is appended to a JSONL journal (flushed and fsync'd) before it counts as done. A rerun
loads the journal and skips what it holds, so a run killed at any point (SIGKILL included) ends up with every
entry answered exactly once; an answer lost in flight is redone, usually from the LLM cache at no cost.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from doceval.errors import UsageError
from doceval.llm import BudgetExceeded, Ledger, LLMError, iter_concurrent, usage_scope
from doceval.scoring.judge import Judge
from doceval.system.docchat.answerers import Answerer
from doceval.system.docchat.memory import Memory
from doceval.system.docchat.types import AgentRecord, MemoryItem, Probe, RunOutcome, SearchResult

log = logging.getLogger(__name__)

__all__ = ["RunOutcome", "load_journal", "run_agent"]

# Stop after this many entries in a row whose answerer failed for good: the endpoint is down or misconfigured,
# and each further entry would only burn its full retry schedule.
MAX_CONSECUTIVE_ERRORS = 5


def load_journal(path: Path) -> dict[str, AgentRecord]:
    """Records already in the journal (last one wins per id).

    A torn last line (the process died mid-write) is cut off so appends start on a clean line; that entry is
    simply redone. A bad line anywhere else is a UsageError naming file:line.
    """
    if not path.exists():
        return {}
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        keep = raw.rfind(b"\n") + 1
        log.warning("%s: dropping a partly written last line (that entry will be redone)", path)
        with path.open("r+b") as fh:
            fh.truncate(keep)
        raw = raw[:keep]
    records: dict[str, AgentRecord] = {}
    for lineno, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = AgentRecord.from_json(json.loads(line))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise UsageError(
                f"{path}:{lineno}: not an agent journal record ({exc}); delete the journal to start over"
            ) from None
        records[rec.id] = rec
    return records


class _Journal:
    """Append-only JSONL; one record per line, durable before it counts."""

    def __init__(self, path: Path | None) -> None:
        self._lock = threading.Lock()
        self._fh = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = path.open("a", encoding="utf-8")

    def append(self, rec: AgentRecord) -> None:
        if self._fh is None:
            return
        line = json.dumps(rec.to_json(), ensure_ascii=False) + "\n"
        with self._lock:
            self._fh.write(line)
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def _usage_dict(scope: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {role: usage.as_dict() for role, usage in sorted(scope.items())}


def _cost(rec: AgentRecord) -> float:
    return sum(float(u.get("cost_usd", 0.0)) for u in rec.usage.values())


Outcome = tuple[str, str | None]


def _outcomes(
    probes: Sequence[Probe],
    todo: Sequence[Probe],
    done: dict[str, AgentRecord],
    shared_memory: Memory | None,
    remember: Callable[[Memory, Probe, AgentRecord], None],
    process: Callable[[Probe], Outcome],
    max_concurrency: int,
) -> Generator[tuple[Probe, Outcome], None, None]:
    if shared_memory is not None:
        # Warm memory: strictly in probe order, replaying resumed entries into memory where they stand.
        for probe in probes:
            if probe.id in done:
                remember(shared_memory, probe, done[probe.id])
            else:
                yield probe, process(probe)
        return
    with contextlib.closing(iter_concurrent(process, todo, max(1, max_concurrency))) as results:
        for i, outcome in results:
            yield todo[i], outcome


def run_agent(
    probes: Sequence[Probe],
    search: Callable[[Probe], SearchResult],
    answerer: Answerer,
    judge: Judge | None,
    *,
    warm_memory: bool = False,
    journal_path: Path | None = None,
    max_concurrency: int = 1,
    budget_usd: float | None = None,
    progress: bool = True,
) -> RunOutcome:
    """Answer (and judge) every probe; see the module docstring for the journal.

    - Memory is fresh for every probe, unless ``warm_memory``: then one memory carries over and probes run
      sequentially in order (order matters); resumed entries are replayed into it so a resumed warm run sees
      the same memory as an uninterrupted one.
    - A refused search is recorded as refused without calling the answerer or the judge.
    - The judge runs only on non-refused answers.
    - ``budget_usd`` covers the whole run, resumed entries' recorded cost included; the run stops cleanly
      before a call that could exceed it (``stopped_reason="budget"``), with finished entries journaled.
    - An entry whose answerer fails for good (retries exhausted, client error) is not journaled and is listed
      in ``errors``; the run goes on, and stops (``stopped_reason="errors"``) after
      MAX_CONSECUTIVE_ERRORS failures in a row, or at the first failure with warm memory.
    """
    ids = [p.id for p in probes]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise UsageError(f"probe ids must be unique; duplicated: {', '.join(dupes[:5])}")

    wanted = set(ids)
    previous = load_journal(journal_path) if journal_path is not None else {}
    done = {i: r for i, r in previous.items() if i in wanted}
    ledger = Ledger(budget_usd, spent_usd=sum(_cost(r) for r in done.values()))
    for component in (answerer, judge):
        attach = getattr(component, "use_ledger", None)
        if attach is not None:
            attach(ledger)

    records: dict[str, AgentRecord] = dict(done)
    errors: dict[str, str] = {}
    lock = threading.Lock()
    journal = _Journal(journal_path)
    shared_memory = Memory() if warm_memory else None
    stopped_reason: str | None = None

    def remember(memory: Memory, probe: Probe, rec: AgentRecord) -> None:
        if not rec.refused and rec.answer:
            memory.record(MemoryItem(probe.question, rec.answer, probe.library, probe.version))

    def process(probe: Probe) -> Outcome:
        """('ok'|'error'|'budget', message); journals its record itself, so in-flight work survives a stop."""
        memory = shared_memory if shared_memory is not None else Memory()  # fresh = reset per probe
        with usage_scope() as scope:
            try:
                found = search(probe)
                surfaced: list[MemoryItem] = []
                verdict = verdict_reason = judge_error = None
                if found.refused:
                    answer, refused, reason = None, True, found.reason
                else:
                    surfaced = memory.recall(probe.question, probe.library, probe.version)
                    answer, refused, reason = answerer.answer(probe, found.passages, surfaced)
                    if judge is not None and not refused and answer is not None:
                        verdict, verdict_reason, judge_error = judge.judge(probe, answer)
            except BudgetExceeded as exc:
                return "budget", str(exc)
            except LLMError as exc:
                return "error", str(exc)
            rec = AgentRecord(
                id=probe.id,
                answer=answer,
                refused=refused,
                refusal_reason=reason if refused else None,
                verdict=verdict,
                verdict_reason=verdict_reason,
                judge_error=judge_error,
                memory_used=[m.question for m in surfaced],
                usage=_usage_dict(scope),
            )
        if shared_memory is not None:
            remember(shared_memory, probe, rec)
        journal.append(rec)
        with lock:
            records[probe.id] = rec
        return "ok", None

    todo = [p for p in probes if p.id not in done]
    bar = tqdm(total=len(probes), initial=len(done), desc="agent", unit="entry", disable=not progress)
    consecutive_errors = 0
    try:
        if shared_memory is not None and max_concurrency > 1:
            log.info("warm memory: running sequentially (entry order matters)")
        outcomes = _outcomes(probes, todo, done, shared_memory, remember, process, max_concurrency)
        with contextlib.closing(outcomes):
            for probe, (status, message) in outcomes:
                if status == "ok":
                    consecutive_errors = 0
                    bar.update(1)
                    if budget_usd is not None or ledger.spent_usd:
                        bar.set_postfix(cost=f"${ledger.spent_usd:.4f}", refresh=False)
                    continue
                if status == "budget":
                    log.warning("stopping: %s", message)
                    stopped_reason = "budget"
                    break
                errors[probe.id] = message or "failed"
                log.error("%s: %s", probe.id, message)
                consecutive_errors += 1
                if shared_memory is not None:
                    # Later entries would see a memory without this one; a rerun then could not reproduce
                    # an uninterrupted warm run. Stop here and let the rerun continue from this entry.
                    stopped_reason = "errors"
                    break
                if consecutive_errors >= MAX_CONSECUTIVE_ERRORS:
                    log.error(
                        "stopping: %d entries in a row failed; check the model endpoint", consecutive_errors
                    )
                    stopped_reason = "errors"
                    break
    finally:
        bar.close()
        journal.close()

    ordered = {p.id: records[p.id] for p in probes if p.id in records}
    return RunOutcome(
        records=ordered,
        usage=ledger.snapshot(),
        cache=ledger.cache_stats(),
        stopped_reason=stopped_reason,
        resumed=len(done),
        errors=errors,
    )
