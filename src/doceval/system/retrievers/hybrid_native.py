"""Hybrid inside the engine: Qdrant Edge's RRF of BM25 sparse and dense chunk rankings (``retriever=hybrid_native``).

Unlike ``retriever=hybrid`` (bm25s and dense each collapsed to documents, then fused here), the engine fuses
chunk rankings and the result is collapsed to documents afterwards; its BM25 is the engine's (English
stemming and stop words, IDF per pin), not doceval's identifier-aware tokenizer.
"""

from __future__ import annotations

from doceval.index.embed import CachedEmbedder
from doceval.index.store import VectorStore
from doceval.system.retrievers.base import Ranked, best_per_document, pin_of


class NativeHybridRetriever:
    name = "hybrid_native"

    def __init__(
        self, store: VectorStore, embedder: CachedEmbedder, pins: set[str], *, rrf_k: int, depth: int
    ) -> None:
        self.store, self.embedder, self.pins = store, embedder, pins
        self.rrf_k, self.depth = rrf_k, depth
        self.sizes = {pin: store.count(pin) for pin in pins}
        # The engine's RRF is 1 / (rrf_k + rank) with rank from 0: first in both rankings scores 2 / rrf_k.
        self.score_range = (0.0, 2.0 / rrf_k)

    def retrieve(self, question: str, library: str, version: str, k: int) -> Ranked:
        pin = pin_of(library, version)
        if pin not in self.pins:
            return []
        vector = self.embedder.encode([question])[0]
        depth = max(self.depth, k)
        limit = max(4 * k, 32)
        while True:  # widen until k documents (several chunks may share one), as the dense retriever does
            hits = self.store.hybrid(pin, vector, question, min(limit, 2 * depth), self.rrf_k, depth)
            ranked = best_per_document(((doc, score) for _, doc, score in hits), k)
            if len(ranked) >= k or limit >= min(self.sizes[pin], 2 * depth):
                return ranked
            limit *= 4
