"""The qdrant-client stores (``store=qdrant_local``, ``store=qdrant_server``): one collection per library@version.

Partitioning by pin keeps every query a plain vector search: local mode scans payloads for filters, which is
about 10x slower than searching a small collection. Local mode is a pure-Python brute-force scan: always exact.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from doceval.common.redact import redact_url
from doceval.config import schema
from doceval.errors import UsageError
from doceval.index.store.common import Hit, collection_name, point_id, rebuild_hint

# Qdrant local mode's on-disk layout: <path>/meta.json lists the collections, each one lives in
# <path>/collection/<name>/storage.sqlite. Opening a path where they are missing silently creates them empty.
_META = "meta.json"
_STORAGE = "storage.sqlite"


class ClientStore:
    """Thin wrapper over QdrantClient. Local mode takes an exclusive lock on its path: open one per process."""

    def __init__(
        self,
        cfg: schema.StoreQdrantLocal | schema.StoreQdrantServer,
        path: Path | None = None,
        expect: Mapping[str, int] | None = None,
    ) -> None:
        """Open the store. ``expect`` (pin -> points, from the index manifest) opens it for reading: nothing is
        created, and every expected collection must be there with exactly that many points (UsageError naming
        the collection and the rerun otherwise). Without it (building), a local path is created if need be."""
        # lazy: start-up (qdrant_client, ~1.8 s): only a retriever that reads the index opens a store
        from qdrant_client import QdrantClient

        if isinstance(cfg, schema.StoreQdrantLocal):
            target = Path(path or "data/index/qdrant")
            if expect is not None:
                check_local_files(target, expect)
            else:
                target.mkdir(parents=True, exist_ok=True)
                _check_meta(target, required=False)
            try:
                self.client = QdrantClient(path=str(target))
            except RuntimeError as exc:  # "Storage folder ... is already accessed by another instance"
                raise UsageError(
                    f"store: the local Qdrant index at {target} is open in another process ({exc}). "
                    "Close it, or use store=qdrant_server for concurrent access."
                ) from exc
            except (ValueError, KeyError, TypeError, sqlite3.DatabaseError) as exc:  # damaged meta or storage
                raise UsageError(
                    f"{target}: the local Qdrant index is damaged ({exc}); {rebuild_hint()}"
                ) from exc
            self.location = str(target)
        elif isinstance(cfg, schema.StoreQdrantServer):
            url = cfg.url or os.environ.get("QDRANT_URL")  # store.url null: $QDRANT_URL
            if not url:
                raise UsageError(
                    "store=qdrant_server needs store.url (or the QDRANT_URL environment variable)"
                )
            api_key = os.environ.get(cfg.api_key_env) or None
            self.client = QdrantClient(url=url, api_key=api_key, timeout=cfg.timeout_s)
            self.location = redact_url(url)  # for messages: never the key, nor the URL's credentials
        else:
            raise UsageError(f"store.name={cfg.name!r} is not a qdrant-client store")
        if expect is not None:
            try:
                self.verify(expect)
            except BaseException:
                self.close()
                raise

    def verify(self, expect: Mapping[str, int]) -> None:
        """Every collection of ``expect`` exists (checked first: a read never creates one) and holds exactly
        its number of points."""
        for pin, points in sorted(expect.items()):
            name = collection_name(pin)
            if not self.client.collection_exists(name):
                raise UsageError(
                    f"{self.location}: collection {name} ({pin}) is missing from the index; {rebuild_hint()}"
                )
            found = self.count(pin)
            if found != points:
                raise UsageError(
                    f"{self.location}: collection {name} ({pin}) holds {found} points, the index manifest "
                    f"says {points}; {rebuild_hint()}"
                )

    def recreate(self, pin: str, dim: int) -> None:
        from qdrant_client import models  # lazy: start-up (qdrant_client, ~1.8 s), as in __init__

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
        texts: Sequence[str] | None = None,
        batch: int = 1024,
    ) -> None:
        """``texts`` are for the Edge store's BM25 vectors; these stores keep only the dense vectors."""
        from qdrant_client import models  # lazy: start-up (qdrant_client, ~1.8 s), as in __init__

        name = collection_name(pin)
        for start in range(0, len(chunk_ids), batch):
            stop = start + batch
            self.client.upsert(
                name,
                points=models.Batch(
                    ids=[point_id(c) for c in chunk_ids[start:stop]],
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

    def search(self, pin: str, vector: np.ndarray, limit: int, exact: bool | None = None) -> list[Hit]:
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

    def finish(self, pin: str) -> int:
        """After the last upsert of a collection: nothing to build (qdrant-client indexes as it goes)."""
        return self.count(pin)

    def close(self) -> None:
        self.client.close()


def check_local_files(target: Path, expect: Mapping[str, int]) -> None:
    """Before Qdrant opens ``target`` (it would recreate a missing ``meta.json`` or collection folder empty):
    the folder, a valid ``meta.json``, and the storage of every collection it lists and of every expected one."""
    if not target.is_dir():
        raise UsageError(f"{target}: the local Qdrant index is missing; {rebuild_hint()}")
    listed = _check_meta(target, required=True)
    for name in sorted(set(listed) | {collection_name(pin) for pin in expect}):
        storage = target / "collection" / name / _STORAGE
        if name not in listed:
            raise UsageError(
                f"{target / _META}: collection {name} is not listed; the index is incomplete; {rebuild_hint()}"
            )
        if not storage.is_file() or storage.stat().st_size == 0:
            raise UsageError(
                f"{storage}: missing; collection {name} of the index was deleted or never written; {rebuild_hint()}"
            )


def _check_meta(target: Path, required: bool) -> dict[str, Any]:
    """``meta.json``'s collections. Missing, empty or not Qdrant's format is a UsageError when ``required`` or
    when collection folders exist without it (Qdrant would write an empty one over the index)."""
    meta = target / _META
    if not meta.is_file():
        if required or any((target / "collection").glob("*")):
            raise UsageError(
                f"{meta}: missing (the collections are unreachable without it); {rebuild_hint()}"
            )
        return {}
    text = meta.read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        raise UsageError(f"{meta}: empty (the collections are unreachable without it); {rebuild_hint()}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{meta}:{exc.lineno}: not valid JSON ({exc.msg}); {rebuild_hint()}") from exc
    collections = data.get("collections") if isinstance(data, dict) else None
    if not isinstance(collections, dict):
        raise UsageError(f"{meta}: not a Qdrant store's meta.json (no collections); {rebuild_hint()}")
    return collections
