"""External agents as systems under test: the user's own assistant behind a Python callable (``agent=function``)
or an HTTP endpoint (``agent=http``), whose adapters live in :mod:`doceval.system.external`, and the loop that
replays probes through one (:func:`run_external`).

A system is called with the probe only (question, library, version) plus a session id; labels never leave the
harness. Its reply must be a JSON object/mapping with ``answer`` (str or null), ``sources`` (a list of id
strings or ``{"id": str, "score": number}`` objects, best first) and ``refused`` (bool); optional ``reason``
(the refusal reason) and ``usage`` (a mapping); every other key is kept verbatim in ``extra``. A reply of
another shape, an exception (a SystemExit included), a call past its deadline or one that failed after its
retries is an *error* for that entry: recorded with its message, never scored (in particular never as a
refusal), and tried again on a rerun. A KeyboardInterrupt is never caught: it stops the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doceval.common.concurrency import CallTimedOut, iter_concurrent
from doceval.common.io import non_finite_path
from doceval.common.journal import Journal, load_records
from doceval.common.progress import Progress
from doceval.config import schema
from doceval.errors import WorkersLost
from doceval.harness.stops import abandoned_stop, errors_stop
from doceval.seam import Probe, Reply, conversation_units, require_unique_ids, whole_units
from doceval.system.external.agents import ExternalAgent, parse_response, system_error_text

log = logging.getLogger(__name__)

__all__ = ["ExternalOutcome", "load_journal", "run_external"]


# -------------------------------------------------------------------------------------------- the run


@dataclass
class ExternalOutcome:
    responses: dict[str, Reply]  # every probe answered OR errored, in probe order
    n_errors: int
    stopped: bool  # max_errors or max_abandoned exceeded: entries not attempted are absent from responses
    resumed: int
    stop_reason: str | None = None  # why it stopped, for the summary's "incomplete"


def load_journal(path: Path) -> dict[str, Reply]:
    """Replies already journaled (last one wins per id), errored ones included."""
    records = load_records(path, Reply.from_json, "an external agent journal record")
    return {r.id: _strict(r) for r in records}


def _strict(response: Reply) -> Reply:
    """A journaled reply an older doceval accepted with a NaN or +-Infinity in it (a score, usage) counts as
    an invalid response now, so a resumed run asks again instead of writing a summary that is not JSON."""
    where = None if response.error is not None else non_finite_path(response.to_json())
    if where is None:
        return response
    return dataclasses.replace(
        response,
        error=f"invalid response: {where.split(' = ')[0].removeprefix('$.')} must be a finite number",
    )


class _ExternalRun:
    """One run's calls of the user's system: each reply (or its error) journaled as it comes back, so calls
    in flight at a stop still count, and kept in ``results``."""

    def __init__(
        self,
        agent: ExternalAgent,
        journal: Journal,
        results: dict[str, Reply],
        session_of: Callable[[Probe], str],
        limits: tuple[int | None, int | None] = (None, None),
    ) -> None:
        self.agent = agent
        self.journal = journal
        self.results = results
        self.session_of = session_of
        # Set once the run stops: a conversation in flight asks no more turns.
        self.stopping = threading.Event()
        self.limits = limits  # max errors, max abandoned calls (what stops the run)
        self._errors = 0
        self._lock = threading.Lock()
        self._recorded: set[str] = set()
        self.remote = False  # engine=ray: calls run on actors, abandoned calls are counted here
        self.abandoned = 0

    def process_unit(self, unit: Sequence[Probe]) -> list[Reply]:
        """A conversation's turns in order, in one session (a single probe is a unit of one)."""
        replies: list[Reply] = []
        for probe in unit:
            if self.stopping.is_set():
                break
            replies.append(self.process(probe))
        return replies

    def process(self, probe: Probe) -> Reply:
        response, abandoned = call_system(self.agent, probe, self.session_of(probe))
        self.record(response, abandoned)
        return response

    def record(self, response: Reply, abandoned: bool = False) -> bool:
        """Journal and keep one reply (the first for its entry: a retried remote call is never counted
        twice); False for a later duplicate, dropped."""
        with self._lock:
            if response.id in self._recorded:
                return False
            self._recorded.add(response.id)
        self.journal.append(
            response.to_json()
        )  # here, not in the loop: calls in flight at a stop still count
        with self._lock:
            self.results[response.id] = response
            self._errors += response.error is not None
            self.abandoned += abandoned
            system = (
                self if self.remote else self.agent
            )  # on Ray the actors' abandoned calls are counted here
            if errors_stop(self._errors, self.limits[0]) or abandoned_stop(system, self.limits[1]):
                self.stopping.set()  # at once: the next turn of this conversation is not asked
        return True


def call_system(agent: ExternalAgent, probe: Probe, session_id: str) -> tuple[Reply, bool]:
    """One call of the user's system as a Reply (its failure that entry's error), timed; and whether the call
    was abandoned past its deadline. Runs where the system is: this process, or a Ray actor."""
    start, t0 = time.time(), time.perf_counter()
    abandoned = False
    try:
        raw = agent.call(probe, session_id)
        duration = time.perf_counter() - t0  # the call alone, not reading its reply
        response = parse_response(probe.id, session_id, raw)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - any failure of the system (a SystemExit too) is that
        # entry's error: the user's code never chooses doceval's exit code
        duration = time.perf_counter() - t0
        abandoned = isinstance(exc, CallTimedOut)
        response = Reply(probe.id, None, session_id=session_id, error=system_error_text(exc))
    response.timing = {"start": start, "duration_s": duration}
    return response, abandoned


def call_unit(agent: ExternalAgent, unit: Sequence[tuple[Probe, str]]) -> list[tuple[Reply, bool]]:
    """A conversation's turns in order in their session (a single probe is a unit of one), on a Ray actor."""
    return [call_system(agent, probe, session_id) for probe, session_id in unit]


def _session_namer(
    done: Mapping[str, Reply],
    warm_memory: bool,
    conversation_of: Mapping[str, str],
    reset_ids: Collection[str] = frozenset(),
) -> Callable[[Probe], str]:
    """A fresh session id per probe (``doceval-<run>-<probe id>``) or per conversation
    (``doceval-<run>-<conversation id>``, new in every invocation, so a replayed conversation gets a new one),
    or with warm memory one for the whole run: a resumed warm run keeps the journaled one, where the system's
    memory of the resumed entries lives. A turn in ``reset_ids`` gets a session of its own (its probe id's);
    the conversation's later turns go on in the conversation's session."""
    run_tag = f"doceval-{uuid.uuid4().hex[:12]}"
    if not warm_memory:
        return lambda probe: (
            f"{run_tag}-{probe.id}"
            if probe.id in reset_ids
            else f"{run_tag}-{conversation_of.get(probe.id) or probe.id}"
        )
    earlier = {r.session_id for r in done.values()}
    session = (earlier.pop() if len(earlier) == 1 else None) or run_tag
    return lambda probe: session


def _replies(
    units: Generator[tuple[int, list[Reply]], None, None],
) -> Generator[tuple[int, Reply], None, None]:
    with contextlib.closing(units):
        for i, replies in units:
            for reply in replies:
                yield i, reply


def _on_ray(
    run: _ExternalRun,
    todo: Sequence[Sequence[Probe]],
    concurrency: int,
    engine: schema.Engine,
    stack: contextlib.ExitStack,
    warm_memory: bool,
) -> Generator[tuple[int, list[Reply]], None, None] | None:
    """The units' replies from Ray actors as they complete (each journaled by ``run.record`` here, on the
    driver), or None for ``engine=local``. A conversation is one unit: its turns run in order on one actor."""
    if not isinstance(engine, schema.EngineRay):
        return None
    # lazy: ray (~1 s to import) loads only for engine=ray
    from doceval.engine import engine_session
    from doceval.engine.fanout import iter_on_actors
    from doceval.harness.remote import check_user_code

    session = stack.enter_context(engine_session(engine))
    assert session is not None
    # Before any call: a module only this machine has is exit 2.
    check_user_code(session, run.agent, "agent.target")
    if warm_memory:  # one session, strictly in probe order, so one actor (max_concurrency is per actor)
        engine = dataclasses.replace(engine, actors=1)
    run.remote = True
    items = [[(probe, run.session_of(probe)) for probe in unit] for unit in todo]

    def record(_: int, replies: list[tuple[Reply, bool]]) -> None:
        for reply, abandoned in replies:
            run.record(reply, abandoned)

    agent = run.agent
    target = agent.describe().get("target")
    what = f"agent.target={target}" if target else f"agent={agent.name}"
    remote = iter_on_actors(lambda: agent, call_unit, items, engine, concurrency, on_done=record, what=what)
    stack.callback(remote.close)  # before the session ends: calls in flight are journaled, actors killed
    return ((i, [reply for reply, _ in replies]) for i, replies in remote)


def _drain_external(
    outcomes: Iterator[tuple[int, Reply]],
    agent: object,
    bar: Any,
    limits: tuple[int | None, int | None],
) -> str | None:
    """Consume the replies as they finish; why the run stopped early (``limits``: max errors, max abandoned
    calls: ``agent.abandoned``) or None."""
    max_errors, max_abandoned = limits
    n_errors = 0
    for _, response in outcomes:
        bar.update(1)
        if response.error is None:
            continue
        n_errors += 1
        bar.set_postfix(errors=n_errors)
        log.warning("%s: %s", response.id, response.error)
        reason = errors_stop(n_errors, max_errors) or abandoned_stop(agent, max_abandoned)
        if reason is not None:
            log.error("stopping: %s", reason)
            return reason
    return None


def run_external(
    probes: Sequence[Probe],
    agent: ExternalAgent,
    *,
    warm_memory: bool = False,
    journal_path: Path | None = None,
    max_concurrency: int = 8,
    max_errors: int | None = None,
    max_abandoned: int | None = None,
    progress: bool = True,
    conversation_of: Mapping[str, str] | None = None,
    reset_ids: Collection[str] = (),
    engine: schema.Engine | None = None,
) -> ExternalOutcome:
    """Send every probe to ``agent`` once; see the module docstring for what a reply must hold.

    - Sessions: a fresh session id per probe (``doceval-<run>-<probe id>``), so the system's memory cannot
      carry one answer into the next; ``warm_memory`` uses one session id for the whole run and calls strictly
      in probe order, one at a time (a resumed warm run keeps the journaled session id).
    - Conversations (``conversation_of``: probe id -> conversation id): one session id per conversation, its
      turns called in order, one conversation a unit of concurrency. On resume, a conversation with a turn
      not answered ok is replayed from its first turn in a new session (its journaled turns are dropped).
      A turn in ``reset_ids`` (``--memory-reset needs_memory``) is asked in a fresh session of its own; the
      conversation's next turn goes on in the conversation's session.
    - ``journal_path``: every finished response (ok or error) is appended before it counts; a rerun skips
      entries journaled ok and calls the errored ones again.
    - ``max_errors``: once more entries than this have errored, no new call starts; calls in flight finish
      (and are journaled and returned) and the outcome says ``stopped``. ``max_abandoned`` likewise, once more
      calls than this were abandoned past their deadline (``agent.timeout_s`` of a function agent).
    - ``engine``: with ``engine=ray`` the calls run on Ray actors (:mod:`doceval.engine.fanout`), each with
      its own copy of ``agent`` and up to ``max_concurrency`` calls at once; this process alone journals,
      keeping the first reply per entry. Warm memory runs on one actor, one call at a time.
    """
    require_unique_ids(probes)
    wanted = {p.id for p in probes}
    previous = load_journal(journal_path) if journal_path is not None else {}
    done = {i: r for i, r in previous.items() if i in wanted and r.error is None}
    conversation_of = {} if warm_memory or conversation_of is None else conversation_of
    units = conversation_units(probes, conversation_of)
    done = {i: r for i, r in done.items() if i in whole_units(units, done)}
    namer = _session_namer(done, warm_memory, conversation_of, frozenset(reset_ids))
    run = _ExternalRun(agent, Journal(journal_path), dict(done), namer, (max_errors, max_abandoned))
    todo = [u for u in units if u[0].id not in done]
    concurrency = 1 if warm_memory else max(1, max_concurrency)
    bar = Progress(len(probes), f"agent ({agent.name})", "entry", enabled=progress, initial=len(done))
    try:
        with contextlib.ExitStack() as stack:
            produced = (
                _on_ray(run, todo, concurrency, engine, stack, warm_memory) if engine is not None else None
            )
            if produced is None:
                produced = iter_concurrent(run.process_unit, todo, concurrency)
            outcomes = stack.enter_context(contextlib.closing(_replies(produced)))
            try:
                reason = _drain_external(
                    outcomes, run if run.remote else agent, bar, (max_errors, max_abandoned)
                )
            except (
                WorkersLost
            ) as lost:  # engine=ray: no node left to run the system: stop as for --max-errors
                reason = str(lost)
                log.error("stopping: %s", reason)
            if reason is not None:
                run.stopping.set()
    finally:
        bar.close()
        run.journal.close()

    ordered = {p.id: run.results[p.id] for p in probes if p.id in run.results}
    return ExternalOutcome(
        responses=ordered,
        n_errors=sum(1 for r in ordered.values() if r.error is not None),
        stopped=reason is not None,
        resumed=len(done),
        stop_reason=reason,
    )
