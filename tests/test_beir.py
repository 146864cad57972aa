"""BEIR import: a hand-made BEIR folder -> doceval corpus + golden set -> the normal retrieval/metrics path.

No model is loaded: BM25 and overlap only. Fixture: tests/fixtures/beir_tiny (see its README.md).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from doceval.cli import main as cli_main
from doceval.config.compose import compose
from doceval.errors import UsageError
from doceval.harness.candidates import retrieve_all
from doceval.inputs.beir import NO_REFERENCE, import_beir, read_qrels
from doceval.inputs.corpus import load_corpus
from doceval.inputs.golden import parse_golden, select_split
from doceval.scoring.metrics import build_matrix
from doceval.scoring.registry import retrieval_scores
from doceval.system.retrievers import make_retriever

ROOT = Path(__file__).resolve().parents[1]


def _materialise_tiny() -> Path:
    """The fixture is stored with `.in` suffixes (so no file named like a BEIR download is committed) and laid
    out here as a real BEIR folder named beir_tiny."""
    source = ROOT / "tests" / "fixtures" / "beir_tiny"
    target = Path(tempfile.mkdtemp(prefix="doceval-beir-")) / "beir_tiny"
    for path in source.rglob("*.in"):
        dest = target / path.relative_to(source).with_suffix("")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, dest)
    return target


TINY = _materialise_tiny()
Main = Callable[[Sequence[str] | None], int]
PIN = "beir-beir-tiny@1"  # default library: beir-<folder name>, normalised like a PyPI name


def doc(beir_id: str) -> str:
    return f"{PIN}:{beir_id}"


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, Path]:
    out = tmp_path_factory.mktemp("beir")
    result = import_beir(TINY, "test", out / "docs", out / "golden.jsonl")
    return result, out / "docs", out / "golden.jsonl"


@pytest.fixture
def tiny_copy(tmp_path: Path) -> Path:
    target = tmp_path / "beir_tiny"
    shutil.copytree(TINY, target)
    return target


@pytest.fixture
def main() -> Main:
    """doceval's CLI entry point (the beir subcommand is registered by doceval.cli.main)."""
    return cli_main


# ------------------------------------------------------------------------------------------------ import


def test_import_counts_and_corpus_layout(imported: tuple[dict, Path, Path]) -> None:
    result, docs, _ = imported
    assert result["pin"] == PIN
    assert result["documents"] == 5 and result["chunks"] == 5 and result["multi_chunk_documents"] == 0
    assert result["entries"] == 2  # q1, q2; q3 has no qrels
    assert result["queries_without_qrels"] == 1
    assert result["qrels"] == 3 and result["qrels_relevant"] == 2  # the relevance-0 line is not relevant
    assert sorted(p.name for p in docs.iterdir()) == ["corpus.jsonl", "manifest.json"]

    corpus = load_corpus(docs)
    assert corpus.pins == [PIN]
    assert corpus.doc_ids() == {doc(f"d{i}") for i in range(1, 6)}
    part = corpus.partitions[PIN]
    assert part.chunk_ids == [f"{d}#0" for d in part.doc_ids]  # one chunk per BEIR document
    text = dict(zip(part.doc_ids, part.texts, strict=True))
    assert text[doc("d1")] == (
        "Vitamin D and bone density\n\nVitamin D supplements increase bone mineral density in elderly women."
    )
    assert text[doc("d5")].startswith("Photovoltaic")  # empty title: the text alone
    manifest = json.loads((docs / "manifest.json").read_text())
    assert manifest["chunk_chars"] == 100_000
    assert manifest["pins"][PIN]["format"] == "beir"
    assert set(manifest["pins"][PIN]["sha256"]) == {"corpus.jsonl", "queries.jsonl", "qrels/test.tsv"}


def test_golden_validates_against_the_corpus(imported: tuple[dict, Path, Path]) -> None:
    _, docs, golden = imported
    entries = parse_golden(golden, corpus_ids=load_corpus(docs).doc_ids())
    assert [e.id for e in entries] == ["q1", "q2"]
    q1, q2 = entries
    assert q1.question == "Does vitamin D increase bone density?"
    assert q1.relevant_ids == (doc("d1"),)  # d2 is judged 0: not relevant
    assert q2.relevant_ids == (doc("d4"),)
    assert q2.extra["beir_relevance"] == {doc("d4"): 2}
    for e in entries:
        assert (e.pin, e.kind, e.split, e.out_of_scope) == (PIN, "beir", "test", False)
        assert e.reference_answer == NO_REFERENCE and e.expected_apis == () and e.forbidden_apis == ()
        assert e.extra["beir_split"] == "test"
    assert select_split(entries, "test") == entries


def test_non_test_split_is_untagged(tiny_copy: Path, tmp_path: Path) -> None:
    shutil.copy(tiny_copy / "qrels" / "test.tsv", tiny_copy / "qrels" / "dev.tsv")
    result = import_beir(tiny_copy, "dev", tmp_path / "d", tmp_path / "g.jsonl", library="Tiny", version="2")
    assert result["pin"] == "tiny@2" and result["golden_split"] is None
    entries = parse_golden(tmp_path / "g.jsonl")
    assert {e.split for e in entries} == {None} and {e.extra["beir_split"] for e in entries} == {"dev"}


# ------------------------------------------------------------------------------ the normal retrieval path


def test_bm25_retrieval_and_metrics_through_the_harness(imported: tuple[dict, Path, Path]) -> None:
    _, docs, golden = imported
    corpus = load_corpus(docs)
    entries = parse_golden(golden, corpus_ids=corpus.doc_ids())
    retriever = make_retriever(compose(["retriever=bm25"]).retriever, corpus)
    cands = retrieve_all(entries, retriever, corpus, depth=100, progress=False)
    ranked, routed = cands.ranked, cands.routed
    assert routed == {"q1": None, "q2": None}
    # q1 shares vitamin/increase/bone/density with d1 and only "bone" with d2; nothing else matches.
    assert [d for d, _ in ranked["q1"]] == [doc("d1"), doc("d2")]
    # q2: d3 has caffeine and sleep, the relevant d4 only sleep.
    assert [d for d, _ in ranked["q2"]] == [doc("d3"), doc("d4")]

    matrix = build_matrix([ranked[e.id] for e in entries], [set(e.relevant_ids) for e in entries])
    per = retrieval_scores(matrix, np.full(len(entries), -np.inf), 10)
    assert per["mrr"].tolist() == [1.0, 0.5]
    assert per["hit_rate"].tolist() == [1.0, 1.0] and per["recall"].tolist() == [1.0, 1.0]
    assert per["ndcg"] == pytest.approx([1.0, 1.0 / math.log2(3)], abs=1e-12)

    overlap = make_retriever(compose(["retriever=overlap"]).retriever, corpus)
    assert overlap.retrieve(entries[1].question, entries[1].library, entries[1].version, 1)[0][0] == doc("d3")


def test_doceval_eval_runs_on_the_imported_set(
    main: Main, imported: tuple[dict, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same `doceval eval` a docs golden set goes through: no special path for benchmarks."""
    _, docs, golden = imported
    monkeypatch.chdir(ROOT)  # conf/ is read relative to the project root
    out = tmp_path / "summary.json"
    argv = ["eval", "--golden", str(golden), "--split", "test", "--no-judge", "--no-track", "--quiet"]
    argv += ["--score-floor", "0", "--output", str(out)]
    argv += ["retriever=bm25", "k=10", f"paths.docs={docs}", f"paths.runs={tmp_path / 'runs'}"]
    assert main(argv) == 0
    summary = json.loads(out.read_text())
    m = summary["metrics"]
    assert m["counts"]["n_in_scope"] == 2 and m["counts"]["n_out_of_scope"] == 0
    assert m["mrr"] == pytest.approx(0.75)
    assert m["ndcg"] == pytest.approx((1.0 + 1.0 / math.log2(3)) / 2)
    assert m["refused_correctly"] is None  # no out-of-scope entries: null, never 0


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("missing", "named"),
    [("corpus.jsonl", "corpus.jsonl"), ("queries.jsonl", "queries.jsonl"), ("qrels", "qrels/test.tsv")],
)
def test_missing_file_names_it_and_the_layout(
    tiny_copy: Path, tmp_path: Path, missing: str, named: str
) -> None:
    target = tiny_copy / missing
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(UsageError) as err:
        import_beir(tiny_copy, "test", tmp_path / "d", tmp_path / "g.jsonl")
    message = str(err.value)
    assert named in message and "not found" in message and "expected the BEIR layout" in message
    assert not (tmp_path / "d").exists() and not (tmp_path / "g.jsonl").exists()


def test_missing_split_lists_the_splits_present(tiny_copy: Path, tmp_path: Path) -> None:
    with pytest.raises(
        UsageError, match=r"qrels/dev\.tsv not found for --split dev \(splits present: test\)"
    ):
        import_beir(tiny_copy, "dev", tmp_path / "d", tmp_path / "g.jsonl")


def test_unknown_ids_in_qrels_give_file_and_line(tiny_copy: Path, tmp_path: Path) -> None:
    with (tiny_copy / "qrels" / "test.tsv").open("a") as fh:
        fh.write("q2\tnope\t1\nq9\td1\t1\n")
    with pytest.raises(UsageError) as err:
        import_beir(tiny_copy, "test", tmp_path / "d", tmp_path / "g.jsonl")
    message = str(err.value)
    qrels = tiny_copy / "qrels" / "test.tsv"
    assert f"{qrels}:5: corpus id 'nope' is not in corpus.jsonl" in message
    assert f"{qrels}:6: query id 'q9' is not in queries.jsonl" in message
    assert "2 problems" in message


@pytest.mark.parametrize(
    ("file", "line", "expected"),
    [
        ("corpus.jsonl", '{"_id": "d6", "title": "x"', "corpus.jsonl:6: not valid JSON"),
        (
            "corpus.jsonl",
            '{"_id": "d1", "text": "again"}',
            "corpus.jsonl:6: duplicate _id 'd1' (first on line 1)",
        ),
        ("corpus.jsonl", '{"title": "no id", "text": "x"}', "corpus.jsonl:6: _id: missing"),
        ("queries.jsonl", '{"_id": "q4"}', "queries.jsonl:4: text: missing"),
        ("qrels/test.tsv", "q1\td3", "test.tsv:5: expected 3 tab-separated columns"),
        ("qrels/test.tsv", "q1\td3\thigh", "test.tsv:5: score 'high' is not an integer relevance grade"),
    ],
)
def test_malformed_lines_give_file_and_line(
    tiny_copy: Path, tmp_path: Path, file: str, line: str, expected: str
) -> None:
    with (tiny_copy / file).open("a") as fh:
        fh.write(line + "\n")
    with pytest.raises(UsageError, match="beir: 1 problem in the input") as err:
        import_beir(tiny_copy, "test", tmp_path / "d", tmp_path / "g.jsonl")
    assert expected in str(err.value)


def test_qrels_reader_accepts_trec_format(tmp_path: Path) -> None:
    path = tmp_path / "trec.txt"
    path.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    assert read_qrels(path) == {"q1": {"d1": (1, 1), "d2": (0, 2)}}


def test_queries_with_only_non_relevant_qrels_are_not_entries(tiny_copy: Path, tmp_path: Path) -> None:
    with (tiny_copy / "qrels" / "test.tsv").open("a") as fh:
        fh.write("q3\td5\t0\n")
    result = import_beir(tiny_copy, "test", tmp_path / "d", tmp_path / "g.jsonl")
    assert result["entries"] == 2 and result["queries_without_positive_qrels"] == 1


# ---------------------------------------------------------------------------------------------------- CLI


def test_cli_import_writes_docs_and_golden(
    main: Main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["beir", "import", str(TINY), "--split", "test", "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "docs" / "corpus.jsonl").is_file()
    assert len(parse_golden(tmp_path / "out" / "golden.jsonl")) == 2
    printed = capsys.readouterr().out
    assert json.loads(printed.splitlines()[0])["entries"] == 2 and "doceval eval --golden" in printed


def test_cli_missing_file_exits_2(
    main: Main, tiny_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tiny_copy / "queries.jsonl").unlink()
    assert main(["beir", "import", str(tiny_copy), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "doceval beir: error:" in err and "queries.jsonl not found" in err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------ benchmarks/beir.py


@functools.lru_cache(maxsize=1)
def _benchmark() -> Any:
    """benchmarks/beir.py as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location("beir_benchmark", ROOT / "benchmarks" / "beir.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module


def test_benchmark_bm25_on_tiny_fixture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The benchmark's own path (import, doceval BM25, doceval metrics, pytrec_eval parity) without a model.
    pytrec_eval is a dependency: a missing one fails here, never skips a parity check."""
    bench = _benchmark()
    argv = [str(TINY), "--retrievers", "bm25", "overlap", "--work", str(tmp_path / "work"), "--quiet"]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "FAIL" not in out
    results = json.loads((tmp_path / "work" / "beir_tiny" / "results.json").read_text())
    bm25 = results["systems"]["bm25"]
    assert bm25["metrics"]["ndcg@10"] == pytest.approx((1.0 + 1.0 / math.log2(3)) / 2)
    assert bm25["metrics"]["mrr@10"] == pytest.approx(0.75)
    assert bm25["parity"]["ok"] and max(bm25["parity"]["max_abs_diff"].values()) <= 1e-9
    assert (tmp_path / "work" / ".gitignore").read_text().strip().endswith("*")


def test_benchmark_missing_file_exits_2(tiny_copy: Path, tmp_path: Path) -> None:
    (tiny_copy / "corpus.jsonl").unlink()
    assert (
        _benchmark().main([str(tiny_copy), "--retrievers", "bm25", "--work", str(tmp_path), "--quiet"]) == 2
    )


def test_lucene_style_tokenizer() -> None:
    # PyStemmer is a dependency (pyproject): a missing one fails here rather than skipping.
    tokenize = _benchmark().lucene_tokenizer(stem=True)
    assert tokenize("The cell's p53 levels rose, e.g. in 1,000 studies") == [
        "cell",
        "p53",
        "level",
        "rose",
        "e.g",
        "1,000",
        "studi",
    ]
    assert _benchmark().lucene_tokenizer(stem=False)("Running the tests") == ["running", "tests"]
