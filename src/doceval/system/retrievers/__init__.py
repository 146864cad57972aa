"""Retrievers behind one interface: ``retrieve(question, library, version, k) -> [(doc_id, score), ...]``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doceval.errors import UsageError
from doceval.index.embed import CachedEmbedder
from doceval.index.store import VectorStore
from doceval.inputs.corpus import Corpus
from doceval.system.retrievers.base import Ranked, Retriever, best_per_document

NAMES = ("overlap", "bm25", "dense", "hybrid")

__all__ = ["NAMES", "Ranked", "Retriever", "best_per_document", "make_retriever"]


def make_retriever(
    cfg: Mapping[str, Any],
    corpus: Corpus,
    store: VectorStore | None = None,
    embedder: CachedEmbedder | None = None,
) -> Retriever:
    """Build the retriever named by ``cfg['name']``; dense and hybrid need the opened store and embedder."""
    from doceval.system.retrievers.bm25 import BM25Retriever
    from doceval.system.retrievers.dense import DenseRetriever
    from doceval.system.retrievers.hybrid import HybridRetriever
    from doceval.system.retrievers.overlap import OverlapRetriever

    name = cfg.get("name")
    if name == "overlap":
        return OverlapRetriever(corpus, min_score=float(cfg.get("min_score", 0.0)))
    if name == "bm25":
        return BM25Retriever(corpus, k1=float(cfg.get("k1", 1.5)), b=float(cfg.get("b", 0.75)))
    if name in ("dense", "hybrid"):
        if store is None or embedder is None:
            raise UsageError(f"retriever={name} needs the index; run `dvc repro index` first")
        dense = DenseRetriever(store, embedder, set(corpus.pins))
        if name == "dense":
            return dense
        lexical = BM25Retriever(corpus, k1=float(cfg.get("k1", 1.5)), b=float(cfg.get("b", 0.75)))
        return HybridRetriever(
            lexical, dense, rrf_k=int(cfg.get("rrf_k", 60)), depth=int(cfg.get("depth", 100))
        )
    raise UsageError(f"retriever={name!r} is not known; choose one of: {', '.join(NAMES)}")
