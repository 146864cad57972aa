"""The built corpus as the retrievers and the agent see it: chunks grouped by library@version partition."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from doceval.common.hints import rerun, stage_command
from doceval.common.io import read_json
from doceval.errors import UsageError


def rebuild_hint() -> str:
    """How to rebuild a corpus here (read when a message is built: the working directory decides)."""
    return f"rerun {rerun('docs')} (or the `doceval beir import` that built it)"


@dataclass
class Partition:
    pin: str
    chunk_ids: list[str] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)


@dataclass
class Corpus:
    root: Path
    manifest: dict[str, Any]
    partitions: dict[str, Partition]

    @property
    def pins(self) -> list[str]:
        return sorted(self.partitions)

    @property
    def libraries(self) -> list[str]:
        return sorted({pin.split("@", 1)[0] for pin in self.partitions})

    def doc_ids(self) -> frozenset[str]:
        return self._doc_ids

    @cached_property
    def _doc_ids(self) -> frozenset[str]:
        # Every evaluate call validates the golden set against it; a sweep would rebuild it per point.
        return frozenset(d for p in self.partitions.values() for d in p.doc_ids)

    @cached_property
    def first_chunks(self) -> dict[str, str]:
        """doc id -> its first chunk (header line + start of the docstring): the passage an answerer sees."""
        return {
            d: t
            for p in self.partitions.values()
            for c, d, t in zip(p.chunk_ids, p.doc_ids, p.texts, strict=True)
            if c.endswith("#0")
        }


_LOADED: dict[tuple[str, int, int, int, int], Corpus] = {}


def load_corpus(root: Path) -> Corpus:
    """Load ``corpus.jsonl`` + ``manifest.json`` from the docs stage's output directory, verified against each
    other (a corpus that is not the one its manifest describes is a UsageError naming the rerun).

    Memoised per process on both files' identity (path, size, mtime): a sweep evaluates many points against
    one corpus and should parse it once. Callers treat the result as read-only.
    """
    corpus_file = root / "corpus.jsonl"
    manifest_file = root / "manifest.json"
    if corpus_file.is_file() and manifest_file.is_file():
        stat, mstat = corpus_file.stat(), manifest_file.stat()
        key = (str(corpus_file.resolve()), stat.st_size, stat.st_mtime_ns, mstat.st_size, mstat.st_mtime_ns)
        if key not in _LOADED:
            _LOADED.clear()  # one corpus at a time is all any command uses
            _LOADED[key] = _load_corpus(root)
        return _LOADED[key]
    return _load_corpus(root)


def _load_corpus(root: Path) -> Corpus:
    """Parse ``corpus.jsonl`` and verify it is the file its manifest describes: the sha256 of its bytes (read
    once, hashed and parsed from the same buffer) against ``content_hash``, then the chunks per pin."""
    manifest_file = root / "manifest.json"
    manifest = read_json(manifest_file, "corpus manifest", rerun=stage_command("docs"))
    _check_manifest(manifest_file, manifest)
    corpus_file = root / "corpus.jsonl"
    if not corpus_file.is_file():
        raise UsageError(f"{corpus_file}: corpus not found. Run {rerun('docs')} to build it.")
    data = corpus_file.read_bytes()
    if hashlib.sha256(data).hexdigest() != manifest["content_hash"]:
        raise UsageError(_mismatch(corpus_file, data, manifest))
    partitions: dict[str, Partition] = {}
    for lineno, line in enumerate(data.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            pin = f"{rec['library']}@{rec['version']}"
            part = partitions.setdefault(pin, Partition(pin))
            part.chunk_ids.append(rec["chunk_id"])
            part.doc_ids.append(rec["doc_id"])
            part.texts.append(rec["text"])
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            raise UsageError(
                f"{corpus_file}:{lineno}: not a valid corpus record ({exc}); {rebuild_hint()}"
            ) from exc
        except (KeyError, TypeError) as exc:
            raise UsageError(f"{corpus_file}:{lineno}: corpus record lacks {exc}; {rebuild_hint()}") from exc
    counts = {pin: len(p.chunk_ids) for pin, p in partitions.items()}
    expected = {pin: info.get("chunks") for pin, info in manifest["pins"].items()}
    if counts != expected:
        raise UsageError(
            f"{corpus_file}: corpus.jsonl does not match its manifest (chunks by pin: "
            f"{_pin_diff(counts, expected)}); {rebuild_hint()}"
        )
    return Corpus(root, manifest, partitions)


def _check_manifest(path: Path, manifest: Any) -> None:
    if (
        not isinstance(manifest, dict)
        or not isinstance(manifest.get("content_hash"), str)
        or not isinstance(manifest.get("pins"), dict)
        or not all(isinstance(v, dict) for v in manifest["pins"].values())
    ):
        raise UsageError(
            f"{path}: not a corpus manifest (expected a JSON object with pins, chunks and content_hash); "
            f"{rebuild_hint()}"
        )


def _mismatch(corpus_file: Path, data: bytes, manifest: dict[str, Any]) -> str:
    """What differs, for the message: the chunk count, then per pin (lines that do not parse are counted
    apart), else the hashes."""
    counts: Counter[str] = Counter()
    bad = 0
    lines = [line for line in data.split(b"\n") if line.strip()]
    for line in lines:
        try:
            rec = json.loads(line)
            counts[f"{rec['library']}@{rec['version']}"] += 1
        except (ValueError, KeyError, TypeError):
            bad += 1
    message = f"{corpus_file}: corpus.jsonl does not match its manifest ({len(lines)} chunks, manifest says "
    message += f"{manifest.get('chunks')})"
    per_pin = _pin_diff(dict(counts), {pin: info.get("chunks") for pin, info in manifest["pins"].items()})
    if per_pin:
        message += f"; by pin: {per_pin}"
    if bad:
        message += f"; {bad} line(s) are not corpus records"
    if not per_pin and not bad:
        digest = hashlib.sha256(data).hexdigest()
        message += (
            f"; its sha256 {digest[:12]}... differs from content_hash {manifest['content_hash'][:12]}..."
        )
    return f"{message}; {rebuild_hint()}"


def _pin_diff(counts: dict[str, int], expected: dict[str, Any]) -> str:
    return ", ".join(
        f"{pin} {counts.get(pin, 0)} of {expected.get(pin, 0)}"
        for pin in sorted(set(counts) | set(expected))
        if counts.get(pin, 0) != expected.get(pin, 0)
    )
