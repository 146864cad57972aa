"""Reading run summaries, comparing two runs side by side, the CI gate, report.md and the comparison plot.

A run summary is what ``doceval eval --output PATH`` writes: ``{"metrics": {...}, "config": {...},
"entries": [...]}`` (DESIGN.md sections 4 and 8). Every summary metric is the mean of the non-null per-entry
values of the same name, so two runs are compared entry by entry, paired by entry id.

Nothing here imports mlflow: an MLflow run id is resolved through an optional ``mlflow_loader`` callable that
the caller (the CLI, via :mod:`doceval.tracking`) provides.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from doceval.errors import UsageError
from doceval.metrics import ANSWER_METRICS, RETRIEVAL_METRICS, mean_or_none
from doceval.stats import paired_bootstrap_ci, win_tie_loss

__all__ = [
    "METRIC_KEYS",
    "LOWER_IS_BETTER",
    "CompareResult",
    "MetricChange",
    "Unanswerable",
    "GateFailure",
    "GateResult",
    "load_summary",
    "check_summary",
    "compare",
    "format_compare",
    "load_gate_config",
    "check_gate_config",
    "gate",
    "render_report",
    "plot_compare",
]

METRIC_KEYS: tuple[str, ...] = (*RETRIEVAL_METRICS, "refused_correctly", *ANSWER_METRICS)
LOWER_IS_BETTER = frozenset({"overrefusal_rate"})

Summary = Mapping[str, Any]
MlflowLoader = Callable[[str], Mapping[str, Any]]

_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_EPS = 1e-9  # float slack for gate comparisons: 0.6 >= 0.60 must hold whatever the summation order
_FIX = "pass a summary JSON written by `doceval eval --output PATH`"


# ------------------------------------------------------------------------------------------- loading


def load_summary(path_or_run_id: str | Path, mlflow_loader: MlflowLoader | None = None) -> dict[str, Any]:
    """A run summary from a JSON file, or from MLflow when the argument is a run id (32 hex characters).

    Anything that is not a summary (missing file, bad JSON, missing ``metrics``/``entries``, malformed
    entries, duplicate entry ids) raises a :class:`UsageError` naming the file and the fix.
    """
    text = str(path_or_run_id)
    path = Path(text)
    if path.is_dir():
        raise UsageError(f"{path}: is a directory, not a run summary; {_FIX}")
    if not path.is_file():
        if _RUN_ID.match(text.lower()):
            if mlflow_loader is None:
                raise UsageError(
                    f"{text}: no such file, and it looks like an MLflow run id but MLflow lookup is not "
                    "available "
                    f"here; {_FIX}"
                )
            data: Any = mlflow_loader(text.lower())
            return check_summary(data, f"MLflow run {text}")
        raise UsageError(f"{path}: run summary not found; {_FIX}, or an MLflow run id (32 hex characters)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not a text file, so not a run summary; {_FIX}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}), so not a run summary; {_FIX}"
        ) from exc
    return check_summary(data, str(path))


def check_summary(data: Any, where: str) -> dict[str, Any]:
    """Check the shape of a summary (``where`` names it in errors) and return it as a dict."""

    def bad(what: str) -> UsageError:
        return UsageError(f"{where}: not a doceval run summary ({what}); {_FIX}")

    if not isinstance(data, dict):
        raise bad(f"top level is a JSON {type(data).__name__}, expected an object")
    missing = [k for k in ("metrics", "entries") if k not in data]
    if missing:
        raise bad(f"missing key{'s' if len(missing) > 1 else ''} {', '.join(repr(k) for k in missing)}")
    metrics, entries = data["metrics"], data["entries"]
    if not isinstance(metrics, dict):
        raise bad("'metrics' is not an object")
    if not isinstance(entries, list):
        raise bad("'entries' is not a list")
    if not isinstance(data.get("config", {}), dict):
        raise bad("'config' is not an object")
    for m in METRIC_KEYS:
        v = metrics.get(m)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
            raise bad(f"metrics.{m} is {v!r}, expected a number or null")
    seen: set[str] = set()
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise bad(f"entries[{i}] is not an object")
        if not isinstance(e.get("id"), str):
            raise bad(f"entries[{i}] has no string 'id'")
        if not isinstance(e.get("scores"), dict):
            raise bad(f"entries[{i}] ({e['id']}) has no 'scores' object")
        if e["id"] in seen:
            raise bad(f"entries[{i}]: duplicate entry id {e['id']!r}")
        seen.add(e["id"])
        for m in METRIC_KEYS:
            v = e["scores"].get(m)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise bad(f"entries[{i}] ({e['id']}).scores.{m} is {v!r}, expected a number or null")
    return data


def _golden_md5(summary: Summary) -> str | None:
    golden = (summary.get("config") or {}).get("golden") or {}
    md5 = golden.get("md5") if isinstance(golden, dict) else None
    return str(md5) if md5 else None


def _doc_ids(entry: Mapping[str, Any]) -> list[str]:
    """The document ids an entry retrieved (after floors and the cut at k), in rank order."""
    out: list[str] = []
    for item in entry.get("retrieved") or []:
        if isinstance(item, list | tuple) and item:
            out.append(str(item[0]))
        elif isinstance(item, dict) and "id" in item:
            out.append(str(item["id"]))
        else:
            out.append(str(item))
    return out


def _entries(n: int) -> str:
    return f"{n} {'entry' if n == 1 else 'entries'}"


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _column(entries: Sequence[Mapping[str, Any]], metric: str) -> np.ndarray:
    return np.array(
        [np.nan if (v := e["scores"].get(metric)) is None else float(v) for e in entries], dtype=np.float64
    )


# ------------------------------------------------------------------------------------------- compare


@dataclass
class MetricChange:
    metric: str
    base: float | None  # mean over the compared entries where the metric applies (None: nothing to average)
    new: float | None
    change: float | None  # new - base
    ci: tuple[float, float] | None  # paired 95% bootstrap interval of mean(new - base)
    wins: int  # entries where NEW is better (for overrefusal_rate: lower)
    ties: int
    losses: int
    n_paired: int  # entries scored (non-null) in both runs


@dataclass
class Unanswerable:
    id: str
    question: str
    sources: list[str]  # empty: no sources reached the agent
    refused: bool | None


@dataclass
class CompareResult:
    base_label: str
    new_label: str
    rows: list[MetricChange]
    unanswerable: list[Unanswerable]  # every out-of-scope entry of NEW (among the compared entries)
    n_compared: int
    only_in_base: list[str] = field(default_factory=list)
    only_in_new: list[str] = field(default_factory=list)
    base_md5: str | None = None
    new_md5: str | None = None
    notes: list[str] = field(default_factory=list)

    def row(self, metric: str) -> MetricChange:
        for r in self.rows:
            if r.metric == metric:
                return r
        raise KeyError(metric)


def compare(
    base: Summary,
    new: Summary,
    *,
    allow_different_golden: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    base_label: str = "BASE",
    new_label: str = "NEW",
) -> CompareResult:
    """Compare two runs metric by metric, pairing entries by id.

    Runs scored on different golden sets (``config.golden.md5`` differ) or over different entry ids are
    refused unless ``allow_different_golden``; then only the shared entries are compared and the result says
    how many were dropped.
    """
    base = check_summary(base, base_label)
    new = check_summary(new, new_label)
    notes: list[str] = []
    b_md5, n_md5 = _golden_md5(base), _golden_md5(new)
    flag = "--allow-different-golden"
    if b_md5 and n_md5 and b_md5 != n_md5:
        if not allow_different_golden:
            raise UsageError(
                f"{base_label} and {new_label} were scored on different golden sets (config.golden.md5 "
                f"{b_md5} vs {n_md5}); compare runs over the same golden set, or pass {flag} to compare the "
                "entries they share"
            )
        notes.append(f"different golden sets (md5 {b_md5} vs {n_md5}): entries paired by id")
    elif not (b_md5 and n_md5):
        notes.append("golden md5 missing from a summary's config: same golden set not verified")

    b_by_id = {e["id"]: e for e in base["entries"]}
    n_by_id = {e["id"]: e for e in new["entries"]}
    only_b = [i for i in b_by_id if i not in n_by_id]
    only_n = [i for i in n_by_id if i not in b_by_id]
    if only_b or only_n:
        what = (
            f"{len(only_b)} entries only in {base_label} (e.g. {', '.join(only_b[:3]) or '-'}), "
            f"{len(only_n)} only in {new_label} (e.g. {', '.join(only_n[:3]) or '-'})"
        )
        if not allow_different_golden:
            raise UsageError(
                f"{base_label} and {new_label} cover different entries: {what}; "
                f"compare runs over the same split and --limit, or pass {flag} to compare the shared entries"
            )
    ids = [i for i in n_by_id if i in b_by_id]
    if not ids:
        raise UsageError(f"{base_label} and {new_label} have no entry ids in common: nothing to compare")
    if only_b or only_n:
        notes.append(
            f"dropped {_entries(len(only_b) + len(only_n))} not in both runs ({len(only_b)} only in "
            f"{base_label}, {len(only_n)} only in {new_label}); compared the {_entries(len(ids))} shared"
        )

    b_rows = [b_by_id[i] for i in ids]
    n_rows = [n_by_id[i] for i in ids]
    rows: list[MetricChange] = []
    for m in METRIC_KEYS:
        bc, nc = _column(b_rows, m), _column(n_rows, m)
        bv, nv = mean_or_none(bc), mean_or_none(nc)
        if not (only_b or only_n):
            for label, summary, value in ((base_label, base, bv), (new_label, new, nv)):
                reported = summary["metrics"].get(m)
                if (reported is None) != (value is None) or (
                    reported is not None and value is not None and abs(float(reported) - value) > 1e-6
                ):
                    notes.append(
                        f"{label}: metrics.{m} = {reported} but its entries average to {value}; "
                        "using the entries"
                    )
        ci = paired_bootstrap_ci(bc, nc, n_boot=n_boot, seed=seed)
        w, t, lo = win_tie_loss(nc, bc) if m in LOWER_IS_BETTER else win_tie_loss(bc, nc)
        rows.append(
            MetricChange(
                metric=m,
                base=bv,
                new=nv,
                change=None if bv is None or nv is None else nv - bv,
                ci=None if ci is None else (float(ci[0]), float(ci[1])),
                wins=w,
                ties=t,
                losses=lo,
                n_paired=int((~(np.isnan(bc) | np.isnan(nc))).sum()),
            )
        )

    unanswerable = [
        Unanswerable(e["id"], _one_line(e.get("question", "")), _doc_ids(e), e.get("refused"))
        for e in n_rows
        if e.get("out_of_scope")
    ]
    return CompareResult(
        base_label, new_label, rows, unanswerable, len(ids), only_b, only_n, b_md5, n_md5, notes
    )


def _num(v: float | None) -> str:
    if v is None or math.isnan(v):
        return "n/a"
    return f"{0.0 if round(v, 4) == 0 else v:.4f}"


def _signed(v: float | None) -> str:
    if v is None or math.isnan(v):
        return "n/a"
    return f"{0.0 if round(v, 4) == 0 else v:+.4f}"


def _interval(ci: tuple[float, float] | None) -> str:
    return "n/a" if ci is None else f"[{_signed(ci[0])}, {_signed(ci[1])}]"


# metric, baseline, new, change, interval, W/T/L, n  (93 columns with the separators)
_WIDTHS = (19, 8, 8, 8, 18, 15, 5)
_HEADER = ("metric", "baseline", "new", "change", "95% CI of change", "W/T/L", "n")


def _table_line(cells: Sequence[str]) -> str:
    parts = []
    for i, (cell, width) in enumerate(zip(cells, _WIDTHS, strict=True)):
        parts.append(cell.ljust(width) if i in (0, 4) else cell.rjust(width))
    return "  ".join(parts).rstrip()


def format_compare(result: CompareResult, gate_line: str | None = None) -> str:
    """The side-by-side table, the ``unanswerable:`` lines for NEW, then the gate line."""
    lines = [f"baseline: {result.base_label}", f"new:      {result.new_label}"]
    lines += [f"note: {n}" for n in result.notes]
    lines += ["", _table_line(_HEADER), _table_line(["-" * w for w in _WIDTHS])]
    for r in result.rows:
        name = r.metric + ("*" if r.metric in LOWER_IS_BETTER else "")
        wtl = f"{r.wins}/{r.ties}/{r.losses}" if r.n_paired else "-"
        lines.append(
            _table_line(
                [name, _num(r.base), _num(r.new), _signed(r.change), _interval(r.ci), wtl, str(r.n_paired)]
            )
        )
    lines += [
        "change = new - baseline; interval: paired bootstrap over the n entries scored in both runs;",
        "W/T/L = entries where new is better/equal/worse; * lower is better.",
        "",
    ]
    if not result.unanswerable:
        lines.append(f"no out-of-scope entries in {result.new_label}: nothing to list as unanswerable")
    for u in result.unanswerable:
        lines.append(f"unanswerable: {u.question} -> {', '.join(u.sources) if u.sources else 'no sources'}")
    if gate_line:
        lines += ["", gate_line]
    return "\n".join(lines)


def plot_compare(result: CompareResult, path: str | Path) -> Path:
    """A PNG of each metric's change (new - baseline) with its paired 95% interval, around 0."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = list(reversed(result.rows))  # first metric on top
    fig = Figure(figsize=(8.5, 0.5 * len(rows) + 1.6), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.axvline(0.0, color="0.3", linewidth=1)
    span = 0.0
    for y, r in enumerate(rows):
        if r.change is None:
            ax.text(
                0.0, y, "n/a (not measured in both runs)", va="center", ha="center", color="0.45", fontsize=9
            )
            continue
        better = -r.change if r.metric in LOWER_IS_BETTER else r.change
        color = "tab:green" if better > 1e-12 else "tab:red" if better < -1e-12 else "0.4"
        lo, hi = r.ci if r.ci is not None else (r.change, r.change)
        ax.errorbar(
            [r.change],
            [y],
            xerr=[[max(r.change - lo, 0.0)], [max(hi - r.change, 0.0)]],
            fmt="o",
            color=color,
            ecolor=color,
            capsize=4,
            markersize=6,
        )
        ax.annotate(
            f"{_signed(r.change)}",
            (r.change, y),
            textcoords="offset points",
            xytext=(0, 7),
            ha="center",
            fontsize=8,
            color=color,
        )
        span = max(span, abs(lo), abs(hi), abs(r.change))
    span = span * 1.15 if span > 0 else 0.05
    ax.set_xlim(-span, span)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r.metric + (" (lower=better)" if r.metric in LOWER_IS_BETTER else "") for r in rows])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel("change (new - baseline), paired 95% bootstrap interval")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(
        f"{Path(result.new_label).name} vs {Path(result.base_label).name} ({result.n_compared} entries)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out, format="png")
    return out


# ------------------------------------------------------------------------------------------- gate


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


def _fmt_threshold(v: float) -> str:
    s = f"{v:.2f}"
    return s if abs(float(s) - v) < 1e-12 else f"{v:.6g}"


def load_gate_config(path: str | Path) -> dict[str, Any]:
    """A gate config YAML (``conf/gate/*.yaml``, or a params.yaml with a ``gate`` block), checked."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{p}: gate config not found; pass an existing conf/gate/*.yaml")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UsageError(f"{p}: not valid YAML ({exc}); fix the file or pass another gate config") from exc
    if isinstance(data, dict) and "thresholds" not in data and isinstance(data.get("gate"), dict):
        data = data["gate"]
    return check_gate_config(data, str(p))


def check_gate_config(cfg: Any, where: str = "gate config") -> dict[str, Any]:
    """Validate a gate config; unknown keys or metric names are errors (a typo must not pass silently)."""
    valid = f"valid metrics: {', '.join(METRIC_KEYS)}"
    if not isinstance(cfg, Mapping):
        raise UsageError(f"{where}: expected a mapping with 'thresholds' and 'non_regression'")
    unknown_keys = sorted(set(cfg) - {"thresholds", "non_regression"})
    if unknown_keys:
        raise UsageError(
            f"{where}: unknown key(s) {', '.join(unknown_keys)}; expected thresholds, non_regression"
        )
    thresholds = cfg.get("thresholds") or {}
    if not isinstance(thresholds, Mapping):
        raise UsageError(f"{where}: thresholds must map metric names to numbers, e.g. hit_rate: 0.60")
    for m, t in thresholds.items():
        if m not in METRIC_KEYS:
            raise UsageError(f"{where}: thresholds.{m}: unknown metric; {valid}")
        if isinstance(t, bool) or not isinstance(t, int | float) or math.isnan(t):
            raise UsageError(f"{where}: thresholds.{m}: {t!r} is not a number")
    nr = cfg.get("non_regression") or {}
    if not isinstance(nr, Mapping):
        raise UsageError(f"{where}: non_regression must be a mapping (enabled, tolerance, metrics)")
    unknown_keys = sorted(set(nr) - {"enabled", "tolerance", "metrics"})
    if unknown_keys:
        raise UsageError(
            f"{where}: non_regression: unknown key(s) {', '.join(unknown_keys)}; "
            "expected enabled, tolerance, metrics"
        )
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
        if m not in METRIC_KEYS:
            raise UsageError(f"{where}: non_regression.metrics: {m!r} is an unknown metric; {valid}")
    if enabled and not nr_metrics:
        raise UsageError(f"{where}: non_regression is enabled but lists no metrics")
    if not thresholds and not enabled:
        raise UsageError(
            f"{where}: no thresholds and non_regression disabled: such a gate always passes; add thresholds"
        )
    return {
        "thresholds": {str(m): float(t) for m, t in thresholds.items()},
        "non_regression": {
            "enabled": enabled,
            "tolerance": float(tol),
            "metrics": [str(m) for m in nr_metrics],
        },
    }


def gate(summary: Summary, gate_cfg: Mapping[str, Any], baseline: Summary | None = None) -> GateResult:
    """Apply thresholds (``>=``; ``<=`` for overrefusal_rate) and, with a baseline, non-regression.

    A threshold on a metric the summary does not measure (null) fails as "not measured".
    """
    cfg = check_gate_config(gate_cfg)
    summary = check_summary(summary, "summary")
    metrics = summary["metrics"]
    failures: list[GateFailure] = []
    conditions: list[str] = []
    notes: list[str] = []
    for m, t in cfg["thresholds"].items():
        lower = m in LOWER_IS_BETTER
        cond = f"{m} {'<=' if lower else '>='} {_fmt_threshold(t)}"
        conditions.append(cond)
        v = metrics.get(m)
        if v is None:
            failures.append(GateFailure(m, cond, None, None, f"{cond}: not measured (null in the summary)"))
            continue
        miss = (v - t) if lower else (t - v)
        if miss > _EPS:
            word = "over" if lower else "short"
            failures.append(
                GateFailure(m, cond, float(v), miss, f"{cond}: {m} = {v:.4f}, {word} by {miss:.4f}")
            )
    nr = cfg["non_regression"]
    if nr["enabled"]:
        tol = nr["tolerance"]
        if baseline is None:
            notes.append("non_regression is enabled but no baseline summary was given: not checked")
        else:
            baseline = check_summary(baseline, "baseline")
            cond = f"no regression > {_fmt_threshold(tol)} in {', '.join(nr['metrics'])} vs baseline"
            conditions.append(cond)
            for m in nr["metrics"]:
                v, b = metrics.get(m), baseline["metrics"].get(m)
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
                worse = (v - b) if m in LOWER_IS_BETTER else (b - v)
                if worse > tol + _EPS:
                    verb = "rose" if m in LOWER_IS_BETTER else "dropped"
                    failures.append(
                        GateFailure(
                            m,
                            cond,
                            float(v),
                            worse - tol,
                            f"{m} {verb} by {worse:.4f} ({b:.4f} -> {v:.4f}), beyond the tolerance {tol:.4f} "
                            f"by {worse - tol:.4f}",
                        )
                    )
    passed = not failures
    line = f"CI gate ({' and '.join(conditions)}): {'PASS' if passed else 'FAIL'}"
    return GateResult(passed, line, failures, conditions, notes)


# ------------------------------------------------------------------------------------------- report.md


def _md(text: Any) -> str:
    return _one_line(text).replace("|", "\\|")


def _table(
    header: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str] | None = None
) -> list[str]:
    align = align or ["l"] + ["r"] * (len(header) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(rule) + " |",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _n_of(summary: Summary, metric: str) -> int:
    counts = summary["metrics"].get("counts") or {}
    n = counts.get(f"n_{metric}")
    if isinstance(n, int):
        return n
    return int((~np.isnan(_column(summary["entries"], metric))).sum())


def _group_table(groups: Mapping[str, Any], label: str) -> list[str]:
    if not groups:
        return ["(none)"]
    shown = [
        m
        for m in METRIC_KEYS
        if any(isinstance(g, Mapping) and g.get(m) is not None for g in groups.values())
    ]
    header = [label, "n", "in scope", "out of scope", *shown]
    rows = []
    # Groups with no in-scope entry (typically one unindexed library each) would bury the table: one row for
    # all of them, its refusal metrics weighted by each group's out-of-scope count.
    only_oos = {k: g for k, g in groups.items() if isinstance(g, Mapping) and not g.get("n_in_scope")}
    if len(only_oos) > 1 and label != "kind":
        groups = {k: g for k, g in groups.items() if k not in only_oos}
        n_oos = sum(int(g.get("n_out_of_scope") or 0) for g in only_oos.values())
        merged: dict[str, Any] = {"n": sum(int(g.get("n") or 0) for g in only_oos.values()), "n_in_scope": 0,
                                  "n_out_of_scope": n_oos}  # fmt: skip
        for m in ("refused_correctly", "refusal_rate"):
            pairs = [
                (float(g[m]), int(g.get("n_out_of_scope") or 0))
                for g in only_oos.values()
                if g.get(m) is not None and g.get("n_out_of_scope")
            ]
            weight = sum(w for _, w in pairs)
            merged[m] = sum(v * w for v, w in pairs) / weight if weight else None
        plural = {"library": "libraries"}.get(label, label + "s")
        groups = {**groups, f"({len(only_oos)} {plural} with no in-scope entry)": merged}
    for name, g in groups.items():
        g = g if isinstance(g, Mapping) else {}
        rows.append(
            [
                _md(name),
                str(g.get("n", "")),
                str(g.get("n_in_scope", "")),
                str(g.get("n_out_of_scope", "")),
                *(_num(g.get(m)) for m in shown),
            ]
        )
    out = _table(header, rows)
    hidden = [m for m in METRIC_KEYS if m not in shown]
    if hidden:
        out += ["", f"Not measured in any group: {', '.join(hidden)}."]
    return out


def _yes_no(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else "?"


def _triple(values: Any) -> str:
    if not values:
        return "-"
    return " / ".join(f"{float(v):.4f}" for v in values)


def render_report(summary: Summary, calibration: Mapping[str, Any] | None = None) -> str:
    """report.md: headline metrics with intervals, counts, breakdowns, floors, provenance, leaks."""
    summary = check_summary(summary, "summary")
    m = summary["metrics"]
    cfg = summary.get("config") or {}
    counts = m.get("counts") or {}
    ci95 = m.get("ci95") or {}
    golden = cfg.get("golden") or {}
    retriever = (cfg.get("retriever") or {}).get("name", "?")
    out = ["# doceval report", ""]
    out.append(
        f"Split `{cfg.get('split')}`, k = {cfg.get('k')}, retriever `{retriever}`, golden set "
        f"`{golden.get('path')}` (md5 `{golden.get('md5')}`), {len(summary['entries'])} entries."
    )
    out += ["", "## Headline metrics", ""]
    rows = []
    for key in METRIC_KEYS:
        name = key + (" (lower is better)" if key in LOWER_IS_BETTER else "")
        v = m.get(key)
        ci = ci95.get(key)
        if v is None and key == "answer_accuracy" and m.get("not_judged"):
            value = "not judged"
        elif v is None:
            value = "n/a (no entries)"
        else:
            value = _num(v)
        ci_text = f"[{_num(ci[0])}, {_num(ci[1])}]" if isinstance(ci, list | tuple) and len(ci) == 2 else "-"
        rows.append([name, value, ci_text, str(_n_of(summary, key))])
    out += _table(["metric", "value", "95% CI", "n"], rows, ["l", "r", "l", "r"])
    if m.get("answer_accuracy") is None and m.get("not_judged"):
        out += ["", "answer_accuracy: not judged (no judge ran for this run)."]
    if counts.get("judge_errors"):
        out += ["", f"**{counts['judge_errors']} judge errors**: excluded from answer_accuracy."]

    out += ["", "## Counts", ""]
    out += _table(["count", "value"], [[_md(k), str(v)] for k, v in counts.items()]) if counts else ["(none)"]
    for title, key, label in (
        ("Per library", "by_library", "library"),
        ("Per library@version", "by_pin", "pin"),
        ("Per kind", "by_kind", "kind"),
    ):
        out += ["", f"## {title}", ""]
        out += _group_table(m.get(key) or {}, label)

    floors = cfg.get("floors") or {}
    out += ["", "## Floors", ""]
    if floors:
        out.append(f"Source: `{floors.get('source', '?')}`. Global floor: {_num(floors.get('global'))}.")
        per = floors.get("per_library") or {}
        if per:
            out += [""] + _table(["library", "floor"], [[_md(k), f"{float(v):.4f}"] for k, v in per.items()])
        else:
            out += ["", "No per-library floors: every library uses the global floor."]
        prov = floors.get("provenance") or {}
        if prov:
            out += ["", "Floors provenance: " + ", ".join(f"{k} `{_md(v)}`" for k, v in prov.items()) + "."]
    else:
        out.append("Not recorded in this summary.")

    if calibration is not None:
        out += ["", "## Calibration", ""]
        # Either {"per_library": {lib: {...}}, "objective", "split"} or the floors artifact itself
        # ({"per_library": {lib: floor}, "libraries": {lib: {...}}, "provenance": {"objective", "split"}}).
        cal_prov = calibration.get("provenance") or {}
        objective_name = calibration.get("objective") or cal_prov.get("objective")
        out.append(
            f"Objective `{objective_name}`, maximised per library on split "
            f"`{calibration.get('split') or cal_prov.get('split')}`."
        )
        per_lib = calibration.get("libraries") or calibration.get("per_library") or {}
        rows, unsep = [], []
        for lib, c in per_lib.items():
            c = c if isinstance(c, Mapping) else {"floor": c}
            sep = c.get("separable")
            sep_text = "yes" if sep is True else "**no**" if sep is False else "?"
            objective = c.get("objective")
            rows.append(
                [
                    _md(lib),
                    _num(None if c.get("floor") is None else float(c["floor"])),
                    _num(None if objective is None else float(objective)),
                    sep_text,
                    _triple(c.get("in_scope_top")),
                    _triple(c.get("out_of_scope_top")),
                ]
            )
            if sep is False:
                unsep.append(str(lib))
        out.append("")
        out += (
            _table(
                [
                    "library",
                    "floor",
                    "objective",
                    "separable",
                    "in-scope relevant score (min / median / max)",
                    "out-of-scope top score (min / median / max)",
                ],
                rows,
                ["l", "r", "r", "l", "l", "l"],
            )
            if rows
            else ["(no libraries)"]
        )
        out.append("")
        if unsep:
            out.append(
                f"No floor separates in-scope from out-of-scope scores for: {', '.join(unsep)}. "
                "The chosen floor trades hits for correct refusals there."
            )
        elif rows:
            out.append("For every library some floor separates in-scope from out-of-scope scores.")
        differ = []
        if floors:
            for lib, c in per_lib.items():
                want = c.get("floor") if isinstance(c, Mapping) else c
                got = (floors.get("per_library") or {}).get(lib, floors.get("global", 0.0))
                if want is not None and abs(float(got) - float(want)) > 1e-12:
                    differ.append(f"{lib} (calibrated {float(want):.4f}, used {float(got):.4f})")
        if differ:
            out += ["", f"**Note**: this run did not use the calibrated floors for: {', '.join(differ)}."]

    prov = cfg.get("provenance") or {}
    out += ["", "## Provenance", ""]
    dirty = prov.get("git_dirty")
    out += [
        f"- git commit: `{prov.get('git_commit')}`"
        + (
            " (**dirty**: uncommitted changes, the numbers may not be reproducible)"
            if dirty
            else " (clean)"
            if dirty is False
            else " (dirty flag unknown)"
        ),
        f"- golden set: `{golden.get('path')}` md5 `{golden.get('md5')}`",
    ]
    for key in ("run_key", "corpus_hash"):
        if cfg.get(key):
            out.append(f"- {key}: `{cfg[key]}`")
    if prov.get("python"):
        out.append(f"- python: {prov['python']}")

    out += ["", "## Out-of-scope entries that still got sources", ""]
    leaks = [e for e in summary["entries"] if e.get("out_of_scope") and _doc_ids(e)]
    n_oos = sum(bool(e.get("out_of_scope")) for e in summary["entries"])
    if leaks:
        out.append(f"{len(leaks)} of {n_oos} out-of-scope entries got sources:")
        out.append("")
        out += _table(
            ["id", "question", "sources", "agent refused"],
            [
                [
                    _md(e["id"]),
                    _md(e.get("question", "")),
                    ", ".join(f"`{d}`" for d in _doc_ids(e)),
                    _yes_no(e.get("refused")),
                ]
                for e in leaks
            ],
            ["l", "l", "l", "l"],
        )
    else:
        out.append(f"None: all {n_oos} out-of-scope entries got no sources.")
    return "\n".join(out) + "\n"
