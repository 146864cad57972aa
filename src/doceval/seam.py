"""The seam between the harness and a system under test: what the harness hands a system (a :class:`Probe`)
and what the system hands back (a :class:`Reply`, one type for doceval's agent and the user's function or HTTP
endpoint, with a typed :data:`RefusalCause`).

Both sides import this module and nothing of each other: the system never sees a label (scope, relevant
documents, reference answer), and the scorers never see the system's internals.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from doceval.errors import UsageError


@dataclass(frozen=True)
class Probe:
    """One golden entry as a system sees it: the question and the library version it is about."""

    id: str
    question: str
    library: str
    version: str


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


RefusalCause = Literal["router", "floor", "retriever", "answerer", "system"]
# Why a system refused: doceval's router (the library or version is not indexed), its search (no passage
# cleared the floor), the user's retriever function (it returned nothing: no floor was involved), its
# answerer (declined although passages reached it), or the user's own system.
REFUSAL_CAUSES: tuple[RefusalCause, ...] = ("router", "floor", "retriever", "answerer", "system")

_REPLY_KEYS: tuple[str, ...] = (
    "id",
    "answer",
    "refused",
    "refusal_cause",
    "refusal_reason",
    "sources",
    "usage",
    "memory_used",
    "session_id",
    "extra",
    "error",
)
# Journal lines written before one reply type: an external system's reply, and doceval's agent's record.
_EXTERNAL_KEYS: tuple[str, ...] = (
    "id",
    "answer",
    "sources",
    "refused",
    "reason",
    "usage",
    "extra",
    "session_id",
    "error",
)
_DOCCHAT_KEYS: tuple[str, ...] = ("id", "answer", "refused", "refusal_reason", "usage", "memory_used")


@dataclass
class Reply:
    """Any system's reply to one probe (doceval's agent, a user's function or HTTP endpoint): what the system
    returns, the harness journals, and the scorers and failure stages read.

    ``refusal_cause`` is set exactly when the system refused (None on a line of a journal from before causes
    were recorded, until :mod:`doceval.system.docchat.runner` fills it in); ``refusal_reason`` is the human
    text the summary shows. ``error`` set means the call failed (transport, timeout after retries, a reply of
    the wrong shape): the entry is NOT scored, and in particular never counted as a refusal.
    """

    id: str  # the probe id
    answer: str | None
    refused: bool = False
    refusal_cause: RefusalCause | None = None
    refusal_reason: str | None = None  # an external system's "reason" is kept even when it did not refuse
    sources: list[Source] = field(default_factory=list)  # ranked, best first (doceval's agent: what it read)
    # doceval's agent: its LLM usage per role; an external system: the usage block it returned ({} if none)
    usage: dict[str, Any] = field(default_factory=dict)
    memory_used: list[str] = field(default_factory=list)  # questions doceval's agent recalled from memory
    session_id: str | None = None  # an external system's session (None for doceval's agent)
    extra: dict[str, Any] = field(default_factory=dict)  # every other key an external system returned
    error: str | None = None
    # When the harness called the system and how long the call took, measured around it (traces, entries.csv):
    # "start" (Unix seconds), "duration_s", and doceval's agent's parts ("search_s", "answerer_s", and
    # "retrieve_s" for a user's retriever function). Empty on a journal line from before timing was recorded.
    timing: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        cause = self.refusal_cause
        if cause is not None and (cause not in REFUSAL_CAUSES or not self.refused):
            raise ValueError(
                f"refusal_cause {cause!r}: one of {', '.join(REFUSAL_CAUSES)}, and only on a refusal"
            )

    @property
    def cost_usd(self) -> float:
        """What doceval's LLM calls for this reply cost (an external system's own usage block is not counted)."""
        return sum(float(u.get("cost_usd", 0.0)) for u in self.usage.values() if isinstance(u, Mapping))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "answer": self.answer,
            "refused": self.refused,
            "refusal_cause": self.refusal_cause,
            "refusal_reason": self.refusal_reason,
            "sources": [{"id": s.id, "score": s.score} for s in self.sources],
            "usage": self.usage,
            "memory_used": self.memory_used,
            "session_id": self.session_id,
            "extra": self.extra,
            "error": self.error,
            "timing": self.timing,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reply:
        """The inverse of :meth:`to_json`, and the journal lines written before it (an external system's reply:
        refused means cause "system"; doceval's agent's record: the cause is left for its runner to fill in).
        KeyError/TypeError/ValueError on another shape (a journal line)."""
        current = "refusal_cause" in data
        external = not current and "session_id" in data
        required = _REPLY_KEYS if current else _EXTERNAL_KEYS if external else _DOCCHAT_KEYS
        missing = [k for k in required if k not in data]
        if missing:
            raise KeyError(f"missing field(s) {', '.join(missing)}")
        refused = _typed(data, "refused", bool)
        cause = _typed(data, "refusal_cause", str, nullable=True) if current else None
        if external and refused:
            cause = "system"
        memory = list(_typed(data, "memory_used", list)) if "memory_used" in data else []
        if not all(isinstance(q, str) for q in memory):
            raise TypeError("'memory_used' must be a list of strings")
        return cls(
            id=_typed(data, "id", str),
            answer=_typed(data, "answer", str, nullable=True),
            refused=refused,
            refusal_cause=cause,
            refusal_reason=_typed(data, "reason" if external else "refusal_reason", str, nullable=True),
            sources=_sources(data.get("sources", [])),
            usage=dict(_typed(data, "usage", dict)),
            memory_used=memory,
            session_id=_typed(data, "session_id", str, nullable=True) if "session_id" in data else None,
            extra=dict(_typed(data, "extra", dict)) if "extra" in data else {},
            error=_typed(data, "error", str, nullable=True) if "error" in data else None,
            timing=_timing(data.get("timing")),
        )


def _timing(value: Any) -> dict[str, float]:
    """A journaled reply's timing: finite numbers by name (anything else dropped: timing is never scored)."""
    if not isinstance(value, Mapping):
        return {}
    return {
        str(k): float(v)
        for k, v in value.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


def _sources(items: Any) -> list[Source]:
    if not isinstance(items, list):
        raise TypeError(f"'sources' must be a list, got {items!r:.60}")
    sources: list[Source] = []
    for item in items:
        score = item["score"]
        if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
            raise TypeError(f"source score must be a number or null, got {score!r}")
        sources.append(Source(id=_typed(item, "id", str), score=None if score is None else float(score)))
    return sources


def require_unique_ids(probes: Sequence[Probe]) -> None:
    """A UsageError naming the duplicated probe ids: a journal and a reply are keyed by the probe id."""
    ids = [p.id for p in probes]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise UsageError(f"probe ids must be unique; duplicated: {', '.join(dupes[:5])}")


def conversation_units(probes: Sequence[Probe], conversation_of: Mapping[str, str]) -> list[list[Probe]]:
    """The probes grouped into what a system is asked as one unit, in probe order: a conversation's turns
    together, in order (``conversation_of``: probe id -> conversation id), every other probe alone. A unit is
    one session (one memory) and one unit of concurrency."""
    units: list[list[Probe]] = []
    unit_of: dict[str, list[Probe]] = {}
    for probe in probes:
        conversation = conversation_of.get(probe.id)
        if conversation is None:
            units.append([probe])
        elif conversation in unit_of:
            unit_of[conversation].append(probe)
        else:
            unit_of[conversation] = [probe]
            units.append(unit_of[conversation])
    return units


def whole_units(units: Sequence[Sequence[Probe]], done: Mapping[str, Any]) -> set[str]:
    """The ids of ``done`` that a resumed run keeps: every probe of a unit all of whose probes are done. A
    conversation with a turn missing is replayed from its first turn (its memory or session must hold every
    earlier turn), so its journaled turns are dropped, never counted twice."""
    return {p.id for unit in units if all(p.id in done for p in unit) for p in unit}


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
