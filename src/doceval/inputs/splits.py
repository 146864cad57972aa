"""Split tags of a golden set: the stratified calibration/test assignment (`doceval golden split`, drafts) and
the rewrite of a golden set with them."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from doceval.common.io import json_text, jsonl_line, write_text_atomic
from doceval.inputs.golden import KNOWN_SPLITS, GoldenEntry, parse_golden
from doceval.inputs.records import read_records


def assign_splits(entries: Sequence[GoldenEntry], seed: int = 0) -> dict[str, str]:
    """Entry id (a conversation's id for its turns) -> split. Stratified calibration/test assignment: per
    (library@version, kind) stratum, a seeded shuffle, then alternate. Odd strata give their extra entry
    alternately to each split, so the halves stay balanced. Entries about unindexed libraries (kind
    ``unindexed_library``) form one stratum whatever their library. A conversation is one unit (its split is
    never per turn), stratified by its starting pin under the kind ``conversation``.
    """
    strata: dict[tuple[str, str], list[str]] = {}
    for e in sorted(entries, key=lambda e: e.id):
        if e.conversation is not None:
            if e.turn == 1:
                strata.setdefault(
                    ("@".join(e.start_pin or (e.library, e.version)), "conversation"), []
                ).append(e.conversation)
            continue
        # Questions about unindexed libraries name one library each: stratify them by kind alone.
        pin = "(unindexed)" if e.kind == "unindexed_library" else e.pin
        strata.setdefault((pin, e.kind), []).append(e.id)
    assignment: dict[str, str] = {}
    extra_to_calibration = True
    for key in sorted(strata):
        ids = strata[key]
        random.Random(f"{seed}:{key[0]}:{key[1]}").shuffle(ids)
        first, second = ("calibration", "test") if extra_to_calibration else ("test", "calibration")
        for i, entry_id in enumerate(ids):
            assignment[entry_id] = first if i % 2 == 0 else second
        if len(ids) % 2:
            extra_to_calibration = not extra_to_calibration
    return assignment


def write_splits(path: Path, seed: int = 0, *, default_pin: tuple[str, str] | None = None) -> dict[str, int]:
    """Rewrite ``path`` with ``split`` tags from :func:`assign_splits`, keeping entry order and other fields.

    A JSONL file stays JSONL (one entry per line); a JSON array is rewritten as an indented JSON array.
    """
    entries = parse_golden(path, known_splits=KNOWN_SPLITS, default_pin=default_pin, allow_drafts=True)
    assignment = assign_splits(entries, seed)
    in_array, records = read_records(path)
    recs = [r.value for r in records]
    for rec in recs:
        rec["split"] = assignment[rec["id"]]
    text = json_text(recs, indent=2) + "\n" if in_array else "".join(jsonl_line(rec) for rec in recs)
    write_text_atomic(path, text)  # a failed write leaves the golden set as it was, never half of it
    return dict(Counter(assignment.values()))
