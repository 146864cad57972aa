"""`doceval golden draft`: a built corpus to drafted golden entries, every one checked as `golden validate
--strict` checks it (docs/design.md section 3.5).

Per library, each pair of consecutive pins (by version) gives its differences (``doceval.drafting.
differences``); up to ``max_per_kind`` of each kind, in a seeded order, are drafted (``doceval.drafting.
traps``), with a conversation across each rename, removal with a replacement, move and changed default; then
the out-of-scope drafts (``doceval.drafting.outofscope``). The drafts are written to a scratch copy and run
through the validator's own checks (format, scope rules, grading rules under ``--strict``); an entry with any
finding is dropped (a conversation with all its turns) until none is left, so every draft written passes.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.common.io import write_jsonl_atomic
from doceval.drafting.differences import KINDS, Difference, find_differences
from doceval.drafting.entries import Draft, unique_ids
from doceval.drafting.inventory import Inventory, build_inventory
from doceval.drafting.outofscope import nonexistent, off_topic, unindexed, version_key
from doceval.drafting.traps import BUILDERS, conversation
from doceval.errors import UsageError
from doceval.inputs.corpus import load_corpus
from doceval.inputs.golden import parse_golden
from doceval.inputs.grading import check_grading
from doceval.inputs.qrels import checked_pairs, labels_md5, qrels_path
from doceval.inputs.scope import check_scope
from doceval.inputs.scope_rules import PinText, pin_texts
from doceval.inputs.splits import assign_splits

if TYPE_CHECKING:
    from doceval.llm import LLMConfig

DIFFERENCES_SUFFIX = ".differences.jsonl"
OUT_OF_SCOPE_DEFAULT = 2  # out-of-scope drafts of each kind per library, unless --max says fewer
CONVERSATION_KINDS = ("renamed", "removed", "moved", "default_changed")


@dataclass(frozen=True)
class DraftOptions:
    corpus: Path
    out: Path
    libraries: tuple[str, ...] = ()
    pins: tuple[str, ...] = ()
    seed: int = 0
    max_per_kind: int | None = None
    llm: LLMConfig | None = None


@dataclass
class DraftResult:
    differences: list[Difference]
    drafts: list[Draft]
    dropped: Counter[str] = field(default_factory=Counter)  # rule -> drafts dropped for it
    phrasing: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    files: list[Path] = field(default_factory=list)


def differences_path(out: Path) -> Path:
    return out.with_name(out.stem + DIFFERENCES_SUFFIX)


def library_pins(
    pins: Sequence[str], libraries: Sequence[str], chosen: Sequence[str]
) -> dict[str, list[str]]:
    """library -> its pins, oldest first, narrowed by ``--library`` and ``--pins``; a name the corpus lacks is
    a UsageError naming the pins it has."""
    known = set(pins)
    for pin in chosen:
        if pin not in known:
            raise UsageError(f"--pins {pin}: not a pin of the corpus; its pins: {', '.join(sorted(known))}")
    for lib in libraries:
        if not any(p.split("@", 1)[0] == lib for p in pins):
            raise UsageError(
                f"--library {lib}: not in the corpus; its libraries: "
                f"{', '.join(sorted({p.split('@', 1)[0] for p in pins}))}"
            )
    out: dict[str, list[str]] = {}
    for pin in pins:
        lib = pin.split("@", 1)[0]
        if (libraries and lib not in libraries) or (chosen and pin not in chosen):
            continue
        out.setdefault(lib, []).append(pin)
    return {lib: sorted(ps, key=lambda p: version_key(p.split("@", 1)[1])) for lib, ps in sorted(out.items())}


def draft_golden(opts: DraftOptions) -> DraftResult:
    """Draft, check and write ``opts.out`` with its qrels and differences beside it."""
    started = time.perf_counter()
    corpus = load_corpus(opts.corpus)
    texts = pin_texts(corpus.partitions)
    groups = library_pins(corpus.pins, opts.libraries, opts.pins)
    if not groups:
        raise UsageError(f"{opts.corpus}: no pins to draft from (--library/--pins left none)")
    differences: list[Difference] = []
    drafts: list[Draft] = []
    for pins in groups.values():
        invs = [build_inventory(pin, texts[pin]) for pin in pins]
        for old, new in zip(invs, invs[1:], strict=False):
            found = find_differences(old, new)
            differences += found
            drafts += _drafts_of(found, old, new, opts)
        drafts += _out_of_scope(invs, corpus.libraries, drafts, opts)
    unique_ids(drafts)
    result = DraftResult(differences, drafts)
    if opts.llm is not None:
        # lazy: start-up (the LLM client loads openai); only --llm needs it
        from doceval.drafting.phrasing import phrase

        result.phrasing = phrase(drafts, opts.llm)
    result.drafts, result.dropped = checked(
        drafts, texts, {p: part.doc_ids for p, part in corpus.partitions.items()}
    )
    _assign_splits(result.drafts, opts.seed)
    result.files = write(result, opts.out)
    result.seconds = time.perf_counter() - started
    return result


def _drafts_of(
    found: Sequence[Difference], old: Inventory, new: Inventory, opts: DraftOptions
) -> list[Draft]:
    out: list[Draft] = []
    for kind in KINDS:
        of_kind = [d for d in found if d.kind == kind]
        random.Random(f"{opts.seed}:{old.pin}:{new.pin}:{kind}").shuffle(of_kind)
        taken = 0
        for diff in of_kind:
            if opts.max_per_kind is not None and taken >= opts.max_per_kind:
                break
            made = list(BUILDERS[kind](diff, old, new))
            if not made:
                continue
            taken += 1
            out += made
            if kind in CONVERSATION_KINDS:
                conv = conversation(diff, made)
                out += [conv] if conv is not None else []
    return out


def _out_of_scope(
    invs: Sequence[Inventory], libraries: Sequence[str], drafts: Sequence[Draft], opts: DraftOptions
) -> list[Draft]:
    n = OUT_OF_SCOPE_DEFAULT if opts.max_per_kind is None else min(OUT_OF_SCOPE_DEFAULT, opts.max_per_kind)
    lib = invs[0].library
    tasks = [
        _task_of(d.record["question"])
        for d in drafts
        if d.record.get("library") == lib and d.record.get("kind") == "lookup"
    ]
    return [
        *nonexistent(invs, opts.seed, n),
        *unindexed(invs, libraries, [t for t in tasks if t], opts.seed, n),
        *off_topic(invs, opts.seed, n),
    ]


def _task_of(question: str) -> str:
    """ "In acme 2.0, how do I add a job?" -> "how do I add a job" (asked again of another version)."""
    head, sep, rest = question.partition(", ")
    return rest.rstrip("?") if sep and head.startswith("In ") else ""


def checked(
    drafts: Sequence[Draft], texts: dict[str, PinText], doc_ids: dict[str, list[str]]
) -> tuple[list[Draft], Counter[str]]:
    """The drafts that pass `golden validate --strict` against the corpus, and why the others were dropped
    (the rule of each entry's first finding). Dropping one entry changes no other entry's findings, except
    that a conversation goes with any of its turns; the loop stops when a round drops nothing."""
    kept = list(drafts)
    dropped: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="doceval-draft-") as tmp:
        path = Path(tmp) / "drafts.jsonl"
        while kept:
            _write_lines(kept, path)
            entries = parse_golden(path, allow_drafts=True)
            scope = check_scope(entries, texts, path, labels_md5(path))
            grading = check_grading(entries, doc_ids, checked_pairs(path))
            first: dict[str, str] = {}
            for finding in [*scope.errors, *grading.findings]:
                first.setdefault(finding.entry_id.split("#", 1)[0], finding.rule)
            if not first:
                break
            dropped.update(first.values())
            kept = [d for d in kept if d.id not in first]
    return kept, dropped


def _write_lines(drafts: Sequence[Draft], path: Path) -> None:
    write_jsonl_atomic(path, [d.record for d in drafts])
    write_jsonl_atomic(qrels_path(path), [line for d in drafts for line in d.qrels])


def _assign_splits(drafts: Sequence[Draft], seed: int) -> None:
    if not drafts:
        return
    with tempfile.TemporaryDirectory(prefix="doceval-draft-") as tmp:
        path = Path(tmp) / "drafts.jsonl"
        _write_lines(drafts, path)
        assignment = assign_splits(parse_golden(path, allow_drafts=True), seed)
    for d in drafts:
        d.record["split"] = assignment[d.id]


def write(result: DraftResult, out: Path) -> list[Path]:
    """The drafts, their qrels and the differences found (every one, drafted or not)."""
    if not result.drafts:
        raise UsageError(f"{out}: no draft passed the checks; nothing written ({dict(result.dropped)})")
    _write_lines(result.drafts, out)
    diffs = differences_path(out)
    write_jsonl_atomic(diffs, [d.record() for d in result.differences])
    return [out, qrels_path(out), diffs]


def summary_counts(result: DraftResult) -> dict[str, Any]:
    """Counts for the command's report: differences by library and kind, drafts by kind and scope."""
    by_kind: Counter[str] = Counter()
    for d in result.drafts:
        by_kind[str(d.record["kind"])] += 1
    return {
        "differences": dict(Counter(f"{d.library} {d.kind}" for d in result.differences)),
        "drafts": dict(by_kind),
        "dropped": dict(result.dropped),
    }
