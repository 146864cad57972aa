"""Reading a golden set's file: UTF-8 text (file, line and byte named when it is not), and its records, the
elements of a JSON array or the non-blank lines of JSONL, each with where it is (docs/design.md section 3)."""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doceval.common.bounded_json import loads
from doceval.errors import UsageError


@dataclass(frozen=True)
class Record:
    """One raw entry of the file: where it is, the parsed value (or why it could not be parsed)."""

    position: int  # JSONL: line number; JSON array: position from 1
    value: Any
    bad: str | None
    in_array: bool

    @property
    def label(self) -> str | None:
        if not self.in_array:
            return None
        rid = self.value.get("id") if isinstance(self.value, dict) else None
        return f"entry {self.position}" + (f" (id {rid})" if isinstance(rid, str) and rid.strip() else "")


def read_text_file(path: Path, what: str, fix: str) -> str:
    """A UTF-8 text file (a BOM is dropped); a folder, an unreadable file or a byte that is not UTF-8 (a binary
    file, another encoding) is a UsageError naming the file, and for a bad byte its line and byte offset."""
    if path.is_dir():
        raise UsageError(f"{path}: is a directory, not a {what}; {fix}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the {what} ({exc.strerror or exc}); {fix}") from None
    start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[start:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = start + exc.start
        line = data.count(b"\n", 0, offset) + 1
        looks = (
            " (it looks like UTF-16)"
            if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
            else " (it looks like a binary file)"
            if b"\x00" in data[:8192]
            else ""
        )
        raise UsageError(
            f"{path}:{line}: byte 0x{data[offset]:02x} at byte offset {offset} (line {line}) is not UTF-8 "
            f"({exc.reason}): the {what} must be UTF-8 text{looks}; save it as UTF-8 ({fix})"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # universal newlines, as text mode reads them


def read_records(path: Path) -> tuple[bool, list[Record]]:
    """``(is_array, records)``: a JSON array's elements, or JSONL's non-blank lines (numbered from 1)."""
    text = read_text_file(path, "golden set", "one JSON object per line, or a JSON array of entries")
    if text.lstrip().startswith("["):
        try:
            data = loads(text)
        except json.JSONDecodeError as exc:
            bad = f"not valid JSON: {exc.msg} at column {exc.colno} (the file is read as a JSON array)"
            return True, [Record(exc.lineno, None, bad, in_array=False)]
        return True, [Record(i, rec, None, in_array=True) for i, rec in enumerate(data, start=1)]
    records = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            records.append(Record(lineno, loads(line), None, in_array=False))
        except json.JSONDecodeError as exc:
            records.append(
                Record(lineno, None, f"not valid JSON: {exc.msg} at column {exc.colno}", in_array=False)
            )
    return False, records
