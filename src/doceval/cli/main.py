"""`doceval` entry point: builds the parser from the command modules and maps errors to exit codes.

Exit codes (docs/design.md section 8): 0 ok/PASS, 1 unexpected error, 2 bad input or usage, 3 gate FAIL,
4 run incomplete (more system errors than --max-errors; the summary is written, marked incomplete),
130 interrupted, 141 stdout closed early (``doceval eval ... | head``).

A reader that stops reading (``| head``) closes the pipe: the next write or the flush at exit raises
BrokenPipeError. That is not an error of doceval's: stdout is pointed at /dev/null (so the interpreter's own flush
at exit cannot fail again) and the command exits 141, what a shell reports for a producer ended by SIGPIPE (128 +
13), as ``yes | head`` does: the output was cut, and ``set -o pipefail`` scripts can tell. The commands write their
files (the summary, the MLflow run) before they print, so nothing is lost but the unread lines.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import select
import sys
import traceback
from collections.abc import Sequence

# Each command module by its own name, not through the package: doceval.cli imports this module.
from doceval.cli.beir import register as register_beir
from doceval.cli.common import Parser
from doceval.cli.golden import register as register_golden
from doceval.cli.history import register as register_history
from doceval.cli.ids import register as register_ids
from doceval.cli.judge import register as register_judge
from doceval.cli.pipeline import register as register_pipeline
from doceval.cli.project import register as register_project
from doceval.cli.results import register as register_results
from doceval.cli.stage import register as register_stage
from doceval.common.io import TERMINAL_ERRORS
from doceval.common.redact import (
    ScrubbingStream,
    register_environment,
    register_overrides,
    scrub_message,
)
from doceval.engine import command_session
from doceval.errors import EXIT_UNEXPECTED, EXIT_USAGE, GateFailed, RunIncomplete, UsageError, WorkersLost

DESCRIPTION = "doceval: evaluate documentation assistants against a labelled golden set"
EXIT_BROKEN_PIPE = 128 + 13  # SIGPIPE, as a shell reports a producer whose reader went away


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (a BrokenPipeError from a socket is a different error).
    Without a real descriptor to ask (a test's captured stdout), the error is taken to be stdout's."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return True


def _discard_stdout() -> None:
    """Point stdout at /dev/null so later writes (and the flush at exit) go nowhere instead of failing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaces stdout for the rest of the process


def _flush_stdout(code: int) -> int:
    """Flush inside main, so a closed pipe is handled here and not reported by the interpreter at exit. A
    command that succeeded but could not print everything exits 141; a failure keeps its own exit code."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_BROKEN_PIPE if code == 0 else code
    except (OSError, ValueError):
        pass  # stdout closed or replaced: nothing left to flush
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="doceval", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for register in (
        register_project,
        register_pipeline,
        register_stage,
        register_golden,
        register_judge,
        register_ids,
        register_results,
        register_history,
        register_beir,
    ):
        register(sub)
    return parser


def _escape_unencodable() -> None:
    """A lone surrogate (an assistant's reply) is printed as ``\\udXXX``, an undecodable byte of a file name as
    that byte, never an exception (stdout's default is to raise)."""
    for stream in (sys.stdout, sys.stderr):
        # A stream replaced by something that is not a text stream is left as it is.
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.reconfigure(errors=TERMINAL_ERRORS)  # type: ignore[union-attr]


def main(argv: Sequence[str] | None = None) -> int:
    _escape_unencodable()
    stdout, stderr = sys.stdout, sys.stderr
    # stdout/stderr for the length of a command: every registered secret is masked in whatever is written.
    sys.stdout, sys.stderr = ScrubbingStream(stdout), ScrubbingStream(stderr)
    try:
        return _main(argv)
    finally:
        # A stdout discarded after a broken pipe stays discarded; otherwise the caller's streams come back.
        if isinstance(sys.stdout, ScrubbingStream):
            sys.stdout = stdout
        sys.stderr = stderr


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    # Before argparse or Hydra can quote one, and before MLflow or Ray read (and print) a URL's credentials.
    register_environment()
    register_overrides(argv if argv is not None else sys.argv[1:])
    try:
        args, extra = parser.parse_known_args(argv)
        # argparse cannot take positionals after options once it has filled a positional list: overrides
        # after a flag (`eval k=3 --output x agent=http`) join the ones before it, in the order given, and
        # commands that read `[LABELS] [OVERRIDES]` (judge) collect the later words themselves. A flag's own
        # value (`--floor LIB=VALUE`) is argparse's and never gets here; an unknown flag is an error.
        collects = "overrides" if hasattr(args, "overrides") else "words" if hasattr(args, "words") else None
        if extra and (collects is None or any(w.startswith("-") for w in extra)):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if extra and collects is not None:
            setattr(args, collects, [*getattr(args, collects), *extra])
    except SystemExit as exc:  # --help or a usage error: still flush here (``doceval --help | head``)
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else EXIT_USAGE
        raise SystemExit(_flush_stdout(code)) from None
    return _flush_stdout(_run(args))


def _run(args: argparse.Namespace) -> int:
    try:
        with command_session():  # engine=ray: one Ray session serves every phase of the command
            return int(args.func(args))
    except BrokenPipeError as exc:
        if exc.errno not in (None, errno.EPIPE) or not _stdout_closed():
            return _unexpected(args.command, exc)  # another pipe (a socket, a subprocess): a real error
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    except UsageError as exc:
        print(scrub_message(f"doceval {args.command}: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except (GateFailed, RunIncomplete, WorkersLost) as exc:
        print(scrub_message(str(exc)), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"doceval {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - last resort: exit 1 with the traceback for a bug report
        return _unexpected(args.command, exc)


def _unexpected(command: str, exc: BaseException) -> int:
    # A traceback quotes arguments and locals' reprs: it is a message like any other.
    print(scrub_message("".join(traceback.format_exception(exc))), end="", file=sys.stderr)
    print(scrub_message(f"doceval {command}: unexpected error: {exc}"), file=sys.stderr)
    return EXIT_UNEXPECTED


if __name__ == "__main__":
    sys.exit(main())
