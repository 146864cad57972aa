"""Import BEIR-format data (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) as a doceval corpus and
golden set, so standard IR benchmarks run through the same index, retrievers and metrics as the docs.

Mapping (docs/design.md sections 2-3):

- the whole BEIR corpus is one partition ``LIB@VERSION`` (default ``beir-<folder name>@1``); a BEIR document
  ``_id`` becomes the document id ``LIB@VERSION:<_id>``;
- the document text is ``title + "\\n\\n" + text`` (just ``text`` when the title is empty). The published BEIR
  figures join title and text with one space; both retrievers tokenise on whitespace, so the join is
  immaterial to them;
- ``chunk_chars`` defaults to 100,000 so each BEIR document is a single chunk: BEIR judges whole documents;
- every query with at least one qrel of relevance > 0 in the split becomes one in-scope golden entry
  (``kind: "beir"``), ``relevant_ids`` = those documents. Relevance grades are kept in the entry's extra field
  ``beir_relevance`` (doceval's nDCG is binary-gain). Qrels of relevance <= 0 are judged non-relevant and
  dropped; queries without a positive qrel in the split are not entries at all (BEIR does not score them).
- the golden ``split`` tag is ``test`` for the BEIR ``test`` split and null otherwise (doceval's known splits
  are calibration/test); the BEIR split name is kept in ``beir_split``.

Bad input is a :class:`~doceval.errors.UsageError` (exit 2) naming the file and line.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doceval.common.io import scan_jsonl, sha256_file, write_jsonl_atomic
from doceval.common.paths import check_pin_part
from doceval.errors import UsageError
from doceval.inputs.docs import Document, normalise_name, refuse_other_corpus, write_corpus
from doceval.inputs.golden import parse_golden

DEFAULT_CHUNK_CHARS = 100_000
NO_REFERENCE = "(BEIR: no reference answer)"
KIND = "beir"
LAYOUT = (
    "expected the BEIR layout: FOLDER/corpus.jsonl ({'_id', 'title', 'text'} per line), "
    "FOLDER/queries.jsonl ({'_id', 'text'} per line), FOLDER/qrels/<split>.tsv "
    "(query-id, corpus-id, score; tab-separated, optional header line)"
)
MAX_PROBLEMS = 20  # reported in full; the rest are counted


@dataclass(frozen=True)
class BeirFiles:
    corpus: Path
    queries: Path
    qrels: Path


def locate(folder: Path, split: str) -> BeirFiles:
    """The three files of a BEIR folder for ``split``; a missing one is a UsageError naming it and the layout."""
    if not folder.is_dir():
        raise UsageError(f"beir: {folder} is not a directory; {LAYOUT}")
    files = BeirFiles(folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv")
    for path in (files.corpus, files.queries):
        if not path.is_file():
            raise UsageError(f"beir: {path} not found; {LAYOUT}")
    if not files.qrels.is_file():
        have = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        hint = f" (splits present: {', '.join(have)})" if have else ""
        raise UsageError(f"beir: {files.qrels} not found for --split {split}{hint}; {LAYOUT}")
    return files


class _Problems:
    """Collects file:line problems so one run reports all of them (the first MAX_PROBLEMS in full)."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: Path, line: int, message: str) -> None:
        self.items.append(f"{path}:{line}: {message}")

    def raise_if_any(self) -> None:
        if not self.items:
            return
        n = len(self.items)
        shown = self.items[:MAX_PROBLEMS]
        more = [f"  ... and {n - MAX_PROBLEMS} more"] if n > MAX_PROBLEMS else []
        head = f"beir: {n} problem{'s' if n != 1 else ''} in the input:"
        raise UsageError("\n".join([head, *(f"  {p}" for p in shown), *more]))


def _id_of(rec: dict[str, Any]) -> str | None:
    raw = rec.get("_id")
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        return None
    text = str(raw)
    return text if text.strip() else None


def _records(path: Path, problems: _Problems) -> Iterator[tuple[int, dict[str, Any]]]:
    """JSON objects of a JSONL file with their line numbers; bad lines are recorded, not raised."""
    for lineno, rec, bad in scan_jsonl(path):
        if bad:
            problems.add(path, lineno, bad)
        elif not isinstance(rec, dict):
            problems.add(path, lineno, "each line must be a JSON object")
        else:
            yield lineno, rec


def read_corpus(path: Path, problems: _Problems) -> dict[str, tuple[str, str]]:
    """BEIR corpus: ``_id -> (title, text)``, in file order."""
    docs: dict[str, tuple[str, str]] = {}
    first: dict[str, int] = {}
    for lineno, rec in _records(path, problems):
        doc_id = _id_of(rec)
        if doc_id is None:
            problems.add(path, lineno, "_id: missing or not a non-empty string")
            continue
        title, text = rec.get("title", ""), rec.get("text", "")
        if title is None:
            title = ""
        if not isinstance(title, str) or not isinstance(text, str):
            problems.add(path, lineno, "title and text must be strings")
            continue
        if doc_id in first:
            problems.add(path, lineno, f"duplicate _id {doc_id!r} (first on line {first[doc_id]})")
            continue
        first[doc_id] = lineno
        docs[doc_id] = (title.strip(), text.strip())
    return docs


def read_queries(path: Path, problems: _Problems) -> dict[str, tuple[str, int]]:
    """BEIR queries: ``_id -> (text, line)``, in file order."""
    queries: dict[str, tuple[str, int]] = {}
    for lineno, rec in _records(path, problems):
        qid = _id_of(rec)
        if qid is None:
            problems.add(path, lineno, "_id: missing or not a non-empty string")
            continue
        text = rec.get("text")
        if not isinstance(text, str):
            problems.add(path, lineno, "text: missing or not a string")
            continue
        if qid in queries:
            problems.add(path, lineno, f"duplicate _id {qid!r} (first on line {queries[qid][1]})")
            continue
        queries[qid] = (text.strip(), lineno)
    return queries


def read_qrels(path: Path, problems: _Problems | None = None) -> dict[str, dict[str, tuple[int, int]]]:
    """``query_id -> {doc_id: (relevance, line)}`` from a BEIR qrels TSV.

    Accepts BEIR's three tab-separated columns (``query-id  corpus-id  score``, with or without the header
    line) and TREC's four (``qid  iter  docno  rel``, whitespace-separated). A repeated (query, document) pair
    keeps its last grade, as BEIR's loader does. With ``problems`` None, any problem raises at once.
    """
    own = problems is None
    found = _Problems() if problems is None else problems
    qrels: dict[str, dict[str, tuple[int, int]]] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) == 1:
                parts = line.split()
            parts = [p.strip() for p in parts]
            if len(parts) == 4:
                parts = [parts[0], parts[2], parts[3]]
            if len(parts) != 3 or not parts[0] or not parts[1]:
                found.add(
                    path,
                    lineno,
                    f"expected 3 tab-separated columns (query-id, corpus-id, score), got {len(parts)}",
                )
                continue
            qid, doc_id, score = parts
            try:
                grade = int(score)
            except ValueError:
                try:
                    as_float = float(score)
                except ValueError:
                    if lineno == 1:  # the header line, "query-id  corpus-id  score"
                        continue
                    as_float = math.nan
                if not math.isfinite(as_float) or as_float != int(as_float):
                    found.add(path, lineno, f"score {score!r} is not an integer relevance grade")
                    continue
                grade = int(as_float)
            qrels.setdefault(qid, {})[doc_id] = (grade, lineno)
    if own:
        found.raise_if_any()
    return qrels


def import_beir(
    folder: Path,
    split: str,
    out_docs: Path,
    out_golden: Path,
    library: str | None = None,
    version: str = "1",
    chunk_chars: int = DEFAULT_CHUNK_CHARS,
) -> dict[str, Any]:
    """Convert a BEIR folder into a doceval corpus directory (``out_docs``) and a golden JSONL (``out_golden``).

    ``library`` defaults to ``beir-<folder name>`` (normalised like a PyPI name). Returns counts and the paths.
    Both outputs are written atomically, and only after every input line checked out.
    """
    folder = Path(folder)
    lib = _check_options(folder, split, library, version, chunk_chars)
    pin = f"{lib}@{version}"

    files = locate(folder, split)
    problems = _Problems()
    corpus = read_corpus(files.corpus, problems)
    queries = read_queries(files.queries, problems)
    qrels = read_qrels(files.qrels, problems)
    problems.raise_if_any()
    if not corpus:
        raise UsageError(f"beir: {files.corpus} holds no documents; {LAYOUT}")
    _check_qrel_targets(qrels, queries, corpus, files, problems)
    problems.raise_if_any()

    golden_split = "test" if split == "test" else None
    entries, no_positive = _golden_entries(queries, qrels, lib, version, split, files, problems)
    problems.raise_if_any()
    if not entries:
        raise UsageError(
            f"beir: no query in {files.qrels} has a qrel with relevance > 0, so there is nothing to evaluate"
        )

    documents = [
        Document(
            doc_id=f"{pin}:{doc_id}",
            library=lib,
            version=version,
            path=doc_id,
            kind=KIND,
            text=f"{title}\n\n{text}" if title else text,
        )
        for doc_id, (title, text) in corpus.items()
    ]
    sources = {pin: _source(folder, split, files)}
    refuse_other_corpus(Path(out_docs), sources, replace=True)  # a re-import replaces a corpus, nothing else
    manifest = write_corpus({pin: documents}, Path(out_docs), chunk_chars, sources)
    write_jsonl_atomic(Path(out_golden), entries)
    # The output must pass the same validator every golden set passes (against the corpus just written).
    parse_golden(Path(out_golden), corpus_ids={d.doc_id for d in documents})
    n_qrels = sum(len(j) for j in qrels.values())
    return {
        "pin": pin,
        "library": lib,
        "version": version,
        "split": split,
        "golden_split": golden_split,
        "documents": len(documents),
        "chunks": manifest["chunks"],
        "multi_chunk_documents": manifest["chunks"] - len(documents),
        "entries": len(entries),
        "queries_in_file": len(queries),
        "queries_without_qrels": sum(1 for q in queries if q not in qrels),
        "queries_without_positive_qrels": len(no_positive),
        "qrels": n_qrels,
        "qrels_relevant": sum(len(e["relevant_ids"]) for e in entries),
        "docs": str(out_docs),
        "golden": str(out_golden),
        "corpus_hash": manifest["content_hash"],
    }


def _check_options(folder: Path, split: str, library: str | None, version: str, chunk_chars: int) -> str:
    """The library name to import under (normalised; default ``beir-<folder name>``), once the split name,
    chunk size, library and version are usable; otherwise a UsageError naming the option."""
    if not split or "/" in split or split.startswith("."):
        raise UsageError(f"beir: --split {split!r} is not a split name (e.g. test, dev, train)")
    if chunk_chars < 1:
        raise UsageError(f"beir: chunk_chars={chunk_chars} must be positive")
    lib = normalise_name(
        check_pin_part(library if library else f"beir-{folder.resolve().name}", "beir: --library")
    )
    check_pin_part(version, "beir: --version")
    return lib


def _check_qrel_targets(
    qrels: dict[str, dict[str, tuple[int, int]]],
    queries: dict[str, tuple[str, int]],
    corpus: dict[str, tuple[str, str]],
    files: BeirFiles,
    problems: _Problems,
) -> None:
    """Every qrel must point at a known query and document: a dangling one would silently shrink the
    relevant set (recall and nDCG would be computed against the wrong denominator)."""
    for qid, judged in qrels.items():
        for doc_id, (_, lineno) in judged.items():
            if qid not in queries:
                problems.add(files.qrels, lineno, f"query id {qid!r} is not in {files.queries.name}")
            if doc_id not in corpus:
                problems.add(files.qrels, lineno, f"corpus id {doc_id!r} is not in {files.corpus.name}")


def _golden_entries(
    queries: dict[str, tuple[str, int]],
    qrels: dict[str, dict[str, tuple[int, int]]],
    lib: str,
    version: str,
    split: str,
    files: BeirFiles,
    problems: _Problems,
) -> tuple[list[dict[str, Any]], list[str]]:
    """One in-scope golden entry per query with a qrel of relevance > 0 in the split, and the ids of the
    queries whose qrels are all <= 0 (not entries: BEIR does not score them)."""
    pin = f"{lib}@{version}"
    golden_split = "test" if split == "test" else None
    entries: list[dict[str, Any]] = []
    no_positive: list[str] = []
    for qid, (text, lineno) in queries.items():
        grades = qrels.get(qid)
        if not grades:
            continue
        relevant = {d: g for d, (g, _) in grades.items() if g > 0}
        if not relevant:
            no_positive.append(qid)
            continue
        if not text:
            problems.add(files.queries, lineno, f"query {qid!r} has qrels in {split} but empty text")
            continue
        entries.append(
            {
                "id": qid,
                "question": text,
                "library": lib,
                "version": version,
                "out_of_scope": False,
                "relevant_ids": [f"{pin}:{d}" for d in relevant],
                "reference_answer": NO_REFERENCE,
                "expected_apis": [],
                "forbidden_apis": [],
                "split": golden_split,
                "kind": KIND,
                "beir_split": split,
                "beir_relevance": {f"{pin}:{d}": g for d, g in relevant.items()},
            }
        )
    return entries, no_positive


def _source(folder: Path, split: str, files: BeirFiles) -> dict[str, Any]:
    """Where the partition came from, recorded in the corpus manifest: the folder, the split and the sha256
    of each BEIR file."""
    return {
        "source": str(folder),
        "format": "beir",
        "split": split,
        "sha256": {
            "corpus.jsonl": sha256_file(files.corpus),
            "queries.jsonl": sha256_file(files.queries),
            f"qrels/{split}.tsv": sha256_file(files.qrels),
        },
    }
