"""`doceval` command line. Each subcommand is a thin wrapper over the library; errors map to exit codes.

Stage commands (docs, index, retrieve, calibrate, evaluate, report) read params.yaml, as DVC runs them.
User commands (eval, sweep) compose conf/ with Hydra overrides given after their flags.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from doceval.errors import EXIT_UNEXPECTED, EXIT_USAGE, GateFailed, UsageError


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; make the message say how to get help."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _params(args: argparse.Namespace) -> dict[str, Any]:
    from doceval.config import load_params

    return load_params(Path(args.params))


def cmd_params(args: argparse.Namespace) -> int:
    from doceval.config import PARAMS, compose, dump_params

    text = dump_params(compose(args.overrides))
    if args.check:
        current = PARAMS.read_text(encoding="utf-8") if PARAMS.is_file() else ""
        if current != text:
            print("params.yaml differs from conf/: run `doceval params` and commit it", file=sys.stderr)
            return EXIT_USAGE
        print("params.yaml matches conf/")
        return 0
    PARAMS.write_text(text, encoding="utf-8")
    print(f"wrote {PARAMS}")
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    import json

    from doceval.docs import build_corpus, build_folder_corpus, parse_specs

    params = _params(args)
    docs_cfg = params["docs"]
    out = Path(params["paths"]["docs"])
    folder = args.folder or docs_cfg.get("folder")
    if folder:
        library = args.library or docs_cfg.get("folder_library")
        version = args.version or docs_cfg.get("folder_version")
        if not library or not version:
            raise UsageError("docs --folder needs --library NAME and --version VERSION for the document ids")
        manifest = build_folder_corpus(Path(folder), library, version, out, int(docs_cfg["chunk_chars"]))
    else:
        specs = parse_specs(docs_cfg["libraries"])
        if args.only:
            known = {s.pin: s for s in specs}
            unknown = [p for p in args.only if p not in known]
            if unknown:
                raise UsageError(
                    f"docs --only: {', '.join(unknown)} not configured; known: {', '.join(sorted(known))}"
                )
            specs = [known[p] for p in args.only]
        cache = Path(params["paths"]["cache"]) / "wheels"
        manifest = build_corpus(specs, out, cache, int(docs_cfg["chunk_chars"]), progress=not args.quiet)
    print(json.dumps({"documents": manifest["documents"], "chunks": manifest["chunks"],
                      "pins": {p: v["chunks"] for p, v in manifest["pins"].items()}}))  # fmt: skip
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from doceval.index import run_index_stage

    run_index_stage(_params(args), progress=not args.quiet)
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="doceval", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def stage(name: str, func: Callable[[argparse.Namespace], int], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--params", default="params.yaml", help="composed configuration (default: params.yaml)")
        p.add_argument("--quiet", action="store_true", help="no progress bars")
        p.set_defaults(func=func)
        return p

    p = sub.add_parser("params", help="compose conf/ into params.yaml (Hydra)")
    p.add_argument("--check", action="store_true", help="exit 2 if params.yaml differs from conf/")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. retriever=bm25")
    p.set_defaults(func=cmd_params)

    p = stage("docs", cmd_docs, "build the documentation corpus from pinned wheels (or a docs folder)")
    p.add_argument("--only", nargs="+", metavar="LIB@VERSION", help="build only these configured pins")
    p.add_argument("--folder", help="a folder of markdown/rst docs instead of wheels")
    p.add_argument("--library", help="library name for --folder")
    p.add_argument("--version", help="version for --folder")

    stage("index", cmd_index, "embed the corpus and write the Qdrant index")

    for register in _EXTRA:
        register(sub, stage)
    return parser


# Later modules add their subcommands here (keeps this file a list of thin wrappers).
_EXTRA: list[Callable[[Any, Callable[..., argparse.ArgumentParser]], None]] = []


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"doceval {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except GateFailed as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"doceval {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - last resort: exit 1 with the traceback for a bug report
        import traceback

        traceback.print_exc()
        print(f"doceval {args.command}: unexpected error: {exc}", file=sys.stderr)
        return EXIT_UNEXPECTED


if __name__ == "__main__":
    sys.exit(main())
