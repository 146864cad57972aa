"""`doceval` entry point: builds the parser from the command modules and maps errors to exit codes.

Exit codes (docs/design.md section 8): 0 ok/PASS, 1 unexpected error, 2 bad input or usage, 3 gate FAIL,
4 run incomplete (more system errors than --max-errors; the summary is written, marked incomplete).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from doceval.cli import beir, golden, ids, pipeline, results
from doceval.cli.common import Parser
from doceval.errors import EXIT_UNEXPECTED, EXIT_USAGE, GateFailed, RunIncomplete, UsageError

DESCRIPTION = "doceval: evaluate documentation assistants against a labelled golden set"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="doceval", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for module in (pipeline, golden, ids, results, beir):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"doceval {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (GateFailed, RunIncomplete) as exc:
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
