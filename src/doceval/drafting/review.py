"""The review of drafted entries (docs/design.md section 3.5): the `golden audit` worksheet for drafts, and
accepting the verdicts into a golden set and its qrels.

`doceval golden review` writes the audit's worksheet rows (``doceval.inputs.audit``), every draft or a seeded
stratified sample, each with the draft's evidence and provenance for the reviewer to check against the docs.
`doceval golden accept` keeps the drafts a reviewer judged ``OK`` or ``MINOR`` (a conversation when every turn
was), drops ``WRONG`` ones and leaves unreviewed ones out; the accepted entries lose ``draft``, keep their
provenance with the verdict added, and keep their qrels lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doceval.common.io import write_jsonl_atomic
from doceval.errors import UsageError
from doceval.inputs.audit import audit_sample, read_verdicts, worksheet_rows
from doceval.inputs.golden import GoldenEntry, parse_golden
from doceval.inputs.qrels import qrels_path, read_qrels
from doceval.inputs.records import read_records

KEEP = ("OK", "MINOR")


def review_rows(entries: Sequence[GoldenEntry], sample: int | None, seed: int) -> list[dict[str, Any]]:
    """The worksheet: the drafts (every one, or a seeded stratified sample) as `golden audit` rows, with
    their evidence quotes and provenance; ``verdict`` and ``reason`` to fill in (and ``reviewer``)."""
    drafts = [e for e in entries if e.draft]
    if not drafts:
        raise UsageError('golden review: the golden set has no drafts (no entry has "draft": true)')
    chosen = audit_sample(drafts, sample, seed) if sample is not None else drafts
    rows = worksheet_rows(chosen)
    for row, e in zip(rows, chosen, strict=True):
        row["evidence"] = e.extra.get("evidence", {})
        row["provenance"] = e.extra.get("provenance", {})
        if e.conversation is not None:
            row["turn"] = e.turn
            row["needs_memory"] = e.needs_memory
            row["standalone"] = e.extra.get("standalone")
        row["reviewer"] = None
    return rows


@dataclass
class Accepted:
    records: list[dict[str, Any]]
    qrels: list[dict[str, Any]]
    counts: Counter[str] = field(default_factory=Counter)  # accepted, wrong, unreviewed (golden lines)


def accept(drafts_path: Path, verdicts_path: Path) -> Accepted:
    """The accepted golden lines and qrels of a drafted set, from a filled worksheet."""
    entries = parse_golden(drafts_path, allow_drafts=True)
    rows = read_verdicts(verdicts_path, [e.id for e in entries], unfilled=True)
    verdict = {r["id"]: r for r in rows}
    _, records = read_records(drafts_path)
    turns: dict[str, list[str]] = {}
    for e in entries:
        turns.setdefault(e.conversation or e.id, []).append(e.id)
    out = Accepted([], [])
    keep: set[str] = set()
    for record in records:
        rec = dict(record.value)
        ids = turns[rec["id"]]
        given = [verdict.get(i, {}).get("verdict") for i in ids]
        if not rec.get("draft"):
            status = "accepted"  # already reviewed: it stays
        elif any(v == "WRONG" for v in given):
            status = "wrong"
        elif all(v in KEEP for v in given):
            status = "accepted"
            rec.pop("draft", None)
            rec["provenance"] = {**rec.get("provenance", {}), "review": [_review(verdict[i]) for i in ids]}
        else:
            status = "unreviewed"
        out.counts[status] += 1
        if status == "accepted":
            out.records.append(rec)
            keep.update(ids)
    if qrels_path(drafts_path).is_file():
        judgments, _ = read_qrels(qrels_path(drafts_path))
        out.qrels = [_qrels_line(j) for j in judgments if j.entry_id in keep]
    return out


def _review(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row.get(k) for k in ("id", "verdict", "reason", "reviewer") if row.get(k) is not None}


def _qrels_line(j: Any) -> dict[str, Any]:
    line = {
        "id": j.entry_id,
        "doc_id": j.doc_id,
        "grade": j.grade,
        "judged_by": j.judged_by,
        "reason": j.reason,
    }
    if j.checked:
        line["checked"] = list(j.checked)
    return line


def write_accepted(accepted: Accepted, out: Path) -> list[Path]:
    if not accepted.records:
        raise UsageError(f"{out}: no draft was accepted (verdicts {dict(accepted.counts)}); nothing written")
    write_jsonl_atomic(out, accepted.records)
    written = [out]
    if accepted.qrels:
        write_jsonl_atomic(qrels_path(out), accepted.qrels)
        written.append(qrels_path(out))
    return written
