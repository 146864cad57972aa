"""Qdrant access (the only module that imports qdrant_client): one collection per library@version.

Partitioning by pin keeps every query a plain vector search: local mode scans payloads for filters, which is
about 10x slower than searching a small collection.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from doceval.errors import UsageError

_NAMESPACE = uuid.UUID("6f1c7a52-3f0e-4c7e-9b7e-0d0cdbc0e001")


def collection_name(pin: str) -> str:
    """``pydantic@2.8.2`` -> ``doceval__pydantic__2_8_2`` (Qdrant names allow [A-Za-z0-9_-])."""
    return "doceval__" + re.sub(r"[^A-Za-z0-9_-]", "_", pin.replace("@", "__"))


class VectorStore:
    """Thin wrapper over QdrantClient. Local mode takes an exclusive lock on its path: open one per process."""

    def __init__(self, cfg: Mapping[str, Any], path: Path | None = None) -> None:
        from qdrant_client import QdrantClient

        kind = cfg.get("name", "qdrant_local")
        if kind == "qdrant_local":
            target = Path(path or "data/index/qdrant")
            target.mkdir(parents=True, exist_ok=True)
            try:
                self.client = QdrantClient(path=str(target))
            except RuntimeError as exc:  # "Storage folder ... is already accessed by another instance"
                raise UsageError(
                    f"store: the local Qdrant index at {target} is open in another process ({exc}). "
                    "Close it, or use store=qdrant_server for concurrent access."
                ) from exc
            self.location = str(target)
        elif kind == "qdrant_server":
            url = cfg.get("url") or os.environ.get("QDRANT_URL")
            if not url:
                raise UsageError(
                    "store=qdrant_server needs store.url (or the QDRANT_URL environment variable)"
                )
            api_key = os.environ.get(str(cfg.get("api_key_env") or "QDRANT_API_KEY")) or None
            self.client = QdrantClient(url=str(url), api_key=api_key, timeout=int(cfg.get("timeout_s", 30)))
            self.location = str(url)  # never the key
        else:
            raise UsageError(f"store.name={kind!r} is not known; use qdrant_local or qdrant_server")

    def recreate(self, pin: str, dim: int) -> None:
        from qdrant_client import models

        name = collection_name(pin)
        if self.client.collection_exists(name):
            self.client.delete_collection(name)
        self.client.create_collection(
            name, vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE)
        )

    def upsert(
        self,
        pin: str,
        chunk_ids: Sequence[str],
        doc_ids: Sequence[str],
        vectors: np.ndarray,
        batch: int = 1024,
    ) -> None:
        from qdrant_client import models

        name = collection_name(pin)
        for start in range(0, len(chunk_ids), batch):
            stop = start + batch
            self.client.upsert(
                name,
                points=models.Batch(
                    ids=[str(uuid.uuid5(_NAMESPACE, c)) for c in chunk_ids[start:stop]],
                    vectors=vectors[start:stop].tolist(),
                    payloads=[
                        {"chunk_id": c, "doc_id": d}
                        for c, d in zip(chunk_ids[start:stop], doc_ids[start:stop], strict=True)
                    ],
                ),
                wait=True,
            )

    def has(self, pin: str) -> bool:
        return bool(self.client.collection_exists(collection_name(pin)))

    def count(self, pin: str) -> int:
        return int(self.client.count(collection_name(pin), exact=True).count)

    def search(self, pin: str, vector: np.ndarray, limit: int) -> list[tuple[str, str, float]]:
        """Top chunks by cosine: ``[(chunk_id, doc_id, score), ...]``."""
        result = self.client.query_points(
            collection_name(pin),
            query=np.asarray(vector, dtype=np.float32).tolist(),
            limit=limit,
            with_payload=True,
        )
        out = []
        for point in result.points:
            payload = point.payload or {}
            out.append((str(payload["chunk_id"]), str(payload["doc_id"]), float(point.score)))
        return out

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
