"""Combining N repeats of one run (``doceval eval --repeats N``, and `judge rescore` of such a run): the judge and
answerer seeds of repeat r, every entry scored by its mean over the repeats (its interval computed over those
means: the summary's metrics stay the mean of its entries), the spread of each metric across repeats, the flaky
entries (whether their answer changed or only the judge's verdict), and every repeat's answers kept
(``repeats.answers``, what `judge rescore` re-judges). docs/design.md section 8.1."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from doceval.config import schema
from doceval.scoring.aggregate import aggregate
from doceval.scoring.conversations import ClusterSettings, conversation_metrics
from doceval.scoring.registry import METRIC_NAMES, names
from doceval.summary import Summary

Role = TypeVar("Role", schema.Answerer, schema.Judge)

# The per-entry outcomes compared across repeats: what a user sees change when the same question is asked again.
OUTCOMES = ("refused", "verdict", *names("flaky"))
# The repeats block's marker that repeat 0 sent the single run's request (results.judges.judge_key reads a
# summary without it by the rule that came before).
REPEAT0 = "the single run's request"
# What each repeat's row keeps of its answer (repeats.answers): what judge rescore re-judges and the report reads.
KEPT = (
    "answer",
    "refused",
    "refusal_reason",
    "retrieved",
    "sources",
    "system_error",
    "verdict",
    "verdict_reason",
    "judge_error",
    "stage",
    "scores",
)
# Counts of answers (not of entries): summed over the repeats.
SUMMED_COUNTS = ("n_judged", "judge_errors", "n_refused", "system_errors")


def seeded(block: Role, r: int) -> Role:
    """An LLM role's block asking with seed = (its seed or 0) + r for r >= 1; repeat 0 and any other block as
    it is, so repeat 0 sends exactly the single run's request (its judge identity and cache entries)."""
    if r and isinstance(block, schema.AnswererOpenAI | schema.JudgeOpenAI):
        return dataclasses.replace(
            block, llm=dataclasses.replace(block.llm, seed=int(block.llm.seed or 0) + r)
        )
    return block


def _outcome(row: Mapping[str, Any] | None, key: str) -> Any:
    if row is None:
        return None
    if key in ("refused", "verdict"):
        return row.get(key)
    return (row.get("scores") or {}).get(key)


def _said(row: Mapping[str, Any] | None) -> str:
    """What the system said in one repeat: its answer, refusal and sources (not the judge's verdict)."""
    if row is None:
        return "None"
    return repr((row.get("answer"), row.get("refused"), row.get("retrieved"), row.get("system_error")))


def _spread(summaries: Sequence[Summary]) -> dict[str, dict[str, Any]]:
    """Per metric the run-level values of each repeat, their mean, sd, min and max."""
    per_metric: dict[str, dict[str, Any]] = {}
    for m in METRIC_NAMES:
        values = [s.metrics.value(m) for s in summaries]
        present = [float(v) for v in values if v is not None]
        if not present:
            per_metric[m] = {"values": values, "mean": None, "sd": None, "min": None, "max": None}
            continue
        per_metric[m] = {
            "values": values,
            "mean": float(np.mean(present)),
            "sd": float(np.std(present, ddof=1)) if len(present) > 1 else 0.0,
            "min": min(present),
            "max": max(present),
        }
    return per_metric


def _flaky(entries: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The entries whose outcome changed between repeats, each saying whether its answer changed or only the
    judge's verdict on the same answer (a judge flip, not the system's)."""
    flaky = []
    for entry in entries:
        seen = [r.get(entry["id"]) for r in rows]
        changed = {}
        for key in OUTCOMES:
            values = [_outcome(row, key) for row in seen]
            if len(set(map(repr, values))) > 1:
                changed[key] = values
        if changed:
            answer_changed = len({_said(row) for row in seen}) > 1
            flaky.append(
                {
                    "id": entry["id"],
                    "question": entry.get("question"),
                    "changed": changed,
                    "answer_changed": answer_changed,
                    "what": "answer" if answer_changed else "verdict only",
                }
            )
    return flaky


def _mean_row(entry: Mapping[str, Any], seen: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """Repeat 0's row with every score the mean over the repeats that scored it (None: none did)."""
    scores = {}
    for m in METRIC_NAMES:
        values = [
            float(v)
            for row in seen
            if row is not None and (v := (row.get("scores") or {}).get(m)) is not None
        ]
        scores[m] = float(np.mean(values)) if values else None
    return {**entry, "scores": scores}


def _mean_metrics(entries: Sequence[Mapping[str, Any]], summaries: Sequence[Summary]) -> dict[str, Any]:
    """The metrics over the entry means (intervals over those means, the run's interval settings), counts of
    answers summed over the repeats, and repeat 0's judged / not-measured flags and cutoffs."""
    first = summaries[0].metrics
    settings = ClusterSettings.of_summary(summaries[0])
    metrics: dict[str, Any] = aggregate(
        entries,
        METRIC_NAMES,
        seed=settings.seed,
        n_boot=settings.n_boot,
        binary_method=settings.binary_method,
    )
    counts = dict(first.counts)
    counts.update(metrics["counts"])
    for key in SUMMED_COUNTS:
        counts[key] = int(sum(s.metrics.counts.get(key, 0) for s in summaries))
    metrics["counts"] = counts
    for key in ("not_judged", "not_measured", "cutoffs"):
        if key in first.recorded:
            metrics[key] = copy.deepcopy(first.recorded[key])
    conversations = conversation_metrics(entries, settings)
    if conversations is not None:
        metrics["conversations"] = conversations
    return metrics


def combine(summaries: Sequence[Summary], seeds: str) -> dict[str, Any]:
    """The summary of N repeats (the JSON object, typed by the caller once): repeat 0's configuration and rows,
    every entry scored by its mean over the repeats, the metrics over those means, and a ``repeats`` block: per
    metric the values, mean, sd, min and max across repeats, the flaky entries, and every repeat's answers."""
    first = dict(summaries[0].recorded)  # copied whole below: the typed summaries stay as they were
    rows = [{e.id: e.recorded for e in s.entries} for s in summaries]
    entries = [_mean_row(e.recorded, [r.get(e.id) for r in rows]) for e in summaries[0].entries]
    first["metrics"] = _mean_metrics(entries, summaries)
    first["entries"] = entries
    stopped = next((s for s in summaries if not s.complete), None)
    if stopped is not None:
        first["complete"], first["incomplete"] = False, copy.deepcopy(stopped.recorded.get("incomplete"))
    first["repeats"] = {
        "n": len(summaries),
        "seeds": seeds,
        "repeat0": REPEAT0,
        "run_keys": [s.settings.recorded.get("run_key") for s in summaries],
        "metrics": _spread(summaries),
        "flaky": _flaky(summaries[0].rows, rows),
        "answers": {
            e.id: [None if (row := r.get(e.id)) is None else {k: row.get(k) for k in KEPT} for r in rows]
            for e in summaries[0].entries
        },
    }
    return copy.deepcopy(first)


def repeat_summaries(summary: Summary) -> list[dict[str, Any]]:
    """A combined summary taken apart again: one summary per repeat, its entries carrying that repeat's answers
    and scores (what `judge rescore` re-judges). A summary recorded before every repeat's answers were kept
    gives only repeat 0's (the caller says so)."""
    block = summary.repeats or {}
    answers = block.get("answers") or {}
    out = []
    for r in range(int(block["n"])):
        one = {k: copy.deepcopy(v) for k, v in summary.recorded.items() if k != "repeats"}
        rows = []
        for e in one["entries"]:
            kept = answers.get(e["id"]) or []
            record = kept[r] if r < len(kept) else None
            rows.append({**e, **copy.deepcopy(record)} if record else e)
        one["entries"] = rows
        out.append(one)
    return out
