"""Scope labels checked against the corpus of the run (docs/design.md section 3.3).

Scope comes from the label, never from behaviour, so a label that is wrong for the corpus silently corrupts
refusal_rate and overrefusal_rate. :func:`check_scope` reads every entry against the documents of its pin:

| rule | what is wrong | severity |
|---|---|---|
| ``indexed_but_unindexed`` | an ``unindexed_library`` entry whose pin the corpus indexes | error, any set |
| ``pin_not_indexed`` | an in-scope entry whose pin the corpus does not index | error, any set |
| ``relevant_id_missing`` | a relevant id that is not a document of the corpus | error, any set |
| ``judged_id_missing`` | a document the qrels judge (any grade) that is not a document of the corpus | error, any set |
| ``nonexistent_api_unnamed`` | a ``nonexistent_api`` entry that names no API in ``forbidden_apis`` | error |
| ``nonexistent_api_documented`` | a ``nonexistent_api`` entry whose API occurs in its pin's documents | error |
| ``forbidden_api_supported`` | an in-scope entry forbids an API that a document of its pin uses unmarked | error |
| ``evidence_not_found`` | an evidence quote that does not occur in the document it is for | error |
| ``expected_api_absent`` | an ``expected_apis`` string that occurs nowhere in the pin's documents | warning |
| ``forbidden_in_question`` | a forbidden string the entry's own question contains | error (graded sets) |
| ``forbidden_in_relevant`` | a forbidden string in a relevant document that does not mark it unsupported | error (graded) |
| ``expected_conflict`` | an expected string (or ``expected_any`` alternative) that contains a forbidden one | warning |
| ``waiver_without_reason`` | an ``allow_forbidden`` string given in the older list form, with no reason | warning |
| ``reference_fails_strings`` | the reference answer fails its own version strings | error (graded, ``--strict``) |
| ``expected_inside_name`` | the reference names an API holding an expected string glued to a longer name | warning |
| ``expected_in_question`` | the entry's own question satisfies an expected string or a whole ``expected_any`` group | warning |
| ``example_fails_strings`` | a relevant document's own examples use an API a group names, in a form none of it matches | warning |

A forbidden string counts as unsupported only where every document of the pin that uses it marks it: a mark
speaks for its own document, so a deprecation on one page says nothing about the pages that still show ``x`` in
use. The version-string rules (``forbidden_in_*``, ``reference_fails_strings``: :mod:`doceval.inputs.selfcheck`) are errors for golden sets with graded
judgments (v2 and later, a ``NAME.qrels.jsonl`` beside them) and warnings for older sets. An entry keeps a
forbidden string on purpose with a waiver, ``"allow_forbidden": {"x(": "why"}``, which waives all three
``forbidden_*`` rules for that string; the older list form (``["x("]``) still waives them, with a warning.

A frozen golden set (v1, v2: their md5s anchor the headline history) is never edited: its findings are
recorded, with its md5, in ``<name>.findings.json`` next to it (when it was frozen, and again when a stricter
rule finds more), and reported as warnings while the file is unchanged. Every new finding, and every finding of
a new golden set, is an error. The first four rules can never be recorded: a label that is wrong for the
configured corpus is wrong for any golden set.

API names are found by the one rule version_correctness scores answers with (:mod:`doceval.common.apimatch`:
case-insensitive, as names not glued to a longer identifier, ``DeclarativeBase`` is not in
``SomeDeclarativeBase``, a space standing for any spacing); a document "marks it
unsupported" when a mark of :mod:`doceval.inputs.marks` ("removed in", "renamed from", "replaced by", "no longer",
"deprecated", ``.. deprecated::``) governs that very name, not when the page merely mentions deprecation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doceval.common.bounded_json import loads
from doceval.common.hints import rerun
from doceval.common.io import write_json_atomic
from doceval.errors import UsageError
from doceval.inputs.doc_examples import EXAMPLE_FAILS, example_findings
from doceval.inputs.golden import GoldenEntry, GoldenError, Problem, parse_golden
from doceval.inputs.qrels import labels_md5
from doceval.inputs.scope_rules import (
    PinText,
    api_findings,
    evidence_findings,
    judged_findings,
    out_of_scope_findings,
    pin_texts,
    version_strings,
)
from doceval.inputs.selfcheck import REFERENCE_FAILS, STRICT_RULES, WARNING_RULES, reference_findings

ALWAYS_ERRORS = frozenset(
    {"indexed_but_unindexed", "pin_not_indexed", "relevant_id_missing", "judged_id_missing"}
)
_OWN_WARNINGS = ("expected_api_absent", "expected_conflict", "waiver_without_reason", EXAMPLE_FAILS)
WARNINGS = frozenset((*_OWN_WARNINGS, *WARNING_RULES))
VERSION_STRING_RULES = frozenset({"forbidden_in_question", "forbidden_in_relevant", REFERENCE_FAILS})
RULES = (
    *sorted(ALWAYS_ERRORS),
    *("nonexistent_api_unnamed", "nonexistent_api_documented", "forbidden_api_supported"),
    *("evidence_not_found", "expected_api_absent", "forbidden_in_question", "forbidden_in_relevant"),
    *("expected_conflict", "waiver_without_reason", REFERENCE_FAILS, *sorted(WARNING_RULES), EXAMPLE_FAILS),
)
FINDINGS_SUFFIX = ".findings.json"


@dataclass(frozen=True)
class Finding:
    rule: str
    entry_id: str
    line: int
    field: str
    detail: str  # the API name, document id or pin the finding is about
    message: str
    fix: str

    def key(self) -> tuple[str, str, str, str]:
        return (self.entry_id, self.rule, self.field, self.detail)

    def problem(self, path: str, known: bool = False) -> Problem:
        tail = " (recorded for the frozen golden set)" if known else f"; fix: {self.fix}"
        return Problem(path, self.line, self.field, f"entry {self.entry_id}: {self.message}{tail}")


@dataclass
class ScopeReport:
    errors: list[Finding]
    known: list[Finding]  # recorded in the findings file: reported, not failed
    warnings: list[Finding]
    stats: dict[str, int]
    findings_file: Path | None = None  # the findings file that applied (None: none, or it did not match)
    note: str | None = None  # why a findings file next to the golden set did not apply


def find_all(
    entries: Sequence[GoldenEntry], pins: Mapping[str, PinText]
) -> tuple[list[Finding], dict[str, int]]:
    """Every finding of every rule, and the counts behind them (the validator's statistics)."""
    findings: list[Finding] = []
    stats = dict.fromkeys(
        (
            "unindexed_library",
            "unindexed_library_indexed",
            "nonexistent_api_names",
            "nonexistent_api_documented",
            "forbidden_names",
            "forbidden_in_pin_docs",
            "forbidden_deprecated",
            "forbidden_supported",
            "forbidden_waived",
            "expected_names",
            "expected_absent",
            "evidence_quotes",
            "evidence_not_found",
            "forbidden_in_question",
            "forbidden_in_relevant",
        ),
        0,
    )
    for e in entries:

        def add(rule: str, field_name: str, detail: str, message: str, fix: str, e: GoldenEntry = e) -> None:
            findings.append(Finding(rule, e.id, e.line, field_name, detail, message, fix))

        for name in e.allow_forbidden:
            if name not in e.allow_reasons:
                add(
                    "waiver_without_reason",
                    "allow_forbidden",
                    name,
                    f"keeps the forbidden {name!r} without saying why (allow_forbidden as a list of strings)",
                    f'give the reason: "allow_forbidden": {{{json.dumps(name)}: "why the entry keeps it"}}',
                )
        reference_findings(e, add)
        docs = pins.get(e.pin)
        if docs is not None:
            judged_findings(e, docs, add)
        if e.out_of_scope:
            out_of_scope_findings(e, docs, stats, add)
            continue
        if docs is None:
            add(
                "pin_not_indexed",
                "library",
                e.pin,
                f"in scope, but the corpus does not index {e.pin}",
                f"add {e.pin} to the corpus (conf/docs), or run with the corpus the golden set was written for",
            )
            continue
        for doc_id in e.relevant_ids:
            if doc_id not in docs.docs:
                add(
                    "relevant_id_missing",
                    "relevant_ids",
                    doc_id,
                    f"{doc_id!r} is not in the built corpus",
                    f"check the dotted path (rebuild with {rerun('docs')} if the corpus is stale)",
                )
        api_findings(e, docs, stats, add)
        version_strings(e, docs, stats, add)
        evidence_findings(e, docs, stats, add)
        example_findings(e, docs.docs, add)
    return findings, stats


def findings_path(golden_path: Path) -> Path:
    return golden_path.with_name(golden_path.stem + FINDINGS_SUFFIX)


def _load_recorded(path: Path, golden_md5: str) -> tuple[set[tuple[str, str, str, str]] | None, str | None]:
    if not path.is_file():
        return None, None
    try:
        data = loads(path.read_text(encoding="utf-8"))
        recorded = {
            (str(f["id"]), str(f["rule"]), str(f["field"]), str(f["detail"])) for f in data["findings"]
        }
        md5 = str(data["golden_md5"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"{path}: not a findings file ({exc}); restore it from git, or delete it and fix the findings"
        ) from exc
    if md5 != golden_md5:
        return None, (
            f"{path.name} records the findings of another version of the golden set (md5 {md5}); it does not "
            "apply, so every finding is an error"
        )
    return recorded, None


def check_scope(
    entries: Sequence[GoldenEntry], pins: Mapping[str, PinText], golden_path: Path, golden_md5: str
) -> ScopeReport:
    """Sort every finding into errors, known (recorded) findings and warnings."""
    findings, stats = find_all(entries, pins)
    fpath = findings_path(golden_path)
    recorded, note = _load_recorded(fpath, golden_md5)
    errors: list[Finding] = []
    known: list[Finding] = []
    warnings: list[Finding] = []
    graded = any(e.qrels is not None for e in entries)
    for f in findings:
        if f.rule in WARNINGS:
            warnings.append(f)
        elif recorded is not None and f.rule not in ALWAYS_ERRORS and f.key() in recorded:
            known.append(f)
        elif f.rule in VERSION_STRING_RULES and not graded:
            warnings.append(f)
        else:
            errors.append(f)
    return ScopeReport(errors, known, warnings, stats, fpath if recorded is not None else None, note)


def raise_on_errors(report: ScopeReport, golden_path: Path, more: Sequence[Problem] = ()) -> None:
    """GoldenError listing every error (file:line: field: entry id, message, fix), and ``more`` (the grading
    rules under ``--strict``), if any."""
    problems = [f.problem(str(golden_path)) for f in report.errors]
    if problems and report.note:
        problems.append(Problem(str(golden_path), 0, "(findings)", report.note))
    problems += more
    if problems:
        raise GoldenError(problems)


def record_findings(report: ScopeReport, golden_path: Path, golden_md5: str) -> Path:
    """Write ``<name>.findings.json``: the recordable findings of this version of the golden set (freezing it
    as it is). Findings that are always errors cannot be recorded."""
    blocking = [f for f in report.errors if f.rule in ALWAYS_ERRORS]
    if blocking:
        raise UsageError(
            f"{golden_path}: {len(blocking)} scope label(s) are wrong for this corpus and cannot be recorded "
            f"(e.g. {blocking[0].problem(str(golden_path))}); fix them first"
        )
    strict = [f for f in report.warnings if f.rule in STRICT_RULES]  # errors under --strict: frozen too
    keep = sorted(
        (f for f in [*report.errors, *report.known, *strict] if f.rule not in WARNINGS),
        key=lambda f: (f.line, f.rule),
    )
    path = findings_path(golden_path)
    data = {
        "golden": golden_path.name,
        "golden_md5": golden_md5,
        "note": "findings of this frozen golden set (never edited) under the scope rules when recorded: reported "
        "as warnings while its md5 matches",
        "findings": [
            {
                "id": f.entry_id,
                "line": f.line,
                "rule": f.rule,
                "field": f.field,
                "detail": f.detail,
                "message": f.message,
            }
            for f in keep
        ],
    }
    write_json_atomic(path, data)
    return path


def format_scope(report: ScopeReport, golden_path: Path) -> list[str]:
    """The validator's lines: the statistics, then every warning and known finding."""
    s = report.stats
    lines = [
        "scope against the corpus:",
        f"  unindexed_library entries: {s['unindexed_library']} ({s['unindexed_library_indexed']} indexed)",
        f"  nonexistent_api names: {s['nonexistent_api_names']} ({s['nonexistent_api_documented']} documented "
        "in their pin)",
        f"  forbidden names of in-scope entries: {s['forbidden_names']}; in their own pin's documents: "
        f"{s['forbidden_in_pin_docs']} ({s['forbidden_deprecated']} marked in every document that uses them, "
        f"{s['forbidden_supported']} not: {s['forbidden_waived']} of those kept by a waiver)",
        f"  expected names: {s['expected_names']}; absent from their pin's documents: {s['expected_absent']}",
        f"  evidence quotes: {s['evidence_quotes']}; not found in their document: {s['evidence_not_found']}",
    ]
    if report.known:
        lines.append(
            f"{len(report.known)} known finding(s) of the frozen golden set, recorded in {report.findings_file} "
            "(warnings):"
        )
        lines += [f"  warning: {f.problem(str(golden_path), known=True)}" for f in report.known]
    if report.warnings:
        lines.append(f"{len(report.warnings)} warning(s):")
        lines += [f"  warning: {f.problem(str(golden_path))}" for f in report.warnings]
    return lines


_CHECKED: dict[tuple[str, str, str, str, tuple[int, int] | None], ScopeReport] = {}


def scope_of(corpus: Any, entries: Sequence[GoldenEntry], golden_path: Path, golden_md5: str) -> ScopeReport:
    """:func:`check_scope` against a loaded corpus (``doceval.inputs.corpus.Corpus``), once per corpus and
    golden set: a sweep evaluates the same pair at every point."""
    record = findings_path(golden_path)
    stamp = (record.stat().st_mtime_ns, record.stat().st_size) if record.is_file() else None
    key = (str(corpus.root), str(corpus.manifest.get("content_hash")), str(golden_path), golden_md5, stamp)
    if key not in _CHECKED:
        _CHECKED[key] = check_scope(entries, pin_texts(corpus.partitions), golden_path, golden_md5)
    return _CHECKED[key]


def load_checked_golden(
    golden_path: Path, corpus: Any, *, allow_drafts: bool = False
) -> tuple[list[GoldenEntry], str, ScopeReport]:
    """The golden set, validated (format, relevant ids) and its scope labels checked against ``corpus``; a
    GoldenError (exit 2) lists every problem of either kind. Drafts are refused unless ``allow_drafts``."""
    # Relevant ids are checked with the scope rules, so a pin the corpus lacks reads as that, not as typos.
    entries = parse_golden(golden_path, allow_drafts=allow_drafts)
    md5 = labels_md5(golden_path)
    report = scope_of(corpus, entries, golden_path, md5)
    raise_on_errors(report, golden_path)
    return entries, md5, report
