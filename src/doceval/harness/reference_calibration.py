"""The offline judge's parts on labelled rows: each component's verdicts (version strings, key facts,
similarity) for `doceval judge validate`, and the two thresholds that maximise kappa for `doceval judge
calibrate`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from doceval.config import schema
from doceval.inputs.judge_labels import LabelledAnswer
from doceval.scoring.agreement import cohen_kappa
from doceval.scoring.reference_judge import ReferenceJudge, VersionStrings, version_strings

_T = TypeVar("_T")


def strings_of(rows: Sequence[LabelledAnswer]) -> dict[str, VersionStrings]:
    """Row id -> the version strings of its entry."""
    by_entry = version_strings([r.entry for r in rows])
    return {r.id: by_entry[r.entry.id] for r in rows}


@dataclass(frozen=True)
class Components:
    """Per row: passes its version strings, share of the reference's key facts, similarity to the reference."""

    passing: list[bool]
    shares: list[float]
    similarities: list[float]

    def verdicts(self, facts_threshold: float, threshold: float) -> dict[str, list[bool]]:
        """Each component alone, with the judge's thresholds."""
        return {
            "version_strings": list(self.passing),
            "key_facts": [s >= facts_threshold for s in self.shares],
            "similarity": [s >= threshold for s in self.similarities],
        }

    def judge(self, facts_threshold: float, threshold: float) -> list[bool]:
        return [
            ok and f >= facts_threshold and s >= threshold
            for ok, f, s in zip(self.passing, self.shares, self.similarities, strict=True)
        ]


def components(rows: Sequence[LabelledAnswer]) -> Components:
    # lazy: start-up (the embedders' module, ~40 ms: `judge calibrate` loads this module before it scores)
    from doceval.index.embed import judge_encoder

    strings = strings_of(rows)
    judge = ReferenceJudge(0.0, strings, judge_encoder)
    try:
        sims = judge.similarities([(r.candidate, r.entry.reference_answer) for r in rows])
    finally:
        judge.close()
    return Components(
        [strings[r.id].passes(r.candidate) for r in rows],
        [strings[r.id].key_facts(r.entry.reference_answer).share(r.candidate) for r in rows],
        [float(s) for s in sims],
    )


def component_verdicts(rows: Sequence[LabelledAnswer], judge_cfg: schema.Judge) -> dict[str, list[bool]]:
    """Each component of the reference judge alone on ``rows``; for another judge only version strings."""
    if isinstance(judge_cfg, schema.JudgeReference):
        return components(rows).verdicts(float(judge_cfg.facts_threshold), float(judge_cfg.threshold))
    strings = strings_of(rows)
    return {"version_strings": [strings[r.id].passes(r.candidate) for r in rows]}


def _cuts(values: Sequence[float], low: float) -> list[float]:
    """Candidate thresholds: below everything, the midpoints between distinct values, above everything."""
    v = sorted(set(values))
    return [low] + [(a + b) / 2 for a, b in zip(v, v[1:], strict=False)] + [(v[-1] + 1e-6) if v else 1.0]


def _middle(run: Sequence[_T]) -> _T:
    return run[len(run) // 2]


def calibrate_thresholds(rows: Sequence[LabelledAnswer]) -> dict[str, Any]:
    """The key-facts and similarity thresholds that together maximise kappa with the labels over ``rows``,
    among cuts between the values of rows that pass their version strings (the only rows they decide). Ties:
    for each facts threshold the middle of its best run of similarity thresholds; among facts thresholds with
    the best kappa, the middle one. Deterministic."""
    c = components(rows)
    human = [r.correct for r in rows]
    live = [i for i, ok in enumerate(c.passing) if ok]
    fact_cuts = _cuts([c.shares[i] for i in live], 0.0)
    sim_cuts = _cuts([c.similarities[i] for i in live], -1.0)
    best_per_fact: list[tuple[float, float, float]] = []  # (kappa, facts threshold, similarity threshold)
    for tf in fact_cuts:
        scored = [(cohen_kappa(human, c.judge(tf, ts)) or 0.0, ts) for ts in sim_cuts]
        top = max(k for k, _ in scored)
        best_per_fact.append((top, tf, _middle([ts for k, ts in scored if k == top])))
    best = max(k for k, _, _ in best_per_fact)
    kappa, tf, ts = _middle([x for x in best_per_fact if x[0] == best])
    return {
        "threshold": round(ts, 4),
        "facts_threshold": round(tf, 4),
        "kappa": kappa,
        "n": len(rows),
        "similarities": {r.id: round(s, 4) for r, s in zip(rows, c.similarities, strict=True)},
        "key_facts": {r.id: round(s, 4) for r, s in zip(rows, c.shares, strict=True)},
    }
