"""The CI gate: thresholds and non-regression against a baseline, from a gate config (conf/gate/); exit 3 on FAIL
is the CLI's.
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from doceval.config import schema
from doceval.config.compose import check_config
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.results.comparison import compare
from doceval.results.power import Detectable, detectable
from doceval.results.summaries import Summary, check_same_k, check_summary
from doceval.scoring.aggregate import column
from doceval.scoring.conversation_names import (
    conversation_metric_names,
    figure_value,
    is_conversation_metric,
    lower_is_better,
    naming_help,
)
from doceval.scoring.intervals import holm
from doceval.scoring.registry import LOWER_IS_BETTER, METRIC_NAMES

_EPS = 1e-9  # float slack for gate comparisons: 0.6 >= 0.60 must hold whatever the summation order
MODES = ("significant", "point")  # non_regression.mode


@dataclass
class GateFailure:
    metric: str
    condition: str  # e.g. "hit_rate >= 0.60" or "no regression > 0.02 vs baseline"
    value: float | None  # the measured value (None: not measured)
    by: float | None  # how far it missed (positive), None when not measured
    reason: str

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


def load_gate_config(path: str | Path) -> schema.Gate:
    """A gate config YAML (``conf/gate/*.yaml``, or a params.yaml with a ``gate`` block), checked by the schema
    and range rules of the composed ``gate`` block (thresholds in [0, 1], known keys and types; keys left out
    take :func:`check_gate_config`'s defaults), then as every gate is."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{p}: gate config not found; pass an existing conf/gate/*.yaml")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UsageError(f"{p}: not valid YAML ({exc}); fix the file or pass another gate config") from exc
    if isinstance(data, dict) and "thresholds" not in data and isinstance(data.get("gate"), dict):
        data = data["gate"]
    rules = check_gate_config(data, str(p))  # names first: its messages list the metrics and the patterns
    check_config({"gate": data}, str(p), complete=False)
    return rules


def check_gate_config(data: schema.Gate | Any, where: str = "gate config") -> schema.Gate:
    """A gate config checked, as the typed block: the composed ``gate`` block, or a gate mapping written by hand
    (a YAML file, the API's ``config=``), where a key left out means: no thresholds, non_regression off (point
    mode, alpha 0.05, tolerance 0), drift off, max_system_errors 0. Unknown keys or metric names are errors (a
    typo must not pass silently), and so is a gate that always passes."""
    if isinstance(data, schema.Gate):
        data = config_dict(data)  # the composed block passes the same checks as a hand-written one
    valid = f"valid metrics: {', '.join(METRIC_NAMES)}"
    if not isinstance(data, Mapping):
        raise UsageError(f"{where}: expected a mapping with 'thresholds' and 'non_regression'")
    unknown_keys = sorted(set(data) - {"thresholds", "non_regression", "drift", "max_system_errors"})
    if unknown_keys:
        raise UsageError(
            f"{where}: unknown key(s) {', '.join(unknown_keys)}; expected thresholds, non_regression, drift, "
            "max_system_errors"
        )
    thresholds = data.get("thresholds") or {}
    if not isinstance(thresholds, Mapping):
        raise UsageError(f"{where}: thresholds must map metric names to numbers, e.g. hit_rate: 0.60")
    for m, t in thresholds.items():
        if m not in METRIC_NAMES and m not in conversation_metric_names():
            raise UsageError(f"{where}: thresholds.{m}: unknown metric; {valid}; {naming_help()}")
        if isinstance(t, bool) or not isinstance(t, int | float) or math.isnan(t):
            raise UsageError(f"{where}: thresholds.{m}: {t!r} is not a number")
    nr = data.get("non_regression") or {}
    if not isinstance(nr, Mapping):
        raise UsageError(f"{where}: non_regression must be a mapping (enabled, tolerance, metrics)")
    unknown_keys = sorted(set(nr) - {"enabled", "tolerance", "metrics", "mode", "alpha"})
    if unknown_keys:
        raise UsageError(
            f"{where}: non_regression: unknown key(s) {', '.join(unknown_keys)}; "
            "expected enabled, tolerance, metrics, mode, alpha"
        )
    mode = nr.get("mode", "point")
    if mode not in MODES:
        raise UsageError(
            f"{where}: non_regression.mode: {mode!r} is not one of {', '.join(MODES)} (significant: fail only "
            "on a drop beyond the tolerance that a paired test tells from noise; point: on any such drop)"
        )
    alpha = nr.get("alpha", 0.05)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha <= 0.5:
        raise UsageError(f"{where}: non_regression.alpha: {alpha!r} must be a number in (0, 0.5], e.g. 0.05")
    enabled = nr.get("enabled", False)
    if not isinstance(enabled, bool):
        raise UsageError(f"{where}: non_regression.enabled: {enabled!r} is not true/false")
    tol = nr.get("tolerance", 0.0)
    if isinstance(tol, bool) or not isinstance(tol, int | float) or not tol >= 0:
        raise UsageError(f"{where}: non_regression.tolerance: {tol!r} must be a number >= 0")
    nr_metrics = nr.get("metrics") or []
    if not isinstance(nr_metrics, list):
        raise UsageError(f"{where}: non_regression.metrics must be a list of metric names")
    for m in nr_metrics:
        if m not in METRIC_NAMES:
            raise UsageError(f"{where}: non_regression.metrics: {m!r} is an unknown metric; {valid}")
    if enabled and not nr_metrics:
        raise UsageError(f"{where}: non_regression is enabled but lists no metrics")
    if not thresholds and not enabled:
        raise UsageError(
            f"{where}: no thresholds and non_regression disabled: such a gate always passes; add thresholds"
        )
    return schema.Gate(
        thresholds=types.MappingProxyType({str(m): float(t) for m, t in thresholds.items()}),
        max_system_errors=_check_max_system_errors(data.get("max_system_errors", 0), where),
        non_regression=schema.NonRegression(
            enabled=enabled,
            tolerance=float(tol),
            metrics=tuple(str(m) for m in nr_metrics),
            mode=str(mode),
            alpha=float(alpha),
        ),
        drift=_check_drift(data.get("drift"), where, valid),
    )


def _check_max_system_errors(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(
            f"{where}: max_system_errors: {value!r} must be an integer >= 0 (the entries whose system call "
            "may fail before the gate fails the run; 0: none)"
        )
    return value


def _check_drift(drift: Any, where: str, valid: str) -> schema.Drift:
    """The drift rule (off by default): a metric that fell by more than ``tolerance`` from the best of the last
    ``window`` tracked runs of the same family (or from the pinned ``reference`` run id) fails the gate."""
    drift = drift or {}
    if not isinstance(drift, Mapping):
        raise UsageError(f"{where}: drift must be a mapping (enabled, metrics, tolerance, window, reference)")
    unknown = sorted(set(drift) - {"enabled", "metrics", "tolerance", "window", "reference"})
    if unknown:
        raise UsageError(f"{where}: drift: unknown key(s) {', '.join(unknown)}; expected enabled, metrics, "
                         "tolerance, window, reference")  # fmt: skip
    enabled = drift.get("enabled", False)
    if not isinstance(enabled, bool):
        raise UsageError(f"{where}: drift.enabled: {enabled!r} is not true/false")
    metrics = drift.get("metrics") or []
    if not isinstance(metrics, list) or any(m not in METRIC_NAMES for m in metrics):
        raise UsageError(f"{where}: drift.metrics: {metrics!r} must list metric names; {valid}")
    tol = drift.get("tolerance", 0.02)
    if isinstance(tol, bool) or not isinstance(tol, int | float) or not tol >= 0:
        raise UsageError(f"{where}: drift.tolerance: {tol!r} must be a number >= 0")
    window = drift.get("window", 10)
    if isinstance(window, bool) or not isinstance(window, int) or window < 2:
        raise UsageError(f"{where}: drift.window: {window!r} must be an integer >= 2 (runs looked back over)")
    reference = drift.get("reference", "best")
    if not isinstance(reference, str) or not reference:
        raise UsageError(f"{where}: drift.reference: {reference!r}: 'best' or a pinned MLflow run id")
    if enabled and not metrics:
        raise UsageError(f"{where}: drift is enabled but lists no metrics")
    return schema.Drift(enabled=enabled, metrics=tuple(str(m) for m in metrics), tolerance=float(tol),
                        window=window, reference=reference)  # fmt: skip


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
            notes.append(f"drift: the pinned reference run {drift.reference} is not in the tracked history; "
                         "not checked")  # fmt: skip
            return failures, notes
    if not window and pinned is None:
        notes.append("drift: no tracked runs of this configuration family yet; not checked")
        return failures, notes
    cond = f"no drift > {_fmt_threshold(drift.tolerance)} in {', '.join(drift.metrics)}"
    for m in drift.metrics:
        now = summary["metrics"].get(m)
        if now is None:
            continue
        lower = m in LOWER_IS_BETTER
        past = [(h, h["metrics"][m]["value"]) for h in ([pinned] if pinned else window)
                if h["metrics"].get(m, {}).get("value") is not None]  # fmt: skip
        if not past:
            continue
        ref, best = (min if lower else max)(past, key=lambda hv: hv[1])
        worse = (now - best) if lower else (best - now)
        if worse > drift.tolerance + _EPS:
            steps = " -> ".join(f"{str(h['commit'])[:8]} {v:.4f}" for h, v in past[-6:])
            failures.append(GateFailure(m, cond, float(now), worse - drift.tolerance,
                f"{m} drifted by {worse:.4f} from {best:.4f} (run {ref['run_id']}, commit {str(ref['commit'])[:8]}) "
                f"to {now:.4f} over the last {len(past)} tracked runs ({steps} -> this run), beyond the tolerance "
                f"{drift.tolerance:.4f}"))  # fmt: skip
    return failures, notes


def gate(
    summary: Summary,
    gate_cfg: schema.Gate,
    baseline: Summary | None = None,
    *,
    allow_different_k: bool = False,
    history: Sequence[Mapping[str, Any]] | None = None,
    source: str | None = None,
) -> GateResult:
    """Apply thresholds (``>=``; ``<=`` for lower-is-better metrics) and, with a baseline, non-regression.

    ``gate_cfg``: the composed ``gate`` block, or one :func:`check_gate_config` made from a hand-written gate.
    A summary with no entries fails ("nothing was measured"), and so do one marked ``complete: false`` ("the
    run is incomplete") and one with more system errors than ``max_system_errors``, whatever its metrics say.
    A threshold on a metric the summary does not measure (null) fails as "not measured". A baseline cut at
    another k is refused (UsageError) unless ``allow_different_k``. ``source`` says where the rules came from
    (printed with the verdict, recorded in JUnit).
    """
    rules = check_gate_config(gate_cfg)
    summary = check_summary(summary, "summary")
    _refuse_unmeasured(rules, summary, baseline)
    failures: list[GateFailure] = []
    conditions: list[str] = []
    notes: list[str] = []
    limits: list[Detectable] = []
    failures += _run_failures(summary, rules.max_system_errors)
    found, conditions = _threshold_failures(rules.thresholds, summary["metrics"])
    failures += found
    nr = rules.non_regression
    if nr.enabled:
        if baseline is None:
            notes.append("non_regression is enabled but no baseline summary was given: not checked")
        else:
            found, cond, nr_notes = _regression_failures(summary, baseline, nr, allow_different_k, limits)
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
    passed = not failures
    line = f"CI gate ({' and '.join(conditions)}): {'PASS' if passed else 'FAIL'}"
    return GateResult(passed, line, failures, conditions, notes, source or GateResult.source, limits)


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
        unmeasured = run["metrics"].get("not_measured") or {}
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


def _aligned(baseline: Summary, summary: Summary) -> list[Mapping[str, Any]]:
    """The baseline's entries in the summary's order (significant mode pairs the same entries: compare checks)."""
    by_id = {e["id"]: e for e in baseline["entries"]}
    return [by_id.get(e["id"], {"scores": {}}) for e in summary["entries"]]


def _regression_failures(
    summary: Summary,
    baseline: Summary,
    nr: schema.NonRegression,
    allow_different_k: bool,
    limits: list[Detectable],
) -> tuple[list[GateFailure], str, list[str]]:
    """Non-regression against the baseline: the failures, the condition, and the notes (a different k allowed,
    a drop the paired test cannot tell from noise in ``significant`` mode, the smallest drop that test can
    detect at this n, appended to ``limits`` too)."""
    baseline = check_summary(baseline, "baseline")
    notes: list[str] = []
    k_note = check_same_k(baseline, summary, "baseline", "summary", allow_different_k=allow_different_k)
    if k_note:
        notes.append(k_note)
    cond = f"no regression > {_fmt_threshold(nr.tolerance)} in {', '.join(nr.metrics)} vs baseline"
    p_holm: dict[str, float | None] | None = None  # None: point mode, any drop beyond the tolerance fails
    if nr.mode == "significant":
        cond += f" (significant at {_fmt_threshold(nr.alpha)}, Holm)"
        p_holm = _paired_p_values(baseline, summary, list(nr.metrics), allow_different_k)
        power = [detectable(m, column(_aligned(baseline, summary), m), column(summary["entries"], m),
                            lower_is_better=m in LOWER_IS_BETTER, family=len(nr.metrics), alpha=nr.alpha,
                            tolerance=nr.tolerance) for m in nr.metrics]  # fmt: skip
        notes += [d.text() for d in power]
        limits.extend(power)
    failures: list[GateFailure] = []
    for m in nr.metrics:
        v, b = summary["metrics"].get(m), baseline["metrics"].get(m)
        if v is None or b is None:
            where = "the summary" if v is None else "the baseline"
            failures.append(
                GateFailure(
                    m,
                    cond,
                    None if v is None else float(v),
                    None,
                    f"{m} non-regression: not measured (null in {where})",
                )
            )
            continue
        failure, note = _regression(m, v, b, cond, nr, p_holm)
        failures += [failure] if failure else []
        notes += [note] if note else []
    return failures, cond, notes


def _regression(
    m: str, v: float, b: float, cond: str, nr: schema.NonRegression, p_holm: Mapping[str, float | None] | None
) -> tuple[GateFailure | None, str | None]:
    """Whether ``m`` regressed from ``b`` to ``v`` beyond the tolerance: a failure, or (in ``significant``
    mode, ``p_holm`` given, when the paired test cannot tell the drop from noise) a note, or neither."""
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
            f"{'n/a' if p is None else f'{p:.3f}'} >= {nr.alpha:g}): not failed"
        )
        return None, note
    reason = f"{what} by {worse - tol:.4f}" + (
        f" (Holm-adjusted p = {p:.3g})" if p_holm is not None and p is not None else ""
    )
    return GateFailure(m, cond, float(v), worse - tol, reason), None


def _run_failures(summary: Summary, max_system_errors: int) -> list[GateFailure]:
    """What fails a run whatever its metrics say: no entries, an incomplete run, or more entries whose system
    call failed than ``max_system_errors`` (those entries are scored by no metric, so the metrics alone would
    pass a run whose system failed on 4 entries of 10)."""
    failures: list[GateFailure] = []
    if not summary["entries"]:
        failures.append(
            GateFailure(
                "(entries)",
                "at least one entry",
                None,
                None,
                "nothing was measured: the summary has no entries (an empty split or a hand-written summary); "
                "gate a summary written by `doceval eval` or `doceval evaluate`",
            )
        )
    if summary.get("complete") is False:
        incomplete = summary.get("incomplete")
        reason = incomplete.get("reason") if isinstance(incomplete, Mapping) else None
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
                f"{errors} of {len(summary['entries'])} entries had a system error (the system under test failed "
                f"on them; they are scored by no metric), more than max_system_errors: {max_system_errors} in the "
                "gate config; fix the system and rerun, or raise max_system_errors",
            )
        )
    return failures


def system_errors(summary: Summary) -> int:
    """``metrics.counts.system_errors``; 0 for a summary written before the count existed."""
    counts = summary["metrics"].get("counts")
    value = counts.get("system_errors", 0) if isinstance(counts, Mapping) else 0
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
