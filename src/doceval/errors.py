"""Errors that map to the documented exit codes (0 ok, 1 unexpected, 2 bad input, 3 gate FAIL, 4 incomplete)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_USAGE = 2
EXIT_GATE_FAIL = 3
EXIT_INCOMPLETE = 4


class UsageError(Exception):
    """Bad input or usage. The message names the file, line, field or flag, and the fix."""

    exit_code = EXIT_USAGE


class GateFailed(Exception):
    """A gate evaluated to FAIL."""

    exit_code = EXIT_GATE_FAIL


class RunIncomplete(Exception):
    """A run stopped early on purpose (``--max-errors`` exceeded): its summary is written, marked incomplete."""

    exit_code = EXIT_INCOMPLETE


class WorkersLost(Exception):
    """engine=ray lost the nodes its work needs (a node died and no other can take its actors, or the head is
    gone): the run stops as for ``--max-errors`` (exit 4, its summary marked incomplete) and the same command
    resumes it. The message says what was lost."""

    exit_code = EXIT_INCOMPLETE
