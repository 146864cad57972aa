"""The index stage: embed every chunk (cached) and write one partition (Edge shard or Qdrant collection) per
library@version."""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doceval.common.hints import rerun, stage_command
from doceval.common.io import atomic_dir, read_json, write_json_atomic
from doceval.common.progress import Progress
from doceval.common.redact import redact_url
from doceval.config import schema
from doceval.errors import UsageError
from doceval.index.embed import CachedEmbedder
from doceval.index.store import SearchConfig, VectorStore, check_store_files, rebuild_hint, store_subdir
from doceval.inputs.corpus import Corpus

MANIFEST = "manifest.json"
# What one build did (embedding-cache hits and misses, the engine, timings), beside the manifest but outside what
# DVC hashes: the manifest alone is the index stage's output, so a rebuild of the same content leaves dvc.lock as
# committed (Qdrant Edge names its segments by random UUIDs, so the shards' bytes differ on every build).
BUILD_RECORD = "build.json"
RECORD_KEYS = ("embedding_cache", "engine", "timings")


def index_hash(corpus_hash: str, fingerprint: str, dim: int) -> str:
    """What the index's content depends on: the corpus bytes and the embedder."""
    return hashlib.sha256(f"{corpus_hash}|{fingerprint}|{dim}".encode()).hexdigest()


def build_index(
    corpus: Corpus,
    embedder: CachedEmbedder,
    store_cfg: schema.Store,
    out_dir: Path,
    progress: bool = True,
    engine: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Embed and upsert every partition. An embedded store (Edge, local mode) is written into a temp dir that
    replaces ``out_dir`` only on success: a killed build leaves the previous index (or none), never half of one.

    ``engine``: what embedded it, recorded as ``["engine"]`` (``{"name": "local"}`` when None) and kept out of
    the content hash, so ``engine=local`` and ``engine=ray`` indexes are interchangeable. A streaming embedder
    (``engine=ray``) gets every miss of every partition first, in one pass.

    Returns the manifest (``manifest.json``: what the index is, a function of the corpus and the settings) with
    this build's record (``build.json``: ``RECORD_KEYS``, what differs from build to build) merged in."""
    timings: dict[str, float] = {"embed_s": 0.0, "upsert_s": 0.0}
    counts: dict[str, int] = {}
    name = store_cfg.name
    subdir = store_subdir(name)
    # Index-time search parameters (null for the qdrant-client stores): part of what the index is.
    search = (
        SearchConfig.of(store_cfg).index_identity() if isinstance(store_cfg, schema.StoreQdrantEdge) else None
    )
    with atomic_dir(out_dir) as tmp:
        store = VectorStore(store_cfg, path=tmp / subdir if subdir else None)
        try:
            total = sum(len(p.chunk_ids) for p in corpus.partitions.values())
            _announce(embedder, total)
            # The bar's rate and estimate count chunks embedded (cached ones jump ahead).
            bar = Progress(total, "index", "chunk", enabled=progress)
            t0 = time.perf_counter()
            embedder.prefetch([t for pin in corpus.pins for t in corpus.partitions[pin].texts], bar.update)
            timings["embed_s"] += time.perf_counter() - t0
            for pin in corpus.pins:
                part = corpus.partitions[pin]
                t0 = time.perf_counter()
                vectors = embedder.encode(part.texts, on_progress=bar.update)
                t1 = time.perf_counter()
                store.recreate(pin, embedder.dim)
                store.upsert(pin, part.chunk_ids, part.doc_ids, vectors, texts=part.texts)
                counts[pin] = store.finish(pin)
                timings["embed_s"] += t1 - t0
                timings["upsert_s"] += time.perf_counter() - t1
                if counts[pin] != len(part.chunk_ids):
                    raise RuntimeError(
                        f"index: {pin} holds {counts[pin]} points, expected {len(part.chunk_ids)}"
                    )
            bar.close()
        finally:
            store.close()
        manifest = {
            "model": embedder.fingerprint,
            # The MiniLM precision and device that ran (after `auto`); null for an API embedder.
            "embedder": embedder.resolved(),
            "dim": embedder.dim,
            "store": name,
            "search": search,
            "location": _location(store_cfg, subdir),
            "partitions": counts,
            "chunks": sum(counts.values()),
            "corpus_hash": corpus.manifest["content_hash"],
            "content_hash": index_hash(corpus.manifest["content_hash"], embedder.fingerprint, embedder.dim),
        }
        record = {
            "embedding_cache": {"hits": embedder.hits, "misses": embedder.misses},
            "engine": dict(engine) if engine is not None else {"name": "local"},
            "timings": timings,
        }
        write_json_atomic(tmp / MANIFEST, manifest)
        write_json_atomic(tmp / BUILD_RECORD, record)
    return {**manifest, **record}


def _location(store: schema.Store, subdir: str | None) -> str:
    """Where the index is: the folder under paths.index, or the server's URL (null: "None"). A URL with
    credentials in it is recorded without them (the manifest is a pipeline output)."""
    if subdir:
        return subdir
    return redact_url(str(store.url if isinstance(store, schema.StoreQdrantServer) else None))


def _announce(embedder: CachedEmbedder, total: int) -> None:
    """One line on stderr before the long part: what embeds the corpus, and how many chunks."""
    resolved = embedder.resolved()
    how = f"{resolved['precision']} on {resolved['device']}" if resolved else "an API embedder"
    print(
        f"index: {total} chunks with {embedder.fingerprint} ({how}); cached chunks are not embedded again",
        file=sys.stderr,
    )


def check_index(
    index_dir: Path,
    corpus: Corpus,
    store_cfg: schema.Store | None = None,
    verify_store: bool = True,
) -> dict[str, Any]:
    """The index manifest, verified against the corpus it claims to index and against the store it describes
    (stale, missing, incomplete or damaged -> UsageError naming what and how to rerun the index stage).

    A local store (``qdrant_local``, under ``index_dir/qdrant``) is checked without creating anything: its
    ``meta.json``, every collection's storage, then every collection's point count against the manifest (one
    open of the store, then closed). A server store is checked the same way when ``store_cfg`` says how to
    reach it (``store=qdrant_server``); without it only the manifest is checked. ``verify_store=False`` skips
    the store for a caller that opens it anyway: ``VectorStore(cfg, path, expect=manifest["partitions"])`` runs
    the same checks in its one open.
    """
    path = index_dir / MANIFEST
    manifest = read_json(path, "index manifest", rerun=stage_command("index"))
    partitions = manifest.get("partitions") if isinstance(manifest, dict) else None
    if (
        not isinstance(manifest, dict)
        or "content_hash" not in manifest
        or not isinstance(partitions, dict)
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in partitions.values())
    ):
        raise UsageError(f"{path}: not an index manifest; rerun {rerun('index')}")
    corpus_hash = corpus.manifest.get("content_hash")
    if manifest.get("corpus_hash") != corpus_hash:
        raise UsageError(
            f"{index_dir}: the index was built from another corpus (corpus changed since); rerun {rerun('index')}"
        )
    if manifest["content_hash"] != index_hash(
        str(corpus_hash), str(manifest.get("model")), int(manifest.get("dim") or 0)
    ):
        raise UsageError(
            f"{path}: content_hash does not match its corpus_hash, model and dim (edited or damaged); "
            f"rerun {rerun('index')}"
        )
    missing = sorted(set(corpus.pins) - set(partitions))
    if missing:
        raise UsageError(f"{index_dir}: no partition for {', '.join(missing)}; rerun {rerun('index')}")
    wrong = [
        f"{pin} {partitions[pin]} points, corpus has {len(corpus.partitions[pin].chunk_ids)} chunks"
        for pin in corpus.pins
        if partitions[pin] != len(corpus.partitions[pin].chunk_ids)
    ]
    if wrong:
        raise UsageError(f"{path}: {'; '.join(wrong)}; rerun {rerun('index')}")
    built_with = str(manifest.get("store", "qdrant_local"))  # a manifest from before store= was recorded
    wanted = built_with if store_cfg is None else store_cfg.name
    if wanted != built_with:
        raise UsageError(
            f"{path}: the index was built into {built_with}, but store={wanted}; {rebuild_hint()}"
        )
    check_search(path, manifest, store_cfg)
    if not verify_store:
        return manifest
    subdir = store_subdir(built_with)
    if store_cfg is not None:
        VectorStore(store_cfg, path=index_dir / subdir if subdir else None, expect=partitions).close()
    elif subdir is not None:
        check_store_files(built_with, index_dir / subdir, partitions)
    return manifest


def check_search(path: Path, manifest: Mapping[str, Any], store_cfg: schema.Store | None) -> None:
    """The index-time search parameters (HNSW m, ef_construct, quantization) the index was built with must be
    the requested ones; query-time ones (exact, hnsw_ef, rescore, oversampling) may differ freely."""
    if not isinstance(store_cfg, schema.StoreQdrantEdge):
        return
    wanted = SearchConfig.of(store_cfg).index_identity()
    built = manifest.get("search")
    if built != wanted:
        diff = (
            ", ".join(
                f"store.search.{key}={wanted[key]!r} (index: {built.get(key)!r})"
                for key in wanted
                if built.get(key) != wanted[key]
            )
            if isinstance(built, dict)
            else f"no index-time search parameters recorded, requested {wanted}"
        )
        raise UsageError(
            f"{path}: the index was built with other index-time search parameters: {diff}; {rebuild_hint()}"
        )
