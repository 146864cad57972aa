"""Per-role usage accounting (tokens, requests, cache hits, cost) and the budget, enforced before a call that
could exceed it.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass

from doceval.llm.errors import BudgetExceeded


@dataclass
class RoleUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0  # HTTP attempts sent, retries included
    retries: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    errors: int = 0  # calls that failed for good
    cost_usd: float = 0.0

    def add(self, **deltas: float) -> None:
        for key, value in deltas.items():
            setattr(self, key, getattr(self, key) + value)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


_SCOPE: contextvars.ContextVar[dict[str, RoleUsage] | None] = contextvars.ContextVar(
    "doceval_llm_scope", default=None
)


@contextlib.contextmanager
def usage_scope() -> Iterator[dict[str, RoleUsage]]:
    """Collect the usage of the LLM calls made in this block by this thread (per-entry accounting)."""
    scope: dict[str, RoleUsage] = {}
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


class Ledger:
    """Thread-safe per-role usage totals plus an optional budget in USD.

    Before a call, :meth:`reserve` holds the call's worst-case cost (estimated prompt tokens + max_tokens);
    the reservation is released when the call settles, so concurrent calls cannot overshoot together.
    """

    def __init__(self, budget_usd: float | None = None, spent_usd: float = 0.0) -> None:
        self.budget_usd = budget_usd
        self._spent_before = spent_usd  # e.g. cost of entries resumed from a journal
        self._reserved = 0.0
        self._roles: dict[str, RoleUsage] = {}
        self._lock = threading.Lock()

    def record(self, role: str, **deltas: float) -> None:
        with self._lock:
            self._roles.setdefault(role, RoleUsage()).add(**deltas)
        scope = _SCOPE.get()
        if scope is not None:
            scope.setdefault(role, RoleUsage()).add(**deltas)

    @property
    def spent_usd(self) -> float:
        with self._lock:
            return self._spent_before + sum(u.cost_usd for u in self._roles.values())

    def reserve(self, estimate_usd: float) -> None:
        with self._lock:
            if self.budget_usd is not None:
                committed = (
                    self._spent_before + sum(u.cost_usd for u in self._roles.values()) + self._reserved
                )
                if committed + estimate_usd > self.budget_usd + 1e-12:
                    raise BudgetExceeded(committed, estimate_usd, self.budget_usd)
            self._reserved += estimate_usd

    def release(self, estimate_usd: float) -> None:
        with self._lock:
            self._reserved = max(0.0, self._reserved - estimate_usd)

    def snapshot(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {role: usage.as_dict() for role, usage in sorted(self._roles.items())}

    def cache_stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "hits": sum(u.cache_hits for u in self._roles.values()),
                "misses": sum(u.cache_misses for u in self._roles.values()),
            }
