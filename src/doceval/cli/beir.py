"""`doceval beir import FOLDER --split test --out DIR`: a BEIR folder -> DIR/docs (corpus) + DIR/golden.jsonl.

Registered by :mod:`doceval.cli.main`; the work is in :mod:`doceval.inputs.beir`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from doceval.cli.common import Parser
from doceval.common.io import output_folder, output_target
from doceval.common.paths import refuse_overlap
from doceval.inputs.beir import DEFAULT_CHUNK_CHARS, import_beir


def cmd_beir_import(args: argparse.Namespace) -> int:
    out = Path(args.out)
    docs, golden = out / "docs", out / "golden.jsonl"
    fix = "pass --out DIR naming a folder (new or existing)"
    output_folder(out, f"--out {out}", fix)
    output_folder(docs, f"--out {out}: {docs}", fix)
    output_target(golden, f"--out {out}: {golden}", fix)
    refuse_overlap(
        [("--out", docs), ("--out", golden)], [("the BEIR folder", args.folder)], "name another --out DIR"
    )
    result = import_beir(
        Path(args.folder),
        args.split,
        docs,
        golden,
        library=args.library,
        version=args.version,
        chunk_chars=args.chunk_chars,
    )
    print(json.dumps(result))
    split_flag = f"--split {result['golden_split']}" if result["golden_split"] else "--split all"
    print(
        f"evaluate with: doceval eval --golden {golden} {split_flag} --no-judge --score-floor 0 "
        f"--output {out / 'summary.json'} retriever=bm25 k=10 paths.docs={docs} paths.runs={out / 'runs'}"
    )
    print(
        "  dense/hybrid: build the index over these docs first (doceval.index.build.build_index, or `doceval stage index "
        "--params P` with paths.docs/paths.index set in P), add paths.index=..., and use --score-floor -1 "
        "(cosine: no floor); benchmarks/beir.py does all of this and compares with the published figures"
    )
    return 0


def register(sub: Any) -> None:
    """Add ``beir import`` to the ``doceval`` subcommands (no params.yaml needed)."""

    beir = sub.add_parser("beir", help="BEIR-format benchmarks (corpus.jsonl, queries.jsonl, qrels/)")
    commands = beir.add_subparsers(dest="beir_command", required=True, parser_class=Parser)
    p = commands.add_parser(
        "import",
        help="convert a BEIR folder into a doceval corpus (DIR/docs) and golden set (DIR/golden.jsonl)",
        description=(
            "Convert FOLDER (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv) into DIR/docs, a corpus directory "
            "like the docs stage writes (one partition LIB@VERSION, one chunk per BEIR document), and "
            "DIR/golden.jsonl, one in-scope entry per query with a qrel of relevance > 0 in SPLIT."
        ),
    )
    p.add_argument("folder", metavar="FOLDER", help="the BEIR dataset folder")
    p.add_argument("--split", default="test", help="qrels split to import: qrels/SPLIT.tsv (default: test)")
    p.add_argument(
        "--out", required=True, metavar="DIR", help="output directory (DIR/docs, DIR/golden.jsonl)"
    )
    p.add_argument("--library", help="library name of the partition (default: beir-<folder name>)")
    p.add_argument("--version", default="1", help="version of the partition (default: 1)")
    p.add_argument(
        "--chunk-chars",
        type=int,
        default=DEFAULT_CHUNK_CHARS,
        help=f"chunk size; the default ({DEFAULT_CHUNK_CHARS}) keeps each BEIR document one chunk",
    )
    p.set_defaults(func=cmd_beir_import)
