"""Two retriever functions over handbook.jsonl, in the shape `doceval eval retriever=function` expects.

`ATTR(question, k)` returns up to k `(id, score)` pairs, best first; an empty list means "refuse".

- `overlap`: every lowercased word counts; a passage needs at least 2 shared words (the evidence bar).
- `content_words`: common words are ignored; a single shared word is enough.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

HANDBOOK = Path(__file__).resolve().with_name("handbook.jsonl")

STOP_WORDS = frozenset({
    "a", "an", "and", "any", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "get",
    "has", "have", "how", "i", "if", "in", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or",
    "our", "should", "so", "than", "that", "the", "their", "them", "then", "there", "they", "this",
    "to", "up", "us", "was", "we", "what", "when", "where", "which", "who", "why", "will", "with",
    "would", "you", "your"
})  # fmt: skip


def tokens(text: str) -> set[str]:
    """The distinct lowercased word tokens of `text`."""
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _load() -> list[tuple[str, set[str]]]:
    with HANDBOOK.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [(row["id"], tokens(row["text"])) for row in rows]


PASSAGES = _load()


def _rank(words: set[str], k: int, bar: int) -> list[tuple[str, float]]:
    scored = [(doc_id, len(words & passage)) for doc_id, passage in PASSAGES]
    kept = sorted((pair for pair in scored if pair[1] >= bar), key=lambda pair: (-pair[1], pair[0]))
    return [(doc_id, float(score)) for doc_id, score in kept[:k]]


def overlap(question: str, k: int) -> list[tuple[str, float]]:
    """Passages sharing at least 2 words with the question (stop words included), most shared first."""
    return _rank(tokens(question), k, bar=2)


def content_words(question: str, k: int) -> list[tuple[str, float]]:
    """Passages sharing at least 1 non-stop word with the question, most shared first."""
    return _rank(tokens(question) - STOP_WORDS, k, bar=1)
