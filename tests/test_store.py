"""The Qdrant store (real embedded Qdrant on disk) and the index stage built on it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers_foundation import EXPECTED_CHUNKS, PIN1, PIN2, build_fixture_corpus, fixture_documents, minilm

from doceval.config import schema
from doceval.config.compose import compose
from doceval.errors import UsageError
from doceval.index.build import BUILD_RECORD, MANIFEST, RECORD_KEYS, build_index, check_index, index_hash
from doceval.index.embed import CachedEmbedder, EmbeddingCache
from doceval.index.store import VectorStore, collection_name
from doceval.inputs.corpus import load_corpus
from doceval.inputs.docs import write_corpus

LOCAL = schema.StoreQdrantLocal(name="qdrant_local")


def _unit_vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_collection_names_are_valid_qdrant_names():
    assert collection_name("pydantic@2.8.2") == "doceval__pydantic__2_8_2"
    assert collection_name("my-lib@1.0rc1+local") == "doceval__my-lib__1_0rc1_local"


def test_local_round_trip(tmp_path):
    chunk_ids = [f"lib@1.0:mod.f{i}#0" for i in range(5)]
    doc_ids = [c.split("#")[0] for c in chunk_ids]
    vectors = _unit_vectors(5, 16)
    with VectorStore(LOCAL, path=tmp_path / "qdrant") as store:
        assert not store.has("lib@1.0")
        store.recreate("lib@1.0", 16)
        store.upsert("lib@1.0", chunk_ids, doc_ids, vectors, batch=2)  # several batches
        assert store.has("lib@1.0") and store.count("lib@1.0") == 5
        for i in range(5):
            hits = store.search("lib@1.0", vectors[i], limit=3)
            assert len(hits) == 3
            assert hits[0][:2] == (chunk_ids[i], doc_ids[i])
            assert hits[0][2] == pytest.approx(1.0, abs=1e-5)
            assert hits[1][2] == pytest.approx(float(np.sort(vectors @ vectors[i])[-2]), abs=1e-5)
        # Upserting the same chunk ids again replaces points (ids derive from chunk ids), never duplicates.
        store.upsert("lib@1.0", chunk_ids, doc_ids, vectors[::-1].copy())
        assert store.count("lib@1.0") == 5
        assert store.search("lib@1.0", vectors[0], 1)[0][0] == chunk_ids[4]
        # recreate drops the old points.
        store.recreate("lib@1.0", 16)
        assert store.count("lib@1.0") == 0
    # The data is on disk: a later process (here: a later open) sees it.
    with VectorStore(LOCAL, path=tmp_path / "qdrant") as store:
        assert store.has("lib@1.0")


def test_a_second_local_store_on_the_same_path_is_a_usage_error(tmp_path):
    first = VectorStore(LOCAL, path=tmp_path / "qdrant")
    try:
        with pytest.raises(UsageError, match="open in another process.*qdrant_server"):
            VectorStore(LOCAL, path=tmp_path / "qdrant")
    finally:
        first.close()
    VectorStore(LOCAL, path=tmp_path / "qdrant").close()  # the lock is released on close


def test_store_config_errors():
    # An unknown store cannot reach VectorStore: composing the config refuses it, naming the options.
    with pytest.raises(UsageError, match="store/faiss.*qdrant_edge qdrant_local qdrant_server"):
        compose(["store=faiss"])


# -------------------------------------------------------------------------------------------- indexing


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The fixture corpus, indexed once with a fresh embedding cache."""
    root = tmp_path_factory.mktemp("idx")
    build_fixture_corpus(root / "docs")
    corpus = load_corpus(root / "docs")
    cache = EmbeddingCache(root / "cache" / "embeddings.sqlite")
    embedder = CachedEmbedder(minilm(), cache)
    manifest = build_index(corpus, embedder, LOCAL, root / "index", progress=False)
    cache.close()
    return root, corpus, manifest


@pytest.mark.slow
def test_build_index_manifest(built):
    root, corpus, manifest = built
    assert manifest["partitions"] == {PIN1: 7, PIN2: 3}
    assert manifest["chunks"] == 10
    assert manifest["dim"] == 384 and manifest["model"] == minilm().fingerprint
    assert manifest["corpus_hash"] == corpus.manifest["content_hash"]
    assert manifest["content_hash"] == index_hash(corpus.manifest["content_hash"], minilm().fingerprint, 384)
    # demo@1.0's Field and demo@2.0's Field have the same text: embedded once, found in the cache once.
    texts = [t for chunks in EXPECTED_CHUNKS.values() for t in chunks]
    assert len(set(texts)) == 9
    assert manifest["embedding_cache"] == {"hits": 1, "misses": 9}
    # On disk: the manifest (what the index is) and, beside it, what this build did.
    written = json.loads((root / "index" / MANIFEST).read_text())
    record = json.loads((root / "index" / BUILD_RECORD).read_text())
    assert set(record) == set(RECORD_KEYS) and {**written, **record} == manifest
    assert check_index(root / "index", corpus) == written
    with VectorStore(LOCAL, path=root / "index" / "qdrant") as store:
        assert store.count(PIN1) == 7 and store.count(PIN2) == 3
        vector = minilm().encode([EXPECTED_CHUNKS[f"{PIN1}:demo.validator"][1]])[0]
        chunk_id, doc_id, score = store.search(PIN1, vector, 1)[0]
        assert (chunk_id, doc_id) == (f"{PIN1}:demo.validator#1", f"{PIN1}:demo.validator")
        assert score == pytest.approx(1.0, abs=1e-4)


@pytest.mark.slow
def test_rebuild_with_the_same_cache_embeds_nothing(built, tmp_path):
    root, corpus, first = built
    cache = EmbeddingCache(root / "cache" / "embeddings.sqlite")
    try:
        embedder = CachedEmbedder(minilm(), cache)
        again = build_index(corpus, embedder, LOCAL, tmp_path / "index", progress=False)
    finally:
        cache.close()
    assert embedder.misses == 0 and embedder.hits == 10
    assert again["content_hash"] == first["content_hash"]
    # The index stage's DVC output is the manifest: the same bytes whatever this build's cache hits and timings
    # (a fresh clone's `dvc repro` leaves dvc.lock as committed).
    assert (tmp_path / "index" / MANIFEST).read_bytes() == (root / "index" / MANIFEST).read_bytes()
    assert again["timings"] != first["timings"] and again["embedding_cache"] != first["embedding_cache"]


@pytest.mark.slow
def test_check_index_refuses_a_stale_or_missing_index(built, tmp_path):
    root, corpus, _ = built
    docs = fixture_documents()
    docs[PIN2][0].text += "\n\nA new paragraph."
    write_corpus(docs, tmp_path / "docs", 80, {})
    changed = load_corpus(tmp_path / "docs")
    assert changed.manifest["content_hash"] != corpus.manifest["content_hash"]
    with pytest.raises(UsageError, match=r"corpus changed.*rerun `dvc repro index`"):
        check_index(root / "index", changed)
    with pytest.raises(UsageError, match=r"index manifest not found.*`dvc repro index`"):
        check_index(tmp_path / "no-index", corpus)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / MANIFEST).write_text("[1, 2]")
    with pytest.raises(UsageError, match="not an index manifest.*dvc repro index"):
        check_index(tmp_path / "junk", corpus)
