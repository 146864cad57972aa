"""The CI gate: thresholds and non-regression against a baseline, from a gate config (conf/gate/); exit 3 on FAIL
is the CLI's.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from doceval.common.naming import ASSISTANT_REFUSED_CORRECTLY
from doceval.config import schema
from doceval.errors import UsageError
from doceval.results.comparison import compare
from doceval.results.gate_config import check_gate_config, load_gate_config
from doceval.results.judges import JUDGED_METRICS, check_same_judge, evidence_notes
from doceval.results.power import Detectable, detectable
from doceval.results.summaries import Summary, check_same_k, checked_summary
from doceval.scoring.aggregate import column
from doceval.scoring.conversation_names import (
    figure_value,
    is_conversation_metric,
    lower_is_better,
)
from doceval.scoring.intervals import holm
from doceval.scoring.registry import LOWER_IS_BETTER
from doceval.summary import Summary as TypedSummary
from doceval.summary import as_summary, settings_of

# The config checks live in doceval.results.gate_config; importers of this module find them here too.
__all__ = [
    "GateFailure",
    "GateResult",
    "check_gate_config",
    "drift_failures",
    "gate",
    "load_gate_config",
    "system_errors",
]

_EPS = 1e-9  # float slack for gate comparisons: 0.6 >= 0.60 must hold whatever the summation order


@dataclass
class GateFailure:
    metric: str
    condition: str  # e.g. "hit_rate >= 0.60" or "no regression > 0.02 vs baseline"
    value: float | None  # the measured value (None: not measured)
    by: float | None  # how far it missed (positive), None when not measured
    reason: str
    kind: str = (
        "threshold"  # threshold | regression (vs the baseline) | drift | run (entries, complete, errors)
    )

    def __str__(self) -> str:
        return self.reason


@dataclass
class GateResult:
    passed: bool
    line: str
    failures: list[GateFailure]
    conditions: list[str]
    notes: list[str] = field(default_factory=list)
    source: str = "the gate passed in"  # where the rules came from (a file, or conf/gate + doceval.yaml)
    # significant non-regression: the smallest drop of each metric its test can detect at this n (results.power)
    detectable: list[Detectable] = field(default_factory=list)


def _fmt_threshold(v: float) -> str:
    s = f"{v:.2f}"
    return s if abs(float(s) - v) < 1e-12 else f"{v:.6g}"


def drift_failures(
    history: Sequence[Mapping[str, Any]], summary: Summary, drift: schema.Drift
) -> tuple[list[GateFailure], list[str]]:
    """The drift rule over the tracked ``history`` (oldest first; doceval.tracking.history) ending with this
    summary: each metric against the best of the last ``window`` runs (or the pinned reference run)."""
    failures: list[GateFailure] = []
    notes: list[str] = []
    window = list(history)[-(drift.window - 1) :] if drift.window > 1 else []
    pinned = None
    if drift.reference != "best":
        pinned = next((h for h in history if h["run_id"] == drift.reference), None)
        if pinned is None:
            notes.append(
                f"drift: the pinned reference run {drift.reference} is not in the tracked history; "
                "not checked"
            )
            return failures, notes
    if not window and pinned is None:
        notes.append("drift: no tracked runs of this configuration family yet; not checked")
        return failures, notes
    cond = f"no drift > {_fmt_threshold(drift.tolerance)} in {', '.join(drift.metrics)}"
    metrics = as_summary(summary).metrics
    for m in drift.metrics:
        now = metrics.value(m)
        if now is None:
            continue
        lower = m in LOWER_IS_BETTER
        past = [
            (h, h["metrics"][m]["value"])
            for h in ([pinned] if pinned else window)
            if h["metrics"].get(m, {}).get("value") is not None
        ]
        if not past:
            continue
        ref, best = (min if lower else max)(past, key=lambda hv: hv[1])
        worse = (now - best) if lower else (best - now)
        if worse > drift.tolerance + _EPS:
            steps = " -> ".join(f"{str(h['commit'])[:8]} {v:.4f}" for h, v in past[-6:])
            failures.append(
                GateFailure(
                    m,
                    cond,
                    float(now),
                    worse - drift.tolerance,
                    f"{m} drifted by {worse:.4f} from {best:.4f} (run {ref['run_id']}, commit {str(ref['commit'])[:8]}) "
                    f"to {now:.4f} over the last {len(past)} tracked runs ({steps} -> this run), beyond the tolerance "
                    f"{drift.tolerance:.4f}",
                    "drift",
                )
            )
    return failures, notes


def gate(
    summary: Summary,
    gate_cfg: schema.Gate,
    baseline: Summary | None = None,
    *,
    allow_different_k: bool = False,
    history: Sequence[Mapping[str, Any]] | None = None,
    source: str | None = None,
    allow_different_judge: bool = False,
) -> GateResult:
    """Apply thresholds (``>=``; ``<=`` for lower-is-better metrics) and, with a baseline, non-regression.

    ``gate_cfg``: the composed ``gate`` block, or one :func:`check_gate_config` made from a hand-written gate.
    A summary with no entries fails ("nothing was measured"), and so do one marked ``complete: false`` ("the
    run is incomplete") and one with more system errors than ``max_system_errors``, whatever its metrics say.
    A threshold on a metric the summary does not measure (null) fails as "not measured". A baseline cut at
    another k is refused (UsageError) unless ``allow_different_k``, and one whose answer_accuracy another judge
    produced, when non-regression gates it, unless ``allow_different_judge``. For a user's assistant a rule on
    a metric of ``for_assistants`` is asked of its substitute. ``source`` says where the rules came from
    (printed with the verdict, recorded in JUnit).
    """
    rules = check_gate_config(gate_cfg)
    summary = checked_summary(summary, "summary")
    rules, notes = _rules_for_system(rules, summary)
    _refuse_unmeasured(rules, summary, baseline)
    failures: list[GateFailure] = []
    conditions: list[str] = []
    limits: list[Detectable] = []
    failures += _run_failures(summary, rules.max_system_errors)
    found, conditions = _threshold_failures(rules.thresholds, summary.metrics.recorded)
    failures += found
    nr = rules.non_regression
    if nr.enabled:
        if baseline is None:
            notes.append("non_regression is enabled but no baseline summary was given: not checked")
        else:
            found, cond, nr_notes = _regression_failures(
                summary, baseline, nr, (allow_different_k, allow_different_judge), limits
            )
            failures += found
            conditions.append(cond)
            notes += nr_notes
    drift = rules.drift
    if drift.enabled:
        conditions.append(f"no drift > {_fmt_threshold(drift.tolerance)} in {', '.join(drift.metrics)}")
        if history is None:
            notes.append("drift is enabled but no tracked history was read: not checked")
        else:
            found, drift_notes = drift_failures(history, summary, drift)
            failures += found
            notes += drift_notes
    if any(m in JUDGED_METRICS for m in _gated(rules)):
        notes += evidence_notes([("the summary", summary)])
    passed = not failures
    line = f"CI gate ({' and '.join(conditions)}): {'PASS' if passed else 'FAIL'}"
    return GateResult(passed, line, failures, conditions, notes, source or GateResult.source, limits)


def _gated(rules: schema.Gate) -> list[str]:
    """Every metric a rule of the gate names: thresholds, then non-regression and drift when enabled."""
    gated = list(rules.thresholds)
    gated += list(rules.non_regression.metrics) if rules.non_regression.enabled else []
    gated += list(rules.drift.metrics) if rules.drift.enabled else []
    return list(dict.fromkeys(gated))


def _rules_for_system(rules: schema.Gate, summary: Summary) -> tuple[schema.Gate, list[str]]:
    """The rules as they apply to this run's system: for a user's assistant each metric of ``for_assistants``
    asked of its substitute (refused_correctly -> refusal_rate: the reply's own refusal, not "no sources"),
    with a note; a rule left on refused_correctly for an assistant gets a note saying what it measures there."""
    if not settings_of(summary).is_assistant:
        return rules, []
    swap, gated, notes = dict(rules.for_assistants), _gated(rules), []
    for m in gated:
        if m in swap:
            notes.append(
                f"{m} is asked of {swap[m]} for an assistant (agent=function|http, gate.for_assistants): "
                f'its {m} says only "{ASSISTANT_REFUSED_CORRECTLY}"'
            )
        elif m == "refused_correctly":
            notes.append(
                f'refused_correctly for an assistant measures "{ASSISTANT_REFUSED_CORRECTLY}", not whether '
                "it refused: gate refusal_rate for that (gate.for_assistants: {refused_correctly: "
                "refusal_rate}, as conf/gate/default.yaml does)"
            )
    if not any(m in swap for m in gated):
        return rules, notes
    thresholds: dict[str, float] = {}
    for m, t in rules.thresholds.items():
        key = swap.get(m, m)
        if key not in thresholds or key == m:  # a threshold set on the substitute itself wins
            thresholds[key] = t

    def swapped(metrics: Sequence[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(swap.get(m, m) for m in metrics))

    nr, drift = rules.non_regression, rules.drift
    return dataclasses.replace(
        rules,
        thresholds=types.MappingProxyType(thresholds),
        non_regression=dataclasses.replace(nr, metrics=swapped(nr.metrics)),
        drift=dataclasses.replace(drift, metrics=swapped(drift.metrics)),
    ), notes


def _refuse_unmeasured(rules: schema.Gate, summary: Summary, baseline: Summary | None) -> None:
    """A rule on a metric a run did not measure (``metrics.not_measured``) is a UsageError naming it: no
    threshold or baseline can pass or fail on a number that does not exist."""
    gated = {m: "thresholds" for m in rules.thresholds}
    if rules.non_regression.enabled:
        gated.update({m: "non_regression.metrics" for m in rules.non_regression.metrics if m not in gated})
    if rules.drift.enabled:
        gated.update({m: "drift.metrics" for m in rules.drift.metrics if m not in gated})
    runs = [("the summary", summary)] + ([("the baseline", baseline)] if baseline is not None else [])
    for where, run in runs:
        unmeasured = as_summary(run).metrics.not_measured
        for m, rule in gated.items():
            if m in unmeasured:
                raise UsageError(
                    f"gate {rule}: {m} was not measured in {where} ({unmeasured[m]}); drop {m} from the "
                    f"gate's {rule}, or measure it"
                )


def _threshold_failures(
    thresholds: Mapping[str, float], metrics: Mapping[str, Any]
) -> tuple[list[GateFailure], list[str]]:
    """The thresholds missed (``>=``; ``<=`` for lower-is-better metrics; null: not measured) and every
    threshold's condition, in the config's order."""
    failures: list[GateFailure] = []
    conditions: list[str] = []
    for m, t in thresholds.items():
        lower = lower_is_better(m)
        cond = f"{m} {'<=' if lower else '>='} {_fmt_threshold(t)}"
        conditions.append(cond)
        v = figure_value(metrics, m)
        if v is None:
            why = "null in the summary"
            if is_conversation_metric(m) and not metrics.get("conversations"):
                why = "the summary has no conversations: evaluate a golden set with conversation entries"
            failures.append(GateFailure(m, cond, None, None, f"{cond}: not measured ({why})"))
            continue
        miss = (v - t) if lower else (t - v)
        if miss > _EPS:
            word = "over" if lower else "short"
            failures.append(
                GateFailure(m, cond, float(v), miss, f"{cond}: {m} = {v:.4f}, {word} by {miss:.4f}")
            )
    return failures, conditions


def _aligned(baseline: TypedSummary, summary: TypedSummary) -> list[Mapping[str, Any]]:
    """The baseline's entries in the summary's order (significant mode pairs the same entries: compare checks)."""
    by_id = {e.id: e.recorded for e in baseline.entries}
    return [by_id.get(i, {"scores": {}}) for i in summary.entry_ids]


def _regression_failures(
    summary: TypedSummary,
    baseline: Summary,
    nr: schema.NonRegression,
    allowed: tuple[bool, bool],
    limits: list[Detectable],
) -> tuple[list[GateFailure], str, list[str]]:
    """Non-regression against the baseline: the failures, the condition, and the notes (a different k or judge
    allowed (``allowed``: allow_different_k, allow_different_judge), a drop the paired test cannot tell from
    noise in ``significant`` mode, the smallest drop that test can detect at this n, appended to ``limits``)."""
    allow_different_k, allow_different_judge = allowed
    typed_baseline = checked_summary(baseline, "baseline")
    notes: list[str] = []
    k_note = check_same_k(typed_baseline, summary, "baseline", "summary", allow_different_k=allow_different_k)
    if k_note:
        notes.append(k_note)
    notes += check_same_judge(
        [("the baseline", typed_baseline), ("the summary", summary)], nr.metrics, allow_different_judge
    )
    cond = f"no regression > {_fmt_threshold(nr.tolerance)} in {', '.join(nr.metrics)} vs baseline"
    p_holm: dict[str, float | None] | None = None  # None: point mode, any drop beyond the tolerance fails
    family = f"Holm over the gate's {len(nr.metrics)} non-regression metrics: {', '.join(nr.metrics)}"
    if nr.mode == "significant":
        cond += f" (significant at {_fmt_threshold(nr.alpha)}, Holm)"
        p_holm = _paired_p_values(typed_baseline, summary, list(nr.metrics), allow_different_k)
        power = [
            detectable(
                m,
                column(_aligned(typed_baseline, summary), m),
                column(summary.rows, m),
                lower_is_better=m in LOWER_IS_BETTER,
                family=len(nr.metrics),
                alpha=nr.alpha,
                tolerance=nr.tolerance,
            )
            for m in nr.metrics
        ]
        notes += [d.text() for d in power]
        limits.extend(power)
    failures: list[GateFailure] = []
    for m in nr.metrics:
        v, b = summary.metrics.value(m), typed_baseline.metrics.value(m)
        if v is None or b is None:
            where = "the summary" if v is None else "the baseline"
            failures.append(
                GateFailure(
                    m,
                    cond,
                    None if v is None else float(v),
                    None,
                    f"{m} non-regression: not measured (null in {where})",
                    "regression",
                )
            )
            continue
        failure, note = _regression(m, v, b, cond, nr, p_holm, family)
        failures += [failure] if failure else []
        notes += [note] if note else []
    return failures, cond, notes


def _regression(
    m: str,
    v: float,
    b: float,
    cond: str,
    nr: schema.NonRegression,
    p_holm: Mapping[str, float | None] | None,
    family: str,
) -> tuple[GateFailure | None, str | None]:
    """Whether ``m`` regressed from ``b`` to ``v`` beyond the tolerance: a failure, or (in ``significant``
    mode, ``p_holm`` given, when the paired test cannot tell the drop from noise) a note, or neither. Each
    adjusted p names its Holm ``family`` (design 8.3; compare's table has its own, 8.2)."""
    tol = nr.tolerance
    worse = (v - b) if m in LOWER_IS_BETTER else (b - v)
    if not worse > tol + _EPS:
        return None, None
    verb = "rose" if m in LOWER_IS_BETTER else "dropped"
    what = f"{m} {verb} by {worse:.4f} ({b:.4f} -> {v:.4f}), beyond the tolerance {tol:.4f}"
    p = None if p_holm is None else p_holm.get(m)
    if p_holm is not None and (p is None or p >= nr.alpha):
        # A drop the paired test cannot tell from noise: said, not failed.
        note = (
            f"{what}, but not significantly (Holm-adjusted p = "
            f"{'n/a' if p is None else f'{p:.3f}'} >= {nr.alpha:g}; {family}): not failed"
        )
        return None, note
    reason = f"{what} by {worse - tol:.4f}" + (
        f" (Holm-adjusted p = {p:.3g}; {family})" if p_holm is not None and p is not None else ""
    )
    return GateFailure(m, cond, float(v), worse - tol, reason, "regression"), None


def _run_failures(summary: Summary, max_system_errors: int) -> list[GateFailure]:
    """What fails a run whatever its metrics say: no entries, an incomplete run, or more entries whose system
    call failed than ``max_system_errors`` (those entries are scored by no metric, so the metrics alone would
    pass a run whose system failed on 4 entries of 10)."""
    failures: list[GateFailure] = []
    typed = as_summary(summary)
    if not typed.entries:
        failures.append(
            GateFailure(
                "(entries)",
                "at least one entry",
                None,
                None,
                "nothing was measured: the summary has no entries (an empty split or a hand-written summary); "
                "gate a summary written by `doceval eval` or `doceval stage evaluate`",
            )
        )
    if not typed.complete:
        reason = typed.incomplete.reason if typed.incomplete is not None else None
        failures.append(
            GateFailure(
                "(complete)",
                "a complete run",
                None,
                None,
                "the run is incomplete (complete: false"
                + (f"; {reason}" if reason else "")
                + "): its metrics cover only part of the split; fix the system and rerun it to completion",
            )
        )
    errors = system_errors(summary)
    if errors > max_system_errors:
        failures.append(
            GateFailure(
                "(system_errors)",
                f"system_errors <= {max_system_errors}",
                float(errors),
                float(errors - max_system_errors),
                f"{errors} of {len(typed.entries)} entries had a system error (the system under test failed "
                f"on them; they are scored by no metric), more than max_system_errors: {max_system_errors} in the "
                "gate config; fix the system and rerun, or raise max_system_errors",
            )
        )
    return failures


def system_errors(summary: Summary) -> int:
    """``metrics.counts.system_errors``; 0 for a summary written before the count existed."""
    value = as_summary(summary).metrics.counts.get("system_errors", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(
            f"summary: metrics.counts.system_errors is {value!r}, expected an integer >= 0; pass a summary "
            "written by `doceval eval --output PATH`"
        )
    return value


def _paired_p_values(
    baseline: Summary, summary: Summary, metrics: list[str], allow_different_k: bool
) -> dict[str, float | None]:
    """Holm-adjusted paired p-values ("no change") of ``metrics`` between the baseline and the summary, entry by
    entry: the same machinery as ``doceval compare``, adjusted over the gated metrics only."""
    try:
        result = compare(
            baseline,
            summary,
            allow_different_k=allow_different_k,
            allow_different_judge=True,  # refused or allowed by the caller already (_regression_failures)
            base_label="baseline",
            new_label="summary",
            metrics=metrics,
        )
    except UsageError as exc:
        raise UsageError(
            f"non_regression.mode: significant pairs the two runs entry by entry, and {exc}; "
            "or set non_regression.mode: point to compare the aggregates only"
        ) from exc
    rows = [result.row(m) for m in metrics]
    return dict(zip(metrics, holm([r.p_value for r in rows]), strict=True))
