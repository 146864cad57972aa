"""`doceval ids`: the document ids of a built doceval corpus, for a golden set's `relevant_ids`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from doceval.common.hints import rerun
from doceval.errors import UsageError
from doceval.inputs.corpus import load_corpus

FALLBACK_DOCS = "data/docs"


def default_docs_dir(params: Path = Path("params.yaml")) -> Path:
    """``paths.docs`` from params.yaml when there is one, else data/docs."""
    if params.is_file():
        # lazy: start-up (yaml and the config schema, ~0.2 s; `--docs DIR` needs neither)
        from doceval.config.compose import load_params

        return Path(load_params(params).paths.docs)
    return Path(FALLBACK_DOCS)


def document_ids(docs_dir: Path, pins: Sequence[str] = ()) -> dict[str, list[str]]:
    """pin -> its document ids in corpus order (sorted), for the pins asked (all when none)."""
    if not (docs_dir / "manifest.json").is_file():
        raise UsageError(
            f"{docs_dir}: no built corpus here (no manifest.json). Build one with {rerun('docs')}, or "
            "`doceval docs --folder DIR --library NAME --version V` and pass its output with --docs"
        )
    corpus = load_corpus(docs_dir)
    unknown = [p for p in pins if p not in corpus.partitions]
    if unknown:
        raise UsageError(
            f"--pin {', '.join(unknown)}: not in {docs_dir}; its pins: {', '.join(corpus.pins) or '(none)'}"
        )
    chosen = list(dict.fromkeys(pins)) if pins else corpus.pins
    return {pin: list(dict.fromkeys(corpus.partitions[pin].doc_ids)) for pin in chosen}


def cmd_ids(args: argparse.Namespace) -> int:
    docs_dir = Path(args.docs) if args.docs else default_docs_dir()
    by_pin = document_ids(docs_dir, args.pin or ())
    if args.count:
        for pin, ids in by_pin.items():
            print(f"{pin}\t{len(ids)}")
        return 0
    for ids in by_pin.values():
        for doc_id in ids:
            print(doc_id)
    return 0


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "ids",
        help="list the document ids of a built corpus (for a golden set's relevant_ids)",
        description="List the document ids of a built doceval corpus, one per line, sorted by pin.",
    )
    p.add_argument(
        "--docs",
        metavar="DIR",
        help=f"corpus directory (default: paths.docs from params.yaml, else {FALLBACK_DOCS})",
    )
    p.add_argument("--pin", action="append", metavar="LIB@VERSION", help="only this pin's ids (repeatable)")
    p.add_argument("--count", action="store_true", help="print the number of documents per pin instead")
    p.set_defaults(func=cmd_ids)
