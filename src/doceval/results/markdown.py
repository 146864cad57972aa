"""report.md: headline with intervals, breakdowns per library, pin and kind, calibration, and the unanswerable
entries.

Every value that comes from data (questions, ids, library names, reasons, config values, provenance) goes
through ``_md`` (escaped text) or ``_code`` (a code span, or escaped text when a code span cannot hold it): HTML
is escaped, Markdown syntax neutralised, and no value can add a line or split a table row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from doceval.common.naming import ASSISTANT_LEGEND, judged_share_note
from doceval.common.text import md_code, md_table, md_text
from doceval.results.comparison import _num
from doceval.results.conversations_md import conversations_section
from doceval.results.floors_md import calibration_section, floors_section
from doceval.results.judges import answer_label
from doceval.results.summaries import (
    Summary,
    _doc_ids,
    checked_summary,
    metric_labels,
    rel1_note,
    shown_metrics,
)
from doceval.scoring.aggregate import column
from doceval.scoring.contrast import contrast_only
from doceval.scoring.failures import STAGES, stage_counts
from doceval.scoring.intervals import MIN_N_BREAKDOWN, interval
from doceval.scoring.registry import LOWER_IS_BETTER, METRIC_NAMES, names
from doceval.summary import RunSettings, as_summary, settings_of


def _md(value: Any) -> str:
    """A value from data as inert one-line Markdown text (see doceval.common.text.md_text)."""
    return md_text(value)


def _code(value: Any) -> str:
    """A value from data as a code span, or as escaped text when it cannot be one (md_code)."""
    return md_code(value)


def _n_of(summary: Summary, metric: str) -> int:
    typed = as_summary(summary)
    n = typed.metrics.counts.get(f"n_{metric}")
    if isinstance(n, int):
        return n
    return int((~np.isnan(column(typed.rows, metric))).sum())


def _group_table(
    groups: Mapping[str, Any], label: str, binary_method: str = "midp", metrics: Sequence[str] = METRIC_NAMES
) -> list[str]:
    if not groups:
        return ["(none)"]
    shown = [
        m for m in metrics if any(isinstance(g, Mapping) and g.get(m) is not None for g in groups.values())
    ]
    header = [label, "n", "in scope", "out of scope", *shown]
    rows = []
    # Groups with no in-scope entry (typically one unindexed library each) would bury the table: one row for
    # all of them, its refusal metrics weighted by each group's out-of-scope count.
    only_oos = {k: g for k, g in groups.items() if isinstance(g, Mapping) and not g.get("n_in_scope")}
    if len(only_oos) > 1 and label != "kind":
        groups = {k: g for k, g in groups.items() if k not in only_oos}
        n_oos = sum(int(g.get("n_out_of_scope") or 0) for g in only_oos.values())
        merged: dict[str, Any] = {
            "n": sum(int(g.get("n") or 0) for g in only_oos.values()),
            "n_in_scope": 0,
            "n_out_of_scope": n_oos,
            "ci95": {},
            "too_few": [],
        }
        for m in names(population="out_of_scope"):
            pairs = [
                (float(g[m]), int(g.get("n_out_of_scope") or 0))
                for g in only_oos.values()
                if g.get(m) is not None and g.get("n_out_of_scope")
            ]
            weight = sum(w for _, w in pairs)
            merged[m] = sum(v * w for v, w in pairs) / weight if weight else None
            if weight and weight < MIN_N_BREAKDOWN:
                merged["too_few"].append(m)
            elif weight:  # both are proportions: the pooled count of refusals over the pooled entries
                hits = round(sum(v * w for v, w in pairs))
                ci = interval(np.r_[np.ones(hits), np.zeros(weight - hits)], binary_method=binary_method)
                merged["ci95"][m] = None if ci is None else [ci.lo, ci.hi]
        plural = {"library": "libraries"}.get(label, label + "s")
        groups = {**groups, f"({len(only_oos)} {plural} with no in-scope entry)": merged}
    too_few = False
    for name, g in groups.items():
        g = g if isinstance(g, Mapping) else {}
        cells = []
        for m in shown:
            cell, few = _group_cell(g, m)
            cells.append(cell)
            too_few = too_few or few
        rows.append(
            [
                _md(name),
                _md(g.get("n", "")),
                _md(g.get("n_in_scope", "")),
                _md(g.get("n_out_of_scope", "")),
                *cells,
            ]
        )
    out = md_table(header, rows)
    out += ["", "Each cell: the mean and its 95% interval [low, high] (methods as in the headline)."]
    if too_few:
        out += [
            f"(n<{MIN_N_BREAKDOWN}): fewer than {MIN_N_BREAKDOWN} entries measured in the group; too few to say "
            "anything with confidence, so no interval is printed."
        ]
    hidden = [m for m in metrics if m not in shown]
    if hidden:
        out += ["", f"Not measured in any group: {', '.join(hidden)}."]
    return out


def _group_cell(group: Mapping[str, Any], metric: str) -> tuple[str, bool]:
    """A breakdown cell and whether it is a too-few one: ``0.7500 [0.588, 0.866]``, ``1.0000 (n<10)``."""
    value = group.get(metric)
    if value is None:
        return _num(value), False
    if metric in (group.get("too_few") or []):
        return f"{_num(value)} (n<{MIN_N_BREAKDOWN})", True
    ci = (group.get("ci95") or {}).get(metric)
    if isinstance(ci, list | tuple) and len(ci) == 2:
        return f"{_num(value)} [{float(ci[0]):.3f}, {float(ci[1]):.3f}]", False
    return _num(value), False


_INTERVALS_NOTE = (
    "Intervals: `midp` (mid-P) / `wilson` / `jeffreys` where every value is 0 or 1 (never zero-width); `bca`: "
    "bias-corrected and accelerated bootstrap for graded values (reciprocal ranks, nDCG); `wilson-bounded`: the score interval of a [0, 1] mean, "
    f"used below {MIN_N_BREAKDOWN} values or when every value is the same (docs/design.md section 4.3)."
)


def _yes_no(value: Any) -> str:
    return "yes" if value is True else "no" if value is False else "?"


def render_report(summary: Summary, calibration: Mapping[str, Any] | None = None) -> str:
    """report.md: headline metrics with intervals, counts, breakdowns, floors, provenance, leaks."""
    typed = checked_summary(summary, "summary")
    m = typed.metrics.recorded
    counts = typed.metrics.counts
    floors = typed.settings.floors.recorded
    out = _title_section(typed)
    out += _headline_section(typed)
    out += ["", "## Counts", ""]
    out += (
        md_table(["count", "value"], [[_md(k), _md(v)] for k, v in counts.items()]) if counts else ["(none)"]
    )
    out += _answer_side(typed)
    out += conversations_section(m, shown_metrics(typed))
    out += _stages_section(typed.rows)
    for title, key, label in (
        ("Per library", "by_library", "library"),
        ("Per library@version", "by_pin", "pin"),
        ("Per kind", "by_kind", "kind"),
    ):
        out += ["", f"## {title}", ""]
        out += _group_table(
            m.get(key) or {},
            label,
            str((m.get("intervals") or {}).get("binary", "midp")),
            shown_metrics(typed),
        )
    out += floors_section(floors)
    if calibration is not None:
        out += calibration_section(calibration, floors)
    out += _provenance_section(typed.settings)
    out += _leaks_section(typed.rows)
    out += ["", *_contrast_section(typed.rows)]
    return "\n".join(out) + "\n"


def _title_section(summary: Summary) -> list[str]:
    """The title and the one-line description of the run (split, k, system, golden set), and INCOMPLETE."""
    typed = as_summary(summary)
    settings, golden = typed.settings, typed.settings.golden
    out = ["# doceval report", ""]
    out.append(
        f"Split {_code(settings.split)}, k = {_md(settings.k)}, system under test "
        f"{_code(settings.system_label)}, golden set {_code(golden.path)} "
        f"(md5 {_code(golden.md5)}), {len(typed.entries)} entries."
    )
    if not typed.complete:
        why = typed.incomplete.reason if typed.incomplete is not None else "stopped early"
        out += ["", f"**INCOMPLETE run**: {_md(why)}; its numbers cover only the entries it reached."]
    return out


def _headline_section(summary: Summary) -> list[str]:
    """Every metric with its value, 95% interval, interval method and n; then the system and judge errors."""
    m = as_summary(summary).metrics.recorded
    counts = m.get("counts") or {}
    ci95 = m.get("ci95") or {}
    out = ["", "## Headline metrics", ""]
    rows = []
    unmeasured: Mapping[str, str] = m.get("not_measured") or {}
    settings = settings_of(summary)
    labels = metric_labels(summary, at_k=False)
    for key in shown_metrics(summary):
        name = _md(labels[key]) + (" (lower is better)" if key in LOWER_IS_BETTER else "")
        v = m.get(key)
        ci = ci95.get(key)
        if key in unmeasured:
            value = "not measured"
        elif v is None and key == "answer_accuracy" and m.get("not_judged"):
            value = "not judged"
        elif v is None:
            value = "n/a (no entries)"
        else:
            value = _num(v)
        ci_text = f"[{_num(ci[0])}, {_num(ci[1])}]" if isinstance(ci, list | tuple) and len(ci) == 2 else "-"
        method = (m.get("ci_method") or {}).get(key)
        rows.append([name, value, ci_text, _md(method) if method else "-", str(_n_of(summary, key))])
    out += md_table(["metric", "value", "95% CI", "interval", "n"], rows, ["l", "r", "l", "l", "r"])
    out += ["", _INTERVALS_NOTE]
    if settings.is_assistant:
        out += ["", _md(ASSISTANT_LEGEND) + "."]
    judge_line = answer_label(summary)[1]
    if judge_line:
        out += [
            "",
            f"**answer_accuracy is {_md(judge_line.split(':', 1)[0])}**: {_md(judge_line.split(':', 1)[1].strip())}.",
        ]
    if rel1_note(summary):
        out += ["", _md(rel1_note(summary))]
    if m.get("judged_share") is not None:
        out += ["", _md(judged_share_note(settings.recorded, settings.k))]
    for why in sorted(set(unmeasured.values())):
        shown = ", ".join(k for k, v in unmeasured.items() if v == why)
        out += ["", f"**Not measured**: {_md(shown)}: {_md(why)}."]
    if m.get("answer_accuracy") is None and m.get("not_judged") and "answer_accuracy" not in unmeasured:
        out += ["", "answer_accuracy: not judged (no judge ran for this run)."]
    if counts.get("system_errors"):
        out += [
            "",
            f"**{_md(counts['system_errors'])} system errors**: calls that failed; scored by no metric.",
        ]
    if counts.get("judge_errors"):
        out += ["", f"**{_md(counts['judge_errors'])} judge errors**: excluded from answer_accuracy."]
    return out


def _provenance_section(settings: RunSettings) -> list[str]:
    """From the run's recorded settings: git commit (and whether the tree was dirty), golden set, run key, corpus
    hash, python."""
    prov, golden = settings.provenance, settings.golden
    out = ["", "## Provenance", ""]
    dirty = prov.get("git_dirty")
    if "git_commit" in prov:
        out.append(
            f"- git commit: {_code(prov.get('git_commit'))}"
            + (
                " (**dirty**: uncommitted changes, the numbers may not be reproducible)"
                if dirty
                else " (clean)"
                if dirty is False
                else " (dirty flag unknown)"
            )
        )
    else:  # a pipeline output (doceval.harness.summary.pipeline_record): nothing that differs per run
        out.append(
            "- code: the commit that holds this report and dvc.lock (pipeline outputs record nothing that "
            "changes from run to run; the stage's MLflow run has its commit and timings)"
        )
    out.append(f"- golden set: {_code(golden.path)} md5 {_code(golden.md5)}")
    for key, value in (("run_key", settings.run_key), ("corpus_hash", settings.corpus_hash)):
        if value:
            out.append(f"- {key}: {_code(value)}")
    if prov.get("python"):
        out.append(f"- python: {_md(prov['python'])}")
    return out


def _leaks_section(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The out-of-scope entries that still got sources (the system should have found nothing)."""
    out = ["", "## Out-of-scope entries that still got sources", ""]
    leaks = [e for e in entries if e.get("out_of_scope") and _doc_ids(e)]
    n_oos = sum(bool(e.get("out_of_scope")) for e in entries)
    if leaks:
        out.append(f"{len(leaks)} of {n_oos} out-of-scope entries got sources:")
        out.append("")
        out += md_table(
            ["id", "question", "sources", "agent refused"],
            [
                [
                    _md(e["id"]),
                    _md(e.get("question", "")),
                    ", ".join(_code(d) for d in _doc_ids(e)),
                    _yes_no(e.get("refused")),
                ]
                for e in leaks
            ],
            ["l", "l", "l", "l"],
        )
    else:
        out.append(f"None: all {n_oos} out-of-scope entries got no sources.")
    return out


def _stages_section(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why entries failed: the failure stage of every entry (scoring.failures), per library and per kind."""
    out = [
        "",
        "## Why entries failed",
        "",
        "The first step where each entry went wrong (docs/design.md section 4.5); `ok` and `correct_refusal` "
        "are successes.",
        "",
    ]
    for title, key in (("library", "library"), ("kind", "kind")):
        counts = stage_counts(entries, key)
        used = [s for s in STAGES if any(c[s] for c in counts.values())]
        if not used:
            continue
        rows = [
            [_md(group), *[str(c[s]) if c[s] else "" for s in used]] for group, c in sorted(counts.items())
        ]
        out += md_table([title, *used], rows, ["l", *["r"] * len(used)]) + [""]
    return out


_SYSTEM_ROLES = ("answerer", "system")  # the system under test; everything else billed here is the judge


def _answer_side(summary: Summary) -> list[str]:
    """The judge that produced answer_accuracy, the LLM usage and cost split between the system under test and
    the judge, and the spread across repeats with the flaky entries."""
    settings = settings_of(summary)
    out: list[str] = []
    judge_id = settings.judge_id
    out += ["", "## Judge", ""]
    if judge_id:
        ident = judge_id.get("identity") or {}
        shown = ", ".join(
            f"{k} {_code(v)}" for k, v in ident.items() if v is not None and k != "template_sha256"
        )
        out.append(
            f"Judge hash {_code(judge_id.get('hash'))}: {shown}. answer_accuracy figures with different "
            "judge hashes are not comparable."
        )
    else:
        out.append("No judge ran: answer_accuracy is not judged.")
    source = settings.rescored_from
    if source:
        old = (source.get("judge_id") or {}).get("hash")
        out += [
            "",
            f"Re-judged from {_code(source.get('path'))} (sha256 {_code(str(source.get('sha256'))[:16])}, "
            f"run key {_code(source.get('run_key'))}, judge {_code(old) if old else 'none'}): the answers are "
            "that run's; only the verdicts are new.",
        ]
    by_role = settings.usage.get("by_role") or {}
    if by_role:
        out += ["", "## LLM usage and cost", ""]
        rows = []
        for role, usage in sorted(by_role.items()):
            side = "system under test" if role in _SYSTEM_ROLES else "judge"
            rows.append(
                [
                    _md(role),
                    side,
                    _md(usage.get("requests", "-")),
                    _md(usage.get("prompt_tokens", "-")),
                    _md(usage.get("completion_tokens", "-")),
                    f"{float(usage.get('cost_usd') or 0):.4f}",
                ]
            )
        out += md_table(
            ["role", "side", "requests", "prompt tokens", "completion tokens", "cost USD"],
            rows,
            ["l", "l", "r", "r", "r", "r"],
        )
    repeats = as_summary(summary).repeats
    if repeats:
        out += ["", f"## Repeats ({_md(repeats.get('n'))})", "", _md(repeats.get("seeds")), ""]
        rows = [
            [_md(k), _num(s["mean"]), _num(s["sd"]), f"[{_num(s['min'])}, {_num(s['max'])}]"]
            for k, s in (repeats.get("metrics") or {}).items()
            if s.get("mean") is not None
        ]
        out += md_table(["metric", "mean", "sd", "range"], rows, ["l", "r", "r", "l"])
        flaky = repeats.get("flaky") or []
        out += [
            "",
            f"{len(flaky)} flaky entries (an outcome changed between repeats)" + (":" if flaky else "."),
        ]
        if flaky:
            out += [
                "",
                *md_table(
                    ["id", "question", "changed"],
                    [
                        [
                            _md(f["id"]),
                            _md(f.get("question", "")),
                            _md("; ".join(f"{k}: {v}" for k, v in f["changed"].items())),
                        ]
                        for f in flaky[:50]
                    ],
                    ["l", "l", "l"],
                ),
            ]
    return out


def _contrast_section(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """Answers scored 0 on version_correctness only for naming a forbidden API in a contrast ("instead of")."""
    out = ["## version_correctness: failed only on a forbidden string in a contrast", ""]
    rows = []
    for e in entries:
        if e.get("out_of_scope") or (e.get("scores") or {}).get("version_correctness") != 0.0:
            continue
        hits = contrast_only(
            e.get("answer"),
            e.get("expected_apis") or [],
            e.get("forbidden_apis") or [],
            e.get("expected_any") or [],
        )
        rows += [[_md(e["id"]), _code(name), _md(snippet)] for name, snippet in hits]
    if not rows:
        return [*out, "None: no answer failed only on a forbidden string used in a contrast."]
    out += [
        f"{len(rows)} answer(s) scored 0 only because they name a forbidden API next to a contrast word "
        '("instead of", "deprecated", "replaces"): the metric counts them wrong; read them before trusting it.',
        "",
    ]
    return out + md_table(["id", "forbidden", "where"], rows, ["l", "l", "l"])
