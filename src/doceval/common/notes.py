"""Notes: what a run does that the user may not expect, on stderr as ``note: ...`` lines (stdout stays the
results), and kept for the Python API's result while :func:`collected_notes` is open."""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Iterator

_NOTES: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("doceval_notes", default=None)


def print_note(text: str) -> None:
    """One note on stderr (and in the open :func:`collected_notes` list)."""
    print(f"note: {text}", file=sys.stderr)
    sink = _NOTES.get()
    if sink is not None:
        sink.append(text)


@contextlib.contextmanager
def collected_notes() -> Iterator[list[str]]:
    """The notes :func:`print_note` prints in this block, as a list (the API returns them with its result)."""
    notes: list[str] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)
