"""The seam between the harness and a system under test: what the harness hands a system (a :class:`Probe`)
and what the system hands back (an :class:`Answer` from DocChat, a :class:`SystemResponse` from an external
agent).

Both sides import this module and nothing of each other: the system never sees a label (scope, relevant
documents, reference answer), and the scorers never see the system's internals.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from doceval.errors import UsageError


@dataclass(frozen=True)
class Probe:
    """One golden entry as a system sees it: the question and the library version it is about."""

    id: str
    question: str
    library: str
    version: str


@dataclass
class Answer:
    """A system's reply to one probe: an answer, or a refusal with its reason, and the LLM usage it cost."""

    id: str
    answer: str | None
    refused: bool
    refusal_reason: str | None
    usage: dict[str, dict[str, float]]  # per role, this entry's LLM calls only

    @property
    def cost_usd(self) -> float:
        return usage_cost(self.usage)


@dataclass(frozen=True)
class Source:
    """One source an external system cited: a document id and its score, if the system gave one."""

    id: str
    score: float | None  # None: the system gave no score


class InvalidRetrieval(UsageError):
    """A retriever function's result of the wrong shape for one question (a usage error when called alone; the
    harness records ``"invalid response: <problem>"`` as that entry's system error)."""

    def __init__(self, about: str, problem: str) -> None:
        super().__init__(f"{about}: {problem}")
        self.problem = problem


def source_problem(doc_id: object, score: object) -> str | None:
    """Why ``(doc_id, score)`` from the user's system cannot be scored, or None: one rule for a retriever's
    results and an assistant's sources. An id is a non-empty str; a score is None (not given) or a finite real
    number: never a bool, NaN (it would pass or fail every floor at random), an infinity, or an int too large
    for a float. The text completes "item 3 ..." or "sources[3] ..."."""
    if not isinstance(doc_id, str):
        return f"has the id {doc_id!r:.60} ({type(doc_id).__name__}); document ids are non-empty strings"
    if not doc_id:
        return 'has an empty id ""; document ids are non-empty strings'
    if score is None:
        return None
    finite = isinstance(score, numbers.Real) and not isinstance(score, bool)
    if finite:
        try:
            finite = math.isfinite(float(score))  # type: ignore[arg-type]
        except OverflowError:  # an int like 10**400
            finite = False
    if not finite:
        return (
            f"({doc_id!r:.60}) has the score {score!r:.60}; expected a finite number (not NaN, infinite or "
            "too large for a float)"
        )
    return None


@dataclass
class SystemResponse:
    """An external system's reply to one probe, as recorded (and journaled) by the harness.

    ``error`` set means the call failed (transport, timeout after retries, a reply of the wrong shape): the
    entry is NOT scored, and in particular never counted as a refusal.
    """

    id: str  # the probe id
    answer: str | None
    sources: list[Source]  # ranked, best first, as returned (the harness cuts at k)
    refused: bool
    reason: str | None  # refusal reason, if the system gave one
    usage: dict[str, Any]  # token usage etc. if the system returned it ({} otherwise)
    extra: dict[str, Any]  # every other key the system returned, kept verbatim
    session_id: str
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "answer": self.answer,
            "sources": [{"id": s.id, "score": s.score} for s in self.sources],
            "refused": self.refused,
            "reason": self.reason,
            "usage": self.usage,
            "extra": self.extra,
            "session_id": self.session_id,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SystemResponse:
        """The inverse of :meth:`to_json`; KeyError/TypeError/ValueError on another shape (a journal line)."""
        sources: list[Source] = []
        for item in _typed(data, "sources", list):
            score = item["score"]
            if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
                raise TypeError(f"source score must be a number or null, got {score!r}")
            sources.append(Source(id=_typed(item, "id", str), score=None if score is None else float(score)))
        return cls(
            id=_typed(data, "id", str),
            answer=_typed(data, "answer", str, nullable=True),
            sources=sources,
            refused=_typed(data, "refused", bool),
            reason=_typed(data, "reason", str, nullable=True),
            usage=dict(_typed(data, "usage", dict)),
            extra=dict(_typed(data, "extra", dict)),
            session_id=_typed(data, "session_id", str),
            error=_typed(data, "error", str, nullable=True),
        )


def _typed(data: Mapping[str, Any], key: str, kind: type, nullable: bool = False) -> Any:
    value = data[key]
    if value is None and nullable:
        return None
    if not isinstance(value, kind):
        raise TypeError(f"{key!r} must be {kind.__name__}{' or null' if nullable else ''}, got {value!r}")
    return value


def usage_cost(usage: dict[str, dict[str, float]]) -> float:
    """Total cost over the roles of a per-role usage block."""
    return sum(float(u.get("cost_usd", 0.0)) for u in usage.values())


def sum_usage(*blocks: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per-role, per-field sum of usage blocks (e.g. every entry's answering and judging)."""
    out: dict[str, dict[str, float]] = {}
    for block in blocks:
        for role, counts in block.items():
            acc = out.setdefault(role, {})
            for key, value in counts.items():
                acc[key] = acc.get(key, 0) + value
    return out
