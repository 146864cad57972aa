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


def worksheet_rows(
    sample: Sequence[GoldenEntry], everything: Sequence[GoldenEntry] = (), assessor: bool = False
) -> list[dict[str, Any]]:
    """The rows an auditor fills in: the labels to check, and ``verdict`` / ``reason`` left empty. A turn of a
    conversation also shows its conversation as the system saw it (:func:`turn_context`, from ``everything``,
    the whole golden set); ``assessor``: a blank ``assessor`` column too (a two-assessor audit's sheets)."""
    by_conversation: dict[str, list[GoldenEntry]] = {}
    for e in everything:
        if e.conversation is not None:
            by_conversation.setdefault(e.conversation, []).append(e)
    return [
        {
            "id": e.id,
            "stratum": stratum(e),
            "pin": e.pin,
            "question": e.question,
            **(
                turn_context(e, by_conversation.get(e.conversation, [])) if e.conversation is not None else {}
            ),
            "out_of_scope": e.out_of_scope,
            "relevant_ids": list(e.relevant_ids),
            "grades": e.grades if not e.out_of_scope else {},
            "reference_answer": e.reference_answer,
            "expected_apis": list(e.expected_apis),
            "expected_any": [list(g) for g in e.expected_any],
            "forbidden_apis": list(e.forbidden_apis),
            "allow_forbidden": {
                n: e.allow_reasons.get(n, "") for n in e.allow_forbidden
            },  # each with its reason
            "verdict": None,
            "reason": None,
            **({"assessor": None} if assessor else {}),
        }
        for e in sample
    ]


def turn_context(turn: GoldenEntry, conversation: Sequence[GoldenEntry]) -> dict[str, Any]:
    """What an auditor of a turn needs of its conversation: the starting pin every probe carried, whether the
    turn needs an earlier one, its standalone rewrite, and the earlier turns' questions with their labelled pins
    and reference answers (what "that field" or "and in 2.8?" refers to)."""
    earlier = sorted((e for e in conversation if e.turn < turn.turn), key=lambda e: e.turn)
    return {
        "conversation": turn.conversation,
        "turn": turn.turn,
        "start_pin": "@".join(turn.start_pin or (turn.library, turn.version)),
        "needs_memory": turn.needs_memory,
        **({"standalone": turn.extra["standalone"]} if "standalone" in turn.extra else {}),
        "earlier_turns": [
            {"turn": e.turn, "question": e.question, "pin": e.pin, "reference_answer": e.reference_answer}
            for e in earlier
        ],
    }


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
        _check_verdict(rec, f"{path}:{lineno}", problems)
        rows.append(rec)
    if problems:
        raise UsageError("\n".join([f"audit verdicts have {len(problems)} problem(s):", *problems]))
    if not rows:
        raise UsageError(f"{path}: no verdicts")
    return rows


def _check_verdict(rec: dict[str, Any], where: str, problems: list[str]) -> None:
    if rec.get("verdict") not in VERDICTS:
        problems.append(f"{where}: verdict: {rec.get('verdict')!r}; use one of {', '.join(VERDICTS)}")
    elif rec["verdict"] != "OK" and not str(rec.get("reason") or "").strip():
        problems.append(f"{where}: reason: a {rec['verdict']} verdict needs its reason")


def read_assessor_verdicts(path: Path, ids: Sequence[str]) -> tuple[str, list[dict[str, Any]]]:
    """One assessor's filled sheet of a two-assessor audit: every row has a verdict (a reason unless OK) and
    the same non-empty ``assessor``, every id is an entry of the golden set, none twice. (assessor, rows)."""
    rows = read_verdicts(path, ids)
    problems: list[str] = []
    names = {str(r.get("assessor") or "").strip() for r in rows}
    if "" in names or len(names) != 1:
        problems.append(
            f"{path}: assessor: every row names the same assessor (got {sorted(names)}); fill in "
            "`assessor` on each row with who audited it"
        )
    seen: set[str] = set()
    for r in rows:
        if r["id"] in seen:
            problems.append(f"{path}: id: {r['id']!r} twice; one verdict per entry")
        seen.add(r["id"])
    if problems:
        raise UsageError("\n".join([f"audit verdicts have {len(problems)} problem(s):", *problems]))
    return names.pop(), rows


ADJUDICATION_FIELDS = ("id", "verdict", "reason", "adjudicator")


def read_adjudication(path: Path, disagreements: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The adjudicator's verdicts on the entries the two assessors disagreed on: one row per disagreement
    (``id``, ``verdict``, ``reason``, ``adjudicator``), none for an entry they agreed on. id -> row."""
    problems: list[str] = []
    out: dict[str, dict[str, Any]] = {}
    wanted = set(disagreements)
    for lineno, rec, problem in scan_jsonl(path):
        where = f"{path}:{lineno}"
        if problem is not None:
            problems.append(f"{where}: (json): {problem}")
            continue
        if rec.get("id") not in wanted:
            problems.append(f"{where}: id: {rec.get('id')!r} is not an entry the assessors disagreed on")
        _check_verdict(rec, where, problems)
        if not str(rec.get("reason") or "").strip():
            problems.append(f"{where}: reason: an adjudication gives its reason, OK included")
        if not str(rec.get("adjudicator") or "").strip():
            problems.append(f"{where}: adjudicator: name who adjudicated")
        out[str(rec.get("id"))] = rec
    unresolved = sorted(wanted - set(out))
    if unresolved:
        problems.append(f"{path}: not adjudicated: {', '.join(unresolved)}")
    if problems:
        raise UsageError("\n".join([f"audit adjudication has {len(problems)} problem(s):", *problems]))
    return out
