"""Entries marked ``draft`` (written by `doceval golden draft`, not yet reviewed; docs/design.md section 3.5):
the checks of the ``draft`` and ``provenance`` fields, and the refusal every loader applies through
``doceval.inputs.golden.parse_golden`` unless drafts are allowed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from doceval.errors import UsageError


class _Entry(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def line(self) -> int: ...
    @property
    def draft(self) -> bool: ...


def refuse_drafts(path: Path, entries: Sequence[_Entry]) -> None:
    """A UsageError naming the entries marked ``draft`` (written by `doceval golden draft`, not reviewed): their
    labels come from a rule, not a person, so no score is computed on them unless drafts are allowed."""
    drafts = [e for e in entries if e.draft]
    if not drafts:
        return
    shown = ", ".join(f"line {e.line} ({e.id})" for e in drafts[:5])
    more = f" and {len(drafts) - 5} more" if len(drafts) > 5 else ""
    raise UsageError(
        f'{path}: {len(drafts)} of {len(entries)} entries are drafts ("draft": true, not reviewed): {shown}{more}; '
        f"review and accept them (`doceval golden review {path} --out SHEET`, then `doceval golden accept "
        f"{path} --verdicts SHEET --out NAME.jsonl`), or pass --allow-drafts (allow_drafts=true) to score them "
        "as drafted"
    )


def check_draft_fields(rec: dict[str, Any], report: Callable[[str, str], None]) -> bool:
    """Whether the record is a draft; reports a ``draft`` that is not a bool and a ``provenance`` that is not
    an object (the drafter's record of the difference and rule an entry came from, kept on acceptance)."""
    draft = rec.get("draft", False)
    if not isinstance(draft, bool):
        report("draft", f"must be true or false, got {type(draft).__name__}")
    if "provenance" in rec and not isinstance(rec["provenance"], dict):
        got = type(rec["provenance"]).__name__
        report("provenance", f"must be an object (what the draft came from), got {got}")
    return draft is True
