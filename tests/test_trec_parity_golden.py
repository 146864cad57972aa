"""Parity with trec_eval on the golden set's own runs: bm25 over the real default corpus for every in-scope
entry of golden set v1, per entry, at several cutoffs (the SciFact parity lives in benchmarks/beir.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from doceval.config.compose import compose
from doceval.inputs.corpus import load_corpus
from doceval.inputs.golden import parse_golden
from doceval.scoring.metrics import build_matrix
from doceval.scoring.registry import retrieval_scores
from doceval.system.retrievers import make_retriever

pytrec_eval = pytest.importorskip("pytrec_eval")

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "v1.jsonl"
CUTOFFS = (1, 3, 5, 10)


@pytest.mark.slow
def test_golden_runs_match_trec_eval_per_entry(real_corpus_dir: Path) -> None:
    corpus = load_corpus(real_corpus_dir)
    entries = [e for e in parse_golden(GOLDEN, corpus_ids=corpus.doc_ids()) if not e.out_of_scope]
    retriever = make_retriever(compose(["retriever=bm25"]).retriever, corpus)
    ranked = [retriever.retrieve(e.question, e.library, e.version, 100) for e in entries]
    # trec_eval sorts by score (ties by doc id, descending); give it rank-derived scores so both sides rank
    # exactly as the retriever did, whatever its ties.
    run = {
        e.id: {d: float(len(r) - i) for i, (d, _) in enumerate(r)}
        for e, r in zip(entries, ranked, strict=True)
        if r
    }
    qrels = {e.id: {d: 1 for d in e.relevant_ids} for e in entries}
    measures = {f"{m}.{','.join(map(str, CUTOFFS))}" for m in ("success", "recall", "ndcg_cut")} | {
        "recip_rank"
    }
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    matrix = build_matrix(ranked, [set(e.relevant_ids) for e in entries])
    floors = np.full(len(entries), -np.inf)
    compared = 0
    for k in CUTOFFS:
        ours = retrieval_scores(matrix, floors, k)
        for i, e in enumerate(entries):
            theirs = trec.get(e.id, {})
            for mine, name in (
                ("hit_rate", f"success_{k}"),
                ("recall", f"recall_{k}"),
                ("ndcg", f"ndcg_cut_{k}"),
            ):
                assert ours[mine][i] == pytest.approx(theirs.get(name, 0.0), abs=1e-9), (e.id, mine, k)
                compared += 1
    uncut = retrieval_scores(matrix, floors, 100)["mrr"]
    for i, e in enumerate(entries):
        assert uncut[i] == pytest.approx(trec.get(e.id, {}).get("recip_rank", 0.0), abs=1e-9), e.id
    assert len(entries) >= 200 and compared == 3 * len(CUTOFFS) * len(entries)
    assert (
        0.3 < float(np.mean(retrieval_scores(matrix, floors, 10)["hit_rate"])) < 1.0
    )  # a real, imperfect run
