"""A labelled judge set (``data/judge/v1.jsonl``, docs/design.md section 3.5): candidate answers to golden
questions with the team's verdict, against which a judge's agreement is measured.

One JSON object per line::

    {"id": "j001", "entry_id": "pyd2-004", "category": "correct", "candidate": "...",
     "verdict": "correct" | "incorrect", "reason": "one line", "split": "calibration" | "test",
     "labelled_by": "who and how"}

The question, pin and reference answer come from the golden entry ``entry_id`` names (so they cannot drift
from the golden set); extra keys (a copy of the question for reading) are ignored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from doceval.common.io import scan_jsonl
from doceval.errors import UsageError
from doceval.inputs.golden import GoldenEntry

# paraphrased_correct (data/judge/v2.jsonl): right for the pin, worded and coded unlike the reference.
# concise_correct / alternative_correct (data/judge/v3, written without reading the reference): only what is
# needed; or an equally valid API the pin documents that the reference may not name.
CATEGORIES = (
    "correct",
    "verbose_correct",
    "paraphrased_correct",
    "other_version",
    "partial",
    "invented_api",
    "refusal",
    "concise_correct",
    "alternative_correct",
)
VERDICTS = ("correct", "incorrect")
SPLITS = ("calibration", "test")
REQUIRED = ("id", "entry_id", "category", "candidate", "verdict", "reason", "split", "labelled_by")


@dataclass(frozen=True)
class LabelledAnswer:
    id: str
    entry: GoldenEntry
    category: str
    candidate: str
    correct: bool  # the team's verdict
    reason: str
    split: str
    labelled_by: str
    line: int


def labels_md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def read_labels(path: Path, golden: Mapping[str, GoldenEntry]) -> list[LabelledAnswer]:
    """Every row, checked: all problems are listed together (``file:line: field: message``), exit 2."""
    if not path.is_file():
        raise UsageError(f"{path}: no such label file (the shipped one is data/judge/v1.jsonl)")
    rows: list[LabelledAnswer] = []
    problems: list[str] = []
    seen: set[str] = set()
    for lineno, rec, problem in scan_jsonl(path):
        where = f"{path}:{lineno}"
        if problem is not None:
            problems.append(f"{where}: (json): {problem}")
            continue
        if not isinstance(rec, dict):
            problems.append(f"{where}: (json): a row must be an object")
            continue
        found = _row_problems(rec, where, golden, seen)
        problems += found
        if found:
            continue
        seen.add(rec["id"])
        rows.append(
            LabelledAnswer(
                rec["id"],
                golden[rec["entry_id"]],
                rec["category"],
                rec["candidate"],
                rec["verdict"] == "correct",
                rec["reason"],
                rec["split"],
                rec["labelled_by"],
                lineno,
            )
        )
    if problems:
        shown = problems[:50] + ([f"... and {len(problems) - 50} more"] if len(problems) > 50 else [])
        raise UsageError("\n".join([f"{path}: {len(problems)} problem(s) in the label file:", *shown]))
    if not rows:
        raise UsageError(f"{path}: no labelled rows")
    return rows


def _row_problems(
    rec: dict[str, Any], where: str, golden: Mapping[str, GoldenEntry], seen: set[str]
) -> list[str]:
    out = [f"{where}: {k}: missing (every row needs {', '.join(REQUIRED)})" for k in REQUIRED if k not in rec]
    if out:
        return out
    for key in REQUIRED:
        if not isinstance(rec[key], str) or not rec[key].strip():
            out.append(f"{where}: {key}: must be a non-empty string")
    if out:
        return out
    if rec["id"] in seen:
        out.append(f"{where}: id: {rec['id']!r} appears twice; give every row its own id")
    if rec["verdict"] not in VERDICTS:
        out.append(f"{where}: verdict: {rec['verdict']!r}; use correct or incorrect")
    if rec["category"] not in CATEGORIES:
        out.append(f"{where}: category: {rec['category']!r}; use one of {', '.join(CATEGORIES)}")
    if rec["split"] not in SPLITS:
        out.append(f"{where}: split: {rec['split']!r}; use calibration or test")
    entry = golden.get(rec["entry_id"])
    if entry is None:
        out.append(f"{where}: entry_id: {rec['entry_id']!r} is not an entry of the golden set")
    elif entry.out_of_scope:
        out.append(
            f"{where}: entry_id: {rec['entry_id']!r} is out of scope: its answers are refusals, not judged"
        )
    return out


def select(rows: Sequence[LabelledAnswer], split: str | None) -> list[LabelledAnswer]:
    """The rows of one split (None: all)."""
    if split is not None and split not in SPLITS:
        raise UsageError(f"--split {split}: use calibration, test or all")
    return [r for r in rows if split is None or r.split == split]


@dataclass(frozen=True)
class LabelSet:
    """The rows of one or more label files, one split: ``files`` maps each file to its rows' indexes; with
    several files a row id is prefixed with its file (``data/judge/v2.jsonl:j001``), as ids repeat across
    versions."""

    rows: list[LabelledAnswer]
    files: dict[str, list[int]]
    info: dict[str, Any]


def read_label_files(paths: Sequence[Path], golden: Mapping[str, GoldenEntry], split: str) -> LabelSet:
    """Every file's rows of ``split`` (``all``: both halves), checked as :func:`read_labels` does; a file with
    no row in the split, or no file at all, is a UsageError naming it."""
    if not paths:
        raise UsageError(
            "judge_validation.labels: no label file; name one or more, e.g. [data/judge/v1.jsonl]"
        )
    rows: list[LabelledAnswer] = []
    files: dict[str, list[int]] = {}
    several = len(paths) > 1
    for path in paths:
        own = select(read_labels(path, golden), None if split == "all" else split)
        if not own:
            raise UsageError(f"{path}: no labelled rows in split {split!r}")
        if str(path) in files:
            raise UsageError(f"{path}: named twice among the label files; name each once")
        files[str(path)] = list(range(len(rows), len(rows) + len(own)))
        rows += [replace(r, id=f"{path}:{r.id}") if several else r for r in own]
    md5s = [labels_md5(p) for p in paths]
    combined = md5s[0] if not several else hashlib.md5("".join(md5s).encode()).hexdigest()
    info = {
        "path": ", ".join(str(p) for p in paths),
        "paths": [str(p) for p in paths],
        "md5": combined,
        "md5s": md5s,
        "split": split,
    }
    return LabelSet(rows, files, info)
