"""The real all-MiniLM-L6-v2 embedder and the content-addressed embedding cache."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers_foundation import minilm

from doceval.config import schema
from doceval.config.compose import compose
from doceval.errors import UsageError
from doceval.index.embed import CachedEmbedder, EmbeddingCache, make_embedder

QUESTION = "How do I serialize a model to a dictionary?"
PARAPHRASE = "Convert the model instance into a dict"
UNRELATED = "The weather in Paris is sunny"


@pytest.mark.slow
def test_paraphrase_ranks_above_an_unrelated_sentence():
    q, para, other = minilm().encode([QUESTION, PARAPHRASE, UNRELATED])
    assert float(q @ para) > float(q @ other) + 0.2
    assert float(q @ para) > 0.4


@pytest.mark.slow
def test_vectors_are_normalised_float32_of_dim_384():
    model = minilm()
    vectors = model.encode([QUESTION, PARAPHRASE, UNRELATED, "x"])
    assert model.dim == 384
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert model.encode([]).shape == (0, 384)
    assert "all-MiniLM-L6-v2" in model.fingerprint


@pytest.mark.slow
def test_cache_returns_identical_vectors_and_counts_hits(tmp_path):
    path = tmp_path / "emb.sqlite"
    cache = EmbeddingCache(path)
    embedder = CachedEmbedder(minilm(), cache)
    first = embedder.encode([QUESTION, PARAPHRASE])
    assert (embedder.hits, embedder.misses) == (0, 2)
    second = embedder.encode([PARAPHRASE, UNRELATED, QUESTION])
    assert (embedder.hits, embedder.misses) == (2, 3)
    assert np.array_equal(second[0], first[1]) and np.array_equal(second[2], first[0])
    # A repeated text inside one call is embedded once.
    embedder.encode(["fresh text", "fresh text"])
    assert embedder.misses == 4
    cache.close()

    # The cache is a file: a new process (here a new connection) hits it, with the same vectors.
    reopened = CachedEmbedder(minilm(), EmbeddingCache(path))
    third = reopened.encode([QUESTION, PARAPHRASE, UNRELATED])
    assert (reopened.hits, reopened.misses) == (3, 0)
    assert np.array_equal(third[:2], first)
    assert np.allclose(third, minilm().encode([QUESTION, PARAPHRASE, UNRELATED]), atol=1e-5)
    assert reopened.encode([]).shape == (0, 384)
    reopened.cache.close()


@pytest.mark.slow
def test_cache_key_depends_on_the_embedder_fingerprint():
    class Other:
        fingerprint = "another-model"
        dim = 384

    wrapped = CachedEmbedder(minilm(), None)
    other = CachedEmbedder(Other(), None)  # type: ignore[arg-type]
    assert wrapped.key(QUESTION) != other.key(QUESTION)
    assert wrapped.key(QUESTION) == CachedEmbedder(minilm(), None).key(QUESTION)


@pytest.mark.slow
def test_without_a_cache_every_text_is_a_miss():
    embedder = CachedEmbedder(minilm(), None)
    embedder.encode([QUESTION, QUESTION])
    assert (embedder.hits, embedder.misses) == (0, 2)


def test_unknown_embedder_name_is_a_usage_error():
    with pytest.raises(UsageError, match="embedder/word2vec.*minilm .*openai"):
        compose(["embedder=word2vec"])
    block = compose(["embedder=openai"]).embedder
    assert isinstance(block, schema.EmbedderOpenAI)
    with pytest.raises(UsageError, match="embedder.model"):
        make_embedder(replace(block, model=""), None)


@pytest.mark.slow
def test_bf16_precision_agrees_with_fp32_under_its_own_cache_key(tmp_path):
    from doceval.index.embed import MiniLMEmbedder

    texts = [
        "Validate a model from a dict with model_validate.",
        "Create an async engine with create_async_engine.",
    ]
    fp32, bf16 = minilm(), minilm("minilm_bf16")
    a, b = fp32.encode(texts), bf16.encode(texts)
    assert b.dtype == np.float32 and np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(a * b, axis=1))) > 0.999  # measured >= 0.99997 on 600 corpus chunks
    assert bf16.fingerprint == fp32.fingerprint + ":bf16"  # its vectors never mix with fp32 ones in a cache
    with pytest.raises(UsageError, match="embedder.precision='fp16'"):
        MiniLMEmbedder(batch_size=16, device="cpu", precision="fp16")


@pytest.mark.slow
def test_bf16_weights_agree_with_fp32_under_their_own_cache_key():
    texts = [
        "Validate a model from a dict with model_validate.",
        "Create an async engine with create_async_engine.",
        "x",
    ]
    fp32, bf16w = minilm(), minilm("minilm_bf16_weights")
    a, b = fp32.encode(texts), bf16w.encode(texts)
    assert b.shape == (3, 384) and b.dtype == np.float32
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(a * b, axis=1))) > 0.999  # measured >= 0.9999 on 600 corpus chunks
    assert bf16w.fingerprint == fp32.fingerprint + ":bf16_weights"  # never mixes with fp32 or bf16 vectors
    assert bf16w.encode([]).shape == (0, 384)
