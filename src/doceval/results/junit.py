"""The gate's verdict as JUnit XML, the format CI systems display: one test case per gate condition (and per
failure outside them: no entries, an incomplete run, too many system errors), for a failed metric threshold one
failing test case per entry that scored against it (a miss on hit_rate, an unrefused out-of-scope question on
refused_correctly), and for too many system errors one per entry whose system call failed."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from doceval.results.gating import GateFailure, GateResult
from doceval.results.judges import JUDGED_METRICS, answer_label
from doceval.scoring.registry import LOWER_IS_BETTER
from doceval.summary import Summary, as_summary, settings_of

MAX_ENTRY_CASES = 500  # per failed metric: a CI page stays readable; the summary has the rest


def _failing_entries(entries: Sequence[Mapping[str, Any]], metric: str) -> list[Mapping[str, Any]]:
    """Entries whose own score pulls the metric the wrong way: 0 where higher is better (a graded metric
    counts below 1), 1 where lower is better."""
    out = []
    for e in entries:
        value = (e.get("scores") or {}).get(metric)
        if value is None:
            continue
        if (metric in LOWER_IS_BETTER and value > 0) or (metric not in LOWER_IS_BETTER and value < 1):
            out.append(e)
    return out


def _system_error_cases(suite: ET.Element, entries: Sequence[Mapping[str, Any]]) -> int:
    """One failing case per entry whose system call failed (at most MAX_ENTRY_CASES), with the error."""
    failed = [e for e in entries if e.get("system_error")]
    for e in failed[:MAX_ENTRY_CASES]:
        case = ET.SubElement(suite, "testcase", classname="doceval.entries.system_errors", name=str(e["id"]))
        text = f"system error on {e['id']} ({e.get('library')}@{e.get('version')}): {e['system_error']}"
        ET.SubElement(case, "failure", message="system error", type="SystemError").text = text
    if len(failed) > MAX_ENTRY_CASES:
        more = f"{len(failed) - MAX_ENTRY_CASES} more entries with a system error are in the summary"
        ET.SubElement(suite, "system-out").text = more
    return min(len(failed), MAX_ENTRY_CASES)


def _power(case: ET.Element, verdict: GateResult) -> None:
    """The smallest drop the significant non-regression rule detects at this n, per metric; a rule that cannot
    fail for any of its metrics is reported skipped, never as a pass that could not have been a failure."""
    lines = [d.text() for d in verdict.detectable]
    if not any(d.can_fail for d in verdict.detectable):
        ET.SubElement(case, "skipped", message="cannot fail at this n").text = "\n".join(lines)
    ET.SubElement(case, "system-out").text = "\n".join(lines)


def _regressed_entries(
    entries: Sequence[Mapping[str, Any]], baseline: Mapping[str, Any], metric: str
) -> list[tuple[Mapping[str, Any], float, float]]:
    """The entries whose ``metric`` got worse than in the baseline (compare's W/T/L losses), with both values."""
    before = {e.get("id"): (e.get("scores") or {}).get(metric) for e in baseline.get("entries") or []}
    out = []
    for e in entries:
        now, then = (e.get("scores") or {}).get(metric), before.get(e.get("id"))
        if now is None or then is None:
            continue
        if (now > then) if metric in LOWER_IS_BETTER else (now < then):
            out.append((e, float(then), float(now)))
    return out


def _entry_cases(
    suite: ET.Element,
    failure: GateFailure,
    entries: Sequence[Mapping[str, Any]],
    baseline: Mapping[str, Any] | None,
) -> int:
    """One failing case per entry behind a failed rule: for a threshold the entries scoring against it, for a
    non-regression the entries that got worse than in the baseline (both values); at most MAX_ENTRY_CASES."""
    m = failure.metric
    if failure.kind == "regression":
        if baseline is None:
            return 0
        rows = [(e, f"{m} {then:g} -> {now:g}") for e, then, now in _regressed_entries(entries, baseline, m)]
        classname, what = f"doceval.regressions.{m}", "entries worse than in the baseline"
    else:
        rows = [(e, f"{m} = {e['scores'][m]:g}") for e in _failing_entries(entries, m)]
        classname, what = f"doceval.entries.{m}", "entries failing"
    for e, value in rows[:MAX_ENTRY_CASES]:
        case = ET.SubElement(suite, "testcase", classname=classname, name=str(e["id"]))
        text = f"{value} for {e['id']} ({e.get('library')}@{e.get('version')}): {e.get('question')}"
        if e.get("refused"):
            text += f" [refused: {e.get('refusal_reason')}]"
        ET.SubElement(case, "failure", message=value, type="EntryFailure").text = text
    if len(rows) > MAX_ENTRY_CASES:
        more = f"{len(rows) - MAX_ENTRY_CASES} more {what} {m} are in the summary"
        ET.SubElement(suite, "system-out").text = more
    return min(len(rows), MAX_ENTRY_CASES)


def junit_xml(
    verdict: GateResult,
    summary: Summary | Mapping[str, Any],
    name: str | None = None,
    baseline: Mapping[str, Any] | None = None,
) -> str:
    """The verdict as JUnit XML; the suite is named ``name``, else the system's configured ``name`` (what CI
    lists it as), else "doceval gate". A failed non-regression lists the entries that got worse than in
    ``baseline``; a case on answer_accuracy carries its judge's label when that judge has not cleared the bar."""
    named = settings_of(summary).name
    suite = ET.Element("testsuite", name=name or (str(named) if named else "doceval gate"))
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="gate_source", value=verdict.source)
    judge_line = answer_label(summary)[1]
    if judge_line:
        ET.SubElement(properties, "property", name="answer_accuracy", value=judge_line)
    cases = 0
    failures = 0
    failed_by_condition = {f.condition: f for f in verdict.failures}
    for cond in verdict.conditions:
        case = ET.SubElement(suite, "testcase", classname="doceval.gate", name=cond)
        cases += 1
        failure = failed_by_condition.get(cond)
        if failure is not None:
            failures += 1
            ET.SubElement(case, "failure", message=failure.reason, type="GateFailure").text = failure.reason
        elif cond.startswith("no regression") and verdict.detectable:
            _power(case, verdict)
        if judge_line and any(m in cond for m in JUDGED_METRICS):
            ET.SubElement(case, "system-out").text = f"answer_accuracy: {judge_line}"
    for f in verdict.failures:
        if f.condition not in verdict.conditions:  # no entries, an incomplete run
            case = ET.SubElement(suite, "testcase", classname="doceval.gate", name=f.condition)
            ET.SubElement(case, "failure", message=f.reason, type="GateFailure").text = f.reason
            cases += 1
            failures += 1
    entries = as_summary(summary).rows
    if any(f.metric == "(system_errors)" for f in verdict.failures):
        n = _system_error_cases(suite, entries)
        cases += n
        failures += n
    for f in verdict.failures:
        if f.value is None or f.metric.startswith("("):
            continue
        n = _entry_cases(suite, f, entries, baseline)
        cases += n
        failures += n
    if verdict.notes:
        ET.SubElement(suite, "system-err").text = "\n".join(verdict.notes)
    suite.set("tests", str(cases))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    root = ET.Element("testsuites", tests=str(cases), failures=str(failures))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
