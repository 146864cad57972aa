"""Retries of LLM calls: which openai failures are transient (429, 408, 5xx, timeouts, connection errors,
malformed bodies), on the generic loop of :mod:`doceval.common.retry` (backoff with jitter, Retry-After, every
attempt counted), with failures turned into redacted :class:`LLMError`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TypeVar

from doceval.common import retry
from doceval.common.redact import scrub_message
from doceval.common.retry import RetryPolicy
from doceval.llm.errors import LLMError, _Malformed

__all__ = ["RetryPolicy", "call_with_retries"]

T = TypeVar("T")


def _classify(exc: BaseException) -> tuple[str, int | None] | None:
    """(kind, status) for retryable failures, None for failures a retry cannot fix."""
    import openai  # lazy: start-up budget (issue 26); loaded by the client that raised, so free here

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
    import openai  # lazy: start-up budget (issue 26)

    if not isinstance(exc, openai.APIStatusError):
        return None
    value = exc.response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    head = type(exc).__name__ + (f" (HTTP {status})" if status else "")
    # The client's key and base_url credentials were registered when the client was made (llm.config).
    return scrub_message(f"{head}: {str(exc)[:300]}")


def call_with_retries(
    call: Callable[[], T],
    policy: RetryPolicy,
    *,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
    on_attempt: Callable[[], None] | None = None,
    on_retry: Callable[[], None] | None = None,
) -> T:
    """Run ``call``, retrying 429, 5xx, timeouts, connection errors and malformed bodies.

    Raises :class:`LLMError` (redacted) when retries run out or the error is one a retry cannot fix.
    """
    import openai  # lazy: start-up budget (issue 26); a model call has loaded it by now

    attempts = 0

    def counted() -> None:
        nonlocal attempts
        attempts += 1
        if on_attempt:
            on_attempt()

    try:
        return retry.call_with_retries(
            call,
            policy,
            classify=_classify,
            retry_after=_retry_after,
            what=what,
            describe=_describe,
            sleep=sleep,
            on_attempt=counted,
            on_retry=on_retry,
        )
    except retry.RetriesExhausted as exc:
        raise LLMError(str(exc), kind=exc.kind, attempts=exc.attempts, status=exc.status) from None
    except openai.OpenAIError as exc:  # not retryable (a 4xx other than 408/429)
        raise LLMError(
            f"{what} failed: {_describe(exc)}",
            kind="client",
            attempts=attempts,
            status=getattr(exc, "status_code", None),
        ) from None  # the original may quote a (masked) key
