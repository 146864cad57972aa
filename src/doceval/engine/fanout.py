"""Calls of the system under test on Ray actors (``engine=ray``): the evaluation fan-out.

``engine.actors`` actors, spread over the nodes, each build the system once (``make_system``, shipped pickled
with the actor) and run up to ``max_concurrency`` calls at once on threads of their own, as the local thread
pool would. Items go to the least busy live actor, at most ``actors x max_concurrency`` in flight, submitted
lazily so a stop starts nothing new; results come back to the driver as they complete (``ray.wait``).

- Building the system fails on a node (a module or file missing there, a factory that raises): exit 2 naming
  what was built, the node and the error, before any call.
- A worker process dies: Ray restarts the actor and retries its call (``engine.max_restarts``,
  ``engine.max_task_retries``). A node is lost: its actors' calls go to the actors still alive (each call at most
  ``max_task_retries`` times more) while Ray recreates the lost actors where it can; when no node can host an
  actor any more, :class:`~doceval.errors.WorkersLost` (exit 4, the run resumable). A call retried this way may
  have reached the system twice; the driver keeps one result per item.
- Only the driver writes anything (the caller's ``on_done``); workers never open the driver's files. Every
  actor is killed when the iteration ends, and an actor whose cluster head is gone ends itself
  (:func:`doceval.engine.cluster.exit_without_head`): no actor outlives its command.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import ray
from ray import cloudpickle
from ray.exceptions import (
    GetTimeoutError,
    LocalRayletDiedError,
    NodeDiedError,
    ObjectLostError,
    RayActorError,
    RayError,
    RayTaskError,
    WorkerCrashedError,
)

from doceval.config import schema
from doceval.engine.cluster import exit_without_head, hostable, live_nodes, this_node
from doceval.errors import UsageError, WorkersLost

log = logging.getLogger(__name__)

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

DRAIN_TIMEOUT_S = 600.0  # calls in flight at a stop: how long the driver waits for them to come back
RECOVERY_TIMEOUT_S = (
    120.0  # every actor lost: how long to wait for Ray to bring one back on a node that can host it
)
RECOVERY_POLL_S = 2.0
START_GRACE_S = 30.0  # once one actor is built: how long the start waits for the others
# A call's worker or node is gone (the call may be retried elsewhere), as opposed to an error of doceval's code.
LOST = (RayActorError, WorkerCrashedError, NodeDiedError, ObjectLostError, LocalRayletDiedError)


class SystemBuildError(Exception):
    """Building the system failed on an actor: ``node`` and the error's type and first line."""

    def __init__(self, node: str, error: str) -> None:
        super().__init__(node, error)  # both in args: the exception pickles back to the driver whole
        self.node, self.error = node, error

    def __str__(self) -> str:
        return f"on node {self.node}: {self.error}"


class SystemActor(Generic[S]):
    """One actor's copy of the system under test, built once (again only if its process is restarted). A failed
    build is kept, not raised: the driver asks :meth:`built` and reports it as the user's error."""

    def __init__(self, payload: bytes) -> None:
        exit_without_head()
        self.failure: SystemBuildError | None = None
        try:
            make_system: Callable[[], S] = cloudpickle.loads(payload)  # the user's module is imported here
            self.system = make_system()
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - the user's code: a SystemExit too is its error
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            self.failure = SystemBuildError(this_node(), f"{type(exc).__name__}: {first}".rstrip(": "))

    def built(self) -> tuple[SystemBuildError | None, str]:
        """The build's failure (None: built), and the node this actor runs on."""
        return self.failure, ray.get_runtime_context().get_node_id()

    def run(self, call: Callable[[S, Any], Any], item: Any) -> Any:
        if self.failure is not None:
            raise self.failure
        return call(self.system, item)


def _build_failed(failure: SystemBuildError, what: str) -> UsageError:
    return UsageError(
        f"engine=ray: building {what} failed on node {failure.node}: {failure.error}; install it (and what it "
        "imports or reads) on every node, the same version everywhere, or run with engine=local"
    )


@dataclass
class _Pool:
    """The actors and what the driver knows of them: which are live (built, on a live node), which are awaited
    (a ``built`` call in flight: it returns once Ray has placed, or after a loss recreated, the actor), the node
    each runs on, and its calls in flight."""

    actors: list[Any]
    what: str
    live: set[int] = field(default_factory=set)
    checks: dict[Any, int] = field(default_factory=dict)  # ``built`` ref -> actor index
    load: list[int] = field(default_factory=list)
    nodes: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.load = [0] * len(self.actors)
        self.checks = {a.built.remote(): i for i, a in enumerate(self.actors)}

    def suspect(self, a: int) -> None:
        """Actor ``a`` lost its worker or node: no new call until Ray has it back."""
        if a in self.live:
            self.live.discard(a)
            self.checks[self.actors[a].built.remote()] = a

    def checked(self, ref: Any) -> None:
        a = self.checks.pop(ref)
        try:
            failure, node = ray.get(ref)
        except RayError:  # dead for good (its restarts spent): it takes no more calls
            return
        if failure is not None:
            raise _build_failed(failure, self.what)
        self.live.add(a)
        self.nodes[a] = node

    def on_lost_nodes(self) -> set[int]:
        """The live actors whose node the cluster no longer lists as alive (their calls would wait for ever on
        a restart that may never be placed): each is suspected; returns them."""
        nodes = live_nodes()
        if nodes is None:
            raise _lost("the cluster's head no longer answers")
        alive = {str(n["NodeID"]) for n in nodes}
        lost = {a for a in self.live if self.nodes.get(a) not in alive}
        for a in lost:
            self.suspect(a)
        return lost

    def least_busy(self) -> int:
        return min(self.live, key=self.load.__getitem__)


def _start(
    make_system: Callable[[], S], n: int, engine: schema.EngineRay, per_actor: int, what: str, gpus: float
) -> _Pool:
    """``n`` actors spread over the nodes, built as soon as one is (those Ray cannot place yet join when it
    does): exit 2 when a build failed."""
    actor_cls: Any = ray.remote(SystemActor).options(
        num_cpus=engine.cpus_per_actor,
        num_gpus=gpus,
        max_restarts=engine.max_restarts,
        max_task_retries=engine.max_task_retries,
        max_concurrency=per_actor,
        scheduling_strategy="SPREAD",
    )
    # Pickled here, unpickled in the actor: a module missing on a node is that node's build error, not a
    # worker that dies deserialising its arguments. Passed by value: a restart never depends on an object ref.
    payload = cloudpickle.dumps(make_system)
    pool = _Pool([actor_cls.remote(payload) for _ in range(n)], what)
    _await_recovery(pool, engine.cpus_per_actor, gpus)
    # The others, built at about the same time where the cluster has room, are waited for a while; one Ray
    # cannot place yet (more actors than the nodes hold) joins whenever it is built.
    deadline = time.monotonic() + START_GRACE_S
    while pool.checks and time.monotonic() < deadline:
        ready, _ = ray.wait(list(pool.checks), num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
        for ref in ready:
            pool.checked(ref)
    return pool


@dataclass
class _Calls(Generic[T, R]):
    """The items' calls: which are in flight on which actor, which wait to be sent (again), how often each was
    lost with its worker or node."""

    pool: _Pool
    call: Callable[[Any, T], R]
    items: Sequence[T]
    per_actor: int
    retries: int
    what: str
    on_done: Callable[[int, R], None] | None
    pending: dict[Any, tuple[int, int]] = field(default_factory=dict)  # call ref -> (item index, actor index)
    retry: deque[int] = field(default_factory=deque)  # items whose call was lost: sent again first
    tries: dict[int, int] = field(default_factory=dict)
    nxt: int = 0  # the next item never sent

    def unfinished(self) -> bool:
        return bool(self.pending or self.retry or self.nxt < len(self.items))

    def fill(self) -> None:
        pool = self.pool
        while (
            pool.live
            and len(self.pending) < len(pool.live) * self.per_actor
            and (self.retry or self.nxt < len(self.items))
        ):
            if self.retry:
                i = self.retry.popleft()
            else:
                i, self.nxt = self.nxt, self.nxt + 1
            a = pool.least_busy()
            pool.load[a] += 1
            self.pending[pool.actors[a].run.remote(self.call, self.items[i])] = (i, a)

    def lost(self, i: int, a: int, why: str) -> None:
        """The call of item ``i`` on actor ``a`` is lost with its worker or node: sent again elsewhere."""
        self.tries[i] = self.tries.get(i, 0) + 1
        if self.tries[i] > self.retries:
            raise _lost(f"a call failed {self.tries[i]} times as its worker or node died ({why})")
        self.pool.suspect(a)
        self.retry.appendleft(i)

    def take(self, ref: Any) -> tuple[int, R] | None:
        i, a = self.pending.pop(ref)
        self.pool.load[a] -= 1
        try:
            value: R = ray.get(ref)
        except RayTaskError as exc:
            if isinstance(exc.cause, SystemBuildError):  # rebuilt elsewhere after a restart: failed there
                raise _build_failed(exc.cause, self.what) from None
            raise
        except LOST as exc:
            self.lost(i, a, _first_line(exc))
            return None
        if self.on_done is not None:
            self.on_done(i, value)
        return i, value

    def reap(self) -> None:
        """Calls on actors whose node died are not waited for: Ray may never place the actor again."""
        for a in self.pool.on_lost_nodes():
            for ref in [r for r, (_, b) in self.pending.items() if b == a]:
                i, _ = self.pending.pop(ref)
                self.pool.load[a] -= 1
                self.lost(i, a, "its node died")

    def forget_lost(self) -> None:
        """At the end: calls on an actor that is not live (its node lost, the head gone) may never come back."""
        for ref in [r for r, (_, a) in self.pending.items() if a not in self.pool.live]:
            self.pending.pop(ref)


def iter_on_actors(
    make_system: Callable[[], S],
    call: Callable[[S, T], R],
    items: Sequence[T],
    engine: schema.EngineRay,
    max_concurrency: int,
    on_done: Callable[[int, R], None] | None = None,
    what: str = "the system under test",
    gpus: float = 0,
) -> Generator[tuple[int, R], None, None]:
    """Yield ``(index, call(system, item))`` in completion order, each call on one of ``engine.actors``
    actors holding its own ``make_system()``; ``call`` and ``make_system`` must pickle (cloudpickle).

    ``on_done(index, result)`` runs on the driver for every result before it is yielded, and also for calls
    still in flight when the iterator is closed early (they are waited for, as the local thread pool waits
    for its calls): the place to journal. ``what`` names the system in errors (``retriever.target=m:f``);
    ``gpus``: each actor's GPUs (the embedder's ``engine.gpus_per_actor``; a system under test takes none).
    Raises UsageError when the system cannot be built on a node, WorkersLost when no node can run it any
    more. Runs inside an open Ray session (:func:`doceval.engine.engine_session`)."""
    per_actor = max(1, max_concurrency)
    pool = _start(make_system, max(1, min(engine.actors, len(items))), engine, per_actor, what, gpus)
    calls = _Calls(pool, call, items, per_actor, engine.max_task_retries, what, on_done)
    try:
        calls.fill()
        while calls.unfinished():
            if not calls.pending:  # every actor lost or being checked: wait for Ray to bring one back
                _await_recovery(pool, engine.cpus_per_actor, gpus)
                calls.fill()
                continue
            ready, _ = ray.wait([*calls.pending, *pool.checks], num_returns=1, timeout=RECOVERY_POLL_S)
            if not ready:
                calls.reap()
            for ref in ready:
                if ref in pool.checks:
                    pool.checked(ref)
                elif (result := calls.take(ref)) is not None:
                    yield result
            calls.fill()
    finally:
        calls.forget_lost()
        _finish(calls.pending, calls.take)
        for actor in pool.actors:
            with contextlib.suppress(Exception):  # the head may be gone too: nothing left to ask
                ray.kill(actor)


def _await_recovery(pool: _Pool, cpus: float, gpus: float) -> None:
    """No live actor: wait (at most RECOVERY_TIMEOUT_S) while Ray places an actor (or, after a loss, recreates
    it) on a node that can host it; WorkersLost as soon as no node can."""
    deadline = time.monotonic() + RECOVERY_TIMEOUT_S
    while not pool.live:
        if not pool.checks:
            raise _lost("every actor of the run is gone")
        ready, _ = ray.wait(list(pool.checks), num_returns=1, timeout=RECOVERY_POLL_S)
        for ref in ready:
            pool.checked(ref)
        if pool.live:
            return
        if not hostable(cpus, gpus):
            raise _lost(f"no live node can host an actor ({cpus:g} CPUs, {gpus:g} GPUs)")
        if time.monotonic() > deadline:
            raise _lost(f"no actor could be placed within {RECOVERY_TIMEOUT_S:.0f} s")


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"


def _lost(why: str) -> WorkersLost:
    return WorkersLost(
        f"engine=ray: {why}; rerun the same command to resume (finished entries are not redone)"
    )


def _finish(pending: dict[Any, tuple[int, int]], take: Callable[[Any], object]) -> None:
    """Calls in flight at an early stop: wait for them and hand each to ``on_done`` (a reply the system gave
    is journaled, as locally); a failure among them is logged, the stop's own reason goes on."""
    while pending:
        try:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=DRAIN_TIMEOUT_S)
        except (RayError, GetTimeoutError) as exc:
            log.warning(
                "engine=ray: %d calls in flight were not recorded (%s)", len(pending), _first_line(exc)
            )
            return
        if not ready:
            log.warning("engine=ray: %d calls in flight did not come back; not recorded", len(pending))
            return
        try:
            take(ready[0])
        except Exception as exc:  # noqa: BLE001 - already stopping: one lost reply must not hide why
            log.warning("engine=ray: a call in flight at the stop failed: %s", exc)
