"""The vector store: the only package that imports ``qdrant_client`` or ``qdrant_edge``.

One partition per library@version, whatever the store: a Qdrant Edge shard (``store=qdrant_edge``, the
default, :mod:`doceval.index.store.edge`), or a qdrant-client collection (``store=qdrant_local``, local mode's
brute-force scan; ``store=qdrant_server``; :mod:`doceval.index.store.client`). :class:`VectorStore` is the one
interface the index stage and the retrievers use; ``store.search`` (:mod:`doceval.index.store.search`) says how
an Edge store searches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from doceval.common.hints import rerun
from doceval.common.registry import Registry, as_variant
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
    "Backend",
    "Hit",
    "HybridBackend",
    "SearchConfig",
    "VectorStore",
    "check_local_files",
    "check_store_files",
    "collection_name",
    "point_id",
    "register_store",
    "search_record",
    "store_subdir",
]


class Backend(Protocol):
    """What a registered store opens: one partition (a collection or a shard) per pin."""

    location: str

    def verify(self, expect: Mapping[str, int]) -> None: ...

    def recreate(self, pin: str, dim: int) -> None: ...

    def upsert(
        self,
        pin: str,
        chunk_ids: Sequence[str],
        doc_ids: Sequence[str],
        vectors: np.ndarray,
        texts: Sequence[str] | None = None,
        batch: int = 1024,
    ) -> None: ...

    def finish(self, pin: str) -> int:
        """After a partition's last upsert: build its index, return its point count."""
        ...

    def has(self, pin: str) -> bool: ...

    def count(self, pin: str) -> int: ...

    def search(self, pin: str, vector: np.ndarray, limit: int, exact: bool | None = None) -> list[Hit]: ...

    def close(self) -> None: ...


@runtime_checkable
class HybridBackend(Backend, Protocol):
    """A store whose engine fuses BM25 and dense rankings itself (what ``retriever=hybrid_native`` needs)."""

    def hybrid(
        self, pin: str, vector: np.ndarray, text: str, limit: int, rrf_k: int, depth: int
    ) -> list[Hit]: ...


# open(block, path, expect): ``expect`` None opens for building, else pin -> points from the index manifest.
Opener = Callable[[schema.Store, Path | None, Mapping[str, int] | None], Backend]


@dataclass(frozen=True)
class RegisteredStore:
    open: Opener
    # An embedded store: its folder under paths.index, and how to check its files against the manifest without
    # a store block (both None: the store lives on a server).
    subdir: str | None = None
    check_files: Callable[[Path, Mapping[str, int]], None] | None = None


STORES: Registry[RegisteredStore] = Registry("store")


def register_store(
    name: str,
    *,
    subdir: str | None = None,
    check_files: Callable[[Path, Mapping[str, int]], None] | None = None,
) -> Callable[[Opener], Opener]:
    """Decorator: ``open(block, path, expect) -> Backend`` serves ``store.name == name``; an embedded store
    names its folder under paths.index (``subdir``) and its file check."""

    def decorate(open_: Opener) -> Opener:
        STORES.add(name, RegisteredStore(open_, subdir, check_files))
        return open_

    return decorate


def store_subdir(name: str) -> str | None:
    """Where an embedded store lives under paths.index (None: a server store, or a name nobody registered)."""
    entry = STORES.get(name)
    return entry.subdir if entry is not None else None


def check_local_files(target: Path, expect: Mapping[str, int]) -> None:
    _check_local_files(target, expect)


def _edge_store(path: Path, search: SearchConfig | None, expect: Mapping[str, int] | None) -> EdgeStore:
    # lazy: start-up (the edge module imports qdrant_edge; eval --no-track must not load it)
    from doceval.index.store.edge import EdgeStore

    return EdgeStore(path, search, expect)


def check_store_files(name: str, target: Path, expect: Mapping[str, int]) -> None:
    """An embedded store's partitions under ``target`` (``store_subdir(name)``) against the index manifest's
    ``expect``, opened and closed without creating anything, for a caller without a ``store`` block."""
    entry = STORES.get(name)
    if entry is None or entry.check_files is None:
        embedded = ", ".join(n for n in STORES.names() if STORES[n].check_files is not None)
        raise UsageError(f"store.name={name!r} is not an embedded store; use one of {embedded}")
    entry.check_files(target, expect)


def _check_edge_files(target: Path, expect: Mapping[str, int]) -> None:
    _edge_store(target, None, expect).close()


def _check_qdrant_local_files(target: Path, expect: Mapping[str, int]) -> None:
    ClientStore(schema.StoreQdrantLocal(name="qdrant_local"), path=target, expect=expect).close()


@register_store("qdrant_edge", subdir="edge", check_files=_check_edge_files)
def _open_edge(cfg: schema.Store, path: Path | None, expect: Mapping[str, int] | None) -> Backend:
    block = as_variant(cfg, schema.StoreQdrantEdge, "store")
    return _edge_store(Path(path or "data/index/edge"), SearchConfig.of(block), expect)


@register_store("qdrant_local", subdir="qdrant", check_files=_check_qdrant_local_files)
def _open_qdrant_local(cfg: schema.Store, path: Path | None, expect: Mapping[str, int] | None) -> Backend:
    return ClientStore(as_variant(cfg, schema.StoreQdrantLocal, "store"), path=path, expect=expect)


@register_store("qdrant_server")
def _open_qdrant_server(cfg: schema.Store, path: Path | None, expect: Mapping[str, int] | None) -> Backend:
    return ClientStore(as_variant(cfg, schema.StoreQdrantServer, "store"), path=path, expect=expect)


class VectorStore:
    """One store, opened for building (``expect`` None) or for reading (``expect``: pin -> points from the
    index manifest; nothing is created, every partition must be whole with exactly that many points)."""

    def __init__(
        self, cfg: schema.Store, path: Path | None = None, expect: Mapping[str, int] | None = None
    ) -> None:
        self.name = cfg.name
        entry = STORES.require(cfg.name)
        self._backend: Backend = entry.open(cfg, path, expect)
        self.location = str(self._backend.location)

    @property
    def supports_hybrid(self) -> bool:
        return isinstance(self._backend, HybridBackend)

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
        return int(self._backend.finish(pin))

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
        if not isinstance(self._backend, HybridBackend):
            raise UsageError(
                f"retriever=hybrid_native needs store=qdrant_edge (the index is {self.name}); "
                f"use retriever=hybrid, or store=qdrant_edge and rerun {rerun('index')}"
            )
        return self._backend.hybrid(pin, vector, text, limit, rrf_k, depth)

    def close(self) -> None:
        self._backend.close()

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
