"""A whole assistant as one Python function, in the shape `doceval eval agent=function` expects.

    doceval eval --golden examples/askdocs/golden.jsonl --split all --no-track \
      agent=function agent.target=examples.askdocs.assistant:answer k=3

It answers at once (no model, no network): the `overlap` retriever's passages are its sources and their
ids its answer; nothing retrieved is a refusal. `benchmarks/bench_inner_loop.py` times doceval's start-up
and scoring around it, so the figures are doceval's own cost, not the assistant's.
"""

from __future__ import annotations

from typing import Any

from examples.askdocs.retrievers import overlap


def answer(question: str, library: str | None, version: str | None, session_id: str) -> dict[str, Any]:
    """The reply doceval reads: `answer`, `sources` (best first, with scores) and `refused`."""
    hits = overlap(question, 5)
    return {
        "answer": " ".join(doc_id for doc_id, _ in hits) if hits else None,
        "sources": [{"id": doc_id, "score": score} for doc_id, score in hits],
        "refused": not hits,
    }
