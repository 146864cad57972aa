"""The index stage: embed every chunk (cached) and write one Qdrant collection per library@version."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doceval.common.io import atomic_dir, read_json, write_json_atomic
from doceval.errors import UsageError
from doceval.index.embed import CachedEmbedder
from doceval.index.store import VectorStore
from doceval.inputs.corpus import Corpus

MANIFEST = "manifest.json"


def index_hash(corpus_hash: str, fingerprint: str, dim: int) -> str:
    """What the index's content depends on: the corpus bytes and the embedder."""
    return hashlib.sha256(f"{corpus_hash}|{fingerprint}|{dim}".encode()).hexdigest()


def build_index(
    corpus: Corpus,
    embedder: CachedEmbedder,
    store_cfg: Mapping[str, Any],
    out_dir: Path,
    progress: bool = True,
) -> dict[str, Any]:
    """Embed and upsert every partition. Local mode writes into a temp dir that replaces ``out_dir`` on success."""
    from tqdm import tqdm

    timings: dict[str, float] = {"embed_s": 0.0, "upsert_s": 0.0}
    counts: dict[str, int] = {}
    local = store_cfg.get("name", "qdrant_local") == "qdrant_local"
    with atomic_dir(out_dir) as tmp:
        store = VectorStore(store_cfg, path=tmp / "qdrant" if local else None)
        try:
            bar = tqdm(
                total=sum(len(p.chunk_ids) for p in corpus.partitions.values()),
                desc="index",
                unit="chunk",
                disable=not progress,
            )
            for pin in corpus.pins:
                part = corpus.partitions[pin]
                t0 = time.perf_counter()
                vectors = embedder.encode(part.texts)
                t1 = time.perf_counter()
                store.recreate(pin, embedder.dim)
                store.upsert(pin, part.chunk_ids, part.doc_ids, vectors)
                timings["embed_s"] += t1 - t0
                timings["upsert_s"] += time.perf_counter() - t1
                counts[pin] = store.count(pin)
                if counts[pin] != len(part.chunk_ids):
                    raise RuntimeError(
                        f"index: {pin} holds {counts[pin]} points, expected {len(part.chunk_ids)}"
                    )
                bar.update(len(part.chunk_ids))
            bar.close()
        finally:
            store.close()
        manifest = {
            "model": embedder.fingerprint,
            "dim": embedder.dim,
            "store": store_cfg.get("name", "qdrant_local"),
            "location": "qdrant" if local else str(store_cfg.get("url")),
            "partitions": counts,
            "chunks": sum(counts.values()),
            "corpus_hash": corpus.manifest["content_hash"],
            "content_hash": index_hash(corpus.manifest["content_hash"], embedder.fingerprint, embedder.dim),
            "embedding_cache": {"hits": embedder.hits, "misses": embedder.misses},
            "timings": timings,
        }
        write_json_atomic(tmp / MANIFEST, manifest)
    return manifest


def check_index(index_dir: Path, corpus: Corpus) -> dict[str, Any]:
    """The index manifest, verified against the corpus it claims to index (stale or missing -> UsageError)."""
    manifest = read_json(index_dir / MANIFEST, "index manifest", rerun="dvc repro index")
    if not isinstance(manifest, dict) or "content_hash" not in manifest:
        raise UsageError(f"{index_dir / MANIFEST}: not an index manifest; rerun `dvc repro index`")
    if manifest.get("corpus_hash") != corpus.manifest.get("content_hash"):
        raise UsageError(
            f"{index_dir}: the index was built from another corpus (corpus changed since); rerun `dvc repro index`"
        )
    missing = sorted(set(corpus.pins) - set(manifest.get("partitions", {})))
    if missing:
        raise UsageError(f"{index_dir}: no partition for {', '.join(missing)}; rerun `dvc repro index`")
    return manifest
