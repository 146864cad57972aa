"""Other spellings of a command or setting. Deprecated 0.1.0 spellings, kept for one release: each works exactly
as before and prints one line on stderr naming the new spelling (the DVC stages moved under `doceval stage`,
`eval --corpus` became `--golden`). And `doceval eval`'s flags that set what an override sets: kept (scripts use
them), each documented as the override's alias."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from doceval.cli.common import Command

REMOVED_IN = "0.3.0"


def deprecation(old: str, new: str) -> None:
    """The one line on stderr an old spelling prints (stdout, a command's output, stays as it was)."""
    print(f"doceval: `{old}` is deprecated and goes in {REMOVED_IN}: use `{new}`", file=sys.stderr)


def alias_help(new: str) -> str:
    return f"deprecated alias of `{new}` (goes in {REMOVED_IN})"


def deprecated_command(
    func: Command, old: str, new: str, user_use: Callable[[argparse.Namespace], bool] | None = None
) -> Command:
    """``func`` under its old name: the deprecation line, then the command as before. ``user_use``: the uses of
    the old name that are a user command of their own (``doceval docs --folder``), which print nothing."""

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        if user_use is None or not user_use(args):
            deprecation(old, new)
        return func(args)

    return run


class DeprecatedFlag(argparse.Action):
    """A flag's old spelling: stores into the new flag's dest and prints the deprecation line when given."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, help=alias_help(new), **kwargs)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        deprecation(f"{parser.prog} {option}", f"{parser.prog} {self.new}")
        setattr(namespace, self.dest, values)


@dataclass(frozen=True)
class OverrideAlias:
    """A flag of `doceval eval` that sets what a Hydra override sets, under another spelling: documented as its
    alias (``--help``, the architecture page's table) and checked to resolve the same (tests/test_flag_aliases.py)."""

    flag: str  # as the help shows it: ``--limit N``
    override: str  # the same setting as overrides: ``limit=N``
    example: tuple[tuple[str, ...], tuple[str, ...]]  # one value both ways: (flag words, override words)
    note: str = ""


EVAL_OVERRIDE_ALIASES = (
    OverrideAlias("--golden PATH", "golden=PATH", (("--golden", "g.jsonl"), ("golden=g.jsonl",))),
    OverrideAlias("--limit N", "limit=N", (("--limit", "3"), ("limit=3",))),
    OverrideAlias(
        "--split NAME",
        "split=calibration|test|all",
        (("--split", "calibration"), ("split=calibration",)),
        "a split another tag names: split.name=NAME",
    ),
    OverrideAlias(
        "--score-floor FLOAT",
        "floors=zero floors.global=FLOAT",
        (("--score-floor", "0.3"), ("floors=zero", "floors.global=0.3")),
        "the summary records the floors' source as `cli` instead of `config`",
    ),
    OverrideAlias(
        "--floor LIB=VALUE",
        "floors=zero +floors.per_library.LIB=VALUE",
        (("--floor", "pydantic=0.3"), ("floors=zero", "+floors.per_library.pydantic=0.3")),
        "repeatable; the summary records the floors' source as `cli` instead of `config`",
    ),
    OverrideAlias("--warm-memory", "memory.isolate=false", (("--warm-memory",), ("memory.isolate=false",))),
    OverrideAlias("--no-track", "tracking.enabled=false", (("--no-track",), ("tracking.enabled=false",))),
    OverrideAlias("--allow-drafts", "allow_drafts=true", (("--allow-drafts",), ("allow_drafts=true",))),
)


def override_help(parser: argparse.ArgumentParser) -> None:
    """Each of ``parser``'s flags that is an override's alias says so in its ``--help`` line."""
    by_flag = {alias.flag.split()[0]: alias for alias in EVAL_OVERRIDE_ALIASES}
    for action in parser._actions:
        alias = next((by_flag[o] for o in action.option_strings if o in by_flag), None)
        if alias is not None and action.help is not None:
            action.help += f" (alias of the override {alias.override})"
