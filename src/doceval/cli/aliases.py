"""Deprecated 0.1.0 spellings, kept for one release: each works exactly as before and prints one line on stderr
naming the new spelling (the DVC stages moved under `doceval stage`, `eval --corpus` became `--golden`)."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Sequence
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
