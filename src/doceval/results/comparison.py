"""`compare`: two runs metric by metric, paired by entry id: the change with its paired 95% interval, the
p-value of "no change" and its Holm adjustment over the table, W/T/L and the unanswerable list.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from doceval.common.table import format_table
from doceval.common.text import one_line, printable
from doceval.errors import UsageError
from doceval.results.conversation_compare import (
    AllTurnsCorrectChange,
    PositionChange,
    all_turns_correct_change,
    format_conversation_changes,
    position_changes,
)
from doceval.results.judges import JUDGED_METRICS, answer_label, check_same_judge, evidence_notes
from doceval.results.summaries import (
    Summary,
    _doc_ids,
    _entries,
    _golden_md5,
    _one_line,
    check_same_corpus,
    check_same_k,
    checked_summary,
    rel1_note,
    shown_metrics,
)
from doceval.scoring.aggregate import column
from doceval.scoring.failures import transitions
from doceval.scoring.intervals import MIN_DIFFERING, holm, paired_change
from doceval.scoring.metrics import mean_or_none
from doceval.scoring.registry import LOWER_IS_BETTER, METRIC_NAMES
from doceval.scoring.stats import win_tie_loss
from doceval.summary import Summary as TypedSummary
from doceval.summary import settings_of

_ALLOW_GOLDEN = "--allow-different-golden"


@dataclass
class MetricChange:
    metric: str
    base: float | None  # mean over the compared entries where the metric applies (None: nothing to average)
    new: float | None
    change: float | None  # new - base
    ci: (
        tuple[float, float] | None
    )  # paired 95% interval of mean(new - base) (scoring.intervals.paired_change)
    wins: int  # entries where NEW is better (for overrefusal_rate: lower)
    ties: int
    losses: int
    n_paired: int  # entries scored (non-null) in both runs
    p_value: float | None = None  # two-sided, "no change": exact McNemar (binary) or sign-flip permutation
    p_holm: float | None = None  # p_value adjusted (Holm) for the number of metrics compared in the table
    method: str = ""  # newcombe+mcnemar | sign-flip | "" (no interval) | not measured
    ci_note: str | None = None  # why no interval for paired entries: "too few differing entries (n=1)"


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
    # entries whose failure stage changed (scoring.failures.transitions): {"from", "to", "ids"}
    transitions: list[dict[str, Any]] = field(default_factory=list)
    # conversations (results.conversation_compare): stage changes per turn position, all_turns_correct
    positions: list[PositionChange] = field(default_factory=list)
    all_turns_correct: AllTurnsCorrectChange | None = None
    # what each run evaluated (doceval.common.naming.system_label: the configured name, else derived)
    systems: tuple[str, str] = ("?", "?")
    rel1_note: str = ""  # why the *_rel1 rows are left out ("" when shown)
    # answer_accuracy's label per run (results.judges.answer_label): "heuristic", "unvalidated" or None
    judge_tags: tuple[str | None, str | None] = (None, None)

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
    allow_different_k: bool = False,
    allow_different_corpus: bool = False,
    allow_different_judge: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    base_label: str = "BASE",
    new_label: str = "NEW",
    metrics: Sequence[str] | None = None,
) -> CompareResult:
    """Compare two runs metric by metric, pairing entries by id: ``metrics`` (default: the table's,
    :func:`doceval.results.summaries.shown_metrics`: the ``*_rel1`` rows only when a run's judgments are graded),
    Holm-adjusted over them.

    Runs scored on different golden sets (``config.golden.md5`` differ) or over different entry ids are
    refused unless ``allow_different_golden``; then only the shared entries are compared and the result says
    how many were dropped. Runs cut at different k are refused unless ``allow_different_k``, runs over
    corpora that index different pins (their out-of-scope sets differ) unless ``allow_different_corpus``, and
    answer_accuracy from two different judges unless ``allow_different_judge`` (results.judges).
    """
    base, new = checked_summary(base, base_label), checked_summary(new, new_label)
    labels = (base_label, new_label)
    notes = _comparability_notes(base, new, labels, allow_different_k, allow_different_corpus)
    b_md5, n_md5 = _golden_md5(base), _golden_md5(new)
    notes += _golden_notes(b_md5, n_md5, labels, allow_different_golden)

    b_by_id = {e.id: e.recorded for e in base.entries}
    n_by_id = {e.id: e.recorded for e in new.entries}
    ids, only_b, only_n = _shared_ids(b_by_id, n_by_id, labels, allow_different_golden, notes)
    b_rows = [b_by_id[i] for i in ids]
    n_rows = [n_by_id[i] for i in ids]
    # The summaries' own means are checked against their entries only when every entry is compared.
    reported = None if (only_b or only_n) else (base, new)
    unmeasured = _unmeasured(base, new, labels, notes)
    chosen = shown_metrics(base, new) if metrics is None else tuple(metrics)
    runs = list(zip(labels, (base, new), strict=True))
    notes += check_same_judge(runs, chosen, allow_different_judge)
    notes += evidence_notes(runs) if set(JUDGED_METRICS) & set(chosen) else []
    rows = _metric_changes(
        b_rows,
        n_rows,
        labels,
        reported,
        notes,
        n_boot=n_boot,
        seed=seed,
        unmeasured=unmeasured,
        metrics=chosen,
    )

    unanswerable = [
        Unanswerable(e["id"], _one_line(e.get("question", "")), _doc_ids(e), e.get("refused"))
        for e in n_rows
        if e.get("out_of_scope")
    ]
    moved = transitions(b_rows, n_rows)
    return CompareResult(
        base_label,
        new_label,
        rows,
        unanswerable,
        len(ids),
        only_b,
        only_n,
        b_md5,
        n_md5,
        notes,
        moved,
        position_changes(b_rows, n_rows),
        all_turns_correct_change(b_rows, n_rows, n_boot=n_boot, seed=seed),
        (settings_of(base).system_label, settings_of(new).system_label),
        rel1_note(base, new) if metrics is None else "",
        (answer_label(base)[0], answer_label(new)[0]),
    )


def _unmeasured(base: TypedSummary, new: TypedSummary, labels: tuple[str, str], notes: list[str]) -> set[str]:
    """The metrics either run did not measure (``metrics.not_measured``: e.g. answers doceval could not read
    the documents of), each with a note saying why: they are shown, never tested."""
    out: set[str] = set()
    for label, summary in zip(labels, (base, new), strict=True):
        unmeasured = summary.metrics.not_measured
        for why in sorted(set(unmeasured.values())):
            listed = sorted(m for m, v in unmeasured.items() if v == why)
            notes.append(f"{label}: {', '.join(listed)} not measured ({why}); not compared")
            out.update(listed)
    return out


def _comparability_notes(
    base: TypedSummary,
    new: TypedSummary,
    labels: tuple[str, str],
    allow_different_k: bool,
    allow_different_corpus: bool,
) -> list[str]:
    """Refuse runs cut at different k or over different corpora (unless allowed); the notes to print when
    allowed, and where each run's entries were read from."""
    base_label, new_label = labels
    notes: list[str] = []
    k_note = check_same_k(base, new, base_label, new_label, allow_different_k=allow_different_k)
    corpus_note = check_same_corpus(
        base, new, base_label, new_label, allow_different_corpus=allow_different_corpus
    )
    if corpus_note:
        notes.append(corpus_note)
    for label, summary in ((base_label, base), (new_label, new)):
        if summary.entries_source:  # a run id: its MLflow traces, checked against its summary.json
            notes.append(f"{label}: entries read from the {summary.entries_source}")
    if k_note:
        notes.append(k_note)
    return notes


def _golden_notes(
    b_md5: str | None, n_md5: str | None, labels: tuple[str, str], allow_different_golden: bool
) -> list[str]:
    """Refuse runs scored on different golden sets (unless allowed); a note when allowed or unverifiable."""
    base_label, new_label = labels
    if b_md5 and n_md5 and b_md5 != n_md5:
        if not allow_different_golden:
            raise UsageError(
                f"{base_label} and {new_label} were scored on different golden sets (config.golden.md5 "
                f"{one_line(b_md5)} vs {one_line(n_md5)}); compare runs over the same golden set, or pass {_ALLOW_GOLDEN} to compare the "
                "entries they share"
            )
        return [f"different golden sets (md5 {b_md5} vs {n_md5}): entries paired by id"]
    if not (b_md5 and n_md5):
        return ["golden md5 missing from a summary's config: same golden set not verified"]
    return []


def _shared_ids(
    b_by_id: dict[str, Any],
    n_by_id: dict[str, Any],
    labels: tuple[str, str],
    allow_different_golden: bool,
    notes: list[str],
) -> tuple[list[str], list[str], list[str]]:
    """The ids in both runs (in NEW's order), and those only in BASE or only in NEW; refuses runs over
    different entries unless ``allow_different_golden`` (then a note says how many were dropped)."""
    base_label, new_label = labels
    only_b = [i for i in b_by_id if i not in n_by_id]
    only_n = [i for i in n_by_id if i not in b_by_id]
    if only_b or only_n:
        what = (
            f"{len(only_b)} entries only in {base_label} (e.g. {', '.join(map(one_line, only_b[:3])) or '-'}), "
            f"{len(only_n)} only in {new_label} (e.g. {', '.join(map(one_line, only_n[:3])) or '-'})"
        )
        if not allow_different_golden:
            raise UsageError(
                f"{base_label} and {new_label} cover different entries: {what}; "
                f"compare runs over the same split and --limit, or pass {_ALLOW_GOLDEN} to compare the shared entries"
            )
    ids = [i for i in n_by_id if i in b_by_id]
    if not ids:
        raise UsageError(f"{base_label} and {new_label} have no entry ids in common: nothing to compare")
    if only_b or only_n:
        notes.append(
            f"dropped {_entries(len(only_b) + len(only_n))} not in both runs ({len(only_b)} only in "
            f"{base_label}, {len(only_n)} only in {new_label}); compared the {_entries(len(ids))} shared"
        )
    return ids, only_b, only_n


def _metric_changes(
    b_rows: Sequence[Mapping[str, Any]],
    n_rows: Sequence[Mapping[str, Any]],
    labels: tuple[str, str],
    reported: tuple[TypedSummary, TypedSummary] | None,
    notes: list[str],
    *,
    n_boot: int,
    seed: int,
    unmeasured: set[str] | None = None,
    metrics: Sequence[str] = METRIC_NAMES,
) -> list[MetricChange]:
    """One row per metric over the paired entries: means, paired change with its interval, W/T/L, p and its
    Holm adjustment. With ``reported`` (BASE and NEW), a note for each summary mean its entries disagree with.
    A metric in ``unmeasured`` (not measured by either run) gets a row with no change and no test."""
    rows: list[MetricChange] = []
    for m in metrics:
        bc, nc = column(b_rows, m), column(n_rows, m)
        bv, nv = mean_or_none(bc), mean_or_none(nc)
        if m in (unmeasured or ()):
            rows.append(MetricChange(m, bv, nv, None, None, 0, 0, 0, 0, method="not measured"))
            continue
        if reported is not None:
            for label, summary, value in zip(labels, reported, (bv, nv), strict=True):
                notes += _reported_mean_note(label, summary, m, value)
        change = paired_change(bc, nc, n_boot=n_boot, seed=seed)
        w, t, lo = win_tie_loss(nc, bc) if m in LOWER_IS_BETTER else win_tie_loss(bc, nc)
        rows.append(
            MetricChange(
                metric=m,
                base=bv,
                new=nv,
                change=None if bv is None or nv is None else nv - bv,
                ci=None if change.ci is None else (float(change.ci[0]), float(change.ci[1])),
                wins=w,
                ties=t,
                losses=lo,
                n_paired=change.n,
                p_value=change.p_value,
                method=change.method,
                ci_note=change.note,
            )
        )
    for row, adjusted in zip(rows, holm([r.p_value for r in rows]), strict=True):
        row.p_holm = adjusted
    return rows


def _reported_mean_note(label: str, summary: TypedSummary, metric: str, value: float | None) -> list[str]:
    """A note when the summary's ``metrics.METRIC`` differs from the mean of its entries (which is used)."""
    reported = summary.metrics.value(metric)
    if (reported is None) != (value is None) or (
        reported is not None and value is not None and abs(float(reported) - value) > 1e-6
    ):
        return [
            f"{label}: metrics.{metric} = {reported} but its entries average to {value}; using the entries"
        ]
    return []


def _num(v: float | None) -> str:
    if v is None or math.isnan(v):
        return "n/a"
    return f"{0.0 if round(v, 4) == 0 else v:.4f}"


def _signed(v: float | None) -> str:
    if v is None or math.isnan(v):
        return "n/a"
    return f"{0.0 if round(v, 4) == 0 else v:+.4f}"


def _interval(ci: tuple[float, float] | None, note: str | None = None) -> str:
    """``[-0.0120, +0.0450]``; without an interval, why (``too few differing entries (n=1)``) or ``n/a``."""
    if ci is None:
        return note or "n/a"
    return f"[{_signed(ci[0])}, {_signed(ci[1])}]"


def _p(v: float | None) -> str:
    if v is None:
        return "n/a"
    return "<0.001" if v < 0.001 else f"{v:.3f}"


_HEADER = ("metric", "base", "new", "change", "95% CI of change", "p", "p_holm", "W/T/L", "n", "method")


def format_compare(result: CompareResult, gate_line: str | None = None) -> str:
    """The side-by-side table, the ``unanswerable:`` lines for NEW, then the gate line. Every line is
    printable (doceval.common.text): a question or id holding an escape sequence is shown, not replayed."""
    b_sys, n_sys = result.systems
    lines = [
        f"baseline: {result.base_label} (system {b_sys})",
        f"new:      {result.new_label} (system {n_sys})",
    ]
    lines += [f"note: {n}" for n in result.notes]
    rows = []
    for r in result.rows:
        name = r.metric + ("*" if r.metric in LOWER_IS_BETTER else "")
        tags = sorted({t for t in result.judge_tags if t}) if r.metric in JUDGED_METRICS else []
        name += f" ({', '.join(tags)})" if tags else ""
        wtl = f"{r.wins}/{r.ties}/{r.losses}" if r.n_paired else "-"
        cells = [name, _num(r.base), _num(r.new), _signed(r.change), _interval(r.ci, r.ci_note)]
        rows.append([*cells, _p(r.p_value), _p(r.p_holm), wtl, str(r.n_paired), r.method or "-"])
    lines += ["", *format_table(_HEADER, rows, left=(0, 4, 9))]
    lines += [
        "change = new - base(line) over the n entries scored in both runs. method: each row's 95% interval of",
        "the change + its test of p (two-sided, no change), as that row computed them; no interval from fewer",
        f"than {MIN_DIFFERING} differing entries (too few);",
        f"p_holm: Holm-adjusted over the {sum(r.p_value is not None for r in result.rows)} metrics of this table "
        "(its family);",
        "the gate line's adjusted p is Holm over the gate's own non-regression metrics, named there.",
        "W/T/L = entries where new is better/equal/worse; * lower is better.",
        *([note] if (note := result.rel1_note) else []),
        "",
    ]
    if result.transitions:
        lines.append("failure stage changes (baseline -> new):")
        for tr in result.transitions:
            shown = ", ".join(tr["ids"][:8]) + (", ..." if len(tr["ids"]) > 8 else "")
            lines.append(f"  {len(tr['ids']):3d} {tr['from']} -> {tr['to']}: {shown}")
        lines.append("")
    formatters = {"num": _num, "signed": _signed, "interval": _interval, "p": _p}
    lines += format_conversation_changes(result.positions, result.all_turns_correct, formatters)
    if not result.unanswerable:
        lines.append(f"no out-of-scope entries in {result.new_label}: nothing to list as unanswerable")
    for u in result.unanswerable:
        lines.append(f"unanswerable: {u.question} -> {', '.join(u.sources) if u.sources else 'no sources'}")
    if gate_line:
        lines += ["", gate_line]
    return "\n".join(printable(line) for line in lines)
