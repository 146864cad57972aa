"""Small file helpers shared by every stage: hashing, atomic outputs, JSON/JSONL with line numbers."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from doceval.errors import UsageError


def _digest_file(path: Path, algo: str) -> str:
    h = hashlib.new(algo)
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_file(path: Path) -> str:
    return _digest_file(path, "sha256")


def md5_file(path: Path) -> str:
    """md5, the digest DVC pins in dvc.lock, so a run's golden md5 can be matched against the lock file."""
    return _digest_file(path, "md5")


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temporary sibling directory that replaces ``target`` only if the block succeeds.

    A failed or interrupted stage leaves the previous output (or nothing), never a half-written one.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield tmp
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
            tmp.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_text_atomic(path: Path, text: str) -> None:
    """Write through a temporary sibling and rename: readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json_atomic(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def read_json(path: Path, what: str, rerun: str | None = None) -> Any:
    """Read a JSON file or raise a UsageError naming it (and the stage that makes it)."""
    hint = f" Run `{rerun}` to (re)build it." if rerun else ""
    if not path.is_file():
        raise UsageError(f"{path}: {what} not found.{hint}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}: {what} is not valid JSON ({exc.msg}).{hint}") from exc


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, record)``; a bad line raises a UsageError with file:line."""
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise UsageError(
                    f"{path}:{lineno}: not valid JSON ({exc.msg}); fix or remove that line"
                ) from exc


def scan_jsonl(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """Yield ``(line_number, record, problem)`` for every non-blank line; a bad line has a problem text and no
    record, so validators can report every bad line at once instead of stopping at the first."""
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line), None
            except json.JSONDecodeError as exc:
                yield lineno, None, f"not valid JSON: {exc.msg} at column {exc.colno}"
