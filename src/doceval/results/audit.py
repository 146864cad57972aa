"""The label audit's result (docs/design.md section 3.4): the verdicts read by :mod:`doceval.inputs.audit`
summarised as counts per verdict and per stratum, and the WRONG rate with its Wilson 95% interval; for a
two-assessor audit, each assessor, their agreement and the adjudicated final verdicts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from doceval.errors import UsageError
from doceval.inputs.audit import VERDICTS
from doceval.scoring.agreement import cohen_kappa
from doceval.scoring.proportions import wilson

__all__ = ["adjudicated", "disagreements", "format_adjudicated", "format_summary", "summarise"]


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts per verdict and per stratum, and the WRONG rate with its Wilson 95% interval."""
    counts = Counter(r["verdict"] for r in rows)
    n = len(rows)
    lo, hi = wilson(counts["WRONG"], n)
    strata: dict[str, Counter[str]] = {}
    for r in rows:
        strata.setdefault(str(r.get("stratum", "?")), Counter())[r["verdict"]] += 1
    return {
        "n": n,
        "counts": {v: counts[v] for v in VERDICTS},
        "wrong_rate": counts["WRONG"] / n,
        "wrong_ci95": [lo, hi],
        "by_stratum": {s: {v: c[v] for v in VERDICTS} for s, c in sorted(strata.items())},
        "wrong": [{"id": r["id"], "reason": r.get("reason")} for r in rows if r["verdict"] == "WRONG"],
    }


def format_summary(audit: dict[str, Any]) -> list[str]:
    """The audit's figures (:func:`summarise`'s record, not a run summary) as terminal lines."""
    c, (lo, hi) = audit["counts"], audit["wrong_ci95"]
    lines = [
        f"audited {audit['n']} entries: OK {c['OK']}, MINOR {c['MINOR']}, WRONG {c['WRONG']}",
        f"label error rate (WRONG): {audit['wrong_rate']:.1%} (95% Wilson interval {lo:.1%} to {hi:.1%})",
        f"target (WRONG below 2%, upper bound below 8%): "
        f"{'met' if audit['wrong_rate'] < 0.02 and hi < 0.08 else 'not met'}",
    ]
    lines += [
        f"  {s}: " + ", ".join(f"{v} {n}" for v, n in counts.items())
        for s, counts in audit["by_stratum"].items()
    ]
    lines += [f"  WRONG {w['id']}: {w['reason']}" for w in audit["wrong"]]
    return lines


def disagreements(first: Sequence[dict[str, Any]], second: Sequence[dict[str, Any]]) -> list[str]:
    """The ids two assessors gave different verdicts (both sheets must cover the same entries)."""
    a, b = {r["id"]: r for r in first}, {r["id"]: r for r in second}
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise UsageError(
            f"the two assessors' sheets cover different entries ({len(only)} in one only, e.g. {only[0]}); "
            "both audit the same rows"
        )
    return [i for i in a if a[i]["verdict"] != b[i]["verdict"]]


def adjudicated(
    first: tuple[str, Sequence[dict[str, Any]]],
    second: tuple[str, Sequence[dict[str, Any]]],
    adjudication: Mapping[str, dict[str, Any]],
) -> dict[str, Any]:
    """A two-assessor audit: each assessor's counts, their agreement (the share of equal verdicts, and Cohen's
    kappa on WRONG or not), and the final verdicts (agreed, else the adjudicator's) summarised as
    :func:`summarise` does, with the WRONG rate and its Wilson interval."""
    (name_a, rows_a), (name_b, rows_b) = first, second
    split = set(disagreements(rows_a, rows_b))
    b = {r["id"]: r for r in rows_b}
    final = []
    for r in rows_a:
        if r["id"] in split:
            ruling = adjudication[r["id"]]
            final.append({**r, "verdict": ruling["verdict"], "reason": ruling["reason"]})
        else:
            reasons = " | ".join(str(x) for x in (r.get("reason"), b[r["id"]].get("reason")) if x)
            final.append({**r, "reason": reasons})
    wrong_a = [r["verdict"] == "WRONG" for r in rows_a]
    wrong_b = [b[r["id"]]["verdict"] == "WRONG" for r in rows_a]
    return {
        "assessors": {name_a: summarise(rows_a)["counts"], name_b: summarise(rows_b)["counts"]},
        "agreement": {
            "n": len(rows_a),
            "same_verdict": len(rows_a) - len(split),
            "kappa_wrong": cohen_kappa(wrong_a, wrong_b),
            "adjudicated": sorted(split),
        },
        "final": summarise(final),
    }


def format_adjudicated(result: dict[str, Any], target_wrong: float, target_upper: float) -> list[str]:
    """The two-assessor audit's table: each assessor, the agreement, then the final verdicts against the
    target (WRONG rate at most ``target_wrong``, its Wilson upper bound at most ``target_upper``)."""
    agreement, final = result["agreement"], result["final"]
    kappa = agreement["kappa_wrong"]
    lines = [
        f"{name}: " + ", ".join(f"{v} {n}" for v, n in counts.items())
        for name, counts in result["assessors"].items()
    ]
    lines.append(
        f"same verdict on {agreement['same_verdict']} of {agreement['n']}; Cohen's kappa on WRONG or not: "
        + ("n/a (no variation)" if kappa is None else f"{kappa:.3f}")
        + f"; adjudicated: {len(agreement['adjudicated'])}"
        + (f" ({', '.join(agreement['adjudicated'])})" if agreement["adjudicated"] else "")
    )
    lines += format_summary(final)[:2]
    met = final["wrong_rate"] <= target_wrong and final["wrong_ci95"][1] <= target_upper
    lines.append(
        f"target (WRONG at most {target_wrong:.0%}, upper bound at most {target_upper:.0%}): "
        f"{'met' if met else 'not met'}"
    )
    lines += format_summary(final)[3:]
    return lines
