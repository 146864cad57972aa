"""Drafted entries from each difference (docs/design.md section 3.5, "Drafting rules"):

| difference | old pin | new pin |
|---|---|---|
| renamed ``a`` -> ``b`` | version trap: ``a`` expected, ``b`` forbidden | version trap: ``b`` expected, ``a`` forbidden |
| removed ``a`` (replacement ``r``) | version trap: ``a`` expected (``r`` forbidden if the old pin lacks it) | trap: ``r`` expected, ``a`` forbidden; no replacement: the statement's document answers; none: ``nonexistent_api`` asking for ``a`` |
| added ``b`` (instead of ``a``) | ``nonexistent_api`` asking for ``b``; with ``a``: trap, ``a`` expected, ``b`` forbidden | lookup: ``b`` expected |
| moved ``n`` from ``m1`` to ``m2`` | trap: ``from m1 import`` expected, ``from m2 import n`` forbidden | the reverse |
| default changed ``p``: ``v1`` -> ``v2`` | trap: ``v1`` expected, ``p=v2`` forbidden | the reverse |

A conversation drafts the old pin's question, then "And in LIB NEW?" with the new pin's labels and its
``standalone`` question (the one asked with no history).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from doceval.drafting.differences import Difference
from doceval.drafting.entries import (
    Draft,
    Labels,
    entry_id,
    evidence_field,
    judgments,
    name_string,
    nonexistent_api_draft,
    object_words,
    primary_documents,
    provenance,
    record,
)
from doceval.drafting.inventory import Inventory
from doceval.drafting.names import last, sentences, summary
from doceval.drafting.questions import quote, task_question, usable_task

_GENERIC_VALUES = frozenset({"none", "true", "false", "0", "1", "''", '""', "()", "[]", "{}"})


def pick_task(inv: Inventory, docs: Sequence[str], avoid: Sequence[str]) -> tuple[str, bool] | None:
    """The task of the first document that states one without the names to avoid: a section's heading of
    two words or more, else what its sentence that starts with code says the code does ("`client.purge_all()`
    deletes every parcel" -> "delete every parcel"); a documented object's first sentence. (text, is a
    heading)."""
    for doc_id in docs:
        info = inv.docs[doc_id]
        if info.header.kind != "section":
            text = summary(inv.texts.docs[doc_id])
            if usable_task(text, avoid):
                return text, False
            continue
        if usable_task(info.header.title, avoid) and len(info.header.title.split()) >= 2:
            return info.header.title, True
        body = inv.texts.docs[doc_id].split("\n", 1)[-1]
        for sentence in sentences(body):
            task = code_then_verb(sentence)
            if task and usable_task(task, avoid):
                return task, False
    return None


def code_then_verb(sentence: str) -> str:
    """ "`client.purge_all()` deletes every parcel." -> "Deletes every parcel" (a sentence saying what the code
    at its start does), else ""."""
    m = re.match(r"\s*(?:`[^`]+`[\s,]*)+([a-z]+s)\b(.*)$", " ".join(sentence.split()))
    if m is None or "`" in m.group(2):
        return ""
    return (m.group(1).capitalize() + m.group(2)).rstrip(". ")


def answering(inv: Inventory, diff: Difference, docs: Sequence[str]) -> list[str]:
    """The documents of the API that answer: those the difference's evidence names in this pin (the aligned
    document, the object's own document), else all of ``docs``; the others still get grade 1 as mentions."""
    cited = [e.doc_id for e in (*diff.old_evidence, *diff.new_evidence) if e.doc_id in docs]
    return list(dict.fromkeys(cited)) or list(docs)


def _entry(
    diff: Difference, inv: Inventory, kind: str, rule: str, labels: Labels, question: str, reference: str
) -> Draft | None:
    eid = entry_id(diff, inv.library, inv.version, kind, f"{diff.kind}-{diff.old or diff.new}-{diff.new}")
    relevant, qrels = judgments(eid, labels)
    if not relevant:
        return None  # no document answers without a forbidden string: nothing to draft
    evidence = evidence_field(inv, (*diff.old_evidence, *diff.new_evidence), relevant)
    rec = record(
        eid,
        question,
        inv,
        kind,
        relevant=relevant,
        reference=reference,
        labels=labels,
        evidence=evidence,
        prov=provenance(diff, rule),
    )
    return Draft(rec, qrels)


def _cite(inv: Inventory, doc_ids: Sequence[str]) -> str:
    for doc_id in doc_ids:
        said = summary(inv.texts.docs[doc_id]) or inv.docs[doc_id].header.title
        if said:
            return f' The docs ({doc_id}): "{quote(said)}"'
    return ""


def _stated(diff: Difference) -> str:
    said = next((e for e in diff.new_evidence if e.quote and e.doc_id.split(":", 1)[0] == diff.new_pin), None)
    return f' {diff.new_pin} says ({said.doc_id}): "{quote(said.quote)}"' if said else ""


def renamed(diff: Difference, old: Inventory, new: Inventory) -> Iterator[Draft]:
    """A version trap in each pin; a renamed parameter expects ``name=``."""
    param = diff.rule.endswith(":parameter")
    a = f"{diff.old}=" if param else name_string(old, diff.old)
    b = f"{diff.new}=" if param else name_string(new, diff.new)
    near = diff.owner or next(
        (new.docs[e.doc_id].header.path for e in diff.new_evidence if e.doc_id in new.docs), ""
    )
    for inv, mine, theirs, name, other_pin in (
        (old, a, b, diff.old, diff.new_pin),
        (new, b, a, diff.new, diff.old_pin),
    ):
        qualified = diff.new_path if inv is new else ""
        docs = [f"{inv.pin}:{diff.owner}"] if param else primary_documents(inv, name, near, qualified)
        docs = answering(inv, diff, [d for d in docs if d in inv.docs])
        if param:
            question = f"In {inv.library} {inv.version}, how do I pass {object_words(diff.new)} to `{last(diff.owner)}`?"
        else:
            task = pick_task(inv, docs, [diff.old, diff.new, a, b])
            if task is None:
                continue
            question = task_question(inv.library, inv.version, *task)
        other = diff.new if inv is old else diff.old
        reference = (
            f"In {inv.library} {inv.version}, use `{mine.strip('.(=')}`.{_cite(inv, docs)} "
            f"`{other}` is the {other_pin} name, not this version's."
        )
        if inv is new:
            reference += _stated(diff)
        labels = Labels(inv, [mine], [theirs], docs, name)
        draft = _entry(
            diff,
            inv,
            "version_trap",
            f"renamed.trap_{'old' if inv is old else 'new'}",
            labels,
            question,
            reference,
        )
        if draft is not None:
            yield draft


def removed(diff: Difference, old: Inventory, new: Inventory) -> Iterator[Draft]:
    a = name_string(old, diff.old)
    r = name_string(new, diff.new) if diff.new else ""
    docs = answering(old, diff, primary_documents(old, diff.old))
    task = pick_task(old, docs, [diff.old, a, *([diff.new, r] if r else [])])
    if task is None:
        return
    forbid_old = [r] if r and not old.has(diff.new) else []
    reference = f"In {old.library} {old.version}, use `{a.strip('.(=')}`.{_cite(old, docs)}"
    labels = Labels(old, [a], forbid_old, docs, diff.old)
    draft = _entry(
        diff,
        old,
        "version_trap",
        "removed.trap_old",
        labels,
        task_question(old.library, old.version, *task),
        reference,
    )
    if draft is not None:
        yield draft
    question = task_question(new.library, new.version, *task)
    stating = [e.doc_id for e in diff.new_evidence]
    if r:
        docs_new = list(dict.fromkeys([*stating, *primary_documents(new, diff.new)]))
        reference = (
            f"In {new.library} {new.version}, `{diff.old}` is gone: use `{r.strip('.(=')}` instead."
            f"{_stated(diff)}"
        )
        labels = Labels(new, [r], [a], docs_new, diff.new)
    elif stating:
        reference = f"{new.library} {new.version} no longer has `{diff.old}`.{_stated(diff)}"
        labels = Labels(new, [], [a], stating, diff.old)
    else:
        yield from _asked_where_absent(diff, new, diff.old, a, "removed.absent_in_new", old)
        return
    draft = _entry(diff, new, "version_trap", "removed.trap_new", labels, question, reference)
    if draft is not None:
        yield draft


def _asked_where_absent(
    diff: Difference, inv: Inventory, name: str, string: str, rule: str, where: Inventory
) -> Iterator[Draft]:
    """A ``nonexistent_api`` entry: the pin is asked for a name only another pin documents."""
    eid = entry_id(diff, inv.library, inv.version, "nonexistent_api", name)
    shown = string.strip(".(=")
    question = f"In {inv.library} {inv.version}, how do I use `{shown}`?"
    reference = (
        f"{inv.library} {inv.version} does not document `{shown}`: it is documented in {where.pin}, not "
        "in this version's docs."
    )
    yield nonexistent_api_draft(eid, question, inv, reference, provenance(diff, rule), string)


def added(diff: Difference, old: Inventory, new: Inventory) -> Iterator[Draft]:
    b = name_string(new, diff.new)
    docs = answering(new, diff, primary_documents(new, diff.new))
    avoid = [diff.new, b, *([diff.alternative] if diff.alternative else [])]
    task = pick_task(new, docs, avoid)
    if task is not None:
        reference = f"In {new.library} {new.version}, use `{b.strip('.(=')}`.{_cite(new, docs)}"
        labels = Labels(new, [b], [], docs, diff.new)
        draft = _entry(
            diff,
            new,
            "lookup",
            "added.lookup_new",
            labels,
            task_question(new.library, new.version, *task),
            reference,
        )
        if draft is not None:
            yield draft
    yield from _asked_where_absent(diff, old, diff.new, b, "added.absent_in_old", new)
    if diff.alternative and task is not None:
        alt = name_string(old, diff.alternative)
        docs_old = primary_documents(old, diff.alternative)
        reference = (
            f"In {old.library} {old.version}, use `{alt.strip('.(=')}`: `{diff.new}` came in {new.pin}."
            f"{_cite(old, docs_old)}"
        )
        labels = Labels(old, [alt], [b], docs_old, diff.alternative)
        draft = _entry(
            diff,
            old,
            "version_trap",
            "added.trap_old",
            labels,
            task_question(old.library, old.version, *task),
            reference,
        )
        if draft is not None:
            yield draft


def moved(diff: Difference, old: Inventory, new: Inventory) -> Iterator[Draft]:
    pairs = (
        (old, diff.old_value, diff.new_value, diff.old_evidence),
        (new, diff.new_value, diff.old_value, diff.new_evidence),
    )
    for inv, mine, theirs, evidence in pairs:
        name = diff.new
        labels = Labels(
            inv,
            [],
            [f"from {theirs} import {name}", f"{theirs}.{name}"],
            [e.doc_id for e in evidence],
            name,
            [[f"from {mine} import", f"{mine}.{name}"]],
        )
        question = f"In {inv.library} {inv.version}, which module do I import `{name}` from?"
        reference = f"In {inv.library} {inv.version}: `from {mine} import {name}`." + (
            f' The docs ({evidence[0].doc_id}): "{quote(evidence[0].quote)}"' if evidence else ""
        )
        draft = _entry(
            diff,
            inv,
            "version_trap",
            f"moved.trap_{'old' if inv is old else 'new'}",
            labels,
            question,
            reference,
        )
        if draft is not None:
            yield draft


def default_changed(diff: Difference, old: Inventory, new: Inventory) -> Iterator[Draft]:
    param, func = diff.old, last(diff.owner)
    for inv, mine, theirs, evidence in (
        (old, diff.old_value, diff.new_value, diff.old_evidence),
        (new, diff.new_value, diff.old_value, diff.new_evidence),
    ):
        expected = [f"{param}={mine}", f"{param} = {mine}", f"defaults to {mine}", f"default is {mine}"]
        if mine.strip("'\"").casefold() not in _GENERIC_VALUES and len(mine.strip("'\"")) >= 2:
            expected.append(mine.strip("'\""))
        forbidden = [f"{param}={theirs}", f"defaults to {theirs}"]
        if any(f.casefold() in e.casefold() for e in expected for f in forbidden):
            return  # one value contains the other: no answer could be told right from wrong by strings
        labels = Labels(inv, [], forbidden, [e.doc_id for e in evidence], param, [expected])
        question = f"In {inv.library} {inv.version}, what is the default of `{param}` in `{func}`?"
        reference = (
            f"In {inv.library} {inv.version}, `{param}` defaults to `{mine}` (it is `{theirs}` in the other "
            f'version). The docs ({evidence[0].doc_id}): "{quote(evidence[0].quote)}"'
        )
        draft = _entry(
            diff,
            inv,
            "version_trap",
            f"default_changed.trap_{'old' if inv is old else 'new'}",
            labels,
            question,
            reference,
        )
        if draft is not None:
            yield draft


BUILDERS = {
    "renamed": renamed,
    "removed": removed,
    "added": added,
    "moved": moved,
    "default_changed": default_changed,
}


def conversation(diff: Difference, drafts: Sequence[Draft]) -> Draft | None:
    """The old pin's trap, then "And in LIB NEW?" answered by the new pin's trap (needs memory; its
    ``standalone`` question is the new pin's own)."""
    by_pin = {(d.record["library"], d.record["version"]): d for d in drafts if not d.record["out_of_scope"]}
    old_pin, new_pin = tuple(diff.old_pin.split("@", 1)), tuple(diff.new_pin.split("@", 1))
    first, second = by_pin.get(old_pin), by_pin.get(new_pin)  # type: ignore[arg-type]
    if first is None or second is None:
        return None
    cid = f"draft-conv-{first.id.removeprefix('draft-')}"
    turns: list[dict[str, Any]] = []
    qrels: list[dict[str, Any]] = []
    for n, (d, kind) in enumerate(((first, "first_turn"), (second, "follow_up_version_switch")), start=1):
        turn = {k: v for k, v in d.record.items() if k not in ("id", "split", "draft", "provenance")}
        turn["kind"] = kind
        turn["needs_memory"] = n == 2
        if n == 2:
            turn["standalone"] = turn["question"]
            turn["question"] = f"And in {new_pin[0]} {new_pin[1]}?"
        turns.append(turn)
        qrels += [replace_id(line, f"{cid}#{n}") for line in d.qrels]
    prov = {**first.record["provenance"], "rule": f"{diff.kind}.conversation"}
    rec = {
        "id": cid,
        "split": None,
        "kind": "conversation",
        "turns": turns,
        "draft": True,
        "provenance": prov,
    }
    return Draft(rec, qrels)


def replace_id(line: dict[str, Any], new_id: str) -> dict[str, Any]:
    return {**line, "id": new_id}
