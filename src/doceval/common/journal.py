"""Append-only JSONL journals that make long LLM runs resumable (the agent's answers, the judge's verdicts).

A record counts as done only once its line is flushed and fsync'd, so a run killed at any point (SIGKILL
included) loses at most the records in flight. Loading cuts off a torn last line, so appends start on a
clean line and that record is simply redone.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

from doceval.common.io import jsonl_line
from doceval.errors import UsageError

log = logging.getLogger(__name__)

T = TypeVar("T")
D = TypeVar("D")


def load_records(path: Path, parse: Callable[[dict[str, Any]], T], what: str) -> list[T]:
    """The journal's records in file order (empty when the file does not exist).

    ``parse`` turns one JSON object into a record and raises KeyError/TypeError/ValueError on another shape;
    such a line (or invalid JSON) anywhere but a torn last line is a UsageError naming ``file:line``.
    """
    if not path.exists():
        return []
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        keep = raw.rfind(b"\n") + 1
        log.warning("%s: dropping a partly written last line (that entry will be redone)", path)
        with path.open("r+b") as fh:
            fh.truncate(keep)
        raw = raw[:keep]
    records: list[T] = []
    for lineno, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise TypeError("not a JSON object")
            records.append(parse(data))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise UsageError(
                f"{path}:{lineno}: not {what} ({exc}); delete the journal to start over"
            ) from None
    return records


class Journal:
    """Appends one JSON object per line, durable before :meth:`append` returns; thread-safe.

    ``path=None`` journals nothing (runs that are cheaper to redo than to fsync).
    """

    def __init__(self, path: Path | None) -> None:
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = path.open("a", encoding="utf-8")

    @property
    def active(self) -> bool:
        """False for ``path=None``: callers skip building records nobody will write."""
        return self._fh is not None

    def append(self, record: Mapping[str, Any]) -> None:
        if self._fh is None:
            return
        line = jsonl_line(record)  # strict JSON, lone surrogates escaped: a reply cannot break the journal
        with self._lock:
            self._fh.write(line)
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def dataclass_from_record(cls: type[D], data: Mapping[str, Any]) -> D:
    """A journaled dataclass from its JSON record: every field required (KeyError names the missing ones),
    keys it does not know ignored, so records written by an older version still load."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    missing = [n for n in names if n not in data]
    if missing:
        raise KeyError(f"missing field(s) {', '.join(missing)}")
    return cls(**{n: data[n] for n in names})
