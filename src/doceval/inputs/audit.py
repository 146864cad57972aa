"""The label audit of a golden set (data/golden/README.md, "Auditing a golden set"): a seeded stratified sample
to check by hand, and the measured label error rate with its Wilson interval.

A row's verdict: ``OK`` (the labels hold), ``MINOR`` (imperfect, but no score changes: a clumsy reference answer,
a loose reason) or ``WRONG`` (a label that changes a score: a missing document that answers as well, a wrong
scope, a version string that rejects a correct answer or accepts a wrong one).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from doceval.common.io import scan_jsonl
from doceval.errors import UsageError
from doceval.inputs.golden import GoldenEntry

VERDICTS = ("OK", "MINOR", "WRONG")


def stratum(e: GoldenEntry) -> str:
    return f"{'out' if e.out_of_scope else 'in'}:{e.kind}"


def audit_sample(entries: Sequence[GoldenEntry], n: int, seed: int = 0) -> list[GoldenEntry]:
    """``n`` entries, allocated to the (scope, kind) strata in proportion to their size (largest remainder, at
    least one per stratum when n allows), drawn per stratum with ``random.Random(f"{seed}:{stratum}")``."""
    if not 0 < n <= len(entries):
        raise UsageError(f"--sample {n}: must be between 1 and the {len(entries)} entries of the golden set")
    groups: dict[str, list[GoldenEntry]] = {}
    for e in entries:
        groups.setdefault(stratum(e), []).append(e)
    names = sorted(groups)
    exact = {s: n * len(groups[s]) / len(entries) for s in names}
    take = {s: min(len(groups[s]), max(1 if n >= len(names) else 0, int(exact[s]))) for s in names}
    by_remainder = sorted(names, key=lambda s: (exact[s] - int(exact[s]), s), reverse=True)
    while sum(take.values()) < n:
        grew = False
        for s in by_remainder:
            if sum(take.values()) < n and take[s] < len(groups[s]):
                take[s] += 1
                grew = True
        if not grew:
            break
    while sum(take.values()) > n:  # the minimum of one per stratum overshot: trim the largest
        biggest = max(names, key=lambda s: (take[s], s))
        take[biggest] -= 1
    picked: list[GoldenEntry] = []
    for s in names:
        rows = sorted(groups[s], key=lambda e: e.id)
        random.Random(f"{seed}:{s}").shuffle(rows)
        picked += rows[: take[s]]
    return sorted(picked, key=lambda e: e.line)


def worksheet_rows(sample: Sequence[GoldenEntry]) -> list[dict[str, Any]]:
    """The rows an auditor fills in: the labels to check, and ``verdict`` / ``reason`` left empty."""
    return [
        {"id": e.id, "stratum": stratum(e), "pin": e.pin, "question": e.question,
         "out_of_scope": e.out_of_scope, "relevant_ids": list(e.relevant_ids),
         "grades": e.grades if not e.out_of_scope else {}, "reference_answer": e.reference_answer,
         "expected_apis": list(e.expected_apis), "expected_any": [list(g) for g in e.expected_any],
         "forbidden_apis": list(e.forbidden_apis), "verdict": None, "reason": None}
        for e in sample
    ]  # fmt: skip


def read_verdicts(path: Path, ids: Sequence[str], *, unfilled: bool = False) -> list[dict[str, Any]]:
    """The filled worksheet; every row needs a verdict (and a reason unless OK), every id must be in ``ids``.
    ``unfilled``: a row whose verdict is still null is kept as it is (a review in progress: not accepted)."""
    if not path.is_file():
        raise UsageError(f"{path}: no verdicts file there; pass the filled worksheet (JSONL) with --verdicts")
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    known = set(ids)
    for lineno, rec, problem in scan_jsonl(path):
        if problem is not None:
            problems.append(f"{path}:{lineno}: (json): {problem}")
            continue
        if rec.get("id") not in known:
            problems.append(f"{path}:{lineno}: id: {rec.get('id')!r} is not an entry of the golden set")
        if unfilled and rec.get("verdict") is None and isinstance(rec.get("id"), str):
            rows.append(rec)
            continue
        if rec.get("verdict") not in VERDICTS:
            problems.append(
                f"{path}:{lineno}: verdict: {rec.get('verdict')!r}; use one of {', '.join(VERDICTS)}"
            )
        elif rec["verdict"] != "OK" and not str(rec.get("reason") or "").strip():
            problems.append(f"{path}:{lineno}: reason: a {rec['verdict']} verdict needs its reason")
        rows.append(rec)
    if problems:
        raise UsageError("\n".join([f"audit verdicts have {len(problems)} problem(s):", *problems]))
    if not rows:
        raise UsageError(f"{path}: no verdicts")
    return rows
