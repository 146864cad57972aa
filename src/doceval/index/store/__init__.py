"""The vector store: the only package that imports ``qdrant_client`` or ``qdrant_edge``.

One partition per library@version, whatever the store: a Qdrant Edge shard (``store=qdrant_edge``, the
default, :mod:`doceval.index.store.edge`), or a qdrant-client collection (``store=qdrant_local``, local mode's
brute-force scan; ``store=qdrant_server``; :mod:`doceval.index.store.client`). :class:`VectorStore` is the one
interface the index stage and the retrievers use; ``store.search`` (:mod:`doceval.index.store.search`) says how
an Edge store searches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from doceval.common.hints import rerun
from doceval.config import schema
from doceval.errors import UsageError
from doceval.index.store.client import ClientStore
from doceval.index.store.client import check_local_files as _check_local_files
from doceval.index.store.common import Hit, collection_name, point_id, rebuild_hint
from doceval.index.store.search import SearchConfig, search_record

if TYPE_CHECKING:
    from doceval.index.store.edge import EdgeStore

__all__ = [
    "rebuild_hint",
    "STORES",
    "Hit",
    "SearchConfig",
    "VectorStore",
    "check_local_files",
    "check_store_files",
    "collection_name",
    "point_id",
    "search_record",
    "store_subdir",
]

STORES = ("qdrant_edge", "qdrant_local", "qdrant_server")
# Where an embedded store lives under paths.index (a server store lives on the server).
_SUBDIR = {"qdrant_edge": "edge", "qdrant_local": "qdrant"}


def store_subdir(name: str) -> str | None:
    return _SUBDIR.get(name)


def check_local_files(target: Path, expect: Mapping[str, int]) -> None:
    _check_local_files(target, expect)


def _edge_store(path: Path, search: SearchConfig | None, expect: Mapping[str, int] | None) -> EdgeStore:
    # lazy: start-up (the edge module imports qdrant_edge; eval --no-track must not load it)
    from doceval.index.store.edge import EdgeStore

    return EdgeStore(path, search, expect)


def check_store_files(name: str, target: Path, expect: Mapping[str, int]) -> None:
    """An embedded store's partitions under ``target`` (``store_subdir(name)``) against the index manifest's
    ``expect``, opened and closed without creating anything, for a caller without a ``store`` block."""
    if name == "qdrant_edge":
        _edge_store(target, None, expect).close()
    elif name == "qdrant_local":
        ClientStore(schema.StoreQdrantLocal(name="qdrant_local"), path=target, expect=expect).close()
    else:
        raise UsageError(f"store.name={name!r} is not an embedded store; use one of {', '.join(_SUBDIR)}")


class VectorStore:
    """One store, opened for building (``expect`` None) or for reading (``expect``: pin -> points from the
    index manifest; nothing is created, every partition must be whole with exactly that many points)."""

    def __init__(
        self, cfg: schema.Store, path: Path | None = None, expect: Mapping[str, int] | None = None
    ) -> None:
        self.name = cfg.name
        self._backend: EdgeStore | ClientStore
        if isinstance(cfg, schema.StoreQdrantEdge):
            self._edge: EdgeStore | None = _edge_store(
                Path(path or "data/index/edge"), SearchConfig.of(cfg), expect
            )
            self._backend = self._edge
        else:
            self._edge = None
            self._backend = ClientStore(cfg, path=path, expect=expect)
        self.location = str(self._backend.location)

    @property
    def supports_hybrid(self) -> bool:
        return self._edge is not None

    def verify(self, expect: Mapping[str, int]) -> None:
        self._backend.verify(expect)

    def recreate(self, pin: str, dim: int) -> None:
        self._backend.recreate(pin, dim)

    def upsert(
        self,
        pin: str,
        chunk_ids: Sequence[str],
        doc_ids: Sequence[str],
        vectors: np.ndarray,
        texts: Sequence[str] | None = None,
        batch: int = 1024,
    ) -> None:
        self._backend.upsert(pin, chunk_ids, doc_ids, vectors, texts=texts, batch=batch)

    def finish(self, pin: str) -> int:
        """After the last upsert of a partition: build its index (Edge) and return its point count."""
        if self._edge is not None:
            return self._edge.finish(pin)
        return self.count(pin)

    def has(self, pin: str) -> bool:
        return bool(self._backend.has(pin))

    def count(self, pin: str) -> int:
        return int(self._backend.count(pin))

    def search(self, pin: str, vector: np.ndarray, limit: int, exact: bool | None = None) -> list[Hit]:
        """Top chunks by cosine: ``[(chunk_id, doc_id, score), ...]``; ``exact=True`` forces an exhaustive
        search on an Edge store (the other stores always search exactly)."""
        result: list[Hit] = self._backend.search(pin, vector, limit, exact)
        return result

    def hybrid(
        self, pin: str, vector: np.ndarray, text: str, limit: int, rrf_k: int, depth: int
    ) -> list[Hit]:
        """The engine's RRF of BM25 and dense chunk rankings (Edge store only)."""
        if self._edge is None:
            raise UsageError(
                f"retriever=hybrid_native needs store=qdrant_edge (the index is {self.name}); "
                f"use retriever=hybrid, or store=qdrant_edge and rerun {rerun('index')}"
            )
        return self._edge.hybrid(pin, vector, text, limit, rrf_k, depth)

    def close(self) -> None:
        self._backend.close()

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
