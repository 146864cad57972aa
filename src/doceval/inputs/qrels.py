"""Graded relevance judgments beside a golden set (docs/design.md section 3.4).

``NAME.qrels.jsonl`` next to ``NAME.jsonl`` holds every judged (entry, document) pair, relevant or not, as TREC
builds its qrels from pooled runs: ``{"id", "doc_id", "grade", "judged_by", "reason"}`` with grade 2 = answers
the question for this version, 1 = partially or indirectly, 0 = judged not relevant. When the file exists it is
authoritative: an entry's ``relevant_ids`` must be exactly its grade-2 documents, and the labels' md5 covers
both files, so a regraded document changes the md5 every summary records.

``NAME.pool.json`` beside them may say which systems the judgments were pooled from (``{"systems": [...],
"depth": K, "how": "..."}``): not a label (it is outside the md5), what ``judged_share`` is read against.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doceval.common.io import scan_jsonl
from doceval.errors import UsageError

QRELS_SUFFIX = ".qrels.jsonl"
POOL_SUFFIX = ".pool.json"
POOL_KEYS = ("systems", "depth", "how")
GRADES = (0, 1, 2)
ANSWERS = 2  # the grade whose documents are an entry's relevant_ids
# The grading rules (doceval.inputs.grading) a judgment's optional "checked" list may name: the assessor re-read
# the pair under that rule and keeps its grade, for the reason the line gives.
GRADING_RULES = ("grading_candidate", "inconsistent_grade")


def qrels_path(golden_path: Path) -> Path:
    return golden_path.with_name(golden_path.stem + QRELS_SUFFIX)


def pool_path(golden_path: Path) -> Path:
    return golden_path.with_name(golden_path.stem + POOL_SUFFIX)


def read_pool(golden_path: Path) -> dict[str, Any] | None:
    """The pool record beside the golden set (None: it has none): ``systems`` (the names of the systems whose
    retrieved documents were judged, as runs name them: ``dense``, ``agent:URL``), ``depth`` (how many of each
    system's top documents) and ``how`` (free text: other passes). UsageError naming the file and field."""
    path = pool_path(golden_path)
    if not path.is_file():
        return None
    fix = 'write it as {"systems": ["bm25", "dense"], "depth": 5, "how": "..."} (docs/design.md 3.4)'
    try:
        record = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable JSON object ({exc}); {fix}") from None
    if not isinstance(record, dict):
        raise UsageError(f"{path}: must be a JSON object; {fix}")
    unknown = sorted(set(record) - set(POOL_KEYS))
    systems, depth, how = record.get("systems"), record.get("depth"), record.get("how", "")
    if unknown:
        raise UsageError(f"{path}: unknown field(s) {', '.join(map(repr, unknown))}; {fix}")
    if not (isinstance(systems, list) and systems and all(isinstance(x, str) and x.strip() for x in systems)):
        raise UsageError(f"{path}: systems: must be a non-empty list of system names; {fix}")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise UsageError(f"{path}: depth: {depth!r} is not a positive number of documents; {fix}")
    if not isinstance(how, str):
        raise UsageError(f"{path}: how: must be text; {fix}")
    return {"systems": list(systems), "depth": depth, "how": how}


def labels_md5(golden_path: Path) -> str:
    """md5 of the golden set, and of its qrels file when it has one (the judgments are labels too). A golden
    set without qrels keeps the md5 of its file, so v1's anchor in the headline history does not move."""
    h = hashlib.md5()
    h.update(golden_path.read_bytes())
    qrels = qrels_path(golden_path)
    if qrels.is_file():
        h.update(b"\0qrels\0")
        h.update(qrels.read_bytes())
    return h.hexdigest()


@dataclass(frozen=True)
class Judgment:
    entry_id: str
    doc_id: str
    grade: int
    judged_by: str
    reason: str
    line: int
    checked: tuple[str, ...] = ()  # grading rules this judgment was re-read under (GRADING_RULES)


def read_qrels(path: Path) -> tuple[list[Judgment], list[tuple[int, str, str]]]:
    """The judgments, and the problems ``(line, field, message)`` of lines that could not be read."""
    judgments: list[Judgment] = []
    problems: list[tuple[int, str, str]] = []
    seen: dict[tuple[str, str], int] = {}
    for lineno, rec, problem in scan_jsonl(path):
        if problem is not None:
            problems.append((lineno, "(json)", problem))
            continue
        if not isinstance(rec, dict):
            problems.append((lineno, "(entry)", "each line must be a JSON object"))
            continue
        bad = False
        for name in ("id", "doc_id", "judged_by"):
            if not isinstance(rec.get(name), str) or not rec[name].strip():
                problems.append((lineno, name, "missing or empty; add a non-empty string"))
                bad = True
        grade = rec.get("grade")
        if isinstance(grade, bool) or grade not in GRADES:
            problems.append((lineno, "grade", f"{grade!r} is not a grade; use 0, 1 or 2"))
            bad = True
        checked = rec.get("checked", [])
        if not isinstance(checked, list) or not all(c in GRADING_RULES for c in checked):
            problems.append(
                (
                    lineno,
                    "checked",
                    f"{checked!r}: must be a list of grading rules ({', '.join(GRADING_RULES)})",
                )
            )
            bad = True
        if bad:
            continue
        key = (rec["id"], rec["doc_id"])
        if key in seen:
            problems.append(
                (lineno, "doc_id", f"{key[1]!r} judged twice for {key[0]} (first on line {seen[key]})")
            )
            continue
        seen[key] = lineno
        judgments.append(
            Judgment(
                rec["id"],
                rec["doc_id"],
                int(rec["grade"]),
                rec["judged_by"],
                str(rec.get("reason", "")),
                lineno,
                tuple(checked),
            )
        )
    return judgments, problems


def grades_by_entry(judgments: Sequence[Judgment]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for j in judgments:
        out.setdefault(j.entry_id, {})[j.doc_id] = j.grade
    return out


def checked_pairs(golden_path: Path) -> dict[tuple[str, str], tuple[str, ...]]:
    """``(entry id, doc id) -> the grading rules its judgment was re-read under`` (only pairs with some), from
    the qrels beside the golden set (empty: none). Call after the golden set has loaded (it checks the file)."""
    path = qrels_path(golden_path)
    if not path.is_file():
        return {}
    judgments, _ = read_qrels(path)
    return {(j.entry_id, j.doc_id): j.checked for j in judgments if j.checked}


def check_against_entries(
    judgments: Sequence[Judgment],
    entries: Mapping[str, Any],
    golden_path: Path,
    doc_ids: Collection[str] | None = None,
    ids_source: str = "the built corpus",
) -> list[tuple[int, str, str]]:
    """Problems ``(line, field, message)`` between the qrels and the golden entries (``id -> GoldenEntry``):
    judgments of unknown entries, of another pin's documents or (``doc_ids`` given: the ids a validation
    checks against) of documents that do not exist, and entries whose ``relevant_ids`` are not exactly their
    grade-2 documents (the qrels are authoritative)."""
    problems: list[tuple[int, str, str]] = []
    grades = grades_by_entry(judgments)
    conversations = {getattr(e, "conversation", None) for e in entries.values()}
    for j in judgments:
        e = entries.get(j.entry_id)
        if e is None and j.entry_id in conversations:
            problems.append(
                (
                    j.line,
                    "id",
                    f"{j.entry_id!r} is a conversation: judge each turn, by its id ({j.entry_id}#1, ...)",
                )
            )
        elif e is None:
            problems.append((j.line, "id", f"{j.entry_id!r} is not an entry of the golden set"))
        elif not j.doc_id.startswith(f"{e.pin}:") and e.library != "docs":
            problems.append((j.line, "doc_id", f"{j.doc_id!r} is not a document of {e.pin}"))
        elif e.out_of_scope and j.grade > 0:
            problems.append((j.line, "grade", f"{j.entry_id} is out of scope: no document can answer it"))
        elif doc_ids is not None and j.doc_id not in doc_ids:
            problems.append(
                (j.line, "doc_id", f"{j.doc_id!r} is not in {ids_source}; fix the id or drop the line")
            )
    for eid, e in entries.items():
        answers = {d for d, g in grades.get(eid, {}).items() if g >= ANSWERS}
        if set(e.relevant_ids) != answers:
            problems.append(
                (
                    0,
                    "relevant_ids",
                    f"{golden_path}:{e.line}: entry {eid}: relevant_ids must be exactly its grade-2 documents in the qrels "
                    f"(missing: {sorted(answers - set(e.relevant_ids)) or '-'}, not graded 2: "
                    f"{sorted(set(e.relevant_ids) - answers) or '-'}); the qrels file is authoritative",
                )
            )
    return problems


def load_grades(
    golden_path: Path,
    entries: Mapping[str, Any],
    doc_ids: Collection[str] | None = None,
    ids_source: str | None = None,
) -> dict[str, dict[str, int]] | None:
    """Per-entry grades from the qrels beside the golden set (None: it has none); UsageError naming the
    qrels file's line and field for every problem (``doc_ids``: every judged document must be one of them)."""
    path = qrels_path(golden_path)
    if not path.is_file():
        return None
    judgments, problems = read_qrels(path)
    problems += check_against_entries(
        judgments, entries, golden_path, doc_ids, ids_source or "the built corpus"
    )
    if problems:
        lines = [
            f"  {path}:{line}: {field}: {message}" if line else f"  {message}"
            for line, field, message in problems
        ]
        raise UsageError("\n".join([f"qrels has {len(problems)} problem(s):", *lines]))
    return grades_by_entry(judgments)


def unjudged(
    entries: Sequence[Any], runs: Sequence[Mapping[str, Any]], k: int | None = None
) -> list[dict[str, Any]]:
    """The (entry, document) pairs that runs retrieved in their top ``k`` (default: all of R) and the golden
    set has not judged: the pool a new system adds, as rows to grade (``grade`` null) and append to the qrels."""
    by_id = {e.id: e for e in entries}
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for run_index, run in enumerate(runs):
        for r in run.get("entries") or []:
            e = by_id.get(r.get("id"))
            if e is None or e.out_of_scope:
                continue
            retrieved = [d for d, *_ in (r.get("retrieved") or [])]
            for doc_id in retrieved[:k] if k else retrieved:
                key = (e.id, str(doc_id))
                if doc_id in e.grades or key in rows:
                    continue
                rows[key] = {
                    "id": e.id,
                    "doc_id": doc_id,
                    "pin": e.pin,
                    "question": e.question,
                    "found_by_run": run_index + 1,
                    "grade": None,
                    "judged_by": None,
                    "reason": None,
                }
    return list(rows.values())
