"""Grading rules for graded golden sets (docs/design.md section 3.4): one rule, checked, not applied by hand.

A document *documents an expected API itself* when its id's dotted path (the part after ``LIB@VERSION:``) is,
or ends with, one of the entry's ``expected_apis`` / ``expected_any`` names, compared on dotted-component
boundaries and case-sensitively (``BaseModel.dict`` ends with ``dict``, never with ``ict``; ``Session.get`` is
not ``session.get``). Names are normalised first (:func:`doceval.inputs.doc_examples.api_name`): surrounding spaces, a leading ``.`` or ``@``, everything from
the first ``=`` (``pre=True`` is ``pre``) and trailing ``(``, ``)``, ``[`` are dropped; what is then not a
dotted identifier (``type hint``, ``scalars().one(``) names no document.

| rule | what it flags | severity |
|---|---|---|
| ``grading_candidate`` | a document of the entry's pin that documents an expected API itself but is unjudged or graded below 2 for that in-scope entry | warning (error under ``--strict``) |
| ``inconsistent_grade`` | a document judged for several entries of the same ``kind`` whose expected APIs it documents, with different grades | warning (error under ``--strict``) |

A qrels line may say the assessor re-read its pair under a rule and keeps the grade, for the reason it gives:
``"checked": ["grading_candidate"]`` silences that pair's ``grading_candidate`` (an unjudged pair cannot be
silenced: judge it); ``inconsistent_grade`` is silent when every judgment of the group says it checked it.
Conversation turns (``<conversation id>#<n>``) are entries like any other here: same rules, keyed by turn id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from doceval.inputs.doc_examples import api_name, dotted_path
from doceval.inputs.golden import GoldenEntry, Problem
from doceval.inputs.qrels import ANSWERS
from doceval.inputs.scope import Finding

# (entry id, doc id) -> the grading rules its judgment was re-read under (the qrels line's "checked")
Checked = Mapping[tuple[str, str], Sequence[str]]


def expected_names(entry: GoldenEntry) -> list[str]:
    """The entry's expected names (``expected_apis`` and every ``expected_any`` alternative), normalised,
    each once, in order."""
    raw = [*entry.expected_apis, *(alt for group in entry.expected_any for alt in group)]
    names = (api_name(r) for r in raw)
    return list(dict.fromkeys(n for n in names if n))


class PinPaths:
    """A pin's document ids indexed by the last component of their dotted path, for suffix look-ups."""

    def __init__(self, doc_ids: Iterable[str]) -> None:
        self._by_last: dict[str, list[tuple[str, str]]] = {}
        for doc_id in dict.fromkeys(doc_ids):
            path = dotted_path(doc_id)
            self._by_last.setdefault(path.rsplit(".", 1)[-1], []).append((doc_id, path))

    def documenting(self, name: str) -> list[str]:
        """Ids of the documents whose dotted path is ``name`` or ends with ``.name``."""
        last = name.rsplit(".", 1)[-1]
        return [d for d, path in self._by_last.get(last, []) if path == name or path.endswith("." + name)]


def documents(doc_id: str, names: Sequence[str]) -> str | None:
    """The first of ``names`` that the document documents itself, or None."""
    path = dotted_path(doc_id)
    return next((n for n in names if path == n or path.endswith("." + n)), None)


@dataclass
class GradingReport:
    candidates: list[Finding]
    inconsistent: list[Finding]
    entries_checked: int  # in-scope graded entries whose pin the corpus indexes

    @property
    def findings(self) -> list[Finding]:
        return [*self.candidates, *self.inconsistent]


def check_grading(
    entries: Sequence[GoldenEntry], pin_doc_ids: Mapping[str, Iterable[str]], checked: Checked | None = None
) -> GradingReport:
    """Both grading rules over a graded golden set (entries carrying qrels), against each pin's document ids
    (``pin -> ids``). A judgment re-read under a rule (``checked``) keeps its grade without a finding of that
    rule. A set without qrels has nothing graded below 2: the report is empty."""
    graded = [e for e in entries if e.qrels is not None and not e.out_of_scope and e.pin in pin_doc_ids]
    paths = {pin: PinPaths(ids) for pin, ids in pin_doc_ids.items()}
    checked = checked or {}
    candidates: list[Finding] = []
    for e in graded:
        candidates += _candidates_of(e, paths[e.pin], checked)
    return GradingReport(candidates, _inconsistent(graded, checked), len(graded))


def _candidates_of(e: GoldenEntry, paths: PinPaths, checked: Checked) -> list[Finding]:
    grades = e.grades
    out: list[Finding] = []
    seen: set[str] = set()
    for name in expected_names(e):
        for doc_id in paths.documenting(name):
            grade = grades.get(doc_id)
            if doc_id in seen or (grade is not None and grade >= ANSWERS):
                continue
            if grade is not None and "grading_candidate" in checked.get((e.id, doc_id), ()):
                continue  # re-read under this rule: its grade and reason stand
            seen.add(doc_id)
            state = "unjudged" if grade is None else f"graded {grade}"
            out.append(
                Finding(
                    "grading_candidate",
                    e.id,
                    e.line,
                    "qrels",
                    doc_id,
                    f"{doc_id} documents the expected {name!r} itself but is {state} for this entry",
                    "read it: grade it 2 if it answers the question for this version, else give the reason "
                    'it does not and add "checked": ["grading_candidate"] to its qrels line',
                )
            )
    return out


def _inconsistent(graded: Sequence[GoldenEntry], checked: Checked) -> list[Finding]:
    """One finding per (kind, document) judged with different grades across the entries whose expected APIs
    it documents, unless every one of those judgments was re-read under this rule; it is reported on the
    first such entry and lists every entry with its grade."""
    groups: dict[tuple[str, str], list[tuple[GoldenEntry, int]]] = {}
    for e in graded:
        names = expected_names(e)
        for doc_id, grade in e.grades.items():
            if documents(doc_id, names):
                groups.setdefault((e.kind, doc_id), []).append((e, grade))
    out: list[Finding] = []
    for (kind, doc_id), judged in groups.items():
        if len({g for _, g in judged}) < 2:
            continue
        if all("inconsistent_grade" in checked.get((e.id, doc_id), ()) for e, _ in judged):
            continue  # each reason says what makes the entries differ
        first = judged[0][0]
        listing = ", ".join(f"{e.id}={g}" for e, g in judged)
        out.append(
            Finding(
                "inconsistent_grade",
                first.id,
                first.line,
                "qrels",
                doc_id,
                f"{doc_id} is graded differently across the {kind} entries whose expected APIs it "
                f"documents: {listing}",
                "apply one grade for the same reason (regrade the odd ones), or give in each line's reason "
                'what makes the entries differ and add "checked": ["inconsistent_grade"] to each',
            )
        )
    return out


def format_grading(report: GradingReport, golden_path: str) -> list[str]:
    """The validator's lines: the counts, then every finding as a warning."""
    entries = len({f.entry_id for f in report.candidates})
    lines = [
        f"grading rules ({report.entries_checked} graded in-scope entries): {len(report.candidates)} "
        f"grading_candidate pair(s) over {entries} entries, {len(report.inconsistent)} inconsistent_grade "
        "document(s)"
    ]
    lines += [f"  warning: {f.problem(golden_path)}" for f in report.findings]
    return lines


def strict_problems(report: GradingReport, golden_path: str) -> list[Problem]:
    """``--strict``: every grading-rule finding as a problem (an error, exit 2)."""
    return [f.problem(golden_path) for f in report.findings]
