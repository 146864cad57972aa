"""Why each entry failed: the first step of the system where it went wrong, from a summary row (its labels, what
the system returned and its scores), so a drop is explained, not only measured (docs/design.md section 4.5).

In-scope entries go through the steps in the system's order: the router, the floor, retrieval (a relevant
document in the top k), the answer's version strings, the judge. Out-of-scope entries either were refused or
got an answer anyway.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

STAGES = (
    "ok",
    "correct_refusal",
    "system_error",
    "router_refused",
    "no_candidate_above_floor",
    "system_refused",
    "relevant_not_in_top_k",
    "answer_missing_expected_api",
    "answer_uses_forbidden_api",
    "judged_incorrect",
    "hallucinated_out_of_scope",
)
ROUTER_PREFIX = "router:"  # doceval's agent: "router: library 'x' is not indexed ..."
SEARCH_PREFIX = "search:"  # "search: no passage cleared the floor ..."


def _contains(text: str, needle: str) -> bool:
    return needle.casefold() in text.casefold()


def failure_stage(row: Mapping[str, Any]) -> str:
    """One of :data:`STAGES` for one summary entry."""
    if row.get("system_error"):
        return "system_error"
    scores = row.get("scores") or {}
    reason = str(row.get("refusal_reason") or "")
    refused = bool(row.get("refused"))
    if row.get("out_of_scope"):
        return "correct_refusal" if refused else "hallucinated_out_of_scope"
    if refused:
        if "sources" in row:  # the user's assistant refused an answerable question
            return "system_refused"
        if reason.startswith(ROUTER_PREFIX):
            return "router_refused"
        if reason.startswith(SEARCH_PREFIX) or not row.get("retrieved"):
            return "no_candidate_above_floor"
        return "system_refused"  # doceval's answerer declined although passages reached it
    if scores.get("hit_rate") == 0.0:
        return "relevant_not_in_top_k"
    answer = str(row.get("answer") or "")
    expected = list(row.get("expected_apis") or [])
    groups = [list(g) for g in row.get("expected_any") or []]
    if any(not _contains(answer, a) for a in expected) or any(
        not any(_contains(answer, a) for a in g) for g in groups
    ):
        return "answer_missing_expected_api"
    if any(_contains(answer, a) for a in row.get("forbidden_apis") or []):
        return "answer_uses_forbidden_api"
    if row.get("verdict") is False:
        return "judged_incorrect"
    return "ok"


def stage_counts(rows: Iterable[Mapping[str, Any]], by: str) -> dict[str, Counter[str]]:
    """Failure stages counted per value of ``by`` (``library`` or ``kind``)."""
    out: dict[str, Counter[str]] = {}
    for row in rows:
        out.setdefault(str(row.get(by)), Counter())[row.get("stage") or failure_stage(row)] += 1
    return out


def transitions(base: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Entries whose stage changed between two runs, grouped: ``{"from", "to", "ids"}`` most frequent first."""
    before = {r["id"]: r.get("stage") or failure_stage(r) for r in base}
    moved: dict[tuple[str, str], list[str]] = {}
    for r in new:
        if r["id"] not in before:
            continue
        old, now = before[r["id"]], r.get("stage") or failure_stage(r)
        if old != now:
            moved.setdefault((old, now), []).append(r["id"])
    return [
        {"from": a, "to": b, "ids": ids} for (a, b), ids in sorted(moved.items(), key=lambda kv: -len(kv[1]))
    ]
