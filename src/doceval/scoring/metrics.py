"""Retrieval and answer metrics (docs/design.md section 4), pure and vectorised with numpy.

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

_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


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


@dataclass(frozen=True)
class RetrievalView:
    """The arrays every retrieval metric at (floors, k) is computed from, built once per scoring.

    ``in_R`` is the bool (n, K) mask of R (:func:`cut`); ``rank`` the rank within R at each selected position;
    ``hits`` the relevant documents in R; ``out_of_scope`` the label (defaults to ``n_relevant == 0``).
    """

    in_R: np.ndarray
    rank: np.ndarray
    hits: np.ndarray
    n_relevant: np.ndarray
    out_of_scope: np.ndarray
    k: int

    @classmethod
    def of(
        cls, matrix: CandidateMatrix, floors: np.ndarray, k: int, out_of_scope: np.ndarray | None = None
    ) -> RetrievalView:
        in_R = cut(matrix, floors, k)
        oos = matrix.n_relevant == 0 if out_of_scope is None else np.asarray(out_of_scope, dtype=bool)
        return cls(in_R, np.cumsum(in_R, axis=1), in_R & matrix.relevant, matrix.n_relevant, oos, k)

    @property
    def in_scope(self) -> np.ndarray:
        return self.n_relevant > 0

    @property
    def n_hits(self) -> np.ndarray:
        return np.asarray(self.hits.sum(axis=1))

    @property
    def refused(self) -> np.ndarray:
        """bool (n,): R is empty (nothing cleared the floor)."""
        return np.asarray(~self.in_R.any(axis=1))


def _in_scope(view: RetrievalView, values: np.ndarray) -> np.ndarray:
    return np.where(view.in_scope, values, np.nan)


def hit_rate(view: RetrievalView) -> np.ndarray:
    """1 if R holds a relevant document; NaN out of scope."""
    return _in_scope(view, (view.n_hits > 0).astype(np.float64))


def recall(view: RetrievalView) -> np.ndarray:
    """|R ∩ relevant| / |relevant| (the whole relevant set, retrieved or not); NaN out of scope."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _in_scope(view, view.n_hits / view.n_relevant)


def mrr(view: RetrievalView) -> np.ndarray:
    """1/rank of the first relevant document in R, 0 if none; NaN out of scope."""
    # The first hit has the smallest rank, hence the largest reciprocal.
    rr = np.where(view.hits, 1.0 / np.maximum(view.rank, 1), 0.0)
    return _in_scope(view, rr.max(axis=1, initial=0.0))


def ndcg(view: RetrievalView) -> np.ndarray:
    """Binary gain, 1/log2(rank+1) discount, ideal DCG over min(n_relevant, k) documents; NaN out of scope."""
    with np.errstate(divide="ignore", invalid="ignore"):
        dcg = np.where(view.hits, 1.0 / np.log2(view.rank + 1.0), 0.0).sum(axis=1)
        n_ideal = np.minimum(view.n_relevant, view.k)
        # The table only needs to reach the largest ideal count, even when k is huge.
        table = _discount_cumsum(int(n_ideal.max()) if n_ideal.size else 0)
        return _in_scope(view, dcg / table[n_ideal])


def refused_correctly(view: RetrievalView) -> np.ndarray:
    """1 if R is empty, over out-of-scope entries (by the label); NaN in scope."""
    return np.where(view.out_of_scope, view.refused.astype(np.float64), np.nan)


def retrieval_scores(
    matrix: CandidateMatrix, floors: np.ndarray, k: int, out_of_scope: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Per-entry retrieval metrics at (floors, k): every retrieval metric of the registry, float (n,) with NaN
    where it does not apply, plus "refused" (bool, R is empty) and "n_retrieved" (int)."""
    from doceval.scoring.registry import retrieval_per_entry

    view = RetrievalView.of(matrix, floors, k, out_of_scope)
    return {
        **retrieval_per_entry(view),
        "refused": view.refused,
        "n_retrieved": view.in_R.sum(axis=1).astype(np.int64),
    }


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


@dataclass(frozen=True)
class AnswerView:
    """What the answer metrics read: the labels, and what the system answered (per entry)."""

    out_of_scope: np.ndarray
    refused: np.ndarray
    answers: list[str | None]
    expected: list[list[str]]
    forbidden: list[list[str]]
    verdicts: list[bool | None]
    judge_ran: bool

    def __post_init__(self) -> None:
        oos = np.asarray(self.out_of_scope, dtype=bool)
        ref = np.asarray(self.refused, dtype=bool)
        n = oos.shape[0]
        lengths = {
            "refused": ref.shape[0],
            "answers": len(self.answers),
            "expected": len(self.expected),
            "forbidden": len(self.forbidden),
            "verdicts": len(self.verdicts),
        }
        bad = {name: m for name, m in lengths.items() if m != n}
        if oos.ndim != 1 or ref.ndim != 1 or bad:
            raise ValueError(f"all inputs must have one value per entry ({n}), got {bad or 'non 1-D arrays'}")
        object.__setattr__(self, "out_of_scope", oos)
        object.__setattr__(self, "refused", ref)

    @property
    def in_scope(self) -> np.ndarray:
        return np.asarray(~self.out_of_scope)


def answer_accuracy(view: AnswerView) -> np.ndarray:
    """Over judged in-scope entries: refused -> 0; verdict True -> 1, False -> 0; None (not judged or a judge
    error) -> NaN, so judge failures are excluded, never scored silently. No judge: all NaN (null, not 0)."""
    n = view.out_of_scope.shape[0]
    if not view.judge_ran:
        return np.full(n, np.nan)
    verdict = np.array([np.nan if v is None else float(bool(v)) for v in view.verdicts], dtype=np.float64)
    return np.where(view.in_scope, np.where(view.refused, 0.0, verdict), np.nan)


def version_correctness(view: AnswerView) -> np.ndarray:
    """In scope: 1 iff the answer contains every expected API and no forbidden one (:func:`contains_apis`);
    refused -> 0."""
    n = view.out_of_scope.shape[0]
    api_ok = np.fromiter(
        (contains_apis(a, e, f) for a, e, f in zip(view.answers, view.expected, view.forbidden, strict=True)),
        dtype=bool,
        count=n,
    )
    return np.where(view.in_scope, (api_ok & ~view.refused).astype(np.float64), np.nan)


def refusal_rate(view: AnswerView) -> np.ndarray:
    """Out of scope: 1 if the system refused (goal 1.0)."""
    return np.where(view.out_of_scope, view.refused.astype(np.float64), np.nan)


def overrefusal_rate(view: AnswerView) -> np.ndarray:
    """In scope: 1 if the system refused (goal 0.0)."""
    return np.where(view.in_scope, view.refused.astype(np.float64), np.nan)


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
    """Per-entry answer metrics of the registry (float (n,), NaN where the metric does not apply).

    Scope comes only from ``out_of_scope``. ``judge_ran=False`` (no judge configured) makes answer_accuracy
    all NaN, so its aggregate is null rather than the 0 the refused entries would give. It is not inferred
    from the verdicts: with a judge configured and every in-scope entry refused, all verdicts are None yet
    the accuracy is genuinely 0.
    """
    from doceval.scoring.registry import answer_per_entry

    return answer_per_entry(
        AnswerView(out_of_scope, refused, answers, expected, forbidden, verdicts, judge_ran=judge_ran)
    )


def mean_or_none(values: np.ndarray) -> float | None:
    """Mean over the non-NaN values; None when there are none (a metric over an empty set is null, not 0)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return None
    return float(v.mean())
