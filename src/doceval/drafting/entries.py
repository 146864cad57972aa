"""One drafted entry's labels (docs/design.md section 3.5): the strings an answer must and must not hold, the
graded documents, the evidence and the record in the golden format with ``draft`` and ``provenance``.

Grades follow the grading rule: the documents of the API the entry is about grade 2 (its relevant ids), other
documents that document a name it expects (``doceval.inputs.grading``) or show it as code grade 1, each with
its reason. A document that holds a forbidden string no mark governs is never relevant.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from doceval.drafting.differences import Difference, Evidence
from doceval.drafting.inventory import Inventory
from doceval.drafting.names import last
from doceval.inputs.doc_examples import api_name
from doceval.inputs.grading import PinPaths

JUDGED_BY = "doceval golden draft"
MAX_MENTIONS = 5  # grade-1 documents that only show the expected name, per entry


@dataclass
class Draft:
    """A drafted golden line (an entry, or a conversation with its turns) and its qrels lines."""

    record: dict[str, Any]
    qrels: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return str(self.record["id"])


def name_string(inv: Inventory, name: str) -> str:
    """The string an answer uses for a name, as the pin's code uses it: a distinctive name as it is
    (``model_dump``, ``TypeAdapter``), a plain word in its call form (``.dict(``, ``submit(``), so that prose
    ("a dict", "submit a job") neither counts for it nor against it."""
    spelled = inv.spelled(name)
    if (
        "_" in spelled.strip("_")
        or sum(c.isupper() for c in spelled) >= 2
        or any(c.isdigit() for c in spelled)
    ):
        return spelled
    uses = inv.uses.get(name.casefold(), set())
    if "method" in uses:
        return f".{spelled}("
    if "call" in uses:
        return f"{spelled}("
    return spelled


def primary_documents(
    inv: Inventory, name: str, near: str = "", qualified: str = "", limit: int = 3
) -> list[str]:
    """The documents of the API ``name`` names in this pin: its own documents, else the sections that call or
    define it. ``qualified`` (``TypeAdapter.json_schema``, as a statement wrote it) picks the ones whose path
    ends in it; ``near`` (the other pin's object) those of its class or module, and when the name has own
    documents in several other classes and none in that one, none: another class's ``validate`` is another API."""
    docs = sorted(inv.documenting(name))
    own = [d for d in docs if inv.docs[d].name.casefold() == name.casefold()]
    if own:
        tail = ".".join(p for p in qualified.split(".") if not p.startswith("_"))
        named = [d for d in own if tail and inv.docs[d].header.path.endswith("." + tail)]
        if named:
            return named[:limit]
        owner = near.rsplit(".", 1)[0] if "." in near else ""
        close = [d for d in own if owner and inv.docs[d].header.path.rsplit(".", 1)[0] == owner]
        return (close or (own if len(own) == 1 or not owner else []))[:limit]
    return [d for d in docs if inv.docs[d].header.kind == "section"][:limit]


def holds_unmarked(inv: Inventory, doc_id: str, strings: list[str]) -> str | None:
    """The first forbidden string the document holds without a mark governing it (as the scope checks read
    it), or None."""
    for s in strings:
        # The scope checks' own reading (PinText): whichever matcher they use, drafts are checked the same way.
        if doc_id in inv.texts.documents_with(s) and inv.texts.unmarked(s, [doc_id]):
            return s
    return None


@dataclass
class Labels:
    """What one in-scope entry expects of an answer in one pin, and the documents that answer it."""

    inv: Inventory
    expected: list[str]
    forbidden: list[str]
    answers: list[str]  # documents of the API: grade 2 unless they hold a forbidden string unmarked
    about: str  # the name the entry expects (for grade-1 mentions)
    expected_any: list[list[str]] = field(default_factory=list)


def judgments(entry_id: str, labels: Labels) -> tuple[list[str], list[dict[str, Any]]]:
    """The relevant ids (grade 2) and every qrels line of one entry."""
    inv = labels.inv
    relevant, lines = [], []
    for doc_id in labels.answers:
        held = holds_unmarked(inv, doc_id, labels.forbidden)
        if held is None:
            relevant.append(doc_id)
            lines.append(
                _line(entry_id, doc_id, 2, f"documents {labels.about} (the API this entry is about)")
            )
        else:
            lines.append(
                _line(
                    entry_id,
                    doc_id,
                    1,
                    f"documents {labels.about} but holds the forbidden {held!r} with no mark governing it",
                    checked=True,
                )
            )
    judged = {line["doc_id"] for line in lines}
    for doc_id in _grading_candidates(inv, labels):
        if doc_id not in judged:
            judged.add(doc_id)
            lines.append(
                _line(
                    entry_id,
                    doc_id,
                    1,
                    "documents another object of an expected name, not the one this entry is about",
                    checked=True,
                )
            )
    mentions = [d for d in sorted(inv.code.get(labels.about.casefold(), set())) if d not in judged]
    for doc_id in mentions[:MAX_MENTIONS]:
        lines.append(_line(entry_id, doc_id, 1, f"mentions {labels.about} without documenting it"))
    return relevant, lines


def _grading_candidates(inv: Inventory, labels: Labels) -> list[str]:
    """Documents whose dotted path ends in an expected name (the grading rule's candidates)."""
    paths = PinPaths(inv.docs)
    raw = [*labels.expected, *(a for group in labels.expected_any for a in group)]
    names = dict.fromkeys(n for n in (api_name(r) for r in raw) if n)
    return sorted({d for n in names for d in paths.documenting(n)})


def _line(entry_id: str, doc_id: str, grade: int, reason: str, checked: bool = False) -> dict[str, Any]:
    line: dict[str, Any] = {
        "id": entry_id,
        "doc_id": doc_id,
        "grade": grade,
        "judged_by": JUDGED_BY,
        "reason": reason,
    }
    if checked:
        line["checked"] = ["grading_candidate"]
    return line


def evidence_field(inv: Inventory, evidence: tuple[Evidence, ...], relevant: list[str]) -> dict[str, str]:
    """``{doc_id: quote}`` for the quotes from the entry's relevant documents (checked verbatim by the scope
    rule ``evidence_not_found``)."""
    return {
        e.doc_id: e.quote for e in evidence if e.doc_id in relevant and e.quote in inv.texts.docs[e.doc_id]
    }


def entry_id(diff: Difference | None, library: str, version: str, kind: str, name: str) -> str:
    """``draft-LIB-VERSION-KIND-NAME`` (+ a short hash of the difference: two differences may share a name);
    :func:`unique_ids` settles what is still shared."""
    tag = hashlib.sha1(repr(diff.record()).encode()).hexdigest()[:6] if diff is not None else ""
    base = f"draft-{library}-{version}-{kind}-{name}" + (f"-{tag}" if tag else "")
    return re.sub(r"[^A-Za-z0-9_.@-]+", "-", base).strip("-")


def unique_ids(drafts: list[Draft]) -> None:
    """Suffix ``-2``, ``-3`` ... to an id already taken (in the record, its turns' qrels and its own)."""
    seen: set[str] = set()
    for d in drafts:
        old = d.id
        new, n = old, 1
        while new in seen:
            n += 1
            new = f"{old}-{n}"
        seen.add(new)
        if new != old:
            d.record["id"] = new
            for line in d.qrels:
                line["id"] = new + line["id"][len(old) :]


def provenance(diff: Difference | None, rule: str, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"rule": rule, "phrasing": "template"}
    if diff is not None:
        out["difference"] = diff.record()
    out.update(more)
    return out


def record(
    entry_id: str,
    question: str,
    inv: Inventory,
    kind: str,
    *,
    relevant: list[str],
    reference: str,
    labels: Labels | None,
    evidence: dict[str, str],
    prov: dict[str, Any],
    out_of_scope: bool = False,
    forbidden: list[str] | None = None,
) -> dict[str, Any]:
    """One entry in the golden format (docs/design.md section 3), marked draft with its provenance."""
    rec: dict[str, Any] = {
        "id": entry_id,
        "question": question,
        "library": inv.library,
        "version": inv.version,
        "out_of_scope": out_of_scope,
        "relevant_ids": relevant,
        "reference_answer": reference,
        "expected_apis": list(labels.expected) if labels else [],
        "forbidden_apis": list(labels.forbidden) if labels else list(forbidden or []),
        "split": None,
        "kind": kind,
    }
    if labels and labels.expected_any:
        rec["expected_any"] = labels.expected_any
    if evidence:
        rec["evidence"] = evidence
    rec["draft"] = True
    rec["provenance"] = prov
    return rec


def object_words(name: str) -> str:
    """A name in words, for a question that must not spell it (``shell_complete`` -> "shell complete")."""
    return " ".join(re.findall(r"[A-Za-z][a-z]*|[0-9]+", last(name).replace("_", " "))).lower()


def nonexistent_api_draft(
    eid: str, question: str, inv: Inventory, reference: str, prov: dict[str, Any], asked: str
) -> Draft:
    """An out-of-scope ``nonexistent_api`` entry: no document of the pin answers, and the name asked for
    (``asked``) is forbidden in the answer."""
    return Draft(
        record(
            eid,
            question,
            inv,
            "nonexistent_api",
            relevant=[],
            reference=reference,
            labels=None,
            evidence={},
            prov=prov,
            out_of_scope=True,
            forbidden=[asked],
        )
    )
