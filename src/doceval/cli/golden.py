"""`doceval golden validate|split|pool|audit`: check a golden set against the design's rules and its scope labels
against the corpus, (re)assign split tags, pool unjudged documents, audit labels; `draft|review|accept` are
registered from ``doceval.cli.drafting``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from doceval.cli import drafting
from doceval.cli.common import Parser
from doceval.common.io import check_writable, jsonl_line, output_target, write_jsonl_atomic, write_text_atomic
from doceval.errors import UsageError
from doceval.inputs.audit import audit_sample, read_verdicts, worksheet_rows
from doceval.inputs.corpus import load_corpus
from doceval.inputs.golden import (
    DEFAULT_PIN,
    format_statistics,
    parse_golden,
    read_ids,
    statistics,
    write_splits,
)
from doceval.inputs.grading import check_grading, format_grading, strict_problems
from doceval.inputs.qrels import checked_pairs, labels_md5, qrels_path, unjudged
from doceval.inputs.scope import format_scope, raise_on_errors, record_findings, scope_of

DEFAULT_CORPUS = "data/docs"


def cmd_golden_validate(args: argparse.Namespace) -> int:
    if args.ids and args.corpus:
        raise UsageError(
            "--ids and --corpus: choose one (--ids checks relevant ids against a list, --corpus against "
            "a built doceval corpus)"
        )
    if args.ids:
        corpus_ids: frozenset[str] | None = read_ids(Path(args.ids))
        entries = parse_golden(
            Path(args.path),
            corpus_ids=corpus_ids,
            default_pin=DEFAULT_PIN,
            ids_source=f"{args.ids} (--ids)",
            allow_drafts=True,
        )
        checked = f" (relevant ids checked against {args.ids})"
    elif args.no_corpus:
        entries = parse_golden(Path(args.path), default_pin=DEFAULT_PIN, allow_drafts=True)
        checked = " (corpus not checked)"
    else:
        return _validate_against_corpus(args)
    if args.strict:
        raise UsageError(
            "--strict: the grading rules need the corpus's document ids (drop --ids / --no-corpus)"
        )
    if args.record_findings:
        raise UsageError("--record-findings: needs the corpus (drop --ids / --no-corpus)")
    print(f"{args.path}: {len(entries)} entries, valid{checked}")
    print(format_statistics(statistics(entries)))
    return 0


def _validate_against_corpus(args: argparse.Namespace) -> int:
    path = Path(args.path)
    corpus_dir = Path(args.corpus or DEFAULT_CORPUS)
    corpus = load_corpus(corpus_dir)
    # Relevant ids: with the scope rules (doceval.inputs.scope). Drafts are validated like any entry.
    entries = parse_golden(path, allow_drafts=True)
    md5 = labels_md5(path)
    report = scope_of(corpus, entries, path, md5)
    if args.record_findings:
        written = record_findings(report, path, md5)
        print(
            f"{written}: recorded {len(report.errors) + len(report.known)} finding(s) of {path} (md5 {md5})"
        )
        return 0
    doc_ids = {pin: part.doc_ids for pin, part in corpus.partitions.items()}
    grading = check_grading(entries, doc_ids, checked_pairs(path))
    # Every error at once: the scope errors, and under --strict the grading rules' findings.
    raise_on_errors(report, path, strict_problems(grading, str(path)) if args.strict else ())
    print(f"{path}: {len(entries)} entries, valid against {corpus_dir} ({len(corpus.pins)} pins)")
    print(format_statistics(statistics(entries)))
    print("\n".join(format_scope(report, path)))
    if any(e.qrels is not None for e in entries):
        print("\n".join(format_grading(grading, str(path))))
    else:
        print(f"grading rules: not checked ({path} has no graded judgments, {qrels_path(path).name})")
    return 0


def cmd_golden_audit(args: argparse.Namespace) -> int:
    # lazy: start-up (the doceval.results package loads numpy, ~0.2 s)
    from doceval.results.audit import format_summary, summarise

    if args.out is not None:
        check_writable(Path(args.out), f"--out {args.out}", "pass a writable --out FILE")
    entries = parse_golden(Path(args.path), allow_drafts=True)  # auditing drafts is reviewing them
    if args.verdicts:
        summary = summarise(read_verdicts(Path(args.verdicts), [e.id for e in entries]))
        print("\n".join(format_summary(summary)))
        return 0
    if args.sample is None or args.out is None:
        raise UsageError(
            "golden audit: pass --sample N --out FILE (a worksheet), or --verdicts FILE (the summary)"
        )
    rows = worksheet_rows(audit_sample(entries, args.sample, args.seed))
    write_jsonl_atomic(Path(args.out), rows)
    print(
        f"{args.out}: {len(rows)} entries to audit (seed {args.seed}); fill in verdict (OK, MINOR, WRONG) and reason"
    )
    return 0


def cmd_golden_pool(args: argparse.Namespace) -> int:
    # lazy: start-up (doceval.results loads numpy)
    from doceval.results import load_summary

    if args.k is not None and args.k < 1:
        raise UsageError(f"--k {args.k}: must be at least 1")
    if args.out:
        check_writable(
            Path(args.out), f"--out {args.out}", "pass a writable --out FILE, or omit it for stdout"
        )
    entries = parse_golden(Path(args.golden), allow_drafts=True)
    rows = unjudged(entries, [load_summary(run) for run in args.runs], args.k)
    text = "".join(jsonl_line(r) for r in rows)
    if args.out:
        write_text_atomic(Path(args.out), text)
    else:
        print(text, end="")
    pairs = {(r["id"]) for r in rows}
    print(
        f"{len(rows)} unjudged document(s) over {len(pairs)} entries in the top {args.k or 'R'} of {len(args.runs)} "
        f"run(s); grade them (0, 1, 2) and append them to {qrels_path(Path(args.golden))}",
        file=sys.stderr,
    )
    return 0


def cmd_golden_split(args: argparse.Namespace) -> int:
    # The golden set is rewritten whole: a symlink to it stays a link, anything but a file is refused.
    output_target(Path(args.path), f"golden split {args.path}", "name the golden set's JSONL file")
    # Splitting checks no ids: an entry without library/version is stratified under the default pin.
    counts = write_splits(Path(args.path), seed=args.seed, default_pin=DEFAULT_PIN)
    print(f"{args.path}: split tags written with seed {args.seed}: {counts}")
    return 0


def register(sub: Any) -> None:
    golden = sub.add_parser("golden", help="golden set tools").add_subparsers(
        dest="golden_command", required=True, parser_class=Parser
    )
    p = golden.add_parser(
        "validate",
        help="check a golden set (JSONL or a JSON array) against the design's rules and the built corpus",
    )
    p.add_argument("path")
    p.add_argument("--corpus", help=f"built corpus directory (default: {DEFAULT_CORPUS})")
    p.add_argument(
        "--no-corpus",
        action="store_true",
        help="skip the check that relevant ids exist; entries may omit library/version (default pin)",
    )
    p.add_argument(
        "--ids",
        metavar="FILE",
        help="your document ids, one per line (# comment lines): every relevant id must be one of them; "
        "implies --no-corpus",
    )
    p.add_argument(
        "--record-findings",
        action="store_true",
        help="freeze the golden set as it is: write NAME.findings.json with its current findings and md5, "
        "so they are reported as warnings while the file is unchanged (labels wrong for the corpus cannot "
        "be recorded)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="the grading rules of a graded set (grading_candidate, inconsistent_grade) are errors (exit 2), "
        "not warnings",
    )
    p.set_defaults(func=cmd_golden_validate)
    p = golden.add_parser(
        "audit",
        help="a seeded stratified sample to audit by hand (--sample N --out FILE), or the label error rate of the "
        "filled worksheet (--verdicts FILE)",
    )
    p.add_argument("path")
    p.add_argument("--sample", type=int, metavar="N", help="entries to sample, stratified by scope and kind")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", metavar="FILE", help="the worksheet to write (JSONL)")
    p.add_argument(
        "--verdicts", metavar="FILE", help="the filled worksheet: prints the WRONG rate and its interval"
    )
    p.set_defaults(func=cmd_golden_audit)
    p = golden.add_parser(
        "pool", help="the documents runs retrieved that the golden set has not judged (rows to grade)"
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="summary JSON files (doceval eval --output)")
    p.add_argument("--golden", required=True, metavar="PATH", help="the golden set (its qrels beside it)")
    p.add_argument("--k", type=int, metavar="K", help="only each run's top K (default: all of R)")
    p.add_argument("--out", metavar="FILE", help="write the rows here (JSONL; default: stdout)")
    p.set_defaults(func=cmd_golden_pool)
    p = golden.add_parser(
        "split", help="(re)assign calibration/test tags, stratified by library@version and kind"
    )
    p.add_argument("path")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_golden_split)
    drafting.register(golden)
