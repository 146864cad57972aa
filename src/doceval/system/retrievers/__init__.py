"""Retrievers behind one interface: ``retrieve(question, library, version, k) -> [(doc_id, score), ...]``.

:data:`RETRIEVERS` (a :class:`~doceval.common.registry.Registry`, the one plug-in rule) maps ``retriever.name`` to
a builder, so a new retriever is a module, a ``conf/retriever/NAME.yaml``, its schema variant and one
``@register_retriever("NAME")`` builder (saying whether it reads the index), here or in any module imported
before the run; the harness only ever calls :func:`make_retriever` and :func:`needs_index`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from doceval.common.hints import rerun
from doceval.common.naming import USER_FUNCTION
from doceval.common.registry import Registry, as_variant
from doceval.config import schema
from doceval.errors import UsageError
from doceval.index.embed import CachedEmbedder
from doceval.index.store import VectorStore
from doceval.inputs.corpus import Corpus
from doceval.system.retrievers.base import Ranked, Retriever, best_per_document
from doceval.system.retrievers.bm25 import BM25Retriever
from doceval.system.retrievers.dense import DenseRetriever
from doceval.system.retrievers.function import FunctionRetriever
from doceval.system.retrievers.hybrid import HybridRetriever
from doceval.system.retrievers.hybrid_native import NativeHybridRetriever
from doceval.system.retrievers.overlap import OverlapRetriever

__all__ = [
    "RETRIEVERS",
    "Builder",
    "Ranked",
    "Registered",
    "Resources",
    "Retriever",
    "best_per_document",
    "make_retriever",
    "needs_index",
    "register_retriever",
]


@dataclass(frozen=True)
class Resources:
    """What :func:`make_retriever` was given; a builder takes what it needs."""

    name: str
    corpus: Corpus | None = None
    store: VectorStore | None = None
    embedder: CachedEmbedder | None = None

    def need_corpus(self) -> Corpus:
        if self.corpus is None:
            raise UsageError(f"retriever={self.name} needs the docs corpus; run {rerun('docs')} first")
        return self.corpus

    def need_index(self) -> tuple[VectorStore, CachedEmbedder]:
        if self.store is None or self.embedder is None:
            raise UsageError(f"retriever={self.name} needs the index; run {rerun('index')} first")
        return self.store, self.embedder


# builder(block, resources): block is the ``retriever`` block (a schema.Retriever variant) naming this builder.
Builder = Callable[[schema.Retriever, Resources], Retriever]
V = TypeVar("V")


@dataclass(frozen=True)
class Registered:
    build: Builder
    needs_corpus: bool
    needs_index: bool = False  # reads data/index: the index is opened for it, and its manifest checked


RETRIEVERS: Registry[Registered] = Registry("retriever")


def register_retriever(
    name: str, *, needs_corpus: bool = True, needs_index: bool = False
) -> Callable[[Builder], Builder]:
    """Decorator: ``builder(block, resources) -> Retriever`` serves ``retriever.name == name``.

    ``needs_corpus=False`` lets it be built with ``corpus=None`` (a retriever that brings its own documents);
    ``needs_index=True`` says it reads the vector index (the harness opens it and checks its manifest).
    """

    def decorate(build: Builder) -> Builder:
        RETRIEVERS.add(name, Registered(build, needs_corpus, needs_index))
        return build

    return decorate


def needs_index(name: Any) -> bool:
    """Whether the retriever registered as ``name`` reads the vector index (False for an unknown name)."""
    entry = RETRIEVERS.get(name) if isinstance(name, str) else None
    return entry is not None and entry.needs_index


def make_retriever(
    cfg: schema.Retriever,
    corpus: Corpus | None,
    store: VectorStore | None = None,
    embedder: CachedEmbedder | None = None,
) -> Retriever:
    """Build the retriever named by ``cfg.name``; dense and the hybrids need the opened store and embedder, all
    but ``function`` need the corpus."""
    entry = RETRIEVERS.require(cfg.name)
    resources = Resources(cfg.name, corpus, store, embedder)
    if entry.needs_corpus:
        resources.need_corpus()
    return entry.build(cfg, resources)


# ----------------------------------------------------------------- the built-in retrievers
# bm25s (the bm25 retriever) and torch (the embedder) load only when the retriever that needs them runs.


def _block(cfg: schema.Retriever, kind: type[V]) -> V:
    return as_variant(cfg, kind, "retriever")


def _bm25(cfg: schema.RetrieverBM25 | schema.RetrieverHybrid, corpus: Corpus) -> Retriever:
    return BM25Retriever(corpus, k1=float(cfg.k1), b=float(cfg.b))


@register_retriever("overlap")
def _build_overlap(cfg: schema.Retriever, res: Resources) -> Retriever:
    block = _block(cfg, schema.RetrieverOverlap)
    return OverlapRetriever(res.need_corpus(), min_score=float(block.min_score))


@register_retriever("bm25")
def _build_bm25(cfg: schema.Retriever, res: Resources) -> Retriever:
    return _bm25(_block(cfg, schema.RetrieverBM25), res.need_corpus())


@register_retriever("dense", needs_index=True)
def _build_dense(cfg: schema.Retriever, res: Resources) -> Retriever:
    store, embedder = res.need_index()
    return DenseRetriever(store, embedder, set(res.need_corpus().pins))


@register_retriever("hybrid", needs_index=True)
def _build_hybrid(cfg: schema.Retriever, res: Resources) -> Retriever:
    block = _block(cfg, schema.RetrieverHybrid)
    store, embedder = res.need_index()
    corpus = res.need_corpus()
    dense = DenseRetriever(store, embedder, set(corpus.pins))
    return HybridRetriever(_bm25(block, corpus), dense, rrf_k=block.rrf_k, depth=block.depth)


@register_retriever("hybrid_native", needs_index=True)
def _build_hybrid_native(cfg: schema.Retriever, res: Resources) -> Retriever:
    block = _block(cfg, schema.RetrieverHybridNative)
    store, embedder = res.need_index()
    return NativeHybridRetriever(
        store, embedder, set(res.need_corpus().pins), rrf_k=block.rrf_k, depth=block.depth
    )


@register_retriever(USER_FUNCTION, needs_corpus=False)
def _build_function(cfg: schema.Retriever, res: Resources) -> Retriever:
    return FunctionRetriever.from_config(_block(cfg, schema.RetrieverFunction))
