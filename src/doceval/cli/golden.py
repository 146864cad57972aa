"""`doceval golden validate|template|split|audit|pool`: check a golden set against the design's rules and its
scope labels against the corpus, write a template from a built corpus's ids, (re)assign split tags, audit labels,
pool unjudged documents; `draft|review|accept` are registered from ``doceval.cli.drafting``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from doceval.cli.common import Parser
from doceval.cli.drafting import register as register_drafting
from doceval.cli.ids import FALLBACK_DOCS, default_docs_dir, document_ids
from doceval.common.io import check_writable, jsonl_line, output_target, write_jsonl_atomic, write_text_atomic
from doceval.common.paths import Named, create_new_file, refuse_overlap
from doceval.errors import UsageError
from doceval.inputs.audit import (
    audit_sample,
    read_adjudication,
    read_assessor_verdicts,
    read_verdicts,
    worksheet_rows,
)
from doceval.inputs.corpus import load_corpus
from doceval.inputs.golden import (
    DEFAULT_PIN,
    format_statistics,
    parse_golden,
    read_ids,
    statistics,
)
from doceval.inputs.grading import check_grading, format_grading, strict_problems
from doceval.inputs.qrels import checked_pairs, labels_md5, qrels_path, unjudged
from doceval.inputs.scope import format_scope, raise_on_errors, record_findings, scope_of
from doceval.inputs.selfcheck import STRICT_RULES
from doceval.inputs.splits import write_splits
from doceval.inputs.standalone import format_standalone
from doceval.inputs.template import template_text

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
    _print_lines(format_standalone(entries, str(args.path)))
    return 0


def _print_lines(lines: list[str]) -> None:
    if lines:
        print("\n".join(lines))


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
    # Every error at once: the scope errors, and under --strict the grading rules' findings and the warnings
    # --strict makes errors (a reference answer that fails its own strings, in an older set).
    made_errors = [f.problem(str(path)) for f in report.warnings if f.rule in STRICT_RULES]
    raise_on_errors(report, path, [*strict_problems(grading, str(path)), *made_errors] if args.strict else ())
    print(f"{path}: {len(entries)} entries, valid against {corpus_dir} ({len(corpus.pins)} pins)")
    print(format_statistics(statistics(entries)))
    _print_lines(format_standalone(entries, str(path)))
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
        check_writable(args.out, f"--out {args.out}", "pass a writable --out FILE")
        read: list[Named] = [("the golden set", args.path), ("its qrels", qrels_path(Path(args.path)))]
        refuse_overlap(
            [("--out", args.out)],
            [*read, *(("--verdicts", v) for v in args.verdicts or [])],
            "name another --out FILE",
        )
    entries = parse_golden(Path(args.path), allow_drafts=True)  # auditing drafts is reviewing them
    verdicts = args.verdicts or []
    if len(verdicts) == 1:
        summary = summarise(read_verdicts(Path(verdicts[0]), [e.id for e in entries]))
        print("\n".join(format_summary(summary)))
        return 0
    if len(verdicts) == 2:
        return _two_assessors(args, entries, [Path(v) for v in verdicts])
    if verdicts:
        raise UsageError(f"golden audit: {len(verdicts)} --verdicts files; give one, or two (two assessors)")
    if args.out is None or (args.sample is None) == (not args.all):
        raise UsageError(
            "golden audit: pass --sample N --out FILE (a sampled worksheet), --all --out FILE (every entry, "
            "one sheet per assessor), or --verdicts FILE (the summary; twice with --adjudication for two assessors)"
        )
    chosen = entries if args.all else audit_sample(entries, args.sample, args.seed)
    rows = worksheet_rows(chosen, entries, assessor=args.all)
    write_jsonl_atomic(Path(args.out), rows)
    what = "every entry" if args.all else f"seed {args.seed}"
    fill = "verdict (OK, MINOR, WRONG), reason" + (" and assessor" if args.all else "")
    print(f"{args.out}: {len(rows)} entries to audit ({what}); fill in {fill}")
    return 0


def _two_assessors(args: argparse.Namespace, entries: list[Any], paths: list[Path]) -> int:
    """`golden audit PATH --verdicts A --verdicts B [--adjudication FILE]`: the adjudicated WRONG rate."""
    # lazy: start-up (as above: numpy)
    from doceval.results.audit import adjudicated, disagreements, format_adjudicated

    ids = [e.id for e in entries]
    first, second = (read_assessor_verdicts(p, ids) for p in paths)
    if first[0] == second[0]:
        raise UsageError(f"{paths[0]} and {paths[1]}: both name assessor {first[0]!r}; two assessors audit")
    split = disagreements(first[1], second[1])
    if split and not args.adjudication:
        raise UsageError(
            f"golden audit: the assessors disagree on {len(split)} entries ({', '.join(split[:5])}); pass "
            "--adjudication FILE (one row per disagreement: id, verdict, reason, adjudicator)"
        )
    ruling = read_adjudication(Path(args.adjudication), split) if args.adjudication else {}
    result = adjudicated(first, second, ruling)
    print(f"{args.path}: {result['final']['n']} of {len(ids)} entries audited by two assessors")
    print("\n".join(format_adjudicated(result, args.target_wrong, args.target_upper)))
    return 0


def cmd_golden_pool(args: argparse.Namespace) -> int:
    # lazy: start-up (doceval.results loads numpy)
    from doceval.results import load_summary

    if args.k is not None and args.k < 1:
        raise UsageError(f"--k {args.k}: must be at least 1")
    if args.out:
        fix = "pass a writable --out FILE, or omit it for stdout"
        check_writable(args.out, f"--out {args.out}", fix)
        read: list[Named] = [("the golden set", args.golden), ("its qrels", qrels_path(Path(args.golden)))]
        refuse_overlap([("--out", args.out)], [*read, *(("a run", run) for run in args.runs)], fix)
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


def cmd_golden_template(args: argparse.Namespace) -> int:
    """A golden template from a built corpus: one example row per pin citing a real id, one out of scope."""
    docs_dir = Path(args.docs) if args.docs else default_docs_dir()
    fix = "name a new --out FILE (a template never overwrites a file)"
    check_writable(args.out, f"--out {args.out}", fix)
    refuse_overlap([("--out", args.out)], [("the corpus", docs_dir)], fix)
    if os.path.lexists(args.out):
        raise UsageError(f"--out {args.out}: already exists; {fix}")
    by_pin = document_ids(docs_dir, args.pin or ())
    create_new_file(Path(args.out), template_text(by_pin), "--out", fix)
    print(
        f"{args.out}: {len(by_pin) + 1} example rows citing ids of {docs_dir} ({', '.join(by_pin)}); replace each "
        f"TODO, add your entries (`doceval ids --docs {docs_dir}` lists every id), then `doceval golden validate "
        f"{args.out} --corpus {docs_dir}`"
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
        "template",
        help="write a golden template from a built corpus: one example row per pin citing a real document id",
    )
    p.add_argument(
        "--docs", metavar="DIR", help=f"the built corpus (default: paths.docs, else {FALLBACK_DOCS})"
    )
    p.add_argument("--pin", action="append", metavar="LIB@VERSION", help="only these pins (repeatable)")
    p.add_argument("--out", required=True, metavar="FILE", help="the template to write (never over a file)")
    p.set_defaults(func=cmd_golden_template)
    _register_audit(golden)
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
    register_drafting(golden)


def _register_audit(golden: Any) -> None:
    """`golden audit`: a worksheet (sampled, or every entry for two assessors) or the verdicts' summary."""
    p = golden.add_parser(
        "audit",
        help="a seeded stratified sample to audit by hand (--sample N --out FILE), or the label error rate of the "
        "filled worksheet (--verdicts FILE)",
    )
    p.add_argument("path")
    p.add_argument("--sample", type=int, metavar="N", help="entries to sample, stratified by scope and kind")
    p.add_argument(
        "--all",
        action="store_true",
        help="a worksheet of every entry (a conversation's turns with their context) and a blank assessor "
        "column: one sheet per assessor of a two-assessor audit",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", metavar="FILE", help="the worksheet to write (JSONL)")
    p.add_argument(
        "--verdicts",
        metavar="FILE",
        action="append",
        help="the filled worksheet: prints the WRONG rate and its interval; twice (one per assessor) for a "
        "two-assessor audit",
    )
    p.add_argument(
        "--adjudication",
        metavar="FILE",
        help="with two --verdicts: the adjudicator's rows for the entries the assessors disagree on "
        "(id, verdict, reason, adjudicator)",
    )
    p.add_argument(
        "--target-wrong", type=float, default=0.02, help="two assessors: the WRONG rate target (default 0.02)"
    )
    p.add_argument(
        "--target-upper",
        type=float,
        default=0.05,
        help="two assessors: the target for the Wilson upper bound (default 0.05)",
    )
    p.set_defaults(func=cmd_golden_audit)
