"""Conversation memory: earlier Q/As surfaced into the next prompt.

Recall matches on the library only, not the version, on purpose: that is how a real assistant's memory leaks
an answer about ``pydantic 1.10`` into a question about ``pydantic 2.8``, and what ``--warm-memory`` measures.
"""

from __future__ import annotations

import re
import threading

from doceval.system.docchat.types import MemoryItem

_TOKEN = re.compile(r"[a-z0-9_]+")


def _tokens(text: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(text.lower()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


class Memory:
    """Earlier Q/As in insertion order; thread-safe."""

    def __init__(self) -> None:
        self._items: list[tuple[MemoryItem, frozenset[str]]] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def record(self, item: MemoryItem) -> None:
        with self._lock:
            self._items.append((item, _tokens(item.question)))

    def recall(self, question: str, library: str, version: str, n: int = 2) -> list[MemoryItem]:
        """The ``n`` most similar earlier Q/As (token Jaccard of the questions) about the same library.

        ``version`` is deliberately not a filter (see the module docstring). Items sharing no token are never
        surfaced. Ties go to the more recent item, so the result is deterministic.
        """
        query = _tokens(question)
        lib = library.lower()
        with self._lock:
            items = list(enumerate(self._items))
        scored = [
            (jaccard(query, toks), pos, item) for pos, (item, toks) in items if item.library.lower() == lib
        ]
        scored = [s for s in scored if s[0] > 0.0]
        scored.sort(key=lambda s: (-s[0], -s[1]))
        return [item for _, _, item in scored[:n]]

    def reset(self) -> None:
        with self._lock:
            self._items.clear()
