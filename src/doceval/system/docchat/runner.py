"""Run the agent over probes: search -> memory -> answerer, journaled and resumable.

The agent only answers; grading its answers is the scorers' job (:mod:`doceval.scoring.judging`).

Every finished entry is appended to a JSONL journal (flushed and fsync'd, :mod:`doceval.common.journal`)
before it counts as done. A rerun loads the journal and skips what it holds, so a run killed at any point
(SIGKILL included) ends up with every entry answered exactly once; an answer lost in flight is redone,
usually from the LLM cache at no cost.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Collection, Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from doceval.common.journal import Journal, load_records
from doceval.common.progress import Progress
from doceval.llm import BudgetExceeded, Ledger, LLMError, iter_concurrent, usage_scope
from doceval.seam import Reply, Source, conversation_units, require_unique_ids, whole_units
from doceval.system.docchat.answerers import Answerer
from doceval.system.docchat.memory import Memory
from doceval.system.docchat.types import MemoryItem, Probe, RunOutcome, SearchResult

log = logging.getLogger(__name__)

__all__ = ["RunOutcome", "load_journal", "run_agent"]

# Stop after this many entries in a row whose answerer failed for good: the endpoint is down or misconfigured,
# and each further entry would only burn its full retry schedule.
MAX_CONSECUTIVE_ERRORS = 5


def load_journal(path: Path) -> dict[str, Reply]:
    """Replies already in the journal (last one wins per id); see :func:`doceval.common.journal.load_records`.
    A refusal journaled before refusals had a cause has ``refusal_cause`` None until :func:`run_agent` asks
    its search again (see :func:`_fill_causes`)."""
    return {r.id: r for r in load_records(path, Reply.from_json, "an agent journal record")}


def _fill_causes(
    done: dict[str, Reply], probes: Sequence[Probe], search: Callable[[Probe], SearchResult]
) -> None:
    """The cause of a refusal journaled without one (an older journal): the search refused it (router or
    floor) or else the answerer did. The search is pure and costs no LLM call, so this is exact."""
    for probe in probes:
        rec = done.get(probe.id)
        if rec is not None and rec.refused and rec.refusal_cause is None:
            found = search(probe)
            rec.refusal_cause = found.cause if found.refused else "answerer"


def _usage_dict(scope: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {role: usage.as_dict() for role, usage in sorted(scope.items())}


Outcome = tuple[str, str | None]


def _remember(memory: Memory, probe: Probe, rec: Reply) -> None:
    """What the agent keeps in memory of one entry: an answer it gave (never a refusal)."""
    if not rec.refused and rec.answer:
        memory.record(MemoryItem(probe.question, rec.answer, probe.library, probe.version))


def _outcomes(
    probes: Sequence[Probe],
    todo: Sequence[Sequence[Probe]],
    done: dict[str, Reply],
    run: _AgentRun,
    max_concurrency: int,
    remote: RemoteUnits | None = None,
) -> Generator[tuple[Probe, Outcome], None, None]:
    shared_memory = run.shared_memory
    if shared_memory is not None:
        # Warm memory: strictly in probe order, replaying resumed entries into memory where they stand.
        for probe in probes:
            if probe.id in done:
                _remember(shared_memory, probe, done[probe.id])
            else:
                yield probe, run.process(probe, shared_memory)
        return
    if remote is not None:
        with contextlib.closing(remote(todo, run.search, run.record)) as answered:
            for outcomes in answered:
                yield from outcomes
        return
    with contextlib.closing(iter_concurrent(run.process_unit, todo, max(1, max_concurrency))) as results:
        for _, outcomes in results:
            yield from outcomes


def _answer(
    search: Callable[[Probe], SearchResult], answerer: Answerer, probe: Probe, memory: Memory
) -> tuple[Reply, Probe]:
    """The agent's reply, before its usage is known, and the probe as answered (a follow-up's with the pin its
    conversation moved to). A refused search never reaches the answerer."""
    start, t0 = time.time(), time.perf_counter()
    found = search(probe)
    t1 = time.perf_counter()
    if found.refused:
        timing = {"start": start, "duration_s": t1 - t0, "search_s": t1 - t0}
        return Reply(probe.id, None, True, found.cause, found.reason, timing=timing), probe
    if found.pin is not None:  # a follow-up: the pin the conversation moved to, not the picker's
        probe = dataclasses.replace(probe, library=found.pin[0], version=found.pin[1])
    surfaced = memory.recall(probe.question, probe.library, probe.version)
    t2 = time.perf_counter()
    answer, refused, reason = answerer.answer(probe, found.passages, surfaced)
    t3 = time.perf_counter()
    reply = Reply(
        probe.id,
        answer,
        refused,
        "answerer" if refused else None,
        reason if refused else None,
        sources=[Source(p.doc_id, p.score) for p in found.passages],
        memory_used=[m.question for m in surfaced],
        timing={"start": start, "duration_s": t3 - t0, "search_s": t1 - t0, "answerer_s": t3 - t2},
    )
    return reply, probe


def answer_probe(
    search: Callable[[Probe], SearchResult], answerer: Answerer, probe: Probe, memory: Memory
) -> tuple[Outcome, Reply | None]:
    """One probe answered with ``memory`` (which then holds the answer): ('ok'|'error'|'budget', message) and
    the reply (None unless ok), its LLM usage recorded in it."""
    with usage_scope() as scope:
        try:
            rec, answered = _answer(search, answerer, probe, memory)
        except BudgetExceeded as exc:
            return ("budget", str(exc)), None
        except LLMError as exc:
            return ("error", str(exc)), None
        rec.usage = _usage_dict(scope)
    _remember(memory, answered, rec)
    return ("ok", None), rec


Answered = tuple[Probe, Outcome, Reply | None]


def answer_unit(
    unit: Sequence[Probe],
    reset_ids: Collection[str],
    answer: Callable[[Probe, Memory], tuple[Outcome, Reply | None]],
    stopping: threading.Event | None = None,
) -> list[Answered]:
    """A conversation's turns in order with one memory, fresh for it (a single probe is a unit of one, so
    memory is reset per entry); a turn that fails ends the conversation (a rerun replays it whole). A turn
    in ``reset_ids`` is answered with an empty memory of its own, which the conversation's never sees: the
    turn alone in a fresh session, the conversation going on afterwards."""
    memory = Memory()
    answered: list[Answered] = []
    for probe in unit:
        if stopping is not None and stopping.is_set():
            break
        outcome, rec = answer(probe, Memory() if probe.id in reset_ids else memory)
        answered.append((probe, outcome, rec))
        if outcome[0] != "ok":
            break
    return answered


# What a unit needs away from the driver (engine=ray): its probes in order, each one's search result (computed
# on the driver from the candidate cache) and the turns answered with an empty memory.
ShippedUnit = tuple[list[Probe], dict[str, SearchResult], frozenset[str]]


def answer_shipped(answerer: Answerer, item: ShippedUnit) -> list[Answered]:
    """:func:`answer_unit` where the agent runs on a Ray actor: its search reads the shipped results only, so
    the worker opens none of the driver's files; the driver journals the replies that come back."""
    probes, results, reset_ids = item

    def search(probe: Probe) -> SearchResult:
        return results[probe.id]

    return answer_unit(probes, reset_ids, lambda probe, memory: answer_probe(search, answerer, probe, memory))


# engine=ray (doceval.harness.remote): answers the units elsewhere, given the driver's search and ``record``
# (the journal, first reply per entry) for every reply as it comes back; yields each unit's outcomes.
RemoteUnits = Callable[
    [Sequence[Sequence[Probe]], Callable[[Probe], SearchResult], Callable[[Reply], bool]],
    Generator[list[tuple[Probe, Outcome]], None, None],
]


class _AgentRun:
    """One run's answering of single probes: search -> memory -> answerer, each reply journaled as it is made
    (so in-flight work survives a stop) and kept in ``records``."""

    def __init__(
        self,
        search: Callable[[Probe], SearchResult],
        answerer: Answerer,
        journal: Journal,
        shared_memory: Memory | None,
        records: dict[str, Reply],
        reset_ids: frozenset[str] = frozenset(),
    ) -> None:
        self.search = search
        self.reset_ids = reset_ids  # turns answered with an empty memory (--memory-reset needs_memory)
        self.answerer = answerer
        self.journal = journal
        self.shared_memory = shared_memory
        self.records = records
        # Set once the run stops: a conversation in flight asks no more turns.
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._recorded: set[str] = set()

    def process_unit(self, unit: Sequence[Probe]) -> list[tuple[Probe, Outcome]]:
        """:func:`answer_unit` here, each reply journaled as it is made."""
        return [(p, o) for p, o, _ in answer_unit(unit, self.reset_ids, self._answer, self.stopping)]

    def _answer(self, probe: Probe, memory: Memory) -> tuple[Outcome, Reply | None]:
        outcome, rec = answer_probe(self.search, self.answerer, probe, memory)
        if rec is not None:
            self.record(rec)
        return outcome, rec

    def process(self, probe: Probe, memory: Memory) -> Outcome:
        """('ok'|'error'|'budget', message); journals its reply itself, so in-flight work survives a stop."""
        return self._answer(probe, memory)[0]

    def record(self, rec: Reply) -> bool:
        """Journal and keep one reply, the first for its entry (a call Ray retried is never counted twice);
        False for a later duplicate, dropped."""
        with self._lock:
            if rec.id in self._recorded:
                return False
            self._recorded.add(rec.id)
        if self.journal.active:
            self.journal.append(rec.to_json())
        with self._lock:
            self.records[rec.id] = rec
        return True


def _drain(
    outcomes: Iterator[tuple[Probe, Outcome]], ledger: Ledger, bar: Any, errors: dict[str, str], warm: bool
) -> str | None:
    """Consume the outcomes as they finish; the reason the run stopped early ("budget", "errors") or None."""
    consecutive_errors = 0
    for probe, (status, message) in outcomes:
        if status == "ok":
            consecutive_errors = 0
            bar.update(1)
            if ledger.budget_usd is not None or ledger.spent_usd:
                bar.set_postfix(cost=f"${ledger.spent_usd:.4f}")
            continue
        if status == "budget":
            log.warning("stopping: %s", message)
            return "budget"
        errors[probe.id] = message or "failed"
        log.error("%s: %s", probe.id, message)
        consecutive_errors += 1
        if warm:
            # Later entries would see a memory without this one; a rerun then could not reproduce an
            # uninterrupted warm run. Stop here and let the rerun continue from this entry.
            return "errors"
        if consecutive_errors >= MAX_CONSECUTIVE_ERRORS:
            log.error("stopping: %d entries in a row failed; check the model endpoint", consecutive_errors)
            return "errors"
    return None


def run_agent(
    probes: Sequence[Probe],
    search: Callable[[Probe], SearchResult],
    answerer: Answerer,
    *,
    warm_memory: bool = False,
    journal_path: Path | None = None,
    max_concurrency: int = 1,
    budget_usd: float | None = None,
    ledger: Ledger | None = None,
    progress: bool = True,
    conversation_of: Mapping[str, str] | None = None,
    reset_ids: Collection[str] = (),
    remote: RemoteUnits | None = None,
) -> RunOutcome:
    """Answer every probe; see the module docstring for the journal.

    - Memory is fresh for every probe, unless ``warm_memory``: then one memory carries over and probes run
      sequentially in order (order matters); resumed entries are replayed into it so a resumed warm run sees
      the same memory as an uninterrupted one.
    - Conversations (``conversation_of``: probe id -> conversation id; isolated memory): one memory per
      conversation, kept across its turns (run in order) and fresh for the next; a conversation is one unit
      of concurrency. On resume, a conversation with a turn missing is replayed from its first turn (its
      journaled turns are dropped, never counted twice). A turn in ``reset_ids`` (``--memory-reset
      needs_memory``) is answered with an empty memory of its own; its search already used the starting pin
      and no rewrite (:func:`doceval.harness.candidates.turn_queries`).
    - A refused search is recorded as refused (its cause "router" or "floor") without calling the answerer.
    - ``budget_usd`` covers the whole run, resumed entries' recorded cost included; the run stops cleanly
      before a call that could exceed it (``stopped_reason="budget"``), with finished entries journaled.
    - ``ledger`` instead shares one ledger (and its budget) with the caller's other LLM work, e.g. judging
      the answers afterwards; it is used as is, so it must already count what earlier invocations spent on
      the entries this run resumes.
    - An entry whose answerer fails for good (retries exhausted, client error) is not journaled and is listed
      in ``errors``; the run goes on, and stops (``stopped_reason="errors"``) after
      MAX_CONSECUTIVE_ERRORS failures in a row, or at the first failure with warm memory.
    - ``remote`` (engine=ray, isolated memory): the units are answered elsewhere (Ray actors,
      :mod:`doceval.harness.remote`), each shipped with its search results; this process alone journals,
      keeping the first reply per entry. Warm memory always runs here, in probe order.
    """
    require_unique_ids(probes)
    if ledger is not None and budget_usd is not None:
        raise ValueError("pass the budget in the ledger, not as budget_usd too")
    wanted = {p.id for p in probes}
    previous = load_journal(journal_path) if journal_path is not None else {}
    done = {i: r for i, r in previous.items() if i in wanted}
    units = conversation_units(probes, {} if warm_memory or conversation_of is None else conversation_of)
    done = {i: r for i, r in done.items() if i in whole_units(units, done)}
    _fill_causes(done, probes, search)
    if ledger is None:
        ledger = Ledger(budget_usd, spent_usd=sum(r.cost_usd for r in done.values()))
    attach = getattr(answerer, "use_ledger", None)
    if attach is not None:
        attach(ledger)

    shared_memory = Memory() if warm_memory else None
    run = _AgentRun(search, answerer, Journal(journal_path), shared_memory, dict(done), frozenset(reset_ids))
    errors: dict[str, str] = {}
    todo = [u for u in units if u[0].id not in done]
    bar = Progress(len(probes), "agent", "entry", enabled=progress, initial=len(done))
    try:
        if shared_memory is not None and max_concurrency > 1:
            log.info("warm memory: running sequentially (entry order matters)")
        outcomes = _outcomes(probes, todo, done, run, max_concurrency, remote)
        with contextlib.closing(outcomes):
            stopped_reason = _drain(outcomes, ledger, bar, errors, warm=shared_memory is not None)
            if stopped_reason is not None:
                run.stopping.set()
    finally:
        bar.close()
        run.journal.close()

    ordered = {p.id: run.records[p.id] for p in probes if p.id in run.records}
    return RunOutcome(
        records=ordered,
        usage=ledger.snapshot(),
        cache=ledger.cache_stats(),
        stopped_reason=stopped_reason,
        resumed=len(done),
        errors=errors,
    )
