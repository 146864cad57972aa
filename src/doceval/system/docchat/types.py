"""Data passed between the agent's parts (router/search -> memory -> answerer -> judge -> runner)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class Passage:
    doc_id: str
    score: float
    text: str


@dataclass(frozen=True)
class MemoryItem:
    question: str
    answer: str
    library: str
    version: str


@dataclass
class Probe:
    """One golden entry as the agent sees it (labels such as ``out_of_scope`` stay with the metrics)."""

    id: str
    question: str
    library: str
    version: str
    reference_answer: str


@dataclass
class SearchResult:
    passages: list[Passage]
    refused: bool
    reason: str | None  # e.g. "router: library 'flask' is not indexed", "no passage cleared the floor"


@dataclass
class AgentRecord:
    """One entry's outcome; JSON-serialisable via ``dataclasses.asdict`` (one journal line)."""

    id: str
    answer: str | None
    refused: bool
    refusal_reason: str | None
    verdict: bool | None
    verdict_reason: str | None
    judge_error: str | None
    memory_used: list[str]  # questions surfaced from memory
    usage: dict[str, dict[str, float]]  # per role, this entry's LLM calls only

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AgentRecord:
        """Inverse of :meth:`to_json`; raises KeyError/TypeError on a record of another shape."""
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in data]
        if missing:
            raise KeyError(f"missing field(s) {', '.join(missing)}")
        rec = cls(**{n: data[n] for n in names})
        if not isinstance(rec.id, str) or not isinstance(rec.refused, bool):
            raise TypeError("id must be a string and refused a boolean")
        return rec


@dataclass
class RunOutcome:
    """What :func:`doceval.system.docchat.runner.run_agent` returns.

    ``usage`` and ``cache`` cover the LLM calls of this invocation (failed and retried calls included); the
    per-entry ``AgentRecord.usage`` of every record (resumed ones included) sums to the whole run's cost.
    ``errors`` lists entries whose answerer failed for good (not journaled, so a rerun retries them).
    """

    records: dict[str, AgentRecord]
    usage: dict[str, dict[str, float]]
    cache: dict[str, int]
    stopped_reason: str | None  # None (finished), "budget", "errors"
    resumed: int
    errors: dict[str, str] = field(default_factory=dict)

    def total_usage(self) -> dict[str, dict[str, float]]:
        """Per-role sum of every record's usage (resumed entries included)."""
        out: dict[str, dict[str, float]] = {}
        for rec in self.records.values():
            for role, counts in rec.usage.items():
                acc = out.setdefault(role, {})
                for key, value in counts.items():
                    acc[key] = acc.get(key, 0) + value
        return out
