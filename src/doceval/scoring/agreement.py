"""How far a judge agrees with human labels: accuracy, Cohen's kappa with a bootstrap interval, the confusion
matrix, agreement per answer category, and across repeats the flip rate and the kappa spread.

Judge errors (no verdict) are counted apart and left out of every agreement figure: "could not score" is not
"wrong". Kappa corrects accuracy for the agreement two raters reach by chance given how often each says
"correct" (Cohen 1960): 1 is perfect agreement, 0 chance level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from doceval.scoring.proportions import wilson
from doceval.summary import Summary, as_summary


def cohen_kappa(human: Sequence[bool], judge: Sequence[bool]) -> float | None:
    """Cohen's kappa of two binary raters; None for no rows. Both raters constant and equal gives 1.0 (perfect
    agreement where chance agreement is also 1: the formula's 0/0, resolved as scikit-learn does not, since
    ``sklearn.metrics.cohen_kappa_score`` returns NaN there)."""
    h, j = np.asarray(human, dtype=bool), np.asarray(judge, dtype=bool)
    if h.shape != j.shape:
        raise ValueError("human and judge verdicts must have the same length")
    n = h.size
    if n == 0:
        return None
    observed = float(np.mean(h == j))
    p_h, p_j = float(np.mean(h)), float(np.mean(j))
    chance = p_h * p_j + (1 - p_h) * (1 - p_j)
    if chance >= 1.0:
        return 1.0 if observed == 1.0 else 0.0
    return (observed - chance) / (1 - chance)


def _kappas(hs: np.ndarray, js: np.ndarray) -> np.ndarray:
    """Kappa of each row of a batch of resampled (human, judge) verdicts, 0/0 resolved as in cohen_kappa."""
    observed = np.mean(hs == js, axis=1)
    ph, pj = hs.mean(axis=1), js.mean(axis=1)
    chance = ph * pj + (1 - ph) * (1 - pj)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(
            np.where(chance >= 1.0, np.where(observed == 1.0, 1.0, 0.0), (observed - chance) / (1 - chance)),
            dtype=np.float64,
        )


def kappa_interval(
    human: Sequence[bool], judge: Sequence[bool], n_boot: int = 2000, seed: int = 0, alpha: float = 0.05
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of kappa, resampling rows (seeded). None below 2 rows."""
    h, j = np.asarray(human, dtype=bool), np.asarray(judge, dtype=bool)
    n = h.size
    if n < 2:
        return None
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    lo, hi = np.quantile(_kappas(h[idx], j[idx]), [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def paired_kappa_difference(
    human: Sequence[bool],
    judge: Sequence[bool],
    baseline: Sequence[bool],
    n_boot: int = 2000,
    seed: int = 0,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """kappa(judge) - kappa(baseline) on the same rows, with a paired percentile bootstrap interval: each
    resample draws one set of rows and scores both raters on it, so what the two share (the rows' difficulty)
    cancels. ``beats`` only when the interval's lower bound is above 0: a difference the rows could produce by
    chance is no evidence that the judge adds anything to the baseline."""
    h = np.asarray(human, dtype=bool)
    j, b = np.asarray(judge, dtype=bool), np.asarray(baseline, dtype=bool)
    if not h.shape == j.shape == b.shape:
        raise ValueError("human, judge and baseline verdicts must have the same length")
    k_j, k_b = cohen_kappa(human, judge), cohen_kappa(human, baseline)
    diff = None if k_j is None or k_b is None else k_j - k_b
    out: dict[str, Any] = {
        "difference": diff,
        "ci95": None,
        "beats": False,
        "n": int(h.size),
        "method": "paired percentile bootstrap over rows (same resampled rows for both)",
    }
    if h.size < 2:
        return out
    idx = np.random.default_rng(seed).integers(0, h.size, size=(n_boot, h.size))
    diffs = _kappas(h[idx], j[idx]) - _kappas(h[idx], b[idx])
    lo, hi = (float(x) for x in np.quantile(diffs, [alpha / 2, 1 - alpha / 2]))
    out.update(ci95=[lo, hi], beats=lo > 0)
    return out


def rater_figures(
    human: Sequence[bool], rater: Sequence[bool], n_boot: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """Kappa with its bootstrap interval and accuracy of one always-scoring rater (a baseline, a component)."""
    interval = kappa_interval(human, rater, n_boot=n_boot, seed=seed)
    n = len(human)
    return {
        "n": n,
        "kappa": cohen_kappa(human, rater),
        "kappa_ci95": list(interval) if interval else None,
        "accuracy": sum(a == b for a, b in zip(human, rater, strict=True)) / n if n else None,
    }


def confusion(human: Sequence[bool], judge: Sequence[bool]) -> dict[str, dict[str, int]]:
    """``{human verdict: {judge verdict: count}}`` with "correct"/"incorrect" keys."""
    out = {h: {"correct": 0, "incorrect": 0} for h in ("correct", "incorrect")}
    for a, b in zip(human, judge, strict=True):
        out["correct" if a else "incorrect"]["correct" if b else "incorrect"] += 1
    return out


def agreement(
    human: Sequence[bool],
    judge: Sequence[bool | None],
    categories: Sequence[str],
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """One judge pass against the labels: the figures over the rows the judge scored, judge errors apart."""
    scored = [i for i, v in enumerate(judge) if v is not None]
    h = [human[i] for i in scored]
    j = [bool(judge[i]) for i in scored]
    n = len(scored)
    agree = sum(a == b for a, b in zip(h, j, strict=True))
    per_category: dict[str, dict[str, Any]] = {}
    for cat in sorted(set(categories)):
        rows = [i for i in scored if categories[i] == cat]
        hits = sum(human[i] == judge[i] for i in rows)
        errors = sum(1 for i, c in enumerate(categories) if c == cat and judge[i] is None)
        per_category[cat] = {
            "n": len(rows),
            "agreement": hits / len(rows) if rows else None,
            "human_correct": sum(human[i] for i in rows),
            "judge_correct": sum(bool(judge[i]) for i in rows),
            "judge_errors": errors,
        }
    interval = kappa_interval(h, j, n_boot=n_boot, seed=seed)
    return {
        "n": n,
        "judge_errors": len(judge) - n,
        "accuracy": agree / n if n else None,
        "accuracy_ci95": list(wilson(agree, n)) if n else None,
        "kappa": cohen_kappa(h, j),
        "kappa_ci95": list(interval) if interval else None,
        "kappa_ci_method": "percentile bootstrap over rows",
        "confusion": confusion(h, j),
        "by_category": per_category,
    }


def repeat_stability(passes: Sequence[Sequence[bool | None]], human: Sequence[bool]) -> dict[str, Any]:
    """Across N passes over the same rows: rows whose verdict changes (judge errors count as a verdict of
    their own), the flip rate, and the spread of kappa across passes."""
    if not passes:
        raise ValueError("no passes")
    n = len(passes[0])
    flipped = [i for i in range(n) if len({p[i] for p in passes}) > 1]
    kappas = []
    for p in passes:
        scored = [i for i, v in enumerate(p) if v is not None]
        k = cohen_kappa([human[i] for i in scored], [bool(p[i]) for i in scored])
        if k is not None:
            kappas.append(k)
    return {
        "repeats": len(passes),
        "flipped": len(flipped),
        "flip_rate": len(flipped) / n if n else None,
        "flipped_rows": flipped,
        "kappa_min": min(kappas) if kappas else None,
        "kappa_max": max(kappas) if kappas else None,
        "kappa_sd": float(np.std(kappas, ddof=1)) if len(kappas) > 1 else 0.0 if kappas else None,
    }


MIN_KAPPA = 0.6  # the bar a judge must clear before its answer_accuracy is printed as a headline figure


def trusted(report: dict[str, Any], min_kappa: float = MIN_KAPPA) -> tuple[bool, str]:
    """Whether a validation report clears the bar: kappa on the held-out rows at least ``min_kappa`` and beating
    version_correctness alone on the same rows by the paired bootstrap (the lower bound of the 95% interval of
    kappa(judge) - kappa(strings) above 0; else the judge adds nothing a string match does not). The reason says
    which figure decided."""
    kappa = (report.get("agreement") or {}).get("kappa")
    base = (report.get("version_strings_alone") or {}).get("kappa")
    beats = report.get("beats_strings") or {}
    if kappa is None:
        return False, "the judge scored no labelled row"
    if kappa < min_kappa:
        return False, f"kappa {kappa:.3f} is below {min_kappa}"
    base_text = "n/a" if base is None else f"{base:.3f}"
    ci = beats.get("ci95")
    diff = beats.get("difference")
    paired = (
        f"kappa - strings {diff:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
        if ci and diff is not None
        else "no paired interval"
    )
    if not beats.get("beats"):
        return False, f"kappa {kappa:.3f} does not beat version strings alone ({base_text}): {paired}"
    return True, f"kappa {kappa:.3f} >= {min_kappa} and beats version strings alone ({base_text}): {paired}"


def reported_figure(report: dict[str, Any], min_kappa: float = MIN_KAPPA) -> str:
    """What the answer figure next to a judge should be read as: "judge" when it clears the bar, else
    "version strings" (version_correctness), the figure the judge failed to beat."""
    return "judge" if trusted(report, min_kappa)[0] else "version strings"


# ------------------------------------------------------------------------------------- a judge's evidence
# A run's answer_accuracy is only as good as its judge, so the run records what is known of that judge: every
# recorded validation of its identity (doceval.harness.judge_evidence reads them from eval/judge/) and whether
# they clear the bar above. Every surface that prints or logs answer_accuracy labels it from this record.

JUDGED_METRICS = ("answer_accuracy",)  # the metrics a judge's verdicts decide (not version strings, refusals)
BAR = f"kappa >= {MIN_KAPPA} and beating version strings alone (paired bootstrap)"
EVIDENCE_TAGS = {"below_bar": "heuristic", "unvalidated": "unvalidated"}  # status -> the label's first word


def validation_record(report: dict[str, Any]) -> dict[str, Any]:
    """What a run keeps of one validation report (``doceval judge validate``, the judge stage): the label file,
    split and rows, kappa with its interval, the paired difference to version strings, and the bar's verdict."""
    agree = report.get("agreement") or {}
    labels = report.get("labels") or {}
    beats = report.get("beats_strings") or {}
    cleared, why = trusted(report)
    return {
        "labels": labels.get("path"),
        "md5": labels.get("md5"),
        "split": labels.get("split"),
        "held_out": bool(labels.get("held_out")),
        "n": agree.get("n"),
        "kappa": agree.get("kappa"),
        "kappa_ci95": agree.get("kappa_ci95"),
        "strings_kappa": (report.get("version_strings_alone") or {}).get("kappa"),
        "difference": beats.get("difference"),
        "difference_ci95": beats.get("ci95"),
        "cleared": cleared,
        "why": why,
    }


def judge_evidence(judge_hash: str, reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The evidence for one judge identity from validation reports (those of other judges ignored; one per
    label file and split, the last one read winning): ``status`` "cleared" when every recorded validation
    clears the bar, "below_bar" when one does not, "unvalidated" when there is none; the held-out label
    files first."""
    records: dict[tuple[Any, Any], dict[str, Any]] = {}
    for report in reports:
        if (report.get("judge") or {}).get("hash") == judge_hash:
            record = validation_record(report)
            records[(record["md5"], record["split"])] = record
    ordered = sorted(records.values(), key=lambda r: (not r["held_out"], str(r["labels"]), str(r["split"])))
    status = (
        "unvalidated" if not ordered else "cleared" if all(r["cleared"] for r in ordered) else "below_bar"
    )
    return {"status": status, "bar": BAR, "validations": ordered}


def _kappa_text(record: dict[str, Any]) -> str:
    """``kappa 0.333 [0.072, 0.606] on data/judge/v3.jsonl (all, 48 rows); judge - strings -0.042 [...]``."""
    kappa, ci = record.get("kappa"), record.get("kappa_ci95")
    shown = "n/a" if kappa is None else f"{kappa:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
    text = f"kappa {shown} on {record.get('labels')} ({record.get('split')}, {record.get('n')} rows)"
    diff, dci = record.get("difference"), record.get("difference_ci95")
    if diff is not None:
        text += f"; judge - strings {diff:+.3f}" + (f" [{dci[0]:+.3f}, {dci[1]:+.3f}]" if dci else "")
    return text


def summary_evidence(summary: Summary | Mapping[str, Any]) -> dict[str, Any] | None:
    """The judge evidence a summary's answer_accuracy carries: None when it has no judged figure (not judged,
    not measured); a summary written before runs recorded it counts as unvalidated."""
    typed = as_summary(summary)
    settings = typed.settings
    if typed.metrics.value("answer_accuracy") is None or not settings.judge_id:
        return None
    evidence = settings.judge_evidence
    if evidence.get("status") in ("cleared", "below_bar", "unvalidated"):
        return dict(evidence)
    return {
        "status": "unvalidated",
        "bar": BAR,
        "validations": [],
        "note": "the summary was written before runs recorded their judge's validation",
    }


def evidence_tag(evidence: dict[str, Any] | None) -> str | None:
    """ "heuristic" (below the bar), "unvalidated" (no recorded validation), or None (cleared, or no judge)."""
    return None if evidence is None else EVIDENCE_TAGS.get(str(evidence.get("status")))


def evidence_label(evidence: dict[str, Any] | None, judge_hash: str | None) -> str | None:
    """The one line every surface prints beside an answer_accuracy whose judge has not cleared the bar: why,
    with the kappa of the held-out label file where one was recorded; None when it cleared (or no judge)."""
    tag = evidence_tag(evidence)
    if tag is None or evidence is None:
        return None
    judge = f"judge {judge_hash}" if judge_hash else "the judge"
    if tag == "unvalidated":
        return (
            f"unvalidated: {judge} has no recorded validation against labelled answers ({BAR} is the bar); "
            "measure it with `doceval judge validate LABELS --split all` and the same judge overrides"
        )
    failing = [r for r in evidence["validations"] if not r.get("cleared")]
    shown = " | ".join(_kappa_text(r) for r in failing[:2])
    return f"heuristic: {judge} has not cleared the bar ({BAR}) on its labelled answers: {shown}"
