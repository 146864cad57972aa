"""Golden sets: load, validate (every problem with file:line:field), select a split, summarise.

A golden set is JSONL (one entry per line) or a JSON array of entry objects (a file whose first character,
after optional whitespace and a BOM, is ``[``). Problems name the file and ``LINE`` for JSONL, or
``entry N (id X)`` for an array. A conversation (``doceval.inputs.conversation``) is one line whose turns
become one entry each, ``<conversation id>#<n>``, checked like any entry.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from doceval.common.hints import rerun
from doceval.common.paths import input_file
from doceval.errors import UsageError
from doceval.inputs.conversation import (
    conversation_extra,
    conversation_turns,
    is_conversation,
    turn_field,
)
from doceval.inputs.conversation import statistics as conversation_statistics
from doceval.inputs.drafts import check_draft_fields, refuse_drafts
from doceval.inputs.qrels import load_grades, read_pool
from doceval.inputs.records import Record, read_records, read_text_file

KNOWN_SPLITS = ("calibration", "test")

# The pin an entry without `library` and `version` gets when no doceval corpus is configured (your own
# documents and retriever): every such entry is about one library, `docs@1` (docs/design.md section 3).
DEFAULT_PIN: tuple[str, str] = ("docs", "1")


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
    # any one string of each group must appear in the answer (valid alternatives), e.g. [["scalars(", "execute("]]
    expected_any: tuple[tuple[str, ...], ...] = ()
    # forbidden strings the entry keeps on purpose (its waivers, docs/design.md 3.3) and their reasons (none for
    # the older list form)
    allow_forbidden: tuple[str, ...] = ()
    allow_reasons: dict[str, str] = field(default_factory=dict, compare=False)
    qrels: dict[str, int] | None = field(default=None, compare=False)  # judged doc -> grade (the qrels file)
    # A turn of a conversation (docs/design.md section 3): its conversation's id, its position from 1, whether it
    # cannot be answered without an earlier turn, and the conversation's starting pin, which every probe of the
    # conversation carries (the turn's own library/version are ground truth for scoring only). None/False/1 for
    # a single-question entry.
    conversation: str | None = None
    turn: int = 1
    needs_memory: bool = False
    start_pin: tuple[str, str] | None = None
    draft: bool = False  # unreviewed (`doceval golden draft`): refused unless allowed (doceval.inputs.drafts)

    @property
    def pin(self) -> str:
        return f"{self.library}@{self.version}"

    @property
    def grades(self) -> dict[str, int]:
        """Every judged document's grade: the qrels file's, else grade 2 for each relevant id (a set without
        graded judgments knows only which documents answer)."""
        return dict(self.qrels) if self.qrels is not None else dict.fromkeys(self.relevant_ids, 2)


@dataclass(frozen=True)
class Problem:
    path: str
    line: int  # JSONL: the line; JSON array: the entry's position, from 1
    field: str
    message: str
    entry: str | None = None  # JSON array: "entry N (id X)", shown in place of the line number

    def __str__(self) -> str:
        where = f"{self.path}: {self.entry}" if self.entry else f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.message}"


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


_PIN_FIELDS = ("library", "version")

Report = Callable[[str, str], None]


def _check_record(rec: Any, in_array: bool, report: Report, default_pin: tuple[str, str] | None) -> bool:
    if not isinstance(rec, dict):
        report("(entry)", f"each {'entry' if in_array else 'line'} must be a JSON object")
        return False
    ok = True
    optional = _PIN_FIELDS if default_pin is not None else ()
    for name, (types, human) in _FIELDS.items():
        if name not in rec:
            if name not in optional:
                report(name, f'missing; add "{name}" ({human})')
                ok = False
        elif not isinstance(rec[name], types) or (bool in types) != isinstance(rec[name], bool):
            report(name, f"must be {human}, got {type(rec[name]).__name__}")
            ok = False
        elif isinstance(rec[name], list) and not all(isinstance(x, str) and x for x in rec[name]):
            report(name, "every item must be a non-empty string")
            ok = False
    if default_pin is not None:
        present = [name for name in _PIN_FIELDS if name in rec]
        if len(present) == 1:
            (missing,) = (name for name in _PIN_FIELDS if name not in rec)
            report(
                missing,
                f'missing; "library" and "version" go together: add "{missing}", or remove '
                f'"{present[0]}" for the default pin {"@".join(default_pin)}',
            )
            ok = False
    for name in ("id", "question", "library", "version", "kind"):
        if isinstance(rec.get(name), str) and not rec[name].strip():
            report(name, "must not be empty")
            ok = False
    return ok


def parse_golden(
    path: Path,
    corpus_ids: Collection[str] | None = None,
    known_splits: Iterable[str] = KNOWN_SPLITS,
    *,
    default_pin: tuple[str, str] | None = None,
    ids_source: str | None = None,
    allow_drafts: bool = False,
) -> list[GoldenEntry]:
    """Load and validate a golden set (JSONL or a JSON array); raise GoldenError listing every problem.

    ``corpus_ids``: every relevant id must be one of these (None: not checked). ``default_pin``: None when a
    doceval corpus is configured: ``library`` and ``version`` are required and relevant ids must be documents
    of the entry's pin (``LIB@VERSION:...``). Given (your own documents, no doceval corpus): an entry without
    both gets this pin, and relevant ids are yours, in any form. ``ids_source`` names where ``corpus_ids``
    come from in messages (default: the built corpus). A conversation line yields its turns' entries, in order.
    ``allow_drafts``: unless True, entries marked draft are refused (every loader passes through here).
    """
    _check_golden_path(path)
    where = str(path)
    problems: list[Problem] = []
    entries: list[GoldenEntry] = []
    in_array, records = read_records(path)
    checks = _Checks(
        set(known_splits), corpus_ids, ids_source, default_pin, _Ids("entry" if in_array else "line")
    )
    for record in records:
        position, label = record.position, record.label

        def report(name: str, message: str, position: int = position, label: str | None = label) -> None:
            problems.append(Problem(where, position, name, message, label))

        if record.bad:
            report("(json)", record.bad)
            continue
        if is_conversation(record.value):
            entries += _conversation_entries(record, checks, report)
        else:
            entry = _checked_entry(record.value, record, checks, report)
            entries += [entry] if entry is not None else []
    if problems:
        # A conversation's id or split is checked on each of its turns: one problem, reported once.
        raise GoldenError(list(dict.fromkeys(problems)))
    if not entries:
        raise UsageError(f"{path}: the golden set has no entries")
    if not allow_drafts:
        refuse_drafts(path, entries)
    grades = load_grades(path, {e.id: e for e in entries}, corpus_ids, ids_source)
    if grades is not None:
        entries = [replace(e, qrels=grades.get(e.id, {})) for e in entries]
    read_pool(path)  # checked with the labels, so a bad pool record stops a run before it starts
    return entries


@dataclass
class _Ids:
    """Where each id was first seen: entry ids, conversation ids and turn ids share one namespace."""

    seen_as: str  # "line" (JSONL) or "entry" (JSON array)
    first_at: dict[str, int] = field(default_factory=dict)

    def claim(self, entry_id: str, position: int, report: Report) -> bool:
        if entry_id in self.first_at:
            report("id", f"duplicate id {entry_id!r} (first on {self.seen_as} {self.first_at[entry_id]})")
            return False
        self.first_at[entry_id] = position
        return True


@dataclass(frozen=True)
class _Checks:
    splits: Collection[str]
    corpus_ids: Collection[str] | None
    ids_source: str | None
    default_pin: tuple[str, str] | None
    ids: _Ids


def _checked_entry(rec: Any, record: Record, checks: _Checks, report: Report) -> GoldenEntry | None:
    """The entry of one record (a single question or a conversation's turn) when its fields and id check out;
    its scope and relevant ids checked against the corpus."""
    if not _check_record(rec, record.in_array, report, checks.default_pin):
        return None
    entry = _entry_of(rec, record.position, checks.default_pin, report)
    if not checks.ids.claim(entry.id, record.position, report):
        return None
    _check_entry(entry, checks.splits, report)
    _check_relevant_ids(entry, checks.corpus_ids, checks.ids_source, checks.default_pin, report)
    return entry


def _conversation_entries(record: Record, checks: _Checks, report: Report) -> list[GoldenEntry]:
    """A conversation line's turns, one entry each in order, with the conversation's id, the turn's position
    and need of memory, and the starting pin (turn 1's) that every probe of the conversation carries."""
    rec = record.value
    # `draft` and `provenance` belong to the conversation as a whole (one unit to review), not to its turns.
    turns = conversation_turns(rec, (*_FIELDS, *_VERSION_STRINGS), report)
    cid = rec.get("id")
    if isinstance(cid, str) and cid.strip():
        checks.ids.claim(cid, record.position, report)
    check_draft_fields(rec, report)
    out: list[GoldenEntry] = []
    for turn in turns:

        def turn_report(name: str, message: str, number: int = turn.number) -> None:
            report(turn_field(number, name), message)

        entry = _checked_entry(turn.record, record, checks, turn_report)
        if entry is None:
            continue
        start_pin = (out[0].library, out[0].version) if out else (entry.library, entry.version)
        entry = replace(
            entry,
            draft=entry.draft or rec.get("draft") is True,
            extra={**conversation_extra(rec), **entry.extra},
            conversation=str(cid),
            turn=turn.number,
            needs_memory=turn.needs_memory,
            start_pin=start_pin,
        )
        out.append(entry)
    return out


def _check_golden_path(path: Path) -> None:
    """A UsageError unless ``path`` is a regular file: a folder, a device or FIFO (never "not found") or a missing
    file, with where the path comes from."""
    where = "(the `golden` key in params.yaml or --golden names it)"
    input_file(path, "golden set", f"name the JSONL (or JSON array) file, e.g. data/golden/v1.jsonl {where}")
    if not path.is_file():
        raise UsageError(f"{path}: golden set not found {where}")


def _entry_of(
    rec: dict[str, Any], position: int, default_pin: tuple[str, str] | None, report: Report
) -> GoldenEntry:
    """The entry of a record whose fields checked out (library lower-cased, the default pin when it has none,
    relevant ids deduplicated, unknown fields kept in ``extra``); reports bad optional fields."""
    library, version = (
        (rec["library"], rec["version"]) if "library" in rec or default_pin is None else default_pin
    )
    waivers = _waivers(rec.get("allow_forbidden", []), report)
    entry = GoldenEntry(
        id=rec["id"],
        question=rec["question"],
        library=library.lower(),
        version=version,
        out_of_scope=rec["out_of_scope"],
        relevant_ids=tuple(dict.fromkeys(rec["relevant_ids"])),
        reference_answer=rec["reference_answer"],
        expected_apis=tuple(rec["expected_apis"]),
        forbidden_apis=tuple(rec["forbidden_apis"]),
        split=rec["split"],
        kind=rec["kind"],
        line=position,
        extra={k: v for k, v in rec.items() if k not in _FIELDS and k not in _OPTIONAL},
        expected_any=_string_groups(rec.get("expected_any", []), report),
        allow_forbidden=tuple(waivers),
        allow_reasons={name: why for name, why in waivers.items() if why},
        draft=check_draft_fields(rec, report),
    )
    for name in entry.allow_forbidden:
        if name not in entry.forbidden_apis:
            report("allow_forbidden", f"{name!r} is not one of the entry's forbidden_apis")
    return entry


def _check_entry(entry: GoldenEntry, splits: Collection[str], report: Report) -> None:
    """Reports a split not known, and scope that disagrees with the relevant ids or the reference answer."""
    if entry.split is not None and entry.split not in splits:
        report("split", f"unknown split {entry.split!r}; use one of {sorted(splits)} or null")
    if not entry.out_of_scope and not entry.relevant_ids:
        report(
            "relevant_ids",
            "an in-scope entry needs at least one relevant document id (or set out_of_scope: true)",
        )
    if entry.out_of_scope and entry.relevant_ids:
        report(
            "relevant_ids",
            "an out-of-scope entry must have no relevant ids (empty the list or set out_of_scope: false)",
        )
    if not entry.out_of_scope and not entry.reference_answer.strip():
        report("reference_answer", "an in-scope entry needs a reference answer")


def _check_relevant_ids(
    entry: GoldenEntry,
    corpus_ids: Collection[str] | None,
    ids_source: str | None,
    default_pin: tuple[str, str] | None,
    report: Report,
) -> None:
    """Reports each relevant id that is not a document of the entry's pin (doceval corpus) or not among
    ``corpus_ids``."""
    for doc_id in entry.relevant_ids:
        if default_pin is None and not doc_id.startswith(f"{entry.pin}:"):
            report(
                "relevant_ids",
                f"{doc_id!r} is not a document of {entry.pin} (ids are LIB@VERSION:path)",
            )
        elif corpus_ids is not None and doc_id not in corpus_ids:
            report(
                "relevant_ids",
                f"{doc_id!r} is not in {ids_source}"
                if ids_source
                else f"{doc_id!r} is not in the built corpus; check the dotted path "
                f"(rebuild with {rerun('docs')} if the corpus is stale)",
            )


_VERSION_STRINGS = ("expected_any", "allow_forbidden")  # optional version-string fields (design section 3)
_OPTIONAL = (*_VERSION_STRINGS, "draft")


def _waivers(value: Any, report: Report) -> dict[str, str]:
    """``allow_forbidden``: kept string -> reason (``{"= Column(": "why"}``), or the older list ("" each)."""
    if isinstance(value, list) and all(isinstance(x, str) and x for x in value):
        return dict.fromkeys(value, "")
    if isinstance(value, dict) and all(k and isinstance(v, str) and v.strip() for k, v in value.items()):
        return dict(value)
    report(
        "allow_forbidden",
        'must map each kept forbidden string to its reason, e.g. {"= Column(": "why the '
        'entry keeps it"} (or be the older list of strings)',
    )
    return {}


def _string_groups(value: Any, report: Report) -> tuple[tuple[str, ...], ...]:
    if not isinstance(value, list) or not all(
        isinstance(g, list) and len(g) >= 2 and all(isinstance(x, str) and x for x in g) for g in value
    ):
        report("expected_any", 'must be a list of groups of at least two alternatives, e.g. [["a(", "b("]]')
        return ()
    return tuple(tuple(g) for g in value)


def read_ids(path: Path) -> frozenset[str]:
    """Document ids from a text file, one per line; blank lines and lines starting with ``#`` are skipped.

    Only a whole line is a comment: ``handbook/returns.md#late-fees`` is an id.
    """
    if path.is_dir():
        raise UsageError(f"--ids {path}: is a directory; pass a text file with one document id per line")
    if not path.is_file():
        raise UsageError(f"--ids {path}: file not found (one document id per line)")
    text = read_text_file(path, "--ids file", "one document id per line")
    ids = {line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")}
    if not ids:
        raise UsageError(f"--ids {path}: no document ids in it (one id per line; `#` starts a comment line)")
    return frozenset(ids)


def select_split(
    entries: Sequence[GoldenEntry], split: str | None, path: Path | None = None
) -> list[GoldenEntry]:
    """Entries of ``split``; untagged entries belong to every split; ``None`` selects everything."""
    if split is None:
        return list(entries)
    # The seed's rule: untagged entries belong to every split, so an untagged golden set runs whole on a split
    # name a tag can hold. A split that no entry is tagged with, in a set that has tags, is a typo or another
    # set's split; in a set without tags, so is a name no tag can hold: an error either way.
    known = sorted({e.split for e in entries if e.split is not None})
    if (known and split not in known) or (not known and split not in KNOWN_SPLITS):
        where = path or "the golden set"
        listed = ", ".join(known) if known else "none (no entry has a split tag)"
        fix = (
            "pass one of them, or --split all (split=all) for every entry"
            if known
            else f"pass --split all (split=all) for every entry, or tag them first: `doceval golden split {where}`"
        )
        raise UsageError(
            f"--split {split}: no entries are tagged {split!r} in {where}; known splits: {listed}; {fix}"
        )
    chosen = [e for e in entries if e.split is None or e.split == split]
    if not chosen:
        raise UsageError(f"--split {split}: {path or 'the golden set'} has no entries")
    return chosen


def statistics(entries: Sequence[GoldenEntry]) -> dict[str, dict[str, int]]:
    """Counts by pin, kind, split and scope (a conversation's turns count as entries), and the conversation
    counts when the set has conversations."""
    conversations = conversation_statistics(entries)
    return {
        "pin": dict(sorted(Counter(e.pin for e in entries).items())),
        "pin_in_scope": dict(sorted(Counter(e.pin for e in entries if not e.out_of_scope).items())),
        "kind": dict(sorted(Counter(e.kind for e in entries).items())),
        "split": dict(sorted(Counter(str(e.split) for e in entries).items())),
        "scope": {
            "in_scope": sum(not e.out_of_scope for e in entries),
            "out_of_scope": sum(e.out_of_scope for e in entries),
        },
        **({"conversations": conversations} if conversations else {}),
    }


def format_statistics(stats: dict[str, dict[str, int]]) -> str:
    lines = []
    for title, table in stats.items():
        lines.append(f"{title}:")
        width = max((len(k) for k in table), default=0)
        lines += [f"  {k:<{width}}  {v:>5}" for k, v in table.items()]
    return "\n".join(lines)
