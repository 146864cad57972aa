"""Bounded concurrency: run a function over items with at most N calls in flight, lazily, so a stop starts
nothing new. Shared by LLM work and external agents; lives here (not in doceval.llm) so using it never loads
openai. And calls of the user's own code with a deadline (:class:`DeadlineCaller`).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TypeVar

from doceval.errors import UsageError

T = TypeVar("T")
R = TypeVar("R")


def timeout_of(value: Any, key: str) -> float | None:
    """A ``timeout_s`` setting named ``key``: seconds > 0, or None (no deadline)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise UsageError(f"{key}={value!r}: expected a number of seconds > 0, or null for no deadline")
    return float(value)


def iter_concurrent(
    fn: Callable[[T], R], items: Iterable[T], max_concurrency: int
) -> Generator[tuple[int, R], None, None]:
    """Yield ``(index, fn(item))`` in completion order with at most ``max_concurrency`` calls in flight.

    Items are submitted lazily, so closing the iterator early (budget stop, error) starts nothing new; calls
    already in flight finish before the iterator closes. An exception from ``fn`` propagates.
    """
    if max_concurrency <= 1:
        for i, item in enumerate(items):
            yield i, fn(item)
        return
    source = iter(enumerate(items))
    with ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="doceval") as pool:
        pending: dict[Future[R], int] = {}

        def fill() -> None:
            while len(pending) < max_concurrency:
                nxt = next(source, None)
                if nxt is None:
                    return
                pending[pool.submit(fn, nxt[1])] = nxt[0]

        fill()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                index = pending.pop(fut)
                yield index, fut.result()
            fill()


def map_concurrent(fn: Callable[[T], R], items: Iterable[T], max_concurrency: int) -> list[R]:
    """``[fn(x) for x in items]`` on a thread pool of ``max_concurrency``, results in input order."""
    results: dict[int, R] = {}
    with contextlib.closing(iter_concurrent(fn, items, max_concurrency)) as it:
        for index, value in it:
            results[index] = value
    return [results[i] for i in range(len(results))]


class CallTimedOut(Exception):
    """A call that did not return within its deadline; it was abandoned (see :class:`DeadlineCaller`)."""


@dataclass
class _Job:
    fn: Callable[[], Any]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


class DeadlineCaller:
    """Runs calls of user code on reused worker threads, waiting for each up to a deadline.

    Python cannot stop a thread: a call past its deadline is abandoned (its worker runs it to the end in the
    background, drops the result and only then takes new work) and counted in :attr:`abandoned`. Workers are
    daemon threads, so an abandoned call that never returns cannot hold the process open at exit (a
    ThreadPoolExecutor would: it joins its workers at exit). Idle workers are reused, so a call costs a
    queue hand-off (tens of microseconds), not a thread start.
    """

    def __init__(self, name: str = "doceval-call") -> None:
        self._name = name
        self._idle: list[queue.SimpleQueue[_Job]] = []
        self._lock = threading.Lock()
        self._started = 0
        self.abandoned = 0

    def call(self, fn: Callable[[], R], timeout_s: float | None) -> R:
        """``fn()``, or :class:`CallTimedOut` after ``timeout_s`` seconds (None: in this thread, no deadline).
        Whatever ``fn`` raises (SystemExit and KeyboardInterrupt included) is raised here."""
        if timeout_s is None:
            return fn()
        job = _Job(fn)
        self._worker().put(job)
        if not job.done.wait(timeout_s):
            with self._lock:
                self.abandoned += 1
            raise CallTimedOut(
                f"no reply within {timeout_s:g}s (the call was abandoned: a thread cannot be stopped)"
            )
        if job.error is not None:
            raise job.error
        result: R = job.result
        return result

    def _worker(self) -> queue.SimpleQueue[_Job]:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self._started += 1
            n = self._started
        inbox: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        threading.Thread(target=self._serve, args=(inbox,), name=f"{self._name}-{n}", daemon=True).start()
        return inbox

    def _serve(self, inbox: queue.SimpleQueue[_Job]) -> None:
        while True:
            job = inbox.get()
            try:
                job.result = job.fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, who decides what it means
                job.error = exc
            job.fn = _done  # drop the user's closure (and what it holds) before waiting for more work
            with self._lock:
                # Idle again before the caller wakes: a caller that calls at once gets this same thread back.
                self._idle.append(inbox)
            job.done.set()


def _done() -> None:
    return None
