"""The store's search parameters (``store.search``): which are part of the index and which are per query.

Pure data, no Qdrant import: the manifest, the candidate cache and the report all record the same dict.
Index-time keys (``m``, ``ef_construct``, ``quantization``) shape what is written on disk, so an index built with
others is refused; query-time keys (``exact``, ``hnsw_ef``, ``rescore``, ``oversampling``) change nothing on disk.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from doceval.config import schema
from doceval.errors import UsageError

INDEX_TIME = ("m", "ef_construct", "quantization")
QUANTIZATIONS = ("scalar", "binary")


@dataclass(frozen=True, kw_only=True)
class SearchConfig:
    """How an Edge store searches: the fields of ``store.search`` (:class:`~doceval.config.schema.StoreSearch`,
    their values in conf/store/qdrant_edge.yaml), checked for the engine."""

    exact: bool
    hnsw_ef: int | None
    m: int
    ef_construct: int
    quantization: str | None
    rescore: bool
    oversampling: float | None

    @classmethod
    def of(cls, store_cfg: schema.StoreQdrantEdge) -> SearchConfig:
        """``store.search`` of an Edge store (the other stores always scan exactly: they have none)."""
        search = store_cfg.search
        out = cls(**{f.name: getattr(search, f.name) for f in fields(search)})
        out.check()
        return out

    def check(self) -> None:
        """What doceval refuses before the engine sees it (qdrant-edge 0.9.0 accepts some of these silently)."""
        if self.quantization is not None and self.quantization not in QUANTIZATIONS:
            raise UsageError(
                f"store.search.quantization={self.quantization!r} is not supported by the Edge store; "
                f"use one of {', '.join(QUANTIZATIONS)} or null"
            )
        if self.oversampling is not None and self.oversampling < 1:
            raise UsageError(f"store.search.oversampling={self.oversampling} must be >= 1 (or null)")
        if self.hnsw_ef is not None and self.hnsw_ef < 1:
            raise UsageError(f"store.search.hnsw_ef={self.hnsw_ef} must be >= 1 (or null)")
        if self.m < 0 or self.ef_construct < 4:
            raise UsageError(
                f"store.search: m={self.m} must be >= 0 and ef_construct={self.ef_construct} >= 4"
            )

    def index_identity(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in INDEX_TIME}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def search_record(store_cfg: schema.Store) -> dict[str, Any]:
    """What the manifest, the candidate cache and the summary say about the search that ran."""
    if not isinstance(store_cfg, schema.StoreQdrantEdge):
        # qdrant_local scans; a server is used with its own defaults
        return {"store": store_cfg.name, "exact": True}
    return {"store": store_cfg.name, **SearchConfig.of(store_cfg).as_dict()}
