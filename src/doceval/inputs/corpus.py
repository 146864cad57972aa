"""The built corpus as the retrievers and the agent see it: chunks grouped by library@version partition."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from doceval.common.io import iter_jsonl, read_json
from doceval.errors import UsageError


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


_LOADED: dict[tuple[str, int, int], Corpus] = {}


def load_corpus(root: Path) -> Corpus:
    """Load ``corpus.jsonl`` + ``manifest.json`` from the docs stage's output directory.

    Memoised per process on the files' identity (path, size, mtime): a sweep evaluates many points against one
    corpus and should parse it once. Callers treat the result as read-only.
    """
    corpus_file = root / "corpus.jsonl"
    if corpus_file.is_file():
        stat = corpus_file.stat()
        key = (str(corpus_file.resolve()), stat.st_size, stat.st_mtime_ns)
        if key not in _LOADED:
            _LOADED.clear()  # one corpus at a time is all any command uses
            _LOADED[key] = _load_corpus(root)
        return _LOADED[key]
    return _load_corpus(root)


def _load_corpus(root: Path) -> Corpus:
    manifest = read_json(root / "manifest.json", "corpus manifest", rerun="dvc repro docs")
    corpus_file = root / "corpus.jsonl"
    if not corpus_file.is_file():
        raise UsageError(f"{corpus_file}: corpus not found. Run `dvc repro docs` to build it.")
    partitions: dict[str, Partition] = {}
    for lineno, rec in iter_jsonl(corpus_file):
        try:
            pin = f"{rec['library']}@{rec['version']}"
            part = partitions.setdefault(pin, Partition(pin))
            part.chunk_ids.append(rec["chunk_id"])
            part.doc_ids.append(rec["doc_id"])
            part.texts.append(rec["text"])
        except (KeyError, TypeError) as exc:
            raise UsageError(
                f"{corpus_file}:{lineno}: corpus record lacks {exc}; rerun `dvc repro docs`"
            ) from exc
    return Corpus(root, manifest, partitions)
