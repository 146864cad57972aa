"""LLM errors: a failed call, a budget stop. Messages are scrubbed by the one scrubber (doceval.common.redact)."""

from __future__ import annotations

# Local servers (vLLM, Ollama, llama.cpp) ignore the key, but the client refuses to start without one.
LOCAL_PLACEHOLDER_KEY = "not-needed"


class LLMError(Exception):
    """A call that failed for good: a non-retryable error, or retries exhausted. The message is redacted."""

    def __init__(self, message: str, *, kind: str, attempts: int, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind  # "rate_limit", "server", "timeout", "connection", "malformed", "client"
        self.attempts = attempts
        self.status = status


class BudgetExceeded(Exception):
    """Raised before a call whose estimated cost would take spending over the budget."""

    def __init__(self, spent_usd: float, estimate_usd: float, budget_usd: float) -> None:
        super().__init__(
            f"LLM budget of ${budget_usd:.4f} reached: ${spent_usd:.4f} spent or reserved, "
            f"the next call could cost up to ${estimate_usd:.4f}"
        )
        self.spent_usd = spent_usd
        self.estimate_usd = estimate_usd
        self.budget_usd = budget_usd


class _Malformed(Exception):
    """A 2xx reply whose body is not the expected shape (treated like a transient server fault)."""
