"""Word-overlap baseline: the share of the question's content words found in a chunk."""

from __future__ import annotations

from doceval.inputs.corpus import Corpus
from doceval.system.retrievers.base import Ranked, best_per_document, pin_of
from doceval.system.retrievers.text import tokenize


class OverlapRetriever:
    name = "overlap"
    score_range = (0.0, 1.0)

    def __init__(self, corpus: Corpus, *, min_score: float) -> None:
        # min_score is exclusive: a document sharing no content word with the question is never a result.
        self.min_score = min_score
        self.index: dict[str, list[tuple[str, frozenset[str]]]] = {
            pin: [(d, frozenset(tokenize(t))) for d, t in zip(p.doc_ids, p.texts, strict=True)]
            for pin, p in corpus.partitions.items()
        }

    def retrieve(self, question: str, library: str, version: str, k: int) -> Ranked:
        terms = frozenset(tokenize(question))
        chunks = self.index.get(pin_of(library, version))
        if not terms or not chunks:
            return []
        hits = ((doc_id, len(terms & words) / len(terms)) for doc_id, words in chunks)
        return best_per_document(((d, s) for d, s in hits if s > self.min_score), k)
