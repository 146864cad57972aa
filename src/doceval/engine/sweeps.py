"""Sweep points as Ray tasks: one task per point, results handed to the driver as they finish.

The task function is the caller's (a module-level function, which Ray ships by reference: the worker imports
its module). It must catch its own errors and return them as data: a task that raises is a bug in doceval,
reported as a :class:`TaskLost` like a worker that died. Ray retries a task whose worker process died
(``engine.max_task_retries``), never one that returned a failure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import ray
from ray.exceptions import RayError, TaskCancelledError

from doceval.config import schema

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class TaskLost:
    """A task Ray could not finish: its worker died more often than retried, or the task raised."""

    message: str


def run_tasks(
    engine: schema.EngineRay,
    fn: Callable[..., R],
    items: Sequence[T],
    on_done: Callable[[int, R | TaskLost], bool],
    shared: tuple[Any, ...] = (),
) -> None:
    """Run ``fn(item, *shared)`` for every item as a Ray task (``engine.cpus_per_actor`` CPUs each, spread over
    the nodes, retried ``engine.max_task_retries`` times when its worker dies) and call ``on_done(index,
    result)`` in the order tasks finish; ``shared`` goes to Ray's object store once for all the tasks.
    ``on_done`` returning False stops the run: tasks not started are cancelled, and those already finished are
    still handed over (the sweep keeps what finished)."""
    remote = ray.remote(fn).options(
        num_cpus=engine.cpus_per_actor, max_retries=engine.max_task_retries, scheduling_strategy="SPREAD"
    )
    refs = [ray.put(value) for value in shared]
    index: dict[Any, int] = {remote.remote(item, *refs): i for i, item in enumerate(items)}
    pending = list(index)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            if not on_done(index[ref], _result(ref)):
                _stop(pending, index, on_done)
                return


def _result(ref: Any) -> Any:
    try:
        return ray.get(ref)
    except RayError as exc:  # a dead worker past its retries, or a task that raised
        return TaskLost(" ".join(str(exc).split())[:2000])


def _stop(pending: list[Any], index: dict[Any, int], on_done: Callable[[int, Any], bool]) -> None:
    """Cancel what has not finished; hand over what finished meanwhile."""
    for ref in pending:
        with contextlib.suppress(RayError):
            ray.cancel(ref)
    for ref in pending:
        try:
            result = ray.get(ref)
        except (TaskCancelledError, RayError):
            continue  # cancelled (or interrupted while running): nothing to keep
        on_done(index[ref], result)
