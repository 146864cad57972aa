"""Data passed between the agent's parts (router/search -> memory -> answerer -> runner).

:class:`Probe` (what the agent is asked) lives in :mod:`doceval.seam` and is re-exported here; the agent
answers with the seam's :class:`~doceval.seam.Reply`, like every system under test.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from doceval.seam import Probe, RefusalCause, Reply, sum_usage

__all__ = ["MemoryItem", "Passage", "Probe", "RunOutcome", "SearchResult"]


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
    reason: str | None  # the text the summary shows, e.g. "router: library 'flask' is not indexed"
    cause: RefusalCause | None = None  # "router", "floor" or "retriever" on a refusal
    # A conversation's follow-up: the (library, version) the search looked in, followed from the questions
    # (doceval.system.docchat.conversation); None: the probe's own pin.
    pin: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        if self.refused != (self.cause in ("router", "floor", "retriever")):
            raise ValueError(
                f"a refused search needs the cause 'router', 'floor' or 'retriever' (got {self.cause!r})"
            )


@dataclass
class RunOutcome:
    """What :func:`doceval.system.docchat.runner.run_agent` returns.

    ``usage`` and ``cache`` are the ledger's totals (failed and retried calls included; with a ledger passed
    in, everything it recorded so far); the per-entry ``Reply.usage`` of every record (resumed ones
    included) sums to the whole run's answering cost. ``errors`` lists entries whose answerer failed for good
    (not journaled, so a rerun retries them).
    """

    records: dict[str, Reply]
    usage: dict[str, dict[str, float]]
    cache: dict[str, int]
    stopped_reason: str | None  # None (finished), "budget", "errors"
    resumed: int
    errors: dict[str, str] = field(default_factory=dict)

    def total_usage(self) -> dict[str, dict[str, float]]:
        """Per-role sum of every record's usage (resumed entries included)."""
        return sum_usage(*(rec.usage for rec in self.records.values()))
