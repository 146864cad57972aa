"""Hybrid: reciprocal-rank fusion of BM25 and dense document rankings."""

from __future__ import annotations

from doceval.system.retrievers.base import Ranked, Retriever


class HybridRetriever:
    name = "hybrid"

    def __init__(self, lexical: Retriever, dense: Retriever, *, rrf_k: int, depth: int) -> None:
        self.lexical, self.dense = lexical, dense
        self.rrf_k, self.depth = rrf_k, depth
        # A document ranked first by both components scores 2 / (rrf_k + 1).
        self.score_range = (0.0, 2.0 / (rrf_k + 1))

    def retrieve(self, question: str, library: str, version: str, k: int) -> Ranked:
        depth = max(self.depth, k)
        fused: dict[str, float] = {}
        for ranking in (
            self.lexical.retrieve(question, library, version, depth),
            self.dense.retrieve(question, library, version, depth),
        ):
            for rank, (doc_id, _) in enumerate(ranking, start=1):
                fused[doc_id] = fused.get(doc_id, 0.0) + 1.0 / (self.rrf_k + rank)
        return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]
