"""The scope rules of one golden entry against the documents of its pin (doceval.inputs.scope runs them over
a golden set and says which are errors): a pin's documents as searchable text, and a rule per field group
(judged ids, out-of-scope kinds, API names, evidence quotes, version strings)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from doceval.common.apimatch import fold, mentions, occurs
from doceval.common.hints import rerun
from doceval.inputs.golden import GoldenEntry
from doceval.inputs.marks import Mark, find_marks, governs


@dataclass
class PinText:
    """The documents of one pin: their text (chunks joined) and, casefolded, all of it for quick presence."""

    docs: dict[str, str] = field(default_factory=dict)
    _folded: dict[str, str] = field(default_factory=dict)
    _all: str = ""
    _marks: dict[str, list[Mark]] = field(default_factory=dict)  # doc id -> its marks, found when first asked

    def finish(self) -> None:
        self._folded = {d: fold(t) for d, t in self.docs.items()}
        self._all = "\n".join(self._folded.values())

    def mentions(self, name: str) -> bool:
        return occurs(name, self._all)

    def documents_with(self, name: str) -> list[str]:
        return [d for d, t in self._folded.items() if occurs(name, t)]

    def uses(self, doc_id: str, name: str) -> bool:
        return occurs(name, self._folded.get(doc_id, ""))

    def unmarked(self, name: str, doc_ids: Iterable[str]) -> list[str]:
        """The documents among ``doc_ids`` in which no mark governs ``name`` itself (removed, renamed, replaced,
        no longer, deprecated: doceval.inputs.marks): a mark elsewhere on the page, or in another document,
        says nothing about the use of ``name`` in this one."""
        return [d for d in doc_ids if not governs(self.marks_of(d), name)]

    def marks_of(self, doc_id: str) -> list[Mark]:
        if doc_id not in self._marks:
            self._marks[doc_id] = find_marks(self.docs[doc_id])
        return self._marks[doc_id]


def pin_texts(partitions: Mapping[str, Any]) -> dict[str, PinText]:
    """pin -> its documents' text, from a corpus's partitions (``doceval.inputs.corpus.Partition``)."""
    out: dict[str, PinText] = {}
    for pin, part in partitions.items():
        texts = PinText()
        for doc_id, text in zip(part.doc_ids, part.texts, strict=True):
            texts.docs[doc_id] = texts.docs[doc_id] + "\n" + text if doc_id in texts.docs else text
        texts.finish()
        out[pin] = texts
    return out


def _norm(text: str) -> str:
    return " ".join(text.split())


# Records one finding of the entry being checked: rule, field, detail, message, fix.
Add = Callable[[str, str, str, str, str], None]


def judged_findings(e: GoldenEntry, docs: PinText, add: Add) -> None:
    """A document the qrels judge for the entry (grade 0 or 1: the grade-2 ones are its relevant ids, checked
    as such) that is not in the corpus: the judgment is about nothing, and a pool built on it is wrong."""
    for doc_id in sorted(set(e.qrels or {}) - set(e.relevant_ids)):
        if doc_id not in docs.docs:
            add(
                "judged_id_missing",
                "qrels",
                doc_id,
                f"{doc_id!r} is judged in the qrels (grade {(e.qrels or {})[doc_id]}) but is not in the built corpus",
                f"fix its doc_id in the qrels file beside the golden set, or drop that line (rebuild with "
                f"{rerun('docs')} if the corpus is stale)",
            )


def out_of_scope_findings(e: GoldenEntry, docs: PinText | None, stats: dict[str, int], add: Add) -> None:
    """An ``unindexed_library`` entry whose pin the corpus indexes; a ``nonexistent_api`` entry that names no
    API, or whose API its pin documents. Other out-of-scope kinds have nothing to check against the corpus."""
    if e.kind == "unindexed_library":
        stats["unindexed_library"] += 1
        if docs is not None:
            stats["unindexed_library_indexed"] += 1
            add(
                "indexed_but_unindexed",
                "kind",
                e.pin,
                f"labelled unindexed_library, but the corpus indexes {e.pin}",
                "relabel the entry for this corpus (in scope with relevant ids, or another out-of-scope "
                "kind), or run with the corpus the golden set was written for (data/golden/README.md)",
            )
        return
    if e.kind == "nonexistent_api":
        if not e.forbidden_apis:
            add(
                "nonexistent_api_unnamed",
                "forbidden_apis",
                "",
                "a nonexistent_api entry must name the API it asks about",
                "put the API name(s) the question asks about in forbidden_apis",
            )
        for name in e.forbidden_apis:
            stats["nonexistent_api_names"] += 1
            if docs is not None and docs.mentions(name):
                stats["nonexistent_api_documented"] += 1
                where = ", ".join(docs.documents_with(name)[:3])
                add(
                    "nonexistent_api_documented",
                    "forbidden_apis",
                    name,
                    f"asks about {name!r} as nonexistent, but {e.pin} documents it (e.g. {where})",
                    "relabel the entry in scope with those documents as relevant ids, or ask about an API "
                    "the pin really lacks",
                )


def api_findings(e: GoldenEntry, docs: PinText, stats: dict[str, int], add: Add) -> None:
    """An in-scope entry's API names against its pin's documents: a forbidden API the pin documents without
    marking that name as not supported (unless the entry allows it), an expected API that occurs nowhere."""
    for name in e.forbidden_apis:
        stats["forbidden_names"] += 1
        holders = docs.documents_with(name)
        if not holders:
            continue
        stats["forbidden_in_pin_docs"] += 1
        unmarked = docs.unmarked(name, holders)
        if not unmarked:
            stats["forbidden_deprecated"] += 1
            continue
        stats["forbidden_supported"] += 1
        if name in e.allow_forbidden:
            stats["forbidden_waived"] += 1
            continue  # the entry keeps the string on purpose (its waiver), as for the other forbidden rules
        add(
            "forbidden_api_supported",
            "forbidden_apis",
            name,
            _supported_message(e, name, holders, unmarked),
            "drop the name from forbidden_apis (the version supports it), or forbid the API the version "
            f'really lacks, or keep it with a reason: "allow_forbidden": {{{json.dumps(name)}: "why"}}',
        )
    for name in e.expected_apis:
        stats["expected_names"] += 1
        if not docs.mentions(name):
            stats["expected_absent"] += 1
            add(
                "expected_api_absent",
                "expected_apis",
                name,
                f"expects {name!r}, which occurs nowhere in {e.pin}'s documents",
                "check the spelling; a usage string (e.g. `future=True`) may be fine",
            )


def _supported_message(e: GoldenEntry, name: str, holders: list[str], unmarked: list[str]) -> str:
    """Why ``name`` reads as supported: no document of the pin marks it, or only some do (a mark governs the
    document it is in; the others still show the name in use)."""
    where = ", ".join(unmarked[:3])
    if len(unmarked) == len(holders):
        return (
            f"forbids {name!r}, which {e.pin} documents without marking it removed, renamed or deprecated "
            f"(e.g. {where})"
        )
    marked = [d for d in holders if d not in unmarked]
    return (
        f"forbids {name!r}, but {len(unmarked)} of the {len(holders)} {e.pin} documents that use it carry no "
        f"mark for it (e.g. {where}); it is marked only in {', '.join(marked[:2])}"
        f"{' ...' if len(marked) > 2 else ''}, and a mark speaks for its own document"
    )


def evidence_findings(e: GoldenEntry, docs: PinText, stats: dict[str, int], add: Add) -> None:
    """Each evidence quote (the entry's ``evidence`` field: doc id -> quote) must occur, whitespace
    normalised, in the document it is for."""
    evidence = e.extra.get("evidence")
    if isinstance(evidence, Mapping):
        for doc_id, quote in evidence.items():
            stats["evidence_quotes"] += 1
            text = docs.docs.get(str(doc_id))
            if text is None or not isinstance(quote, str) or _norm(quote) not in _norm(text):
                stats["evidence_not_found"] += 1
                add(
                    "evidence_not_found",
                    "evidence",
                    str(doc_id),
                    f"the evidence quote for {doc_id} does not occur in that document",
                    "quote the document verbatim, or fix the relevant id",
                )


def version_strings(e: GoldenEntry, docs: PinText, stats: dict[str, int], add: Add) -> None:
    """Forbidden strings a correct answer cannot avoid (in the question, or in a document that answers it and
    does not call them deprecated), and expected strings no answer can satisfy."""
    question = fold(e.question)
    for name in e.forbidden_apis:
        if name in e.allow_forbidden:
            continue
        if occurs(name, question):
            stats["forbidden_in_question"] += 1
            add(
                "forbidden_in_question",
                "forbidden_apis",
                name,
                f"forbids {name!r}, which its own question contains: an answer quoting the question fails",
                "narrow the string (e.g. the call form), drop it, or keep it with a reason in allow_forbidden",
            )
        for doc_id in e.relevant_ids:
            if docs.uses(doc_id, name) and docs.unmarked(name, [doc_id]):
                stats["forbidden_in_relevant"] += 1
                add(
                    "forbidden_in_relevant",
                    "forbidden_apis",
                    name,
                    f"forbids {name!r}, which its relevant document {doc_id} uses without marking it not supported",
                    "narrow the string, drop it, or keep it with a reason in allow_forbidden",
                )
                break
    expected = [*e.expected_apis, *(alt for group in e.expected_any for alt in group)]
    for want in expected:
        for name in e.forbidden_apis:
            if mentions(want, name):
                add(
                    "expected_conflict",
                    "expected_apis",
                    want,
                    f"expects {want!r}, which contains the forbidden {name!r}: no answer can use it",
                    "change the expected string or the forbidden one",
                )
