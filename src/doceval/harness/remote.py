"""The harness's work on Ray actors (``engine=ray``), the driver alone writing anything.

- The user's retriever function: each actor builds the retriever once and answers one question at a time (as
  the local loop calls it: a user's function need not be thread-safe), the driver collects the candidates in
  entry order. A failed call is that entry's system error, as locally.
- doceval's agent with the extractive answerer (:func:`docchat_on_ray`): each actor builds the answerer once;
  a unit (an entry, or a conversation's turns in order) goes to one actor with its search results, computed
  on the driver from the candidate cache, so workers open no index shard, run folder or cache.
- The user's code found only through the driver's import path is refused on a cluster with nodes on other
  hosts (:func:`check_user_code`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.common.concurrency import CallTimedOut
from doceval.common.io import sha256_file
from doceval.common.progress import Progress
from doceval.common.targets import installed_file
from doceval.errors import UsageError, WorkersLost
from doceval.harness.retrieval_journal import journal_answer
from doceval.harness.stops import ErrorLimits, abandoned_calls_stop, errors_stop
from doceval.system.external.agents import system_error_text

if TYPE_CHECKING:
    from doceval.common.journal import Journal
    from doceval.config import schema
    from doceval.engine.cluster import RaySession
    from doceval.harness.candidate_set import CandidateSet
    from doceval.inputs.golden import GoldenEntry
    from doceval.seam import Reply
    from doceval.system.docchat.conversation import TurnQuery
    from doceval.system.docchat.runner import Outcome as AgentOutcome
    from doceval.system.docchat.runner import RemoteUnits
    from doceval.system.docchat.types import Probe, SearchResult
    from doceval.system.retrievers import Retriever

log = logging.getLogger(__name__)

# (entry id, ranked, error, (start, seconds), scored, abandoned): one call's outcome, sent back to the driver
Outcome = tuple[str, list[tuple[str, float]], str | None, tuple[float, float], bool | None, bool]


def retrieve_one(retriever: Retriever, item: tuple[str, TurnQuery, int]) -> Outcome:
    """One call of the user's retriever, on an actor: its failure is the entry's error, never raised."""
    entry_id, ask, depth = item
    start, t0 = time.time(), time.perf_counter()
    error, abandoned = None, False
    try:
        ranked = list(retriever.retrieve(ask.query, ask.library, ask.version, depth))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - only the user's code: its exit code is never doceval's
        ranked, error, abandoned = [], system_error_text(exc), isinstance(exc, CallTimedOut)
    return (
        entry_id,
        ranked,
        error,
        (start, time.perf_counter() - t0),
        getattr(retriever, "scored", None),
        abandoned,
    )


def retrieve_on_ray(
    entries: Sequence[GoldenEntry],
    retriever: Retriever,
    make_system: Callable[[], Retriever],
    turns: Mapping[str, TurnQuery],
    depth: int,
    engine: schema.EngineRay,
    limits: ErrorLimits,
    progress: bool,
    into: tuple[CandidateSet, Journal],
) -> None:
    """:func:`doceval.harness.candidates.retrieve_all` for a user's retriever on ``engine.actors`` actors:
    fills the candidate set and journals each answer as it arrives (``into``); ``retriever`` is the driver's
    copy (its ``scored`` is set from the actors' results). Losing every node that can run the actors stops the
    run as ``--max-errors`` does (``out.stopped``): the journal resumes it."""
    # lazy: ray (~1 s to import) loads only for engine=ray
    from doceval.engine import engine_session
    from doceval.engine.fanout import iter_on_actors

    out, journal = into
    abandoned = [0]
    items = [(e.id, turns[e.id], depth) for e in entries]

    def record(_: int, outcome: Outcome) -> None:
        entry_id, ranked, error, timing, scored, lost = outcome
        out.ranked[entry_id], out.routed[entry_id], out.timings[entry_id] = ranked, None, timing
        if getattr(retriever, "scored", None) is None and scored is not None:
            retriever.scored = scored  # type: ignore[attr-defined]  # bare ids or pairs, as the actors saw
        if error is not None:
            out.errors[entry_id] = error
            log.warning("%s: %s", entry_id, error)
        elif journal.active:
            journal_answer(journal, entry_id, ranked, timing, retriever)
        abandoned[0] += lost

    bar = Progress(len(entries), f"retrieve ({retriever.name})", "q", enabled=progress)
    what = f"retriever.target={getattr(retriever, 'target', retriever.name)}"
    with engine_session(engine) as session, contextlib.ExitStack() as stack:
        assert session is not None
        check_user_code(session, retriever, "retriever.target")
        stack.callback(bar.close)
        results = iter_on_actors(make_system, retrieve_one, items, engine, 1, on_done=record, what=what)
        try:
            for _ in stack.enter_context(contextlib.closing(results)):
                bar.update(1)
                out.stopped = errors_stop(len(out.errors), limits.max_errors) or abandoned_calls_stop(
                    abandoned[0], limits.max_abandoned
                )
                if out.stopped is not None:
                    log.error("stopping: %s", out.stopped)
                    break
        except WorkersLost as lost:  # no node left to run the function on: stop as --max-errors does
            out.stopped = str(lost)
            log.error("stopping: %s", out.stopped)


WHAT = "doceval's agent (answerer=extractive)"
USER_CODE_FIX = (
    "install it as a package on every node (e.g. `pip install .` of a project holding it, the same version "
    "everywhere), put it in a folder every node mounts at the same path, or run with engine=local"
)


def check_user_code(session: RaySession, system: object, key: str) -> None:
    """Exit 2 before any call when a worker could not import the user's code (a retriever function or an
    assistant callable) as this machine does: the module its target names (``MODULE:ATTR``, which a worker
    imports to build it) and the module the callable is defined in. Judged by each module's file, not its name:
    a file of this interpreter's installation (site-packages, the standard library) is on every node that
    installed the same; any other file (the working directory, $PYTHONPATH, an editable install, a folder shared
    by mount) must be, by path and sha256, where each node imports the module from: a probe task on every node
    checks, and the first node without it is named. ``key`` is the config key naming the code
    (``retriever.target``), quoted with its value."""
    describe = getattr(system, "describe", None)
    record: dict[str, Any] = describe() if callable(describe) else {}
    target = str(record.get("target") or "")
    modules = dict.fromkeys(m for m in (target.partition(":")[0], record.get("module")) if m)
    files = {m: _module_file(m) for m in modules}
    local = {m: f for m, f in files.items() if f is not None and not installed_file(f)}
    if not local or session.all_local():
        return  # no file (a notebook's code, shipped by value), or installed: every node has its own copy
    # lazy: ray (~1 s) loads only for engine=ray
    from doceval.engine.probes import import_origins

    for module, file in local.items():
        sha = sha256_file(file)
        for node, origin, detail in import_origins(module):
            if origin == str(file) and detail == sha:
                continue
            if origin is None:
                found = f"importing {module!r} there fails ({detail})"
            elif origin != str(file):
                found = f"{module!r} is {origin} there"
            else:
                found = "the file there differs (another sha256)"
            raise UsageError(
                f"engine=ray: {key}={target} is {file} on this machine (module {module!r}); node {node} does not "
                f"import that file: {found}; {USER_CODE_FIX}"
            )


def _module_file(name: str) -> Path | None:
    """The source file of an imported module (the user's code is imported before this check), else None."""
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    return Path(file).resolve() if file and Path(file).is_file() else None


def docchat_on_ray(
    engine: schema.EngineRay, answerer_cfg: schema.Answerer, reset_ids: frozenset[str]
) -> RemoteUnits:
    """How :func:`doceval.system.docchat.runner.run_agent` answers its units on ``engine.actors`` actors with
    an offline answerer (``answerer_cfg``, registered ``offline``), one unit at a time per actor (pure Python under the GIL, as
    locally); ``reset_ids``: the turns answered with an empty memory (``--memory-reset needs_memory``)."""
    # lazy: the agent's runner is the system: loaded only for doceval's agent
    from doceval.system.docchat.answerers import make_answerer
    from doceval.system.docchat.runner import answer_shipped

    def remote(
        todo: Sequence[Sequence[Probe]],
        search: Callable[[Probe], SearchResult],
        record: Callable[[Reply], bool],
    ) -> Generator[list[tuple[Probe, AgentOutcome]], None, None]:
        # lazy: ray (~1 s to import) loads only for engine=ray
        from doceval.engine import engine_session
        from doceval.engine.fanout import iter_on_actors

        items = [
            (list(unit), {p.id: search(p) for p in unit}, reset_ids & {p.id for p in unit}) for unit in todo
        ]

        answered_units: set[int] = set()

        def on_done(i: int, answered: list[Any]) -> None:
            answered_units.add(i)
            for _probe, _outcome, rec in answered:
                if rec is not None:
                    record(rec)

        make = functools.partial(make_answerer, answerer_cfg)
        with engine_session(engine):
            results = iter_on_actors(make, answer_shipped, items, engine, 1, on_done=on_done, what=WHAT)
            try:
                with contextlib.closing(results):
                    for _, answered in results:
                        yield [(probe, outcome) for probe, outcome, _ in answered]
                return
            except WorkersLost as lost:
                # The offline answerer runs anywhere: what the cluster can no longer answer, the driver does.
                log.warning("%s; doceval's agent answers the rest here, on the driver", lost)
        here = make()
        for i, item in enumerate(items):
            if i not in answered_units:
                answered = answer_shipped(here, item)
                on_done(i, answered)
                yield [(probe, outcome) for probe, outcome, _ in answered]

    return remote
