"""``store=qdrant_edge``: one Qdrant Edge shard per library@version under ``paths.index/edge``.

Each shard holds the dense vector (cosine, HNSW graph built at index time) and a BM25 sparse vector (IDF
applied by the engine over the shard, i.e. per pin) for ``retriever=hybrid_native``. A shard counts as whole
only with its marker ``<name>.done.json`` (written after the shard is optimized, flushed and counted) and when
its point count matches it: a shard left half-written by a killed build is never read as complete.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from doceval.common.io import write_json_atomic
from doceval.errors import UsageError
from doceval.index.store.common import Hit, collection_name, point_id, rebuild_hint
from doceval.index.store.search import SearchConfig

SPARSE = "bm25"
BM25_K, BM25_B = 1.5, 0.75  # the bm25 retriever's defaults (conf/retriever/bm25.yaml)
MARKER = ".done.json"


def _quantization(search: SearchConfig) -> qe.ScalarQuantizationConfig | qe.BinaryQuantizationConfig | None:
    if search.quantization == "scalar":
        return qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, always_ram=True)
    if search.quantization == "binary":
        return qe.BinaryQuantizationConfig(always_ram=True)
    return None


def _engine_error(what: str, search: SearchConfig, exc: Exception) -> UsageError:
    return UsageError(f"store.search {search.as_dict()}: the Edge engine refused {what} ({exc})")


class EdgeStore:
    """The Edge shards of one index folder. Reading (``expect`` given) opens every expected shard, checked.
    ``search`` None opens it to verify only (``doceval.index.store.check_store_files``): it cannot search or
    build."""

    def __init__(
        self, path: Path, search: SearchConfig | None, expect: Mapping[str, int] | None = None
    ) -> None:
        self.path = path
        self.location = str(path)
        self._search = search
        self.shards: dict[str, qe.EdgeShard] = {}
        self.avg_len: dict[str, float] = {}
        self.query_bm25 = qe.Bm25(qe.Bm25Config(k=BM25_K, b=BM25_B))  # query weights: 1 per term
        if expect is None:
            path.mkdir(parents=True, exist_ok=True)
            return
        if not path.is_dir():
            raise UsageError(f"{path}: the Edge index is missing; {rebuild_hint()}")
        try:
            self.verify(expect)
        except BaseException:
            self.close()
            raise

    @property
    def search_cfg(self) -> SearchConfig:
        if self._search is None:
            raise RuntimeError(f"{self.path}: this Edge store was opened to verify only (no store.search)")
        return self._search

    # ------------------------------------------------------------------ layout

    def shard_dir(self, pin: str) -> Path:
        return self.path / collection_name(pin)

    def marker(self, pin: str) -> Path:
        return self.path / (collection_name(pin) + MARKER)

    def _open(self, pin: str) -> qe.EdgeShard:
        if pin not in self.shards:
            folder, marker = self.shard_dir(pin), self.marker(pin)
            if not marker.is_file():
                state = (
                    "has no completeness marker (a killed index stage?)" if folder.exists() else "is missing"
                )
                raise UsageError(f"{folder}: Edge shard of {pin} {state}; {rebuild_hint()}")
            try:
                self.shards[pin] = qe.EdgeShard.load(str(folder))
            except Exception as exc:  # the engine raises a bare Exception for missing or damaged files
                raise UsageError(
                    f"{folder}: the Edge shard of {pin} is damaged ({exc}); {rebuild_hint()}"
                ) from exc
        return self.shards[pin]

    # ------------------------------------------------------------------ reading

    def verify(self, expect: Mapping[str, int]) -> None:
        """Every expected shard: marker, loadable, and the marker's and the engine's counts equal the manifest's."""
        for pin, points in sorted(expect.items()):
            marker = self.marker(pin)
            try:
                recorded = (
                    json.loads(marker.read_text(encoding="utf-8")).get("points") if marker.is_file() else None
                )
            except (OSError, ValueError, AttributeError):
                recorded = None
            found = self.count(pin)  # opens the shard: a missing marker or a damaged shard is reported here
            if recorded != points or found != points:
                raise UsageError(
                    f"{self.shard_dir(pin)}: Edge shard of {pin} holds {found} points (marker says {recorded}), "
                    f"the index manifest says {points}; {rebuild_hint()}"
                )

    def has(self, pin: str) -> bool:
        return self.marker(pin).is_file()

    def count(self, pin: str) -> int:
        return int(self._open(pin).count(qe.CountRequest(exact=True)))

    def _params(self, exact: bool | None) -> qe.SearchParams:
        s = self.search_cfg
        if s.exact if exact is None else exact:
            # Exact means the original vectors scanned: quantized copies are ignored too.
            return qe.SearchParams(exact=True, quantization=qe.QuantizationSearchParams(ignore=True))
        quant = (
            qe.QuantizationSearchParams(rescore=s.rescore, oversampling=s.oversampling)
            if s.quantization
            else None
        )
        return qe.SearchParams(hnsw_ef=s.hnsw_ef, exact=False, quantization=quant)

    def _run(self, pin: str, request: qe.QueryRequest) -> list[Hit]:
        try:
            points = self._open(pin).query(request)
        except UsageError:
            raise
        except Exception as exc:
            raise _engine_error("the query", self.search_cfg, exc) from exc
        return [
            (str((p.payload or {})["chunk_id"]), str((p.payload or {})["doc_id"]), float(p.score))
            for p in points
        ]

    def search(self, pin: str, vector: np.ndarray, limit: int, exact: bool | None = None) -> list[Hit]:
        """Top chunks by cosine; ``exact`` overrides ``store.search.exact`` for this query."""
        query = qe.Query.Nearest(np.asarray(vector, dtype=np.float32).tolist())
        return self._run(
            pin, qe.QueryRequest(limit=limit, query=query, with_payload=True, params=self._params(exact))
        )

    def hybrid(
        self, pin: str, vector: np.ndarray, text: str, limit: int, rrf_k: int, depth: int
    ) -> list[Hit]:
        """The engine's reciprocal-rank fusion of the top ``depth`` chunks by BM25 and by cosine."""
        sparse = self.query_bm25.embed_query(text)
        prefetches = [
            qe.Prefetch(limit=depth, query=qe.Query.Nearest(sparse, using=SPARSE)),
            qe.Prefetch(
                limit=depth,
                query=qe.Query.Nearest(np.asarray(vector, dtype=np.float32).tolist()),
                params=self._params(None),
            ),
        ]
        # The 0.9.0 stubs do not list Fusion.Rrf among the query types the engine takes.
        fusion: Any = qe.Fusion.Rrf(k=rrf_k)
        request = qe.QueryRequest(limit=limit, prefetches=prefetches, query=fusion, with_payload=True)
        return self._run(pin, request)

    # ------------------------------------------------------------------ building

    def recreate(self, pin: str, dim: int) -> None:
        self._drop(pin)
        s = self.search_cfg
        config = qe.EdgeConfig(
            vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine),
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            # full_scan_threshold=1 KB and indexing_threshold=1 KB: the graph is built and used however small
            # the pin, so exact=false really is HNSW (and the one segment keeps exact and HNSW comparable).
            hnsw_config=qe.HnswIndexConfig(m=s.m, ef_construct=s.ef_construct, full_scan_threshold=1),
            quantization_config=_quantization(s),
            optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1, default_segment_number=1),
            # No write-ahead log: a shard is built once in the index stage's temp folder and flushed before its
            # marker, so a WAL protects nothing, and its two preallocated 32 MiB files per shard were half of
            # the index's apparent size (DVC hashes and caches it).
            wal_enabled=False,
        )
        try:
            self.shards[pin] = qe.EdgeShard.create(str(self.shard_dir(pin)), config)
        except Exception as exc:
            raise _engine_error("the index configuration", s, exc) from exc

    def upsert(
        self,
        pin: str,
        chunk_ids: Sequence[str],
        doc_ids: Sequence[str],
        vectors: np.ndarray,
        texts: Sequence[str] | None = None,
        batch: int = 1024,
    ) -> None:
        """Dense vectors plus BM25 document vectors of ``texts`` (the partition's chunks; without texts the
        chunk has no sparse vector and hybrid_native finds it by cosine only)."""
        shard = self._open_for_write(pin)
        if texts is not None and pin not in self.avg_len:
            self.avg_len[pin] = max(1.0, float(np.mean([len(t.split()) for t in texts])) if texts else 1.0)
        bm25 = qe.Bm25(qe.Bm25Config(k=BM25_K, b=BM25_B, avg_len=self.avg_len.get(pin, 256.0)))
        for start in range(0, len(chunk_ids), batch):
            stop = min(start + batch, len(chunk_ids))
            points = []
            for i in range(start, stop):
                vector: dict[str, Any] = {"": vectors[i].tolist()}
                if texts is not None:
                    vector[SPARSE] = bm25.embed_document(texts[i])
                points.append(
                    qe.Point(
                        id=point_id(chunk_ids[i]),
                        vector=vector,
                        payload={"chunk_id": chunk_ids[i], "doc_id": doc_ids[i]},
                    )
                )
            try:
                shard.update(qe.UpdateOperation.upsert_points(points))
            except Exception as exc:
                raise _engine_error("the points", self.search_cfg, exc) from exc

    def finish(self, pin: str) -> int:
        """Build the graph (and quantized copies), flush, count, then write the marker: the shard is whole."""
        shard = self._open_for_write(pin)
        try:
            shard.optimize()
            shard.flush()
        except Exception as exc:
            raise _engine_error("building the index", self.search_cfg, exc) from exc
        points = int(shard.count(qe.CountRequest(exact=True)))
        # The engine rewrites a shard's files the first time it loads them (config, a fresh appendable
        # segment), then never again: settle it here, so a reader never changes the index that DVC hashed.
        self.shards.pop(pin).close()
        try:
            qe.EdgeShard.load(str(self.shard_dir(pin))).close()
        except Exception as exc:
            raise _engine_error("reopening the built index", self.search_cfg, exc) from exc
        record = {
            "pin": pin,
            "points": points,
            "search": self.search_cfg.index_identity(),
            "bm25": {"k": BM25_K, "b": BM25_B, "avg_len": self.avg_len.get(pin)},
        }
        write_json_atomic(self.marker(pin), record)
        return points

    def _open_for_write(self, pin: str) -> qe.EdgeShard:
        if pin not in self.shards:
            raise RuntimeError(f"Edge shard of {pin} is not open for writing: call recreate first")
        return self.shards[pin]

    def _drop(self, pin: str) -> None:
        shard = self.shards.pop(pin, None)
        if shard is not None:
            shard.close()
        self.marker(pin).unlink(missing_ok=True)  # the marker goes first: a half-dropped shard is never whole
        shutil.rmtree(self.shard_dir(pin), ignore_errors=True)

    def close(self) -> None:
        for shard in self.shards.values():
            shard.close()
        self.shards.clear()
