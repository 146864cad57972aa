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

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

import numpy as np

from doceval.common.apimatch import fold, occurs

_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


@dataclass(frozen=True)
class CandidateMatrix:
    """n entries x K candidates, padded.

    scores: float64 (n, K), -inf where padded; relevant: bool (n, K), grade >= the relevance threshold;
    n_relevant: int (n,) = size of the relevant set per entry (may exceed the number of relevant docs
    retrieved); doc_ids: list[list[str]] (unpadded, after dedup) kept for building per-entry retrieved lists.
    Graded judgments (docs/design.md section 3.4): grades float (n, K), the grade of each candidate (0 where
    unjudged); judged bool (n, K); relevant1 / n_relevant1: the same at grade >= 1; ideal float (n, m): every
    judged grade of the entry, best first (the ideal ranking for nDCG). Without grades every relevant document
    has grade 2 and nothing else is judged.

    Padding is identified by position (column >= len(doc_ids[i])), not by the -inf score, so a genuine
    candidate scoring -inf is still kept under a -inf floor.
    """

    scores: np.ndarray
    relevant: np.ndarray
    n_relevant: np.ndarray
    doc_ids: list[list[str]]
    grades: np.ndarray | None = None
    judged: np.ndarray | None = None
    relevant1: np.ndarray | None = None
    n_relevant1: np.ndarray | None = None
    ideal: np.ndarray | None = None

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
    ranked: Sequence[Sequence[tuple[str, float]]],
    relevant: Sequence[Collection[str] | Mapping[str, int]],
    threshold: int = 2,
) -> CandidateMatrix:
    """Pad ranked candidate lists into a :class:`CandidateMatrix`.

    Each list is in rank order as given: the list order is authoritative (ties keep list order, scores are
    not re-sorted). Duplicate doc ids are collapsed first, keeping the first occurrence (its best rank), so a
    duplicate can neither take a slot of the top k nor count twice. NaN scores are rejected because a NaN
    compares false against every floor and would vanish silently.

    ``relevant[i]``: the entry's relevant ids (each grade 2), or its graded judgments ``{doc: 0|1|2}``; a
    document is relevant when its grade is at least ``threshold``.
    """
    if threshold not in (1, 2):
        raise ValueError(f"threshold must be 1 or 2, got {threshold}")
    graded = [_grades_of(i, rel) for i, rel in enumerate(relevant)]
    relevant = [{d for d, g in gr.items() if g >= threshold} for gr in graded]
    if len(ranked) != len(relevant):
        raise ValueError(f"ranked has {len(ranked)} entries but relevant has {len(relevant)}")
    n = len(ranked)
    ids_rows, dup_rows, rel_rows, rel_cols, n_relevant = _dedup_rows(ranked, relevant)
    flat = _flat_scores(ranked, dup_rows)
    lengths = np.fromiter(map(len, ids_rows), dtype=np.int64, count=n)
    width = int(lengths.max()) if n else 0
    scores = np.full((n, width), -np.inf, dtype=np.float64)
    # Row-major boolean assignment fills each row left to right, matching the flattened order.
    scores[np.arange(width)[None, :] < lengths[:, None]] = flat
    rel_mat = np.zeros((n, width), dtype=bool)
    rel_mat[np.asarray(rel_rows, dtype=np.intp), np.asarray(rel_cols, dtype=np.intp)] = True
    if all(g == 2 for gr in graded for g in gr.values()):
        # Binary judgments (relevant ids only): every judged document is relevant, grade 2; no Python loop.
        grades, judged = np.where(rel_mat, 2.0, 0.0), rel_mat.copy()
        m = int(n_relevant.max()) if n else 0
        ideal = np.where(np.arange(max(m, 1))[None, :] < n_relevant[:, None], 2.0, 0.0)
    else:
        grades, judged, ideal = _grade_matrices(ids_rows, graded, width)
    return CandidateMatrix(
        scores=scores,
        relevant=rel_mat,
        n_relevant=n_relevant,
        doc_ids=ids_rows,
        grades=grades,
        judged=judged,
        relevant1=grades >= 1,
        n_relevant1=np.fromiter((sum(g >= 1 for g in gr.values()) for gr in graded), np.int64, count=n),
        ideal=ideal,
    )


def _dedup_rows(
    ranked: Sequence[Sequence[tuple[str, float]]], relevant: Sequence[Collection[str]]
) -> tuple[list[list[str]], dict[int, list[int]], list[int], list[int], np.ndarray]:
    """Per row: the doc ids with duplicates collapsed (first occurrence kept), the positions kept (only for
    rows with duplicates), the (row, column) of each relevant document retrieved, and the relevant-set sizes."""
    ids_rows: list[list[str]] = []
    dup_rows: dict[int, list[int]] = {}  # row -> positions to keep, only for rows with duplicates
    rel_rows: list[int] = []
    rel_cols: list[int] = []
    n_relevant = np.empty(len(ranked), dtype=np.int64)
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
    return ids_rows, dup_rows, rel_rows, rel_cols, n_relevant


def _flat_scores(
    ranked: Sequence[Sequence[tuple[str, float]]], dup_rows: Mapping[int, list[int]]
) -> np.ndarray:
    """Every row's scores flattened in list order, the later occurrences of duplicated ids dropped; NaN refused."""
    raw_lengths = np.fromiter(map(len, ranked), dtype=np.int64, count=len(ranked))
    flat = np.fromiter(
        map(_SECOND, chain.from_iterable(ranked)), dtype=np.float64, count=int(raw_lengths.sum())
    )
    if dup_rows:
        offsets = np.concatenate(([0], np.cumsum(raw_lengths)[:-1]))
        keep = np.ones(flat.size, dtype=bool)
        for i, positions in dup_rows.items():
            keep[offsets[i] : offsets[i] + raw_lengths[i]] = False
            keep[offsets[i] + np.asarray(positions, dtype=np.int64)] = True
        flat = flat[keep]
    if np.isnan(flat).any():
        raise ValueError("candidate scores must not be NaN")
    return flat


def _grades_of(i: int, rel: Collection[str] | Mapping[str, int]) -> dict[str, int]:
    if isinstance(rel, str):
        # set("doc-id") would silently become a set of characters.
        raise TypeError(f"relevant[{i}] must be a collection of doc ids, not a single string")
    if isinstance(rel, Mapping):
        return {str(d): int(g) for d, g in rel.items()}
    return dict.fromkeys(rel, 2)


def _grade_matrices(
    ids_rows: Sequence[Sequence[str]], graded: Sequence[Mapping[str, int]], width: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-candidate grades (0 where unjudged), the judged mask and each entry's judged grades, best first."""
    n = len(ids_rows)
    grades = np.zeros((n, width), dtype=np.float64)
    judged = np.zeros((n, width), dtype=bool)
    m = max((len(gr) for gr in graded), default=0)
    ideal = np.zeros((n, max(m, 1)), dtype=np.float64)
    for i, (ids, gr) in enumerate(zip(ids_rows, graded, strict=True)):
        if not gr:
            continue
        present = set(ids)  # C-level; then Python work per judged document, not per candidate
        for doc, g in gr.items():
            if doc in present:
                j = ids.index(doc)
                grades[i, j] = g
                judged[i, j] = True
        best = sorted(gr.values(), reverse=True)
        ideal[i, : len(best)] = best
    return grades, judged, ideal


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
    # graded judgments (CandidateMatrix): gains of R, grade >= 1 hits, judged documents in R, ideal grades
    gains: np.ndarray | None = None
    hits1: np.ndarray | None = None
    n_relevant1: np.ndarray | None = None
    judged: np.ndarray | None = None
    ideal: np.ndarray | None = None

    @classmethod
    def of(
        cls, matrix: CandidateMatrix, floors: np.ndarray, k: int, out_of_scope: np.ndarray | None = None
    ) -> RetrievalView:
        in_R = cut(matrix, floors, k)
        oos = matrix.n_relevant == 0 if out_of_scope is None else np.asarray(out_of_scope, dtype=bool)
        grades = matrix.grades if matrix.grades is not None else np.where(matrix.relevant, 2.0, 0.0)
        judged = matrix.judged if matrix.judged is not None else matrix.relevant
        rel1 = matrix.relevant1 if matrix.relevant1 is not None else matrix.relevant
        n_rel1 = matrix.n_relevant1 if matrix.n_relevant1 is not None else matrix.n_relevant
        ideal = matrix.ideal
        if ideal is None:  # binary: n_relevant documents of grade 2
            m = int(matrix.n_relevant.max()) if matrix.n else 0
            ideal = np.where(np.arange(max(m, 1))[None, :] < matrix.n_relevant[:, None], 2.0, 0.0)
        return cls(
            in_R,
            np.cumsum(in_R, axis=1),
            in_R & matrix.relevant,
            matrix.n_relevant,
            oos,
            k,
            np.where(in_R, grades, 0.0),
            in_R & rel1,
            n_rel1,
            in_R & judged,
            ideal,
        )

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
    """Graded gain (the grade: 2 answers, 1 partially; trec_eval's linear gain), 1/log2(rank+1) discount,
    ideal DCG over the entry's judged grades best first, cut at k; NaN out of scope. With binary judgments
    (every relevant document grade 2) it is binary-gain nDCG."""
    assert view.gains is not None and view.ideal is not None
    with np.errstate(divide="ignore", invalid="ignore"):
        dcg = np.where(view.in_R, view.gains / np.log2(view.rank + 1.0), 0.0).sum(axis=1)
        depth = min(view.k, view.ideal.shape[1])
        discount = 1.0 / np.log2(np.arange(2, depth + 2, dtype=np.float64))
        idcg = (view.ideal[:, :depth] * discount[None, :]).sum(axis=1)
        return _in_scope(view, dcg / idcg)


def hit_rate_rel1(view: RetrievalView) -> np.ndarray:
    """hit_rate counting any document of grade >= 1 (partial answers too); NaN out of scope."""
    assert view.hits1 is not None
    return _in_scope(view, np.asarray(view.hits1.any(axis=1), dtype=np.float64))


def recall_rel1(view: RetrievalView) -> np.ndarray:
    """|R ∩ grade >= 1| / |grade >= 1|; NaN out of scope."""
    assert view.hits1 is not None and view.n_relevant1 is not None
    with np.errstate(divide="ignore", invalid="ignore"):
        return _in_scope(view, view.hits1.sum(axis=1) / view.n_relevant1)


def mrr_rel1(view: RetrievalView) -> np.ndarray:
    """1/rank of the first document of grade >= 1 in R, 0 if none; NaN out of scope."""
    assert view.hits1 is not None
    rr = np.where(view.hits1, 1.0 / np.maximum(view.rank, 1), 0.0)
    return _in_scope(view, rr.max(axis=1, initial=0.0))


def judged_share(view: RetrievalView) -> np.ndarray:
    """Share of R that was judged (any grade); NaN out of scope and where R is empty. An unjudged document is
    scored as not relevant, so a low value says the metrics may undercount (trec_eval's unjudged measure)."""
    assert view.judged is not None
    n_r = view.in_R.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(n_r > 0, view.judged.sum(axis=1) / n_r, np.nan)
    return _in_scope(view, share)


def refused_correctly(view: RetrievalView) -> np.ndarray:
    """1 if R is empty, over out-of-scope entries (by the label); NaN in scope."""
    return np.where(view.out_of_scope, view.refused.astype(np.float64), np.nan)


def contains_apis(
    answer: str | None,
    expected: Sequence[str],
    forbidden: Sequence[str],
    expected_any: Sequence[Sequence[str]] = (),
) -> bool:
    """True when the answer contains every expected API, at least one string of each ``expected_any`` group
    (valid alternatives), and no forbidden one, each matched by the one rule the golden set's checks use
    (:mod:`doceval.common.apimatch`: case-insensitive, as a name, a space standing for any spacing).

    A missing answer (None) is False: it cannot show the expected APIs.
    """
    if isinstance(expected, str) or isinstance(forbidden, str):
        # A bare string would be checked character by character.
        raise TypeError("expected and forbidden must be sequences of API names, not a single string")
    if answer is None:
        return False
    text = fold(answer)
    return (
        all(occurs(a, text) for a in expected)
        and all(any(occurs(a, text) for a in group) for group in expected_any)
        and not any(occurs(a, text) for a in forbidden)
    )


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
    expected_any: list[list[list[str]]] | None = None  # per entry: groups of alternatives (None: none)

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
    groups = view.expected_any if view.expected_any is not None else [[] for _ in range(n)]
    api_ok = np.fromiter(
        (
            contains_apis(a, e, f, g)
            for a, e, f, g in zip(view.answers, view.expected, view.forbidden, groups, strict=True)
        ),
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


def mean_or_none(values: np.ndarray) -> float | None:
    """Mean over the non-NaN values; None when there are none (a metric over an empty set is null, not 0)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return None
    return float(v.mean())
