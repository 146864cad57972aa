"""answer_accuracy next to the judge that produced it: two runs' figures are set side by side only when one judge
produced both (compare, the gate's non-regression; history and drift split the family by judge), and every
figure from a judge that has not cleared the bar is labelled with that judge's evidence (docs/design.md 4.4).

version_correctness and the refusal metrics do not depend on the judge; answer_accuracy does (JUDGED_METRICS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from doceval.common.naming import judge_hash
from doceval.errors import UsageError
from doceval.scoring.agreement import JUDGED_METRICS, evidence_label, evidence_tag, summary_evidence
from doceval.summary import Summary, as_summary, settings_of

__all__ = ["ALLOW_FLAG", "JUDGED_METRICS", "answer_label", "check_same_judge", "evidence_notes", "judge_key"]

ALLOW_FLAG = "--allow-different-judge"


def judge_key(summary: Summary | Mapping[str, Any]) -> str | None:
    """The hash two summaries' judges are compared by (None: no judge recorded).

    The stated rule for summaries written before repeat 0 sent the single run's request: a ``--repeats``
    summary without the ``repeats.repeat0`` marker recorded repeat 0's judge with ``seed: 0`` where the
    configuration left it unset, so its identity is read with that seed unset, as the single run records it."""
    named = settings_of(summary).judge_id
    if named is None or not named.get("hash"):
        return None
    identity = named.get("identity")
    repeats = as_summary(summary).repeats
    if (
        repeats is not None
        and "repeat0" not in repeats
        and isinstance(identity, Mapping)
        and identity.get("seed") == 0
    ):
        return judge_hash({**identity, "seed": None})
    return str(named["hash"])


def judged(summary: Summary | Mapping[str, Any]) -> bool:
    """Whether the summary has a judged answer_accuracy (a value, not "not judged" or "not measured")."""
    return as_summary(summary).metrics.value("answer_accuracy") is not None


def check_same_judge(
    runs: Sequence[tuple[str, Summary | Mapping[str, Any]]],
    metrics: Sequence[str],
    allow_different_judge: bool,
) -> list[str]:
    """Refuse (UsageError naming both judges) to set a judged metric of ``metrics`` from two different judges
    side by side, unless ``allow_different_judge``; the notes to print (allowed, or unverifiable)."""
    if not any(m in JUDGED_METRICS for m in metrics) or not all(judged(s) for _, s in runs):
        return []
    (a_label, a), (b_label, b) = runs
    a_key, b_key = judge_key(a), judge_key(b)
    if a_key is None or b_key is None:
        missing = a_label if a_key is None else b_label
        return [f"{missing} records no judge identity: the same judge behind answer_accuracy is not verified"]
    if a_key == b_key:
        return []
    what = f"answer_accuracy comes from different judges ({a_label}: judge {a_key}, {b_label}: judge {b_key})"
    if not allow_different_judge:
        raise UsageError(
            f"{what}: their figures are not comparable (another model, prompt, seed or rule); rescore one run with "
            f"the other's judge (`doceval judge rescore SUMMARY judge=... --output NEW`), or pass {ALLOW_FLAG} "
            "to compare them anyway"
        )
    return [f"{what}: compared because {ALLOW_FLAG} was given"]


def answer_label(summary: Summary | Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(tag, line)`` for the summary's answer_accuracy: ``("heuristic", "heuristic: judge ... kappa ...")``,
    ``("unvalidated", ...)``, or ``(None, None)`` when its judge cleared the bar (or nothing was judged)."""
    evidence = summary_evidence(summary)
    hash_ = settings_of(summary).judge_hash
    return evidence_tag(evidence), evidence_label(evidence, hash_)


def evidence_notes(runs: Sequence[tuple[str, Summary | Mapping[str, Any]]]) -> list[str]:
    """One note per run whose answer_accuracy comes from a judge that has not cleared the bar."""
    notes = []
    for label, summary in runs:
        line = answer_label(summary)[1]
        if line:
            notes.append(f"{label}: answer_accuracy is {line}")
    return notes
