"""Data passed between the agent's parts (router/search -> memory -> answerer -> runner).

:class:`Probe` (what the agent is asked) lives in :mod:`doceval.seam` and is re-exported here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from doceval.common.journal import dataclass_from_record
from doceval.seam import Answer, Probe, sum_usage

__all__ = ["AgentRecord", "MemoryItem", "Passage", "Probe", "RunOutcome", "SearchResult"]


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
class SearchResult:
    passages: list[Passage]
    refused: bool
    reason: str | None  # e.g. "router: library 'flask' is not indexed", "no passage cleared the floor"


@dataclass
class AgentRecord(Answer):
    """One entry's answer as the agent journals it (one JSON line), plus the memory it surfaced."""

    memory_used: list[str]  # questions surfaced from memory

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AgentRecord:
        """Inverse of :meth:`to_json`; raises KeyError/TypeError on a record of another shape.

        Keys it does not know are ignored, so journals written when the runner also judged still load.
        """
        rec = dataclass_from_record(cls, data)
        if not isinstance(rec.id, str) or not isinstance(rec.refused, bool):
            raise TypeError("id must be a string and refused a boolean")
        return rec


@dataclass
class RunOutcome:
    """What :func:`doceval.system.docchat.runner.run_agent` returns.

    ``usage`` and ``cache`` are the ledger's totals (failed and retried calls included; with a ledger passed
    in, everything it recorded so far); the per-entry ``AgentRecord.usage`` of every record (resumed ones
    included) sums to the whole run's answering cost. ``errors`` lists entries whose answerer failed for good
    (not journaled, so a rerun retries them).
    """

    records: dict[str, AgentRecord]
    usage: dict[str, dict[str, float]]
    cache: dict[str, int]
    stopped_reason: str | None  # None (finished), "budget", "errors"
    resumed: int
    errors: dict[str, str] = field(default_factory=dict)

    def total_usage(self) -> dict[str, dict[str, float]]:
        """Per-role sum of every record's usage (resumed entries included)."""
        return sum_usage(*(rec.usage for rec in self.records.values()))
