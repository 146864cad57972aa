"""Retrieval and answer metrics (DESIGN.md section 4), pure and vectorised with numpy.

Retrieval is scored from a padded candidate matrix (n entries x K candidates) built once from the cached
top-K lists; any (floor, k <= K) is then a mask plus a few reductions, so floor sweeps never re-rank.

Conventions:
- Per-entry scores are float arrays with NaN where a metric does not apply (e.g. retrieval metrics for
  out-of-scope entries, answer_accuracy for unjudged entries). Aggregation ignores NaN, and a metric over an
  empty set is ``None``, never 0 (see :func:`mean_or_none`).
- Scope comes from the ``out_of_scope`` label (or, for retrieval, from ``n_relevant == 0``), never from what
  the system did.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

import numpy as np

__all__ = [
    "RETRIEVAL_METRICS",
    "ANSWER_METRICS",
    "CandidateMatrix",
    "build_matrix",
    "cut",
    "retrieval_scores",
    "refused_correctly",
    "contains_apis",
    "answer_scores",
    "mean_or_none",
]

_FIRST = itemgetter(0)
_SECOND = itemgetter(1)

RETRIEVAL_METRICS = ("hit_rate", "recall", "mrr", "ndcg")
ANSWER_METRICS = ("answer_accuracy", "version_correctness", "refusal_rate", "overrefusal_rate")


@dataclass(frozen=True)
class CandidateMatrix:
    """n entries x K candidates, padded.

    scores: float64 (n, K), -inf where padded; relevant: bool (n, K); n_relevant: int (n,) = size of the
    relevant set per entry (may exceed the number of relevant docs retrieved); doc_ids: list[list[str]]
    (unpadded, after dedup) kept for building per-entry retrieved lists.

    Padding is identified by position (column >= len(doc_ids[i])), not by the -inf score, so a genuine
    candidate scoring -inf is still kept under a -inf floor.
    """

    scores: np.ndarray
    relevant: np.ndarray
    n_relevant: np.ndarray
    doc_ids: list[list[str]]

    def __post_init__(self) -> None:
        # Cheap shape checks: a mis-shaped matrix would otherwise broadcast silently into wrong numbers.
        if self.scores.ndim != 2 or self.relevant.shape != self.scores.shape:
            raise ValueError(
                f"scores and relevant must be 2-D of the same shape, got {self.scores.shape} "
                f"and {self.relevant.shape}"
            )
        n, width = self.scores.shape
        if self.n_relevant.shape != (n,) or len(self.doc_ids) != n:
            raise ValueError(
                f"n_relevant must have shape ({n},) and doc_ids {n} rows, got {self.n_relevant.shape} "
                f"and {len(self.doc_ids)}"
            )
        if any(len(ids) > width for ids in self.doc_ids):
            raise ValueError(f"a doc_ids row is longer than the matrix width {width}")

    @property
    def n(self) -> int:
        return int(self.scores.shape[0])

    @property
    def width(self) -> int:
        """K, the padded number of candidate columns."""
        return int(self.scores.shape[1])

    @property
    def lengths(self) -> np.ndarray:
        """int (n,): number of real (deduplicated) candidates per entry."""
        return np.fromiter(map(len, self.doc_ids), dtype=np.int64, count=len(self.doc_ids))

    @property
    def valid(self) -> np.ndarray:
        """bool (n, K): True on real candidates, False on padding."""
        return np.arange(self.width)[None, :] < self.lengths[:, None]

    def retrieved(self, in_R: np.ndarray) -> list[list[str]]:
        """Per-entry doc ids selected by a mask from :func:`cut`, in rank order."""
        return [
            [ids[j] for j in np.flatnonzero(row[: len(ids)])]
            for ids, row in zip(self.doc_ids, in_R, strict=True)
        ]


def build_matrix(
    ranked: Sequence[Sequence[tuple[str, float]]], relevant: Sequence[Collection[str]]
) -> CandidateMatrix:
    """Pad ranked candidate lists into a :class:`CandidateMatrix`.

    Each list is in rank order as given: the list order is authoritative (ties keep list order, scores are
    not re-sorted). Duplicate doc ids are collapsed first, keeping the first occurrence (its best rank), so a
    duplicate can neither take a slot of the top k nor count twice. NaN scores are rejected because a NaN
    compares false against every floor and would vanish silently.
    """
    if len(ranked) != len(relevant):
        raise ValueError(f"ranked has {len(ranked)} entries but relevant has {len(relevant)}")
    n = len(ranked)
    ids_rows: list[list[str]] = []
    dup_rows: dict[int, list[int]] = {}  # row -> positions to keep, only for rows with duplicates
    rel_rows: list[int] = []
    rel_cols: list[int] = []
    n_relevant = np.empty(n, dtype=np.int64)
    # This loop is the only O(n*K) Python part of scoring, so per-row work stays in C-level builtins
    # (map, dict.fromkeys, list.index) and Python-level work is per relevant doc, not per candidate.
    for i, (row, rel) in enumerate(zip(ranked, relevant, strict=True)):
        ids = list(map(_FIRST, row))
        seen = dict.fromkeys(ids)  # insertion order = first occurrences in list order
        if len(seen) != len(ids):
            first: dict[str, int] = {}
            for j, doc in enumerate(ids):
                first.setdefault(doc, j)
            dup_rows[i] = list(first.values())
            ids = list(seen)
        ids_rows.append(ids)
        if isinstance(rel, str):
            # set("doc-id") would silently become a set of characters.
            raise TypeError(f"relevant[{i}] must be a collection of doc ids, not a single string")
        rel_set = rel if isinstance(rel, set | frozenset) else set(rel)
        n_relevant[i] = len(rel_set)
        for doc in rel_set:
            if doc in seen:
                rel_rows.append(i)
                rel_cols.append(ids.index(doc))
    raw_lengths = np.fromiter(map(len, ranked), dtype=np.int64, count=n)
    flat = np.fromiter(
        map(_SECOND, chain.from_iterable(ranked)), dtype=np.float64, count=int(raw_lengths.sum())
    )
    if dup_rows:
        # Drop the later occurrences of duplicated ids from the flattened scores.
        offsets = np.concatenate(([0], np.cumsum(raw_lengths)[:-1]))
        keep = np.ones(flat.size, dtype=bool)
        for i, positions in dup_rows.items():
            keep[offsets[i] : offsets[i] + raw_lengths[i]] = False
            keep[offsets[i] + np.asarray(positions, dtype=np.int64)] = True
        flat = flat[keep]
    if np.isnan(flat).any():
        raise ValueError("candidate scores must not be NaN")
    lengths = np.fromiter(map(len, ids_rows), dtype=np.int64, count=n)
    width = int(lengths.max()) if n else 0
    scores = np.full((n, width), -np.inf, dtype=np.float64)
    # Row-major boolean assignment fills each row left to right, matching the flattened order.
    scores[np.arange(width)[None, :] < lengths[:, None]] = flat
    rel_mat = np.zeros((n, width), dtype=bool)
    rel_mat[np.asarray(rel_rows, dtype=np.intp), np.asarray(rel_cols, dtype=np.intp)] = True
    return CandidateMatrix(scores=scores, relevant=rel_mat, n_relevant=n_relevant, doc_ids=ids_rows)


def _floor_vector(floors: np.ndarray | float, n: int) -> np.ndarray:
    f = np.asarray(floors, dtype=np.float64)
    if f.ndim == 0:
        f = np.full(n, float(f))
    if f.shape != (n,):
        raise ValueError(f"floors must have shape ({n},) (one per entry), got {f.shape}")
    if np.isnan(f).any():
        # A NaN floor would drop every candidate and look like a refusal.
        raise ValueError("floors must not be NaN (use -inf for 'no floor')")
    return f


def cut(matrix: CandidateMatrix, floors: np.ndarray, k: int) -> np.ndarray:
    """bool (n, K) mask of R: candidates scoring >= their entry's floor, then the first k that remain.

    ``floors`` has one value per entry (a scalar is broadcast). Dropping happens before the top-k cut, so a
    candidate below the floor never takes a slot. Raises ValueError if k < 1.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    f = _floor_vector(floors, matrix.n)
    kept = matrix.valid & (matrix.scores >= f[:, None])
    # Position among the kept candidates (1-based); list order is authoritative, so no sort.
    return kept & (np.cumsum(kept, axis=1) <= k)


def _discount_cumsum(m: int) -> np.ndarray:
    """c[j] = sum_{r=1..j} 1/log2(r+1), c[0] = 0: ideal DCG of j relevant docs at the top."""
    return np.concatenate(([0.0], np.cumsum(1.0 / np.log2(np.arange(2, m + 2, dtype=np.float64)))))


def retrieval_scores(matrix: CandidateMatrix, floors: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """Per-entry retrieval metrics at (floors, k).

    Returns float (n,) arrays for hit_rate, recall (denominator = size of the relevant set), mrr (1/rank of
    the first relevant in R, 0 if none) and ndcg (binary gain, 1/log2(rank+1) discount, ideal DCG over
    min(n_relevant, k) relevant docs), NaN where n_relevant == 0 (out of scope); plus "refused" (bool,
    R is empty) and "n_retrieved" (int).
    """
    in_R = cut(matrix, floors, k)
    rank = np.cumsum(in_R, axis=1)  # rank within R at each selected position
    hits = in_R & matrix.relevant
    n_hits = hits.sum(axis=1)
    n_rel = matrix.n_relevant
    in_scope = n_rel > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = n_hits / n_rel
        # The first hit has the smallest rank, hence the largest reciprocal.
        rr = np.where(hits, 1.0 / np.maximum(rank, 1), 0.0)
        mrr = rr.max(axis=1, initial=0.0)
        dcg = np.where(hits, 1.0 / np.log2(rank + 1.0), 0.0).sum(axis=1)
        n_ideal = np.minimum(n_rel, k)
        # The table only needs to reach the largest ideal count, even when k is huge.
        table = _discount_cumsum(int(n_ideal.max()) if n_ideal.size else 0)
        ndcg = dcg / table[n_ideal]
    nan = np.nan
    return {
        "hit_rate": np.where(in_scope, (n_hits > 0).astype(np.float64), nan),
        "recall": np.where(in_scope, recall, nan),
        "mrr": np.where(in_scope, mrr, nan),
        "ndcg": np.where(in_scope, ndcg, nan),
        "refused": ~in_R.any(axis=1),
        "n_retrieved": in_R.sum(axis=1).astype(np.int64),
    }


def refused_correctly(in_R: np.ndarray) -> np.ndarray:
    """float (n,): 1.0 where R is empty else 0.0. The caller applies it to out-of-scope entries only."""
    return np.where(np.asarray(in_R, dtype=bool).any(axis=1), 0.0, 1.0)


def contains_apis(answer: str | None, expected: Sequence[str], forbidden: Sequence[str]) -> bool:
    """True when the answer contains every expected API and no forbidden one (case-insensitive substring).

    A missing answer (None) is False: it cannot show the expected APIs.
    """
    if isinstance(expected, str) or isinstance(forbidden, str):
        # A bare string would be checked character by character.
        raise TypeError("expected and forbidden must be sequences of API names, not a single string")
    if answer is None:
        return False
    text = answer.casefold()
    return all(a.casefold() in text for a in expected) and not any(a.casefold() in text for a in forbidden)


def answer_scores(
    out_of_scope: np.ndarray,
    refused: np.ndarray,
    answers: list[str | None],
    expected: list[list[str]],
    forbidden: list[list[str]],
    verdicts: list[bool | None],
    *,
    judge_ran: bool = True,
) -> dict[str, np.ndarray]:
    """Per-entry answer metrics (float (n,), NaN where the metric does not apply).

    Scope comes only from ``out_of_scope`` (A = in scope, U = out of scope):
    - answer_accuracy (A): refused -> 0.0; else verdict True -> 1.0, False -> 0.0, None (not judged or judge
      error) -> NaN, so judge failures are excluded, never scored silently.
    - version_correctness (A): refused -> 0.0; else 1.0 iff :func:`contains_apis`.
    - refusal_rate (U): refused -> 1.0.
    - overrefusal_rate (A): refused -> 1.0.

    ``judge_ran=False`` (no judge configured) makes answer_accuracy all NaN, so its aggregate is null rather
    than the 0 the refused entries would give. It is not inferred from the verdicts: with a judge configured
    and every in-scope entry refused, all verdicts are None yet the accuracy is genuinely 0.
    """
    oos = np.asarray(out_of_scope, dtype=bool)
    ref = np.asarray(refused, dtype=bool)
    n = oos.shape[0]
    lengths = {
        "refused": ref.shape[0],
        "answers": len(answers),
        "expected": len(expected),
        "forbidden": len(forbidden),
        "verdicts": len(verdicts),
    }
    bad = {name: m for name, m in lengths.items() if m != n}
    if oos.ndim != 1 or ref.ndim != 1 or bad:
        raise ValueError(f"all inputs must have one value per entry ({n}), got {bad or 'non 1-D arrays'}")

    in_scope = ~oos
    nan = np.nan
    verdict = np.array([nan if v is None else float(bool(v)) for v in verdicts], dtype=np.float64)
    accuracy = np.where(in_scope, np.where(ref, 0.0, verdict), nan) if judge_ran else np.full(n, nan)
    api_ok = np.fromiter(
        (contains_apis(a, e, f) for a, e, f in zip(answers, expected, forbidden, strict=True)),
        dtype=bool,
        count=n,
    )
    refused_f = ref.astype(np.float64)
    return {
        "answer_accuracy": accuracy,
        "version_correctness": np.where(in_scope, (api_ok & ~ref).astype(np.float64), nan),
        "refusal_rate": np.where(oos, refused_f, nan),
        "overrefusal_rate": np.where(in_scope, refused_f, nan),
    }


def mean_or_none(values: np.ndarray) -> float | None:
    """Mean over the non-NaN values; None when there are none (a metric over an empty set is null, not 0)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return None
    return float(v.mean())
