"""Retrievers on a hand-built corpus: exact, hand-computed scores for overlap and BM25, real MiniLM + Qdrant
for dense, exact RRF fusion for hybrid; the shared contract (per document, no duplicates, k, pins, ties)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from helpers_foundation import EXPECTED_CHUNKS, PIN1, PIN2, build_fixture_corpus, minilm

from doceval.config import schema
from doceval.config.compose import compose
from doceval.errors import UsageError
from doceval.index.build import build_index
from doceval.index.embed import CachedEmbedder
from doceval.index.store import VectorStore
from doceval.inputs.corpus import Corpus, Partition, load_corpus
from doceval.system.retrievers import best_per_document, make_retriever
from doceval.system.retrievers.bm25 import BM25Retriever
from doceval.system.retrievers.dense import DenseRetriever
from doceval.system.retrievers.hybrid import HybridRetriever
from doceval.system.retrievers.overlap import OverlapRetriever
from doceval.system.retrievers.text import tokenize

A = f"{PIN1}:demo.Model.dict"
B = f"{PIN1}:demo.Model.json"
C = f"{PIN1}:demo.Field"
D = f"{PIN1}:demo.validator"  # three chunks
E = f"{PIN1}:demo.config"
F = f"{PIN2}:demo.BaseModel.model_dump"
G = f"{PIN2}:demo.BaseModel.model_dump_json"
H = f"{PIN2}:demo.Field"

Q_SERIALIZE = "How do I serialize a model to a dictionary?"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    root = tmp_path_factory.mktemp("corpus") / "docs"
    build_fixture_corpus(root)
    return load_corpus(root)


@pytest.fixture(scope="module")
def overlap(corpus):
    return OverlapRetriever(corpus)


@pytest.fixture(scope="module")
def bm25(corpus):
    return BM25Retriever(corpus)


@pytest.fixture(scope="module")
def dense(corpus, tmp_path_factory):
    embedder = CachedEmbedder(minilm(), None)
    out = tmp_path_factory.mktemp("index") / "index"
    local = schema.StoreQdrantLocal(name="qdrant_local")
    build_index(corpus, embedder, local, out, progress=False)
    store = VectorStore(local, path=out / "qdrant")
    yield DenseRetriever(store, embedder, set(corpus.pins))
    store.close()


@pytest.fixture(scope="module")
def hybrid(bm25, dense):
    return HybridRetriever(bm25, dense, rrf_k=60, depth=100)


@pytest.fixture
def retriever(request):
    return request.getfixturevalue(request.param)


ALL = pytest.mark.parametrize(
    "retriever", ["overlap", "bm25", pytest.param("dense", marks=pytest.mark.slow),
                  pytest.param("hybrid", marks=pytest.mark.slow)], indirect=True,
)  # fmt: skip


def test_fixture_tokens_the_hand_computations_rely_on():
    assert tokenize(Q_SERIALIZE) == ["serialize", "model", "dictionary"]
    assert tokenize("What does model_dump return?") == ["model_dump", "model", "dump", "return"]
    # Chunk lengths in tokens of demo@1.0 (A, B, C, D#0, D#1, D#2, E): they sum to 56, so avgdl = 8.
    texts = [t for doc in (A, B, C, D, E) for t in EXPECTED_CHUNKS[doc]]
    assert [len(tokenize(t)) for t in texts] == [8, 9, 7, 8, 8, 10, 6]


# --------------------------------------------------------------------------------------------- overlap


def test_overlap_scores_are_the_share_of_question_terms_found(overlap):
    # q = {serialize, model, dictionary}: A has all 3, B has serialize+model, D's chunk #1 has model;
    # C and E share nothing and are not results.
    assert overlap.retrieve(Q_SERIALIZE, "demo", "1.0", 10) == [(A, 1.0), (B, 2 / 3), (D, 1 / 3)]


def test_overlap_keeps_whole_identifiers(overlap):
    # q = {model_dump, model, dump, return}: F holds model_dump, model, dump (3/4); G's identifier is
    # model_dump_json, so it only shares the parts model, dump (2/4).
    assert overlap.retrieve("What does model_dump return?", "demo", "2.0", 10) == [(F, 0.75), (G, 0.5)]


def test_overlap_scores_a_document_by_its_best_chunk(overlap):
    # q = {validators, run, reject}: chunk D#1 has validators+run (2/3), D#2 has reject (1/3): best, not sum.
    assert overlap.retrieve("validators run reject", "demo", "1.0", 10) == [(D, 2 / 3)]


def test_overlap_min_score_is_exclusive(corpus):
    strict = OverlapRetriever(corpus, min_score=1 / 3)
    assert strict.retrieve(Q_SERIALIZE, "demo", "1.0", 10) == [(A, 1.0), (B, 2 / 3)]


def test_a_question_of_only_stop_words_finds_nothing(overlap, bm25):
    assert overlap.retrieve("How do I do it?", "demo", "1.0", 5) == []
    assert bm25.retrieve("How do I do it?", "demo", "1.0", 5) == []


# ------------------------------------------------------------------------------------------------ bm25


def test_bm25_scores_match_the_lucene_formula_by_hand(bm25):
    # N = 7 chunks, avgdl = 8, k1 = 1.5, b = 0.75; idf = ln(1 + (N - df + 0.5) / (df + 0.5)).
    # df: serialize 2 (A, B), model 3 (A, B, D#1), dictionary 1 (A).
    idf_serialize, idf_model, idf_dictionary = math.log(3.2), math.log(16 / 7), math.log(16 / 3)
    norm_a = 1.5  # dl 8 = avgdl
    norm_b = 1.5 * (0.25 + 0.75 * 9 / 8)  # dl 9
    want_a = (
        idf_serialize * 1 / (1 + norm_a) + idf_model * 2 / (2 + norm_a) + idf_dictionary * 1 / (1 + norm_a)
    )
    want_b = idf_serialize * 1 / (1 + norm_b) + idf_model * 2 / (2 + norm_b)
    want_d = idf_model * 1 / (1 + 1.5)  # chunk D#1, dl 8
    got = bm25.retrieve(Q_SERIALIZE, "demo", "1.0", 10)
    assert [d for d, _ in got] == [A, B, D]  # C and E share no term: absent, not scored 0
    assert [s for _, s in got] == pytest.approx([want_a, want_b, want_d], rel=1e-5)


def test_bm25_ranks_the_exact_identifier_first(bm25):
    got = bm25.retrieve("model_dump", "demo", "2.0", 10)
    assert [d for d, _ in got] == [F, G]
    assert got[0][1] > got[1][1] > 0


# ----------------------------------------------------------------------------------------------- dense


@pytest.mark.slow
def test_dense_scores_are_the_best_chunk_cosine(dense):
    got = dense.retrieve(Q_SERIALIZE, "demo", "1.0", 10)
    assert [d for d, _ in got][0] == A
    assert sorted(d for d, _ in got) == sorted([A, B, C, D, E])  # every document of the pin, once each
    model = minilm()
    q = model.encode([Q_SERIALIZE])[0]
    for doc_id, score in got:
        chunk_vectors = model.encode(EXPECTED_CHUNKS[doc_id])
        assert score == pytest.approx(float(np.max(chunk_vectors @ q)), abs=1e-4)
    assert -1.0 <= got[-1][1] <= got[0][1] <= 1.0


@pytest.mark.slow
def test_dense_ranks_the_paraphrased_api_first_in_the_right_pin(dense):
    got = dense.retrieve("convert an instance into a JSON text", "demo", "2.0", 1)
    assert got[0][0] == G


# ---------------------------------------------------------------------------------------------- hybrid


@pytest.mark.slow
def test_hybrid_is_reciprocal_rank_fusion(hybrid, bm25, dense):
    lexical = [d for d, _ in bm25.retrieve(Q_SERIALIZE, "demo", "1.0", 100)]
    semantic = [d for d, _ in dense.retrieve(Q_SERIALIZE, "demo", "1.0", 100)]
    assert lexical == [A, B, D] and semantic[0] == A
    got = hybrid.retrieve(Q_SERIALIZE, "demo", "1.0", 10)
    # A is first in both rankings: 1/61 + 1/61.
    assert got[0] == (A, 2 / 61)
    for doc_id, score in got:
        want = 1 / (60 + semantic.index(doc_id) + 1)
        if doc_id in lexical:
            want += 1 / (60 + lexical.index(doc_id) + 1)
        assert score == pytest.approx(want, abs=1e-12), doc_id
    # B (2nd in BM25) outranks every document BM25 did not find, whatever dense says.
    assert [d for d, _ in got].index(B) < min([d for d, _ in got].index(x) for x in (C, E))
    assert hybrid.score_range == (0.0, 2 / 61)


# -------------------------------------------------------------------------------- the shared contract


@ALL
def test_results_are_per_document_without_duplicates(retriever):
    got = retriever.retrieve("validators run before model reject value", "demo", "1.0", 10)
    ids = [d for d, _ in got]
    assert D in ids
    assert len(ids) == len(set(ids))
    assert all("#" not in d for d in ids)  # document ids, never chunk ids
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)


@ALL
def test_k_is_respected(retriever):
    full = retriever.retrieve(Q_SERIALIZE, "demo", "1.0", 10)
    assert len(full) >= 3
    assert retriever.retrieve(Q_SERIALIZE, "demo", "1.0", 2) == full[:2]
    assert len(retriever.retrieve(Q_SERIALIZE, "demo", "1.0", 1)) == 1


@ALL
def test_unknown_pin_returns_nothing_and_library_names_are_case_insensitive(retriever):
    assert retriever.retrieve(Q_SERIALIZE, "demo", "9.9", 5) == []
    assert retriever.retrieve(Q_SERIALIZE, "nope", "1.0", 5) == []
    assert retriever.retrieve(Q_SERIALIZE, "Demo", "1.0", 5) == retriever.retrieve(
        Q_SERIALIZE, "demo", "1.0", 5
    )


@ALL
def test_results_stay_inside_the_pin(retriever):
    for version, prefix in (("1.0", f"{PIN1}:"), ("2.0", f"{PIN2}:")):
        got = retriever.retrieve("serialize the model to a dictionary", "demo", version, 10)
        assert got and all(d.startswith(prefix) for d, _ in got)


def test_ties_are_broken_by_document_id_whatever_the_corpus_order(corpus):
    reversed_corpus = Corpus(
        corpus.root,
        corpus.manifest,
        {
            pin: Partition(pin, p.chunk_ids[::-1], p.doc_ids[::-1], p.texts[::-1])
            for pin, p in corpus.partitions.items()
        },
    )
    for make in (OverlapRetriever, BM25Retriever):
        forward = make(corpus).retrieve("field", "demo", "1.0", 10)
        backward = make(reversed_corpus).retrieve("field", "demo", "1.0", 10)
        assert forward == backward
    # "serialize": A and B score 1.0 each under overlap; "dict" < "json".
    assert OverlapRetriever(reversed_corpus).retrieve("serialize", "demo", "1.0", 10) == [(A, 1.0), (B, 1.0)]


def test_best_per_document_collapses_chunks_and_sorts_deterministically():
    hits = [("b", 0.5), ("a", 0.5), ("c", 0.9), ("a", 0.2), ("b", 0.7), ("d", 0.5)]
    want = [("c", 0.9), ("b", 0.7), ("a", 0.5), ("d", 0.5)]
    for seed in range(5):
        random.Random(seed).shuffle(hits)
        assert best_per_document(hits, 10) == want
        assert best_per_document(hits, 2) == want[:2]


@dataclass(frozen=True)
class _Named:
    """A block naming a retriever nobody registered (the schema would refuse it; the registry must too)."""

    name: str


def test_make_retriever_names_and_usage_errors(corpus):
    assert make_retriever(compose(["retriever=overlap"]).retriever, corpus).name == "overlap"
    assert make_retriever(compose(["retriever=bm25", "retriever.k1=1.2"]).retriever, corpus).k1 == 1.2
    with pytest.raises(UsageError, match="dvc repro index"):
        make_retriever(schema.RetrieverDense(name="dense"), corpus)
    with pytest.raises(UsageError, match="overlap, bm25, dense, hybrid"):
        make_retriever(_Named("splade"), corpus)  # type: ignore[arg-type]
    with pytest.raises(
        UsageError, match="retriever/splade.*bm25 dense function hybrid hybrid_native overlap"
    ):
        compose(["retriever=splade"])


def test_a_retriever_declares_whether_it_reads_the_index() -> None:
    """A new retriever is a registration, never a harness edit: the harness asks the registry."""
    from doceval.system.retrievers import RETRIEVERS, needs_index, register_retriever

    assert [n for n in RETRIEVERS if needs_index(n)] == ["dense", "hybrid", "hybrid_native"]
    assert not needs_index("function") and not needs_index("nope") and not needs_index(None)

    @register_retriever("test_index_reader", needs_index=True)
    def build(cfg: Any, resources: Any) -> Any:
        return resources.need_index()

    try:
        assert needs_index("test_index_reader")
    finally:
        del RETRIEVERS["test_index_reader"]
