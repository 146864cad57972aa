"""Bounded concurrency: run a function over items with at most N calls in flight, lazily, so a stop starts
nothing new. Shared by LLM work and external agents; lives here (not in doceval.llm) so using it never loads
openai.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


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
