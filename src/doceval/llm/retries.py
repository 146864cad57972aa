"""Retries with exponential backoff and jitter on 429, 5xx and timeouts, honouring Retry-After; our loop, so
every attempt is counted.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import openai

from doceval.llm.errors import LLMError, _Malformed, redact

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Exponential backoff with jitter (50-100% of the step), at least the server's Retry-After."""
        step = min(self.max_delay_s, self.base_delay_s * 2.0**attempt)
        delay = step * (0.5 + random.random() / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_delay_s))
        return delay


def _classify(exc: BaseException) -> tuple[str, int | None] | None:
    """(kind, status) for retryable failures, None for failures a retry cannot fix."""
    if isinstance(exc, openai.APITimeoutError):
        return "timeout", None
    if isinstance(exc, openai.APIConnectionError):
        return "connection", None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status == 429:
            return "rate_limit", status
        if status >= 500 or status == 408:
            return "server", status
        return None
    if isinstance(exc, json.JSONDecodeError | openai.APIResponseValidationError | _Malformed):
        return "malformed", None
    return None


def _retry_after(exc: BaseException) -> float | None:
    if not isinstance(exc, openai.APIStatusError):
        return None
    value = exc.response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _describe(exc: BaseException, secrets: Sequence[str]) -> str:
    status = getattr(exc, "status_code", None)
    head = type(exc).__name__ + (f" (HTTP {status})" if status else "")
    return redact(f"{head}: {str(exc)[:300]}", secrets)


def call_with_retries(
    call: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str,
    secrets: Sequence[str] = (),
    sleep: Callable[[float], None] = time.sleep,
    on_attempt: Callable[[], None] | None = None,
    on_retry: Callable[[], None] | None = None,
) -> T:
    """Run ``call``, retrying 429, 5xx, timeouts, connection errors and malformed bodies.

    Raises :class:`LLMError` (redacted) when retries run out or the error is one a retry cannot fix.
    """
    attempt = 0
    while True:
        if on_attempt:
            on_attempt()
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - classified below; unknown errors are re-raised
            kind_status = _classify(exc)
            if kind_status is None:
                if isinstance(exc, openai.OpenAIError):
                    raise LLMError(
                        f"{what} failed: {_describe(exc, secrets)}",
                        kind="client",
                        attempts=attempt + 1,
                        status=getattr(exc, "status_code", None),
                    ) from None  # the original may quote a (masked) key
                raise
            kind, status = kind_status
            if attempt >= policy.max_retries:
                raise LLMError(
                    f"{what} failed after {attempt + 1} attempt(s): {_describe(exc, secrets)}",
                    kind=kind,
                    attempts=attempt + 1,
                    status=status,
                ) from None
            delay = policy.delay(attempt, _retry_after(exc))
            log.warning(
                "%s: %s; retry %d/%d in %.2fs",
                what,
                _describe(exc, secrets),
                attempt + 1,
                policy.max_retries,
                delay,
            )
            if on_retry:
                on_retry()
            sleep(delay)
            attempt += 1
