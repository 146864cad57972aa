"""Calls of the system under test on Ray actors (``engine=ray``): the evaluation fan-out.

``engine.actors`` actors each build the system once (``make_system``, shipped through the object store once
for all of them) and run up to ``max_concurrency`` calls at once on threads of their own, as the local thread
pool would. Items go to the least busy actor, at most ``actors x max_concurrency`` in flight, submitted
lazily so a stop starts nothing new; results come back to the driver as they complete (``ray.wait``). A call
whose worker process dies is retried by Ray on the actor's restarted process (``engine.max_restarts``,
``engine.max_task_retries``): the system may then have been called twice for one item, but the driver sees
one result per item. Only the driver writes anything (the caller's ``on_done``): workers never open the
driver's files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Sequence
from typing import Any, Generic, TypeVar

import ray
from ray.exceptions import ActorUnavailableError, RayActorError, WorkerCrashedError

from doceval.config import schema
from doceval.errors import UsageError

log = logging.getLogger(__name__)

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

DRAIN_TIMEOUT_S = 600.0  # calls in flight at a stop: how long the driver waits for them to come back


class SystemActor(Generic[S]):
    """One actor's copy of the system under test, built once (again only if its process is restarted)."""

    def __init__(self, make_system: Callable[[], S]) -> None:
        self.system = make_system()

    def run(self, call: Callable[[S, Any], Any], item: Any) -> Any:
        return call(self.system, item)


def _lost(exc: BaseException, engine: schema.EngineRay) -> UsageError:
    return UsageError(
        f"engine=ray: a system actor's worker died and its call could not be retried ({type(exc).__name__}: "
        f"{str(exc).splitlines()[0][:200]}); raise engine.max_restarts={engine.max_restarts} or "
        f"engine.max_task_retries={engine.max_task_retries}, and rerun the same command to resume from the "
        "journal (finished entries are not redone)"
    )


def iter_on_actors(
    make_system: Callable[[], S],
    call: Callable[[S, T], R],
    items: Sequence[T],
    engine: schema.EngineRay,
    max_concurrency: int,
    on_done: Callable[[int, R], None] | None = None,
) -> Generator[tuple[int, R], None, None]:
    """Yield ``(index, call(system, item))`` in completion order, each call on one of ``engine.actors``
    actors holding its own ``make_system()``; ``call`` and ``make_system`` must pickle (cloudpickle).

    ``on_done(index, result)`` runs on the driver for every result before it is yielded, and also for calls
    still in flight when the iterator is closed early (they are waited for, as the local thread pool waits
    for its calls): the place to journal. A worker that dies past its retries is a UsageError saying how to
    resume. Runs inside an open Ray session (:func:`doceval.engine.engine_session`)."""
    per_actor = max(1, max_concurrency)
    actor_cls: Any = ray.remote(SystemActor).options(
        num_cpus=engine.cpus_per_actor,
        max_restarts=engine.max_restarts,
        max_task_retries=engine.max_task_retries,
        max_concurrency=per_actor,
    )
    factory_ref, call_ref = ray.put(make_system), ray.put(call)
    n_actors = max(1, min(engine.actors, len(items)))
    actors: list[Any] = [actor_cls.remote(factory_ref) for _ in range(n_actors)]
    pending: dict[Any, tuple[int, int]] = {}  # object ref -> (item index, actor index)
    load = [0] * n_actors
    source = iter(enumerate(items))

    def fill() -> None:
        while len(pending) < n_actors * per_actor:
            nxt = next(source, None)
            if nxt is None:
                return
            a = min(range(n_actors), key=load.__getitem__)
            load[a] += 1
            pending[actors[a].run.remote(call_ref, nxt[1])] = (nxt[0], a)

    def take(ref: Any) -> tuple[int, R]:
        index, a = pending.pop(ref)
        load[a] -= 1
        try:
            value: R = ray.get(ref)
        except (RayActorError, WorkerCrashedError, ActorUnavailableError) as exc:
            raise _lost(exc, engine) from None
        if on_done is not None:
            on_done(index, value)
        return index, value

    try:
        fill()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                yield take(ref)
            fill()
    finally:
        _finish(pending, take)
        for actor in actors:
            ray.kill(actor)


def _finish(pending: dict[Any, tuple[int, int]], take: Callable[[Any], object]) -> None:
    """Calls in flight at an early stop: wait for them and hand each to ``on_done`` (a reply the system gave
    is journaled, as locally); a failure among them is logged, the stop's own reason goes on."""
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=DRAIN_TIMEOUT_S)
        if not ready:
            log.warning("engine=ray: %d calls in flight did not come back; not recorded", len(pending))
            return
        try:
            take(ready[0])
        except Exception as exc:  # noqa: BLE001 - already stopping: one lost reply must not hide why
            log.warning("engine=ray: a call in flight at the stop failed: %s", exc)
