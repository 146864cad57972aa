"""``judge=reference``: an offline judge that needs no LLM.

An answer is correct when it passes the entry's version strings (every ``expected_apis`` string, one string of
each ``expected_any`` group, no ``forbidden_apis`` string: :func:`doceval.scoring.metrics.contains_apis`), states
at least ``facts_threshold`` of the reference answer's key facts (:mod:`doceval.scoring.key_facts`: the
parameters, values and API paths that a right-API-wrong-detail answer gets wrong) and its cosine similarity to
the reference answer, both embedded with the bundled all-MiniLM-L6-v2, reaches ``threshold``. Both thresholds
are calibrated on the calibration half of a labelled judge set (``doceval judge calibrate``) and its agreement
with the human labels is measured on the other half (``doceval judge validate``), like any judge's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from doceval.common.apimatch import RULE as MATCH_RULE
from doceval.common.apimatch import fold, occurs
from doceval.common.io import escape_surrogates
from doceval.scoring.key_facts import KeyFacts, extract
from doceval.scoring.metrics import contains_apis
from doceval.seam import Probe

if TYPE_CHECKING:
    from doceval.config.schema import JudgeReference

EMBEDDER = "all-MiniLM-L6-v2"
# Names the extraction rule in the judge's identity: a change to doceval.scoring.key_facts that moves verdicts
# bumps it, so the judge hash changes with it.
KEY_FACTS_RULE = "key_facts v1"


class TextEncoder(Protocol):
    """What the judge embeds with: unit-length vectors, one row per text (the harness passes the bundled
    all-MiniLM-L6-v2, :func:`doceval.index.embed.judge_encoder`; scoring never imports the index)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


# Builds the encoder on first use: loading the model takes seconds, and only a judge that scores needs it.
EncoderFactory = Callable[[], TextEncoder]


@dataclass(frozen=True)
class VersionStrings:
    """An entry's version strings, as the golden set labels them."""

    expected: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    expected_any: tuple[tuple[str, ...], ...] = ()

    def passes(self, answer: str) -> bool:
        return contains_apis(answer, self.expected, self.forbidden, self.expected_any)

    def failure(self, answer: str) -> str:
        """Why ``answer`` fails (empty when it passes): the first missing or forbidden string."""
        text = fold(answer)
        for s in self.expected:
            if not occurs(s, text):
                return f"misses {s!r}"
        for group in self.expected_any:
            if not any(occurs(s, text) for s in group):
                return f"misses one of {list(group)!r}"
        for s in self.forbidden:
            if occurs(s, text):
                return f"uses {s!r}"
        return ""

    def key_facts(self, reference: str) -> KeyFacts:
        """The reference's key facts, the entry's ``expected_any`` groups among them."""
        return extract(reference, self.expected_any, self.forbidden)


class ReferenceJudge:
    """Version strings AND key-facts share >= ``facts_threshold`` AND cosine(answer, reference) >= ``threshold``.
    Deterministic: repeats never flip."""

    name = "reference"

    def __init__(
        self,
        threshold: float,
        labels: Mapping[str, VersionStrings],
        encoder: EncoderFactory,
        facts_threshold: float = 0.0,
    ) -> None:
        self.threshold = float(threshold)
        self.facts_threshold = float(facts_threshold)
        self.labels = dict(labels)
        self._make_encoder = encoder
        self._model: TextEncoder | None = None
        self._lock = threading.Lock()  # the model is loaded once, and encodes one batch at a time

    def _encoder(self) -> TextEncoder:
        if self._model is None:
            self._model = self._make_encoder()
        return self._model

    def similarities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Cosine similarity of each (answer, reference) pair (the embeddings are normalised)."""
        if not pairs:
            return np.zeros(0, dtype=np.float64)
        with self._lock:
            model = self._encoder()
            # No tokenizer takes a lone surrogate (a label file's "\ud800", an assistant's reply): as \udXXX text.
            answers = model.encode([escape_surrogates(a) for a, _ in pairs])
            references = model.encode([escape_surrogates(r) for _, r in pairs])
        return np.asarray(np.sum(answers * references, axis=1), dtype=np.float64)

    def judge(self, probe: Probe, answer: str, reference: str) -> tuple[bool | None, str | None, str | None]:
        strings = self.labels.get(probe.id)
        if strings is None:
            return None, None, f"reference judge: entry {probe.id!r} has no version strings in the golden set"
        failure = strings.failure(answer)
        if failure:
            return False, f"fails the entry's version strings: {failure}", None
        facts = strings.key_facts(reference)
        share = facts.share(answer)
        if share < self.facts_threshold:
            missing = ", ".join(" or ".join(g) for g in facts.missing(answer)[:3])
            return (
                False,
                (
                    f"states {share:.2f} of the reference's key facts < {self.facts_threshold:.2f} "
                    f"(misses {missing})"
                ),
                None,
            )
        similarity = float(self.similarities([(answer, reference)])[0])
        verdict = similarity >= self.threshold
        relation = ">=" if verdict else "<"
        return (
            verdict,
            f"key facts {share:.2f} >= {self.facts_threshold:.2f}, similarity to the reference {similarity:.3f} {relation} {self.threshold:.3f}",
            None,
        )

    def close(self) -> None:
        self._model = None


def version_strings(entries: Sequence[Any]) -> dict[str, VersionStrings]:
    """Entry id -> its version strings (golden entries: ``expected_apis``, ``forbidden_apis``, ``expected_any``)."""
    return {
        e.id: VersionStrings(
            tuple(e.expected_apis), tuple(e.forbidden_apis), tuple(tuple(g) for g in e.expected_any)
        )
        for e in entries
    }


def identity(cfg: JudgeReference) -> dict[str, Any]:
    return {
        "name": "reference",
        "threshold": float(cfg.threshold),
        "facts_threshold": float(cfg.facts_threshold),
        "embedder": EMBEDDER,
        "key_facts": KEY_FACTS_RULE,
        "version_strings": MATCH_RULE,
        "rule": "version strings and key-facts share >= facts_threshold and cosine >= threshold",
    }
