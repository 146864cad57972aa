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

from doceval.common.apimatch import mentions
from doceval.seam import RefusalCause

STAGES = (
    "ok",
    "correct_refusal",
    "system_error",
    "router_refused",
    "no_candidate_above_floor",
    "retriever_refused",
    "system_refused",
    "relevant_not_in_top_k",
    "answer_not_measured",
    "answer_missing_expected_api",
    "answer_uses_forbidden_api",
    "judged_incorrect",
    "hallucinated_out_of_scope",
)
# A refusal's stage by its cause: the system's step that refused (the user's assistant is one step).
REFUSAL_STAGES: dict[RefusalCause, str] = {
    "router": "router_refused",
    "floor": "no_candidate_above_floor",
    "retriever": "retriever_refused",  # the user's retriever function returned nothing (no floor involved)
    "answerer": "system_refused",  # doceval's answerer declined although passages reached it
    "system": "system_refused",  # the user's assistant refused an answerable question
}


def _contains(text: str, needle: str) -> bool:
    return mentions(text, needle)  # the rule version_correctness scored it with


def refusal_cause(row: Mapping[str, Any]) -> RefusalCause:
    """The cause of a stored summary row's refusal: its ``refusal_cause`` when it records one, else from its
    typed fields (rows written before the cause was recorded): an assistant's row has ``sources``; doceval's
    agent's row has the router's refusal in ``router_refusal``, and an empty ``retrieved`` when no passage
    cleared the floor."""
    recorded = row.get("refusal_cause")
    if recorded in REFUSAL_STAGES:
        return recorded  # type: ignore[no-any-return]
    if "sources" in row:
        return "system"
    if row.get("router_refusal"):
        return "router"
    return "answerer" if row.get("retrieved") else "floor"


def failure_stage(row: Mapping[str, Any], cause: RefusalCause | None = None) -> str:
    """One of :data:`STAGES` for one summary entry; a refusal by ``cause``, the reply's (the harness passes
    it), or for a stored row :func:`refusal_cause`."""
    if row.get("system_error"):
        return "system_error"
    scores = row.get("scores") or {}
    refused = bool(row.get("refused"))
    if row.get("out_of_scope"):
        return "correct_refusal" if refused else "hallucinated_out_of_scope"
    if refused:
        return REFUSAL_STAGES[cause or refusal_cause(row)]
    if scores.get("hit_rate") == 0.0:
        return "relevant_not_in_top_k"
    # An in-scope answer always has a version_correctness; null means doceval could not read the documents'
    # text (a user's retriever whose ids are no known corpus's), so checking the answer would grade ids.
    if "version_correctness" in scores and scores["version_correctness"] is None:
        return "answer_not_measured"
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
