"""Retrievers on a hand-built corpus: exact, hand-computed scores for overlap and BM25, real MiniLM + Qdrant
for dense, exact RRF fusion for hybrid; the shared contract (per document, no duplicates, k, pins, ties)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_foundation import EXPECTED_CHUNKS, PIN1, PIN2, build_fixture_corpus, minilm

from doceval.config import schema
from doceval.config.compose import compose
from doceval.errors import UsageError
from doceval.index.build import build_index
from doceval.index.embed import CachedEmbedder
from doceval.index.store import VectorStore, store_subdir
from doceval.inputs.corpus import Corpus, Partition, load_corpus
from doceval.system.retrievers import RETRIEVERS, Retriever, best_per_document, make_retriever, needs_index
from doceval.system.retrievers.base import SCORE_DECIMALS
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
# The retriever blocks as conf/ writes them (k1 = 1.5, b = 0.75: the hand computations below rely on them).
OVERLAP = compose(["retriever=overlap"]).retriever
BM25 = compose(["retriever=bm25"]).retriever


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    root = tmp_path_factory.mktemp("corpus") / "docs"
    build_fixture_corpus(root)
    return load_corpus(root)


@pytest.fixture(scope="module")
def overlap(corpus):
    return make_retriever(OVERLAP, corpus)


@pytest.fixture(scope="module")
def bm25(corpus):
    return make_retriever(BM25, corpus)


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
    hybrid = compose(["retriever=hybrid"]).retriever
    assert isinstance(hybrid, schema.RetrieverHybrid)
    return HybridRetriever(bm25, dense, rrf_k=hybrid.rrf_k, depth=hybrid.depth)


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


@pytest.mark.slow
def test_hybrid_native_fuses_the_engine_s_two_rankings(index, corpus):
    """The Edge engine's RRF, 1 / (rrf_k + rank) with rank from 0: A leads BM25 and dense alike."""
    store, embedder = index
    native = make_retriever(compose(["retriever=hybrid_native"]).retriever, corpus, store, embedder)
    got = native.retrieve(Q_SERIALIZE, "demo", "1.0", 10)
    assert got[0][0] == A and got[0][1] == pytest.approx(2 / 60, abs=1e-6)
    assert native.retrieve("model_dump", "demo", "2.0", 10)[0][0] == F  # the exact identifier, in its pin


# -------------------------------------------------------------------------------- the shared contract
# Every registered retriever, built from its composed block the way the harness builds it, is held to the
# interface only (document ids, no duplicates, sorted, at most k, inside the pin); how well it ranks is each
# retriever's own hand-computed cases above. A retriever registered later is in this list without a test edit.


def contract_bm25(root: str) -> Any:
    """retriever=function's factory for the contract: BM25 over the fixture corpus, as the user's function."""
    bm25 = make_retriever(BM25, load_corpus(Path(root)))

    def retrieve(question: str, k: int, library: str, version: str) -> list[tuple[str, float]]:
        return bm25.retrieve(question, library, version, k)

    return retrieve


# Settings a retriever cannot run without (its conf/ block leaves them to the user); everything else composes.
REQUIRED_SETTINGS = {
    "function": ["retriever.target=test_retrievers:contract_bm25", "+retriever.kwargs.root={root}"]
}


@pytest.fixture(scope="module")
def index(corpus: Corpus, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The fixture corpus in the configured store (qdrant_edge: hybrid_native needs it), with the real MiniLM."""
    embedder = CachedEmbedder(minilm(), None)
    store_cfg = compose([]).store
    out = tmp_path_factory.mktemp("contract") / "index"
    build_index(corpus, embedder, store_cfg, out, progress=False)
    store = VectorStore(store_cfg, path=out / str(store_subdir(store_cfg.name)))
    yield store, embedder
    store.close()


@pytest.fixture
def registered(request: pytest.FixtureRequest, corpus: Corpus) -> Retriever:
    name = request.param
    overrides = [o.format(root=corpus.root) for o in REQUIRED_SETTINGS.get(name, [])]
    block = compose([f"retriever={name}", *overrides]).retriever
    if RETRIEVERS[name].needs_index:
        store, embedder = request.getfixturevalue("index")
        return make_retriever(block, corpus, store, embedder)
    return make_retriever(block, corpus)


CONTRACT = pytest.mark.parametrize(
    "registered",
    [pytest.param(n, marks=pytest.mark.slow) if RETRIEVERS[n].needs_index else n for n in RETRIEVERS.names()],
    indirect=True,
)


def _checked(
    retriever: Retriever, question: str, library: str, version: str, k: int
) -> list[tuple[str, float]]:
    """One call, held to the interface: a list of (document id, float score) pairs, at most k, one per
    document, best first with ties in document-id order (design 2.3), every score inside the declared range."""
    got = retriever.retrieve(question, library, version, k)
    assert isinstance(got, list) and len(got) <= k, got
    ids = [d for d, _ in got]
    assert all(isinstance(d, str) and "#" not in d for d in ids), ids  # document ids, never chunk ids
    assert len(ids) == len(set(ids)), ids
    assert all(isinstance(s, float) and not math.isnan(s) for _, s in got), got
    assert got == sorted(got, key=lambda pair: (-round(pair[1], SCORE_DECIMALS), pair[0])), got
    # Compared at SCORE_DECIMALS, as every score is (design 2.3): float32 puts a cosine of 1 at 1.0000001.
    low, high = (round(bound, SCORE_DECIMALS) for bound in retriever.score_range)
    assert all(low <= round(s, SCORE_DECIMALS) <= high for _, s in got), (retriever.score_range, got)
    return got


@CONTRACT
def test_results_are_documents_of_the_pin_sorted_and_at_most_k(registered: Retriever) -> None:
    for version, pin, doc in (("1.0", PIN1, A), ("2.0", PIN2, F)):
        own_text = " ".join(EXPECTED_CHUNKS[doc])
        found = _checked(registered, own_text, "demo", version, 10)
        assert found, f"{registered.name} found nothing in {pin} for one of its documents' own text"
        assert all(d.startswith(f"{pin}:") for d, _ in found), found
        for k in (1, 2):
            assert len(_checked(registered, own_text, "demo", version, k)) <= k


@CONTRACT
def test_same_question_same_answer(registered: Retriever) -> None:
    first = _checked(registered, Q_SERIALIZE, "demo", "1.0", 5)
    assert _checked(registered, Q_SERIALIZE, "demo", "1.0", 5) == first


@CONTRACT
def test_unknown_pin_returns_nothing_and_library_names_are_case_insensitive(registered: Retriever) -> None:
    assert _checked(registered, Q_SERIALIZE, "demo", "9.9", 5) == []
    assert _checked(registered, Q_SERIALIZE, "nope", "1.0", 5) == []
    assert _checked(registered, Q_SERIALIZE, "Demo", "1.0", 5) == _checked(
        registered, Q_SERIALIZE, "demo", "1.0", 5
    )


def test_ties_are_broken_by_document_id_whatever_the_corpus_order(corpus):
    reversed_corpus = Corpus(
        corpus.root,
        corpus.manifest,
        {
            pin: Partition(pin, p.chunk_ids[::-1], p.doc_ids[::-1], p.texts[::-1])
            for pin, p in corpus.partitions.items()
        },
    )
    for block in (OVERLAP, BM25):
        forward = make_retriever(block, corpus).retrieve("field", "demo", "1.0", 10)
        backward = make_retriever(block, reversed_corpus).retrieve("field", "demo", "1.0", 10)
        assert forward == backward
    # "serialize": A and B score 1.0 each under overlap; "dict" < "json".
    reversed_overlap = make_retriever(OVERLAP, reversed_corpus)
    assert reversed_overlap.retrieve("serialize", "demo", "1.0", 10) == [(A, 1.0), (B, 1.0)]


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
    with pytest.raises(UsageError, match="choose one of: " + ", ".join(RETRIEVERS.names())):
        make_retriever(_Named("splade"), corpus)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="retriever/splade.*" + " ".join(RETRIEVERS.names())):
        compose(["retriever=splade"])  # conf/retriever/ offers exactly the registered retrievers


class _Late:
    """A retriever registered after every built-in (a plug-in module imported by the user's code)."""

    name = "test_late"
    score_range = (0.0, 1.0)

    def retrieve(self, question: str, library: str, version: str, k: int) -> list[tuple[str, float]]:
        return [(f"{library}@{version}:late", 1.0)][:k]


def test_a_retriever_registered_late_is_found_like_a_built_in(corpus) -> None:
    """Registration order is irrelevant: nothing copies the names at import time (M4: a retriever registered
    below the old ``NAMES = tuple(RETRIEVERS)`` was missing from it)."""
    import doceval.api as api
    from doceval.system.retrievers import register_retriever

    register_retriever("test_late", needs_index=True)(lambda cfg, resources: _Late())
    try:
        # The API's check reads the registry when called (it listed a snapshot taken when doceval.api loaded).
        with pytest.raises(UsageError, match=r"not a built-in retriever; pass one of .*test_late"):
            api.evaluate("golden.jsonl", retriever="nope")
        assert "test_late" in RETRIEVERS.names() and needs_index("test_late")
        built = make_retriever(_Named("test_late"), corpus)  # type: ignore[arg-type]
        assert built.retrieve("q", "demo", "1.0", 5) == [("demo@1.0:late", 1.0)]
        with pytest.raises(UsageError, match=r"choose one of: .*test_late"):
            make_retriever(_Named("nope"), corpus)  # type: ignore[arg-type]
    finally:
        RETRIEVERS.remove("test_late")
    assert "test_late" not in RETRIEVERS.names()


def test_a_retriever_registered_twice_under_one_name_is_refused() -> None:
    from doceval.system.retrievers import register_retriever

    with pytest.raises(ValueError, match="'bm25' is registered twice"):
        register_retriever("bm25")(lambda cfg, resources: _Late())


def test_a_retriever_declares_whether_it_reads_the_index(corpus) -> None:
    """A new retriever is a registration, never a harness edit: the harness asks the registry."""
    from doceval.system.retrievers import register_retriever

    assert not needs_index("nope") and not needs_index(None)

    @register_retriever("test_index_reader", needs_index=True)
    def build(cfg: Any, resources: Any) -> Any:
        return resources.need_index()

    try:
        assert needs_index("test_index_reader")
        with pytest.raises(UsageError, match="retriever=test_index_reader needs the index"):
            make_retriever(_Named("test_index_reader"), corpus)  # type: ignore[arg-type]
    finally:
        RETRIEVERS.remove("test_index_reader")


def test_the_agreement_signals_bm25_is_conf_s_bm25_block():
    """The bm25 ranking the agreement and fused signals read takes k1 and b from conf/retriever/bm25.yaml (its
    constructor has no defaults of its own), whatever retriever is configured."""
    from doceval.harness.candidates import shipped_bm25

    assert shipped_bm25() == BM25
