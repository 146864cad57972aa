"""The candidate set: the top-K candidates of every golden entry with raw scores and what they were computed
from (built by :mod:`doceval.harness.candidates`, cached by the retrieve stage and read back by
:mod:`doceval.harness.candidate_cache`), and the names of its files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doceval.system.retrievers.base import Ranked

CANDIDATES = "candidates.jsonl"
EXACT = "exact.jsonl"  # the same retrieval with exact search, when the configured search is approximate
META = "meta.json"
# bm25's ranked ids per entry beside any retriever's candidates: the evaluate stage's trade-off compares the two
# rankings (agreement, fused), and building bm25 over the corpus there cost seconds every run.
BM25_RANKINGS = "bm25.jsonl"


@dataclass
class CandidateSet:
    """Candidates per entry id, plus what they were computed from."""

    meta: dict[str, Any]
    ranked: dict[str, Ranked]
    routed: dict[str, str | None]  # entry id -> router refusal reason (None when routed)
    # A user's retriever function only (never cached): entry id -> its system error, and why retrieval stopped
    # early (--max-errors, run.max_abandoned); entries never asked are then absent from ``ranked``.
    errors: dict[str, str] = field(default_factory=dict)
    stopped: str | None = None
    bm25: dict[str, list[str]] | None = None  # BM25_RANKINGS as cached beside (None: not cached, or live)
    # A user's retriever function only: entry id -> (start in Unix seconds, seconds) of its call, for traces.
    timings: dict[str, tuple[float, float]] = field(default_factory=dict)
    journal: Path | None = None  # a user's retriever function only: its answers' journal (retrieval_journal)

    @property
    def depth(self) -> int:
        return int(self.meta["candidates_k"])
