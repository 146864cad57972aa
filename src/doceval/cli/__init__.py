"""`doceval` command line: argument parsing and thin commands over the library (exit codes in docs/design.md)."""

from __future__ import annotations

from doceval.cli.main import main

__all__ = ["main"]
