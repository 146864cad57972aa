"""`doceval init DIR`: scaffold a user's own evaluation project (the work is doceval.app.project's)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from doceval.errors import UsageError


def cmd_init(args: argparse.Namespace) -> int:
    # lazy: start-up (the scaffolding composes the configuration with Hydra)
    from doceval.app.project import DocsSource, add_conversations, init_project

    docs: list[str] = args.docs or []
    if not docs and args.conversations and (Path(args.dir) / "doceval.yaml").is_file():
        # An existing project gains its conversation set (the documented way to add one later).
        for path in add_conversations(Path(args.dir), Path(args.conversations)):
            print(f"rewrote {path}")
        print("next: doceval params (then dvc repro runs the conversations stage)")
        return 0
    libraries: list[str] = args.library or []
    versions: list[str] = args.version or []
    if not docs:
        raise UsageError("init: --docs PATH is required (a folder of your markdown/rst docs)")
    if len(libraries) not in (1, len(docs)):
        raise UsageError(
            f"init: {len(docs)} --docs and {len(libraries)} --library: give one --library for all, or one per --docs"
        )
    if len(versions) not in (0, len(docs)):
        raise UsageError(
            f"init: {len(docs)} --docs and {len(versions)} --version: give one --version per --docs, or none "
            "(then each --docs folder holds one subfolder per version, DIR/<version>/)"
        )
    sources = [
        DocsSource(
            Path(path),
            libraries[i] if len(libraries) > 1 else libraries[0],
            versions[i] if versions else None,
        )
        for i, path in enumerate(docs)
    ]
    written = init_project(
        Path(args.dir),
        sources,
        Path(args.golden) if args.golden else None,
        git=args.git,
        dvc=args.dvc,
        conversations=Path(args.conversations) if args.conversations else None,
    )
    for path in written:
        print(f"wrote {path}")
    where = "" if Path(args.dir) == Path() else f"cd {args.dir} && "
    print(
        f"next: {where}doceval stage docs, write the golden set from its ids, commit, then dvc repro (the commands: "
        f"{Path(args.dir) / 'README.md'})"
    )
    return 0


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "init",
        help="scaffold your own evaluation project: doceval.yaml, params.yaml, dvc.yaml over your docs",
        description="Scaffold an evaluation project over your own docs and golden set, run by the installed "
        "doceval. Never overwrites a file.",
    )
    p.add_argument("dir", metavar="DIR", help="the project folder (created if needed; . for this one)")
    p.add_argument(
        "--docs", action="append", metavar="PATH", help="a folder of markdown/rst docs (repeatable)"
    )
    p.add_argument(
        "--library", action="append", metavar="NAME", help="its library (one for all, or one per --docs)"
    )
    p.add_argument(
        "--version",
        action="append",
        metavar="V",
        help="its version (one per --docs; none: DIR/<version>/ subfolders, one per version)",
    )
    p.add_argument(
        "--golden", metavar="FILE", help="your golden set (JSONL); default: golden.jsonl, to write"
    )
    p.add_argument(
        "--conversations",
        metavar="FILE",
        help="your conversation set (JSONL): golden_conversations in doceval.yaml and a conversations stage in "
        "dvc.yaml (its qrels beside it, NAME.qrels.jsonl, too); without --docs, on a project init made, adds it",
    )
    p.add_argument("--git", action="store_true", help="run `git init` in DIR")
    p.add_argument("--dvc", action="store_true", help="run `dvc init` in DIR (analytics off)")
    p.set_defaults(func=cmd_init)
