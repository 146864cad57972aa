"""The store's search parameters (``store.search``): which are part of the index and which are per query.

Pure data, no Qdrant import: the manifest, the candidate cache and the report all record the same dict.
Index-time keys (``m``, ``ef_construct``, ``quantization``) shape what is written on disk, so an index built with
others is refused; query-time keys (``exact``, ``hnsw_ef``, ``rescore``, ``oversampling``) change nothing on disk.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from doceval.errors import UsageError

INDEX_TIME = ("m", "ef_construct", "quantization")
QUANTIZATIONS = ("scalar", "binary")


@dataclass(frozen=True)
class SearchConfig:
    """Defaults: exact search (the same ranking as a brute-force scan, so headline numbers do not move)."""

    exact: bool = True
    hnsw_ef: int | None = None
    m: int = 16
    ef_construct: int = 100
    quantization: str | None = None
    rescore: bool = True
    oversampling: float | None = None

    @classmethod
    def of(cls, store_cfg: Mapping[str, Any]) -> SearchConfig:
        """``store.search`` of an Edge store; the other stores always scan exactly (their defaults)."""
        if store_cfg.get("name", "qdrant_local") != "qdrant_edge":
            return cls()
        raw = dict(store_cfg.get("search") or {})
        unknown = sorted(set(raw) - set(cls.__dataclass_fields__))
        if unknown:
            raise UsageError(f"store.search: unknown key(s) {', '.join(unknown)}")
        out = cls(**raw)
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

    def exact_twin(self) -> SearchConfig:
        """The same index searched exhaustively (the reference of the report's "ANN vs exact")."""
        return SearchConfig(**{**self.as_dict(), "exact": True})


def search_record(store_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What the manifest, the candidate cache and the summary say about the search that ran."""
    name = str(store_cfg.get("name", "qdrant_local"))
    if name != "qdrant_edge":
        return {"store": name, "exact": True}  # qdrant_local scans; a server is used with its own defaults
    return {"store": name, **SearchConfig.of(store_cfg).as_dict()}
