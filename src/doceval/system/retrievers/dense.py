"""Dense retrieval: the question's embedding against the pin's Qdrant collection (cosine)."""

from __future__ import annotations

from doceval.index.embed import CachedEmbedder
from doceval.index.store import VectorStore
from doceval.system.retrievers.base import Ranked, best_per_document, pin_of


class DenseRetriever:
    name = "dense"
    score_range = (-1.0, 1.0)

    def __init__(self, store: VectorStore, embedder: CachedEmbedder, pins: set[str]) -> None:
        self.store = store
        self.embedder = embedder
        self.pins = pins
        self.sizes = {pin: store.count(pin) for pin in pins}

    def retrieve(self, question: str, library: str, version: str, k: int) -> Ranked:
        pin = pin_of(library, version)
        if pin not in self.pins:
            return []
        vector = self.embedder.encode([question])[0]
        # Several chunks can belong to one document: widen the chunk search until k documents are found
        # (or the partition is exhausted), so the per-document top-k is exact.
        limit = max(4 * k, 32)
        while True:
            hits = self.store.search(pin, vector, limit)
            ranked = best_per_document(((doc, score) for _, doc, score in hits), k)
            if len(ranked) >= k or limit >= self.sizes[pin]:
                return ranked
            limit *= 4
