"""One retry loop for every remote call (LLM endpoints, an external agent over HTTP): exponential backoff with
jitter, at least the server's Retry-After, every attempt counted.

What is worth retrying depends on the client library, so the caller passes ``classify(exc)``: ``(kind,
status)`` for a transient failure (429, 5xx, a timeout, a dropped connection), None for one a retry cannot fix.
This module imports no client library, so the harness can use it without loading openai.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

# (kind, HTTP status or None), e.g. ("rate_limit", 429), ("timeout", None).
Classification = tuple[str, int | None]


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: (
        int  # the block's own (conf/answerer|judge/openai.yaml, conf/agent/http.yaml): no default here
    )
    # The delays of a block that leaves them out (an HTTP agent's, an embedder's): doceval's own.
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Exponential backoff with jitter (50-100% of the step), at least the server's Retry-After."""
        step = min(self.max_delay_s, self.base_delay_s * 2.0**attempt)
        delay = step * (0.5 + random.random() / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_delay_s))
        return delay


class RetriesExhausted(Exception):
    """A transient failure that outlived the retry policy; ``last`` is the final attempt's exception."""

    def __init__(self, message: str, *, last: BaseException, kind: str, status: int | None, attempts: int):
        super().__init__(message)
        self.last = last
        self.kind = kind
        self.status = status
        self.attempts = attempts


def _no_retry_after(exc: BaseException) -> float | None:
    return None


def _plain(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def call_with_retries(
    call: Callable[[], T],
    policy: RetryPolicy,
    *,
    classify: Callable[[BaseException], Classification | None],
    retry_after: Callable[[BaseException], float | None] = _no_retry_after,
    what: str = "call",
    describe: Callable[[BaseException], str] = _plain,
    sleep: Callable[[float], None] = time.sleep,
    on_attempt: Callable[[], None] | None = None,
    on_retry: Callable[[], None] | None = None,
) -> T:
    """Run ``call``, retrying what ``classify`` calls transient, up to ``policy.max_retries`` times.

    - A failure ``classify`` returns None for is re-raised unchanged at once (the caller decides what it means).
    - When retries run out: :class:`RetriesExhausted`, its message ``"{what} failed after N attempt(s): ..."``
      built with ``describe`` (the caller's chance to redact secrets), raised without the original as cause
      (its text may quote a credential); the original is on ``.last``.
    - ``retry_after(exc)``: the server's Retry-After in seconds, honoured up to ``policy.max_delay_s``.
    - ``on_attempt`` runs before every attempt and ``on_retry`` before every backoff sleep (counters).
    """
    attempt = 0
    while True:
        if on_attempt:
            on_attempt()
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - classified below; the rest is re-raised
            kind_status = classify(exc)
            if kind_status is None:
                raise
            kind, status = kind_status
            if attempt >= policy.max_retries:
                raise RetriesExhausted(
                    f"{what} failed after {attempt + 1} attempt(s): {describe(exc)}",
                    last=exc,
                    kind=kind,
                    status=status,
                    attempts=attempt + 1,
                ) from None
            delay = policy.delay(attempt, retry_after(exc))
            log.warning(
                "%s: %s; retry %d/%d in %.2fs", what, describe(exc), attempt + 1, policy.max_retries, delay
            )
            if on_retry:
                on_retry()
            sleep(delay)
            attempt += 1
