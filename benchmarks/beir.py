"""External validation: doceval's own retrievers and metrics on a BEIR dataset, against the published figures.

    python benchmarks/beir.py PATH [--split test] [--retrievers bm25 dense] [--limit-queries N]
                              [--work DIR] [--bm25-protocol anserini] [--bm25-ablation] [--output JSON]

PATH is a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv), e.g. a SciFact download (not part of
the repository: pass its path).
Nothing here is a special path for benchmarks: the data is imported with ``doceval.inputs.beir.import_beir`` into a
corpus + golden set in ``--work`` (default benchmarks/.work, git-ignored; never data/), the index is built with
``doceval.index.build.build_index`` (all-MiniLM-L6-v2 behind the content-addressed embedding cache in
WORK/cache/embeddings.sqlite, so a rerun never re-embeds; ``--store``: the default qdrant_edge, or qdrant_local),
candidates come from
``doceval.harness.candidates.retrieve_all`` with retrievers from ``doceval.system.retrievers.make_retriever`` (top 100), and the
scores from ``doceval.scoring`` (build_matrix / retrieval_scores, floors at -inf).

Printed per system: nDCG@10, recall@100, MRR@10 and hit@10, the published nDCG@10 with the difference and
whether it is within the target (BM25: within [0.665, 0.679] or 0.01 of it; all-MiniLM-L6-v2: 0.645 +- 0.01),
then per-query parity with pytrec_eval on the same runs (ndcg_cut_10, recall_100, success_10, and recip_rank
on the run truncated to its top 10) as the max absolute difference. pytrec_eval gets scores that follow the
list order (n, n-1, ...) so it ranks exactly what doceval ranked; the effect of trec_eval's own tie-break on
the raw scores is printed separately. Timings (import, embed/index, retriever build, retrieve) and the machine.

Protocol differences (why doceval's BM25 is not Anserini's): ``--bm25-protocol anserini`` adds a BM25 run with
Anserini's settings for BEIR "flat" (k1=0.9, b=0.4; Lucene-style tokens, possessive 's removed, Lucene's 33
English stop words, Porter stemming via PyStemmer) built with bm25s like doceval's retriever; it is a
diagnostic in this script only and changes nothing in doceval. ``--bm25-ablation`` separates the factors
(parameters, tokenizer, stemming).

Exit status: 0 ok; 1 parity with pytrec_eval failed; 2 bad input; 3 a published target missed (only with
``--strict-targets``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from doceval.config import schema
from doceval.config.compose import compose
from doceval.errors import UsageError
from doceval.harness.candidates import retrieve_all
from doceval.index.embed import CachedEmbedder
from doceval.index.store import STORES, VectorStore, store_subdir
from doceval.inputs.beir import import_beir, read_qrels
from doceval.inputs.corpus import Corpus, load_corpus
from doceval.inputs.golden import GoldenEntry, parse_golden
from doceval.scoring.metrics import build_matrix, mean_or_none
from doceval.scoring.registry import retrieval_scores
from doceval.system.retrievers import (
    RETRIEVERS,
    Ranked,
    Retriever,
    best_per_document,
    make_retriever,
    needs_index,
)
from doceval.system.retrievers.base import pin_of

DEPTH = 100
PARITY_TOL = 1e-9
TARGET_SLACK = 0.01
# Published nDCG@10 on the BEIR test split (low, high): the BEIR paper, Pyserini's regression and MTEB.
PUBLISHED: dict[str, dict[str, tuple[float, float, str]]] = {
    "scifact": {
        "bm25": (0.665, 0.679, "BM25 Anserini multifield 0.665 (BEIR paper) / flat 0.679 (Pyserini)"),
        "dense": (0.645, 0.645, "all-MiniLM-L6-v2, MTEB SciFact"),
    }
}

# Term statistics of Pyserini's prebuilt Lucene flat index (lucene-index.beir-v1.0.0-<name>-flat, Porter,
# Lucene stop words): how closely --bm25-protocol anserini's tokenizer reproduces Anserini's analyzer.
PYSERINI_FLAT_TERMS: dict[str, dict[str, int]] = {"scifact": {"total": 838_128, "unique": 28_865}}
# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (what Anserini's default analyzer removes).
LUCENE_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)
# An approximation of Lucene's StandardTokenizer (UAX#29 words): letters/digits/underscores, joined across
# an apostrophe or a full stop ("e.g", "don't", "3.5") and across a comma between digits ("1,000").
_LUCENE_WORD = re.compile(r"\w+(?:[.'\u2019]\w+|(?<=\d),\d+)*")


def lucene_tokenizer(stem: bool) -> Callable[[str], list[str]]:
    stemmer = None
    if stem:
        try:
            import Stemmer
        except ImportError as exc:
            raise UsageError(
                "--bm25-protocol anserini / --bm25-ablation need PyStemmer: pip install PyStemmer"
            ) from exc
        stemmer = Stemmer.Stemmer("porter")  # Lucene's PorterStemFilter is the original Porter algorithm

    def tokenize(text: str) -> list[str]:
        words = [w.replace("\u2019", "'") for w in _LUCENE_WORD.findall(text.lower())]
        words = [w[:-2] if w.endswith("'s") else w for w in words]  # EnglishPossessiveFilter
        words = [w for w in words if w and w not in LUCENE_STOP]
        return list(stemmer.stemWords(words)) if stemmer is not None else words

    return tokenize


class LuceneStyleBM25:
    """BM25 (bm25s, Lucene scoring) with a pluggable tokenizer; otherwise identical to doceval's BM25Retriever
    (per-partition models, chunks scoring 0 dropped, best chunk per document, doc-id tie-break)."""

    score_range = (0.0, math.inf)

    def __init__(
        self, name: str, corpus: Corpus, tokenize: Callable[[str], list[str]], k1: float, b: float
    ) -> None:
        import bm25s

        self.name, self.tokenize = name, tokenize
        self.models: dict[str, tuple[Any, list[str], dict[str, int]]] = {}
        self.terms = {"total": 0, "unique": 0}  # index statistics, comparable with a Lucene index's
        for pin, part in corpus.partitions.items():
            vocab: dict[str, int] = {}
            ids = [[vocab.setdefault(tok, len(vocab)) for tok in tokenize(t)] for t in part.texts]
            self.terms["total"] += sum(map(len, ids))
            self.terms["unique"] += len(vocab)
            model = bm25s.BM25(k1=k1, b=b, method="lucene")
            model.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False)
            self.models[pin] = (model, part.doc_ids, vocab)

    def retrieve(self, question: str, library: str, version: str, k: int) -> Ranked:
        entry = self.models.get(pin_of(library, version))
        if entry is None:
            return []
        model, doc_ids, vocab = entry
        query = [vocab[t] for t in self.tokenize(question) if t in vocab]
        if not query:
            return []
        scores = np.asarray(model.get_scores(query), dtype=np.float64)
        hits = np.flatnonzero(scores > 0)
        return best_per_document(((doc_ids[i], float(scores[i])) for i in hits), k)


@dataclass
class System:
    label: str
    family: str | None  # key into PUBLISHED, or None (no published figure)
    build: Callable[[], Retriever]
    primary: bool = False  # one of --retrievers (counts for --strict-targets); else a diagnostic variant
    results: dict[str, Any] = field(default_factory=dict)


def project_retriever(
    cfg: schema.Retriever, corpus: Corpus, store: VectorStore | None, embedder: CachedEmbedder | None
) -> Callable[[], Retriever]:
    """doceval's own retriever, exactly as the retrieve stage builds it (``make_retriever``)."""
    return lambda: make_retriever(cfg, corpus, store=store, embedder=embedder)


# ------------------------------------------------------------------------------------------------ scoring


def doceval_scores(ranked: Sequence[Ranked], relevant: Sequence[set[str]]) -> dict[str, np.ndarray]:
    matrix = build_matrix(ranked, relevant)
    floors = np.full(matrix.n, -np.inf)
    at10 = retrieval_scores(matrix, floors, 10)
    at100 = retrieval_scores(matrix, floors, DEPTH)
    return {
        "ndcg@10": at10["ndcg"],
        "recall@100": at100["recall"],
        "mrr@10": at10["mrr"],
        "hit@10": at10["hit_rate"],
    }


def trec_run(
    entries: Sequence[GoldenEntry], ranked: Sequence[Ranked], strip: int, top: int | None, raw: bool
) -> dict[str, dict[str, float]]:
    """pytrec_eval run: BEIR doc ids; scores n, n-1, ... (list order) unless ``raw`` (the retriever's scores)."""
    run: dict[str, dict[str, float]] = {}
    for e, lst in zip(entries, ranked, strict=True):
        kept = lst[:top] if top is not None else lst
        if kept:
            n = len(kept)
            run[e.id] = {d[strip:]: (float(s) if raw else float(n - i)) for i, (d, s) in enumerate(kept)}
    return run


def parity(
    entries: Sequence[GoldenEntry],
    ranked: Sequence[Ranked],
    ours: dict[str, np.ndarray],
    qrels: dict[str, dict[str, int]],
    strip: int,
) -> dict[str, Any]:
    """Max |doceval - pytrec_eval| per measure over all queries, on the same ranking; plus tie-break effect."""
    import pytrec_eval

    binary = {q: {d: int(g > 0) for d, g in judged.items()} for q, judged in qrels.items()}
    full = trec_run(entries, ranked, strip, None, raw=False)
    top10 = trec_run(entries, ranked, strip, 10, raw=False)
    measures = {"ndcg_cut.10", "recall.100", "success.10"}
    res_full = pytrec_eval.RelevanceEvaluator(binary, measures).evaluate(full)
    res_rr = pytrec_eval.RelevanceEvaluator(binary, {"recip_rank"}).evaluate(top10)
    pairs = [("ndcg@10", res_full, "ndcg_cut_10"), ("recall@100", res_full, "recall_100")]
    pairs += [("hit@10", res_full, "success_10"), ("mrr@10", res_rr, "recip_rank")]
    diffs: dict[str, float] = {}
    worst: dict[str, str] = {}
    for ours_key, res, trec_key in pairs:
        d = np.array(
            [abs(ours[ours_key][i] - res.get(e.id, {}).get(trec_key, 0.0)) for i, e in enumerate(entries)]
        )
        diffs[trec_key] = float(d.max()) if d.size else 0.0
        worst[trec_key] = entries[int(d.argmax())].id if d.size else ""
    # trec_eval re-sorts by score and breaks ties by document id: how much that alone moves nDCG@10.
    raw = trec_run(entries, ranked, strip, None, raw=True)
    res_raw = pytrec_eval.RelevanceEvaluator(binary, {"ndcg_cut.10"}).evaluate(raw)
    ndcg_raw = float(np.mean([res_raw.get(e.id, {}).get("ndcg_cut_10", 0.0) for e in entries]))
    tied = sum(1 for lst in ranked if any(lst[i][1] == lst[i + 1][1] for i in range(min(len(lst), 11) - 1)))
    graded: float | None = None
    if any(g > 1 for judged in qrels.values() for g in judged.values()):
        res_g = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(full)
        graded = float(np.mean([res_g.get(e.id, {}).get("ndcg_cut_10", 0.0) for e in entries]))
    return {
        "max_abs_diff": diffs,
        "worst_query": worst,
        "ok": all(v <= PARITY_TOL for v in diffs.values()),
        "trec_raw_score_ndcg@10": ndcg_raw,
        "queries_with_ties_in_top10": tied,
        "graded_ndcg@10": graded,
    }


def verdict(family: str | None, dataset: str, ndcg: float, subset: bool) -> dict[str, Any]:
    """The published figure(s), the signed difference to each, and whether nDCG@10 is within the target:
    inside [low, high] or within TARGET_SLACK of it."""
    pub = PUBLISHED.get(dataset, {}).get(family or "")
    if pub is None:
        return {
            "published": None,
            "diff": None,
            "distance": None,
            "target": "no published figure",
            "met": True,
        }
    low, high, source = pub
    figures = [low] if low == high else [low, high]
    distance = ndcg - low if ndcg < low else (ndcg - high if ndcg > high else 0.0)
    met = abs(distance) <= TARGET_SLACK + 1e-12
    target = "n/a (--limit-queries)" if subset else ("ok" if met else "MISSED") + f" (+-{TARGET_SLACK})"
    return {
        "published": figures,
        "source": source,
        "diff": [ndcg - f for f in figures],
        "distance": distance,
        "target": target,
        "met": met or subset,
    }


# ---------------------------------------------------------------------------------------------------- main


def machine() -> str:
    cpus = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    cpu = platform.processor() or platform.machine()
    return f"{platform.platform()} | {cpu} | cpus={cpus} (usable {usable}) | load avg {load} | python {platform.python_version()}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)")
    ap.add_argument("--split", default="test")
    ap.add_argument(
        "--retrievers",
        nargs="+",
        default=["bm25", "dense"],
        choices=[n for n in RETRIEVERS.names() if RETRIEVERS[n].needs_corpus],  # function brings its own
    )
    ap.add_argument(
        "--store",
        choices=[n for n in STORES.names() if store_subdir(n) is not None],
        default="qdrant_edge",
        help="the embedded store the index is built in (hybrid_native needs qdrant_edge)",
    )
    ap.add_argument("--limit-queries", type=int, metavar="N", help="only the first N queries (smoke runs)")
    ap.add_argument(
        "--work",
        type=Path,
        default=Path(__file__).resolve().parent / ".work",
        help="work dir for the imported data, index and embedding cache (default: benchmarks/.work)",
    )
    ap.add_argument(
        "--bm25-protocol",
        choices=["doceval", "anserini"],
        default="doceval",
        help="anserini: also run BM25 with Anserini's BEIR settings (diagnostic)",
    )
    ap.add_argument(
        "--bm25-ablation", action="store_true", help="BM25 variants separating params/tokens/stemming"
    )
    ap.add_argument("--output", type=Path, help="write the results as JSON (default WORK/NAME/results.json)")
    ap.add_argument("--strict-targets", action="store_true", help="exit 3 when a published target is missed")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    ap.add_argument(
        "--precision",
        choices=["fp32", "bf16", "bf16_weights"],
        default="fp32",
        help="the MiniLM encoder's precision",
    )
    args = ap.parse_args(argv)
    if args.limit_queries is not None and args.limit_queries < 1:
        ap.error("--limit-queries must be at least 1")
    try:
        return run(args)
    except UsageError as exc:
        print(f"benchmarks/beir.py: error: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    folder: Path = args.path.resolve()
    dataset = folder.name.lower()
    work: Path = args.work / dataset
    args.work.mkdir(parents=True, exist_ok=True)
    ignore = args.work / ".gitignore"
    if not ignore.exists():
        ignore.write_text(
            "# benchmark work dir (imported data, index, embedding cache): never committed\n*\n"
        )
    print(f"machine: {machine()}")
    print(f"data: {folder} (split {args.split}) -> work {work}")
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    imported = import_beir(folder, args.split, work / "docs", work / "golden.jsonl")
    corpus = load_corpus(work / "docs")
    entries = parse_golden(work / "golden.jsonl", corpus_ids=corpus.doc_ids())
    timings["import_s"] = time.perf_counter() - t0
    subset = args.limit_queries is not None and args.limit_queries < len(entries)
    if args.limit_queries is not None:
        entries = entries[: args.limit_queries]
    pin = imported["pin"]
    strip = len(pin) + 1
    raw_qrels = read_qrels(folder / "qrels" / f"{args.split}.tsv")
    qrels = {e.id: {d: g for d, (g, _) in raw_qrels[e.id].items()} for e in entries}
    relevant = [set(e.relevant_ids) for e in entries]
    print(
        f"import: {imported['documents']} documents ({imported['chunks']} chunks), {len(entries)} queries"
        f"{' (subset)' if subset else ''}, {sum(map(len, relevant))} relevant qrels  [{timings['import_s']:.1f} s]"
    )

    store: VectorStore | None = None
    embedder: CachedEmbedder | None = None
    if any(needs_index(n) for n in args.retrievers):
        from doceval.index.build import build_index
        from doceval.index.embed import make_embedder

        # batch 16 for bf16_weights (less padding, as conf/embedder/minilm_bf16_weights.yaml), 64 otherwise
        batch = 16 if args.precision == "bf16_weights" else 64
        minilm = compose(
            ["embedder=minilm", f"embedder.batch_size={batch}", f"embedder.precision={args.precision}"]
        )
        store_cfg = compose([f"store={args.store}"]).store
        t0 = time.perf_counter()
        embedder = make_embedder(minilm.embedder, args.work / "cache" / "embeddings.sqlite")
        timings["model_load_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        manifest = build_index(corpus, embedder, store_cfg, work / "index", progress=not args.quiet)
        timings["index_s"] = time.perf_counter() - t0
        timings["index_embed_s"] = manifest["timings"]["embed_s"]
        timings["index_upsert_s"] = manifest["timings"]["upsert_s"]
        cache = manifest["embedding_cache"]
        print(
            f"index: {manifest['chunks']} chunks, {manifest['model']}, embedding cache hits {cache['hits']} / "
            f"misses {cache['misses']}  [model load {timings['model_load_s']:.1f} s, embed "
            f"{timings['index_embed_s']:.1f} s, upsert {timings['index_upsert_s']:.1f} s]"
        )
        store = VectorStore(
            store_cfg,
            path=work / "index" / store_subdir(args.store),
            expect=manifest["partitions"],
        )

    systems: list[System] = []
    for name in args.retrievers:
        family = name if name in ("bm25", "dense") else None
        cfg = compose([f"retriever={name}"]).retriever  # conf/'s parameters, as the retrieve stage's
        systems.append(
            System(
                name,
                family,
                project_retriever(cfg, corpus, store, embedder),
                True,
            )
        )
    if args.bm25_ablation:
        systems.append(
            System(
                "bm25 doceval-tokens k1=0.9 b=0.4",
                "bm25",
                # composed here, not in the timed build
                project_retriever(
                    compose(["retriever=bm25", "retriever.k1=0.9", "retriever.b=0.4"]).retriever,
                    corpus,
                    None,
                    None,
                ),
            )
        )
        systems.append(
            System(
                "bm25 lucene-tokens k1=0.9 b=0.4 (no stem)",
                "bm25",
                lambda: LuceneStyleBM25("bm25-lucene", corpus, lucene_tokenizer(False), 0.9, 0.4),
            )
        )
        systems.append(
            System(
                "bm25 lucene-tokens+porter k1=1.5 b=0.75",
                "bm25",
                lambda: LuceneStyleBM25("bm25-porter", corpus, lucene_tokenizer(True), 1.5, 0.75),
            )
        )
    if args.bm25_protocol == "anserini" or args.bm25_ablation:
        systems.append(
            System(
                "bm25 anserini protocol (k1=0.9 b=0.4 porter)",
                "bm25",
                lambda: LuceneStyleBM25("bm25-anserini", corpus, lucene_tokenizer(True), 0.9, 0.4),
            )
        )

    parity_ok = targets_ok = True
    try:
        for system in systems:
            t0 = time.perf_counter()
            retriever = system.build()
            build_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            cands = retrieve_all(entries, retriever, corpus, DEPTH, progress=not args.quiet)
            by_id, routed = cands.ranked, cands.routed
            retrieve_s = time.perf_counter() - t0
            refused = [q for q, reason in routed.items() if reason]
            if refused:
                raise RuntimeError(
                    f"router refused {len(refused)} BEIR queries, e.g. {refused[0]}: {routed[refused[0]]}"
                )
            ranked = [by_id[e.id] for e in entries]
            ours = doceval_scores(ranked, relevant)
            means = {k: mean_or_none(v) for k, v in ours.items()}
            check = parity(entries, ranked, ours, qrels, strip)
            ndcg = float(means["ndcg@10"] or 0.0)
            # Published figures are for the BEIR test split only.
            versus = verdict(system.family, dataset if args.split == "test" else "", ndcg, subset)
            parity_ok &= bool(check["ok"])
            targets_ok &= versus["met"] or not system.primary
            system.results = {
                "metrics": means,
                "published": versus,
                "parity": check,
                "timings": {
                    "build_s": build_s,
                    "retrieve_s": retrieve_s,
                    "per_query_ms": 1000 * retrieve_s / len(entries),
                },
                "empty_rankings": sum(1 for r in ranked if not r),
                "index_terms": getattr(retriever, "terms", None),
            }
    finally:
        if store is not None:
            store.close()

    print()
    head = f"{'system':<46}{'nDCG@10':>8}{'R@100':>8}{'MRR@10':>8}{'hit@10':>8}  {'published':<12}{'diff':>16}  target"
    print(head)
    print("-" * len(head))
    for s in systems:
        r = s.results
        m = r["metrics"]
        v = r["published"]
        pub_text = "-" if v["published"] is None else "/".join(f"{f:.3f}" for f in v["published"])
        diff_text = "" if v["diff"] is None else "/".join(f"{d:+.4f}" for d in v["diff"])
        print(
            f"{s.label:<46}{m['ndcg@10']:>8.4f}{m['recall@100']:>8.4f}{m['mrr@10']:>8.4f}{m['hit@10']:>8.4f}  "
            f"{pub_text:<12}{diff_text:>16}  {v['target']}"
        )
    for fam, pub in PUBLISHED.get(dataset, {}).items():
        print(f"published {fam}: {pub[2]}")
    print("(diff: nDCG@10 minus each published figure; target: within the published range or +-0.01 of it)")
    print()
    print(f"parity with pytrec_eval ({len(entries)} queries, per query; tolerance {PARITY_TOL:g}):")
    for s in systems:
        p = s.results["parity"]
        diffs = "  ".join(f"{k} {v:.1e}" for k, v in p["max_abs_diff"].items())
        print(f"  {s.label:<46}{'PASS' if p['ok'] else 'FAIL'}  max |diff|: {diffs}")
        extra = (
            f"    trec_eval re-sorting the raw scores (ties by doc id): nDCG@10 {p['trec_raw_score_ndcg@10']:.4f} "
            f"({p['queries_with_ties_in_top10']} of {len(entries)} queries have tied scores in their top 11)"
        )
        if p["graded_ndcg@10"] is not None:
            extra += f"; graded-gain nDCG@10 {p['graded_ndcg@10']:.4f} (doceval's nDCG is binary-gain)"
        print(extra)
    reference = PYSERINI_FLAT_TERMS.get(dataset)
    for s in systems:
        terms = s.results["index_terms"]
        if terms and reference and s.label.startswith("bm25 anserini"):
            print(
                f"  {s.label}: index terms total {terms['total']:,} / unique {terms['unique']:,} vs Pyserini's "
                f"flat index {reference['total']:,} / {reference['unique']:,} "
                f"({100 * (terms['total'] / reference['total'] - 1):+.2f}% / "
                f"{100 * (terms['unique'] / reference['unique'] - 1):+.2f}%)"
            )
    print()
    print("timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    for s in systems:
        t = s.results["timings"]
        print(
            f"  {s.label:<46}build {t['build_s']:.1f}  retrieve {t['retrieve_s']:.1f} ({t['per_query_ms']:.1f} ms/query)"
        )

    output = args.output or work / "results.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        json.dumps(
            {
                "dataset": dataset,
                "split": args.split,
                "queries": len(entries),
                "subset": subset,
                "machine": machine(),
                "import": imported,
                "timings": timings,
                "systems": {s.label: s.results for s in systems},
            },
            indent=2,
        )
        + "\n"
    )
    print(f"results: {output}")
    if not parity_ok:
        print("PARITY FAILED: doceval's metrics disagree with pytrec_eval on the same runs", file=sys.stderr)
        return 1
    if args.strict_targets and not targets_ok:
        print("a published target was missed (--strict-targets)", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
