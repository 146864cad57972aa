"""The retriever interface and the chunk -> document aggregation every retriever shares."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

Ranked = list[tuple[str, float]]


class Retriever(Protocol):
    name: str
    # Inclusive range of scores this retriever can produce; floors outside it are rejected as bad input.
    score_range: tuple[float, float]

    def retrieve(self, question: str, library: str, version: str, k: int) -> Ranked:
        """Top-k documents of ``library@version`` as ``[(doc_id, score), ...]``, best first, no duplicates."""
        ...


# Scores are compared at this many decimals (and stored so in the candidate cache): float32 arithmetic moves a
# cosine's last bits with the CPU's instruction set, thread count and the engine's SIMD code (~1e-7), so two
# documents closer than that have no true order. Rounded, they tie and the document id decides (design.md 2.3).
SCORE_DECIMALS = 6


def best_per_document(chunk_hits: Iterable[tuple[str, float]], k: int) -> Ranked:
    """Collapse chunk hits to documents (best chunk score), order by score rounded to ``SCORE_DECIMALS`` desc
    then doc id, keep k (scores as they came: the candidate cache stores them rounded).

    The doc-id tie-break makes rankings deterministic whatever order the backend returned equal scores in, and
    whatever the last bits of two near-equal scores were on this machine.
    """
    best: dict[str, float] = {}
    for doc_id, score in chunk_hits:
        if doc_id not in best or score > best[doc_id]:
            best[doc_id] = score
    return sorted(best.items(), key=lambda item: (-round(item[1], SCORE_DECIMALS), item[0]))[:k]


def pin_of(library: str, version: str) -> str:
    return f"{library.lower()}@{version}"
