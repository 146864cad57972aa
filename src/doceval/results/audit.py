"""The label audit's result (docs/design.md section 3.4): the verdicts read by :mod:`doceval.inputs.audit`
summarised as counts per verdict and per stratum, and the WRONG rate with its Wilson 95% interval."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from doceval.inputs.audit import VERDICTS
from doceval.scoring.proportions import wilson

__all__ = ["format_summary", "summarise"]


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


def format_summary(summary: dict[str, Any]) -> list[str]:
    c, (lo, hi) = summary["counts"], summary["wrong_ci95"]
    lines = [
        f"audited {summary['n']} entries: OK {c['OK']}, MINOR {c['MINOR']}, WRONG {c['WRONG']}",
        f"label error rate (WRONG): {summary['wrong_rate']:.1%} (95% Wilson interval {lo:.1%} to {hi:.1%})",
        f"target (WRONG below 2%, upper bound below 8%): "
        f"{'met' if summary['wrong_rate'] < 0.02 and hi < 0.08 else 'not met'}",
    ]
    lines += [
        f"  {s}: " + ", ".join(f"{v} {n}" for v, n in counts.items())
        for s, counts in summary["by_stratum"].items()
    ]
    lines += [f"  WRONG {w['id']}: {w['reason']}" for w in summary["wrong"]]
    return lines
