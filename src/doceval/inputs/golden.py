"""Golden sets: load, validate (every problem with file:line:field), select a split, summarise."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doceval.common.io import scan_jsonl
from doceval.errors import UsageError

KNOWN_SPLITS = ("calibration", "test")


@dataclass(frozen=True)
class GoldenEntry:
    id: str
    question: str
    library: str
    version: str
    out_of_scope: bool
    relevant_ids: tuple[str, ...]
    reference_answer: str
    expected_apis: tuple[str, ...]
    forbidden_apis: tuple[str, ...]
    split: str | None
    kind: str
    line: int = 0
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def pin(self) -> str:
        return f"{self.library}@{self.version}"


@dataclass(frozen=True)
class Problem:
    path: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.field}: {self.message}"


class GoldenError(UsageError):
    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        head = f"golden set has {len(problems)} problem{'s' if len(problems) != 1 else ''}:"
        super().__init__("\n".join([head, *(f"  {p}" for p in problems)]))


# field -> (accepted types, human name); `split` also accepts null.
_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "id": ((str,), "a string"),
    "question": ((str,), "a string"),
    "library": ((str,), "a string"),
    "version": ((str,), "a string"),
    "out_of_scope": ((bool,), "true or false"),
    "relevant_ids": ((list,), "a list of document ids"),
    "reference_answer": ((str,), "a string"),
    "expected_apis": ((list,), "a list of strings"),
    "forbidden_apis": ((list,), "a list of strings"),
    "split": ((str, type(None)), "a string or null"),
    "kind": ((str,), "a string"),
}


def _check_record(rec: Any, where: str, line: int, problems: list[Problem]) -> bool:
    if not isinstance(rec, dict):
        problems.append(Problem(where, line, "(entry)", "each line must be a JSON object"))
        return False
    ok = True
    for name, (types, human) in _FIELDS.items():
        if name not in rec:
            problems.append(Problem(where, line, name, f'missing; add "{name}" ({human})'))
            ok = False
        elif not isinstance(rec[name], types) or (bool in types) != isinstance(rec[name], bool):
            problems.append(Problem(where, line, name, f"must be {human}, got {type(rec[name]).__name__}"))
            ok = False
        elif isinstance(rec[name], list) and not all(isinstance(x, str) and x for x in rec[name]):
            problems.append(Problem(where, line, name, "every item must be a non-empty string"))
            ok = False
    for name in ("id", "question", "library", "version", "kind"):
        if isinstance(rec.get(name), str) and not rec[name].strip():
            problems.append(Problem(where, line, name, "must not be empty"))
            ok = False
    return ok


def parse_golden(
    path: Path, corpus_ids: Collection[str] | None = None, known_splits: Iterable[str] = KNOWN_SPLITS
) -> list[GoldenEntry]:
    """Load and validate a golden JSONL file; raise GoldenError listing every problem found."""
    if not path.is_file():
        raise UsageError(
            f"{path}: golden set not found (the `golden` key in params.yaml or --golden names it)"
        )
    where = str(path)
    splits = set(known_splits)
    problems: list[Problem] = []
    entries: list[GoldenEntry] = []
    first_line: dict[str, int] = {}
    for line, rec, bad in scan_jsonl(path):
        if bad:
            problems.append(Problem(where, line, "(json)", bad))
            continue
        if not _check_record(rec, where, line, problems):
            continue
        entry = GoldenEntry(
            id=rec["id"],
            question=rec["question"],
            library=rec["library"].lower(),
            version=rec["version"],
            out_of_scope=rec["out_of_scope"],
            relevant_ids=tuple(dict.fromkeys(rec["relevant_ids"])),
            reference_answer=rec["reference_answer"],
            expected_apis=tuple(rec["expected_apis"]),
            forbidden_apis=tuple(rec["forbidden_apis"]),
            split=rec["split"],
            kind=rec["kind"],
            line=line,
            extra={k: v for k, v in rec.items() if k not in _FIELDS},
        )
        if entry.id in first_line:
            problems.append(
                Problem(
                    where, line, "id", f"duplicate id {entry.id!r} (first on line {first_line[entry.id]})"
                )
            )
            continue
        first_line[entry.id] = line
        if entry.split is not None and entry.split not in splits:
            problems.append(
                Problem(
                    where,
                    line,
                    "split",
                    f"unknown split {entry.split!r}; use one of {sorted(splits)} or null",
                )
            )
        if not entry.out_of_scope and not entry.relevant_ids:
            problems.append(
                Problem(
                    where,
                    line,
                    "relevant_ids",
                    "an in-scope entry needs at least one relevant document id (or set out_of_scope: true)",
                )
            )
        if entry.out_of_scope and entry.relevant_ids:
            problems.append(
                Problem(
                    where,
                    line,
                    "relevant_ids",
                    "an out-of-scope entry must have no relevant ids (empty the list or set "
                    "out_of_scope: false)",
                )
            )
        if not entry.out_of_scope and not entry.reference_answer.strip():
            problems.append(
                Problem(where, line, "reference_answer", "an in-scope entry needs a reference answer")
            )
        for doc_id in entry.relevant_ids:
            if not doc_id.startswith(f"{entry.pin}:"):
                problems.append(
                    Problem(
                        where,
                        line,
                        "relevant_ids",
                        f"{doc_id!r} is not a document of {entry.pin} (ids are LIB@VERSION:path)",
                    )
                )
            elif corpus_ids is not None and doc_id not in corpus_ids:
                problems.append(
                    Problem(
                        where,
                        line,
                        "relevant_ids",
                        f"{doc_id!r} is not in the built corpus; check the dotted path "
                        "(rebuild with `dvc repro docs` if the corpus is stale)",
                    )
                )
        entries.append(entry)
    if problems:
        raise GoldenError(problems)
    if not entries:
        raise UsageError(f"{path}: the golden set has no entries")
    return entries


def select_split(
    entries: Sequence[GoldenEntry], split: str | None, path: Path | None = None
) -> list[GoldenEntry]:
    """Entries of ``split``; untagged entries belong to every split; ``None`` selects everything."""
    if split is None:
        return list(entries)
    chosen = [e for e in entries if e.split is None or e.split == split]
    if not any(e.split == split for e in entries):
        known = sorted({e.split for e in entries if e.split is not None})
        raise UsageError(
            f"--split {split}: no entries are tagged {split!r} in {path or 'the golden set'}; "
            f"known splits: {', '.join(known) or '(none: every entry is untagged, use split=all)'}"
        )
    return chosen


def statistics(entries: Sequence[GoldenEntry]) -> dict[str, dict[str, int]]:
    return {
        "pin": dict(sorted(Counter(e.pin for e in entries).items())),
        "pin_in_scope": dict(sorted(Counter(e.pin for e in entries if not e.out_of_scope).items())),
        "kind": dict(sorted(Counter(e.kind for e in entries).items())),
        "split": dict(sorted(Counter(str(e.split) for e in entries).items())),
        "scope": {
            "in_scope": sum(not e.out_of_scope for e in entries),
            "out_of_scope": sum(e.out_of_scope for e in entries),
        },
    }


def format_statistics(stats: dict[str, dict[str, int]]) -> str:
    lines = []
    for title, table in stats.items():
        lines.append(f"{title}:")
        width = max((len(k) for k in table), default=0)
        lines += [f"  {k:<{width}}  {v:>5}" for k, v in table.items()]
    return "\n".join(lines)


def assign_splits(entries: Sequence[GoldenEntry], seed: int = 0) -> dict[str, str]:
    """Stratified calibration/test assignment: per (library@version, kind) stratum, a seeded shuffle, then
    alternate. Odd strata give their extra entry alternately to each split, so the halves stay balanced.
    Entries about unindexed libraries (kind ``unindexed_library``) form one stratum whatever their library.
    """
    import random

    strata: dict[tuple[str, str], list[str]] = {}
    for e in sorted(entries, key=lambda e: e.id):
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


def write_splits(path: Path, seed: int = 0) -> dict[str, int]:
    """Rewrite ``path`` with ``split`` tags from :func:`assign_splits`, keeping line order and other fields."""
    entries = parse_golden(path, known_splits=KNOWN_SPLITS)
    assignment = assign_splits(entries, seed)
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        rec["split"] = assignment[rec["id"]]
        lines.append(json.dumps(rec, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dict(Counter(assignment.values()))
