"""`doceval golden validate|split`: check a golden set against the design's rules, (re)assign split tags."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from doceval.cli.common import Parser


def cmd_golden_validate(args: argparse.Namespace) -> int:
    from doceval.inputs.corpus import load_corpus
    from doceval.inputs.golden import format_statistics, parse_golden, statistics

    corpus_ids = None if args.no_corpus else load_corpus(Path(args.corpus)).doc_ids()
    entries = parse_golden(Path(args.path), corpus_ids=corpus_ids)
    print(
        f"{args.path}: {len(entries)} entries, valid"
        + ("" if corpus_ids is not None else " (corpus not checked)")
    )
    print(format_statistics(statistics(entries)))
    return 0


def cmd_golden_split(args: argparse.Namespace) -> int:
    from doceval.inputs.golden import write_splits

    counts = write_splits(Path(args.path), seed=args.seed)
    print(f"{args.path}: split tags written with seed {args.seed}: {counts}")
    return 0


def register(sub: Any) -> None:
    golden = sub.add_parser("golden", help="golden set tools").add_subparsers(
        dest="golden_command", required=True, parser_class=Parser
    )
    p = golden.add_parser(
        "validate", help="check a golden set against the design's rules and the built corpus"
    )
    p.add_argument("path")
    p.add_argument("--corpus", default="data/docs", help="built corpus directory (default: data/docs)")
    p.add_argument("--no-corpus", action="store_true", help="skip the check that relevant ids exist")
    p.set_defaults(func=cmd_golden_validate)
    p = golden.add_parser(
        "split", help="(re)assign calibration/test tags, stratified by library@version and kind"
    )
    p.add_argument("path")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_golden_split)
