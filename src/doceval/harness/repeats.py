"""`doceval eval --repeats N`: every entry answered and judged N times, each repeat with its own seeds (so its
own cache entries and journals), every metric reported as the mean with its spread across repeats, and the
entries whose outcome flips between repeats (the flaky probes) listed."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from doceval.config import schema
from doceval.scoring.registry import METRIC_NAMES, names

if TYPE_CHECKING:
    from doceval.config.schema import Config

Role = TypeVar("Role", schema.Answerer, schema.Judge)

# The per-entry outcomes compared across repeats: what a user sees change when the same question is asked again.
OUTCOMES = ("refused", "verdict", *names("flaky"))
LLM_ROLES = ("answerer", "judge")


def _seeded(block: Role, r: int) -> Role:
    """An LLM role's block asking with seed = (its seed or 0) + r; any other block as it is."""
    if isinstance(block, schema.AnswererOpenAI | schema.JudgeOpenAI):
        return dataclasses.replace(
            block, llm=dataclasses.replace(block.llm, seed=int(block.llm.seed or 0) + r)
        )
    return block


def repeat_config(cfg: Config, r: int) -> Config:
    """The configuration of repeat ``r``: every LLM role asks with seed = (its seed or 0) + r."""
    return dataclasses.replace(cfg, answerer=_seeded(cfg.answerer, r), judge=_seeded(cfg.judge, r))


def sampled_roles(cfg: Config, external_agent: bool) -> list[str]:
    """What can change between repeats: the user's assistant, and every LLM role."""
    roles = ["system"] if external_agent else []
    blocks = {"answerer": cfg.answerer, "judge": cfg.judge}
    return roles + [r for r in LLM_ROLES if isinstance(blocks[r], schema.AnswererOpenAI | schema.JudgeOpenAI)]


def _outcome(row: Mapping[str, Any], key: str) -> Any:
    if key in ("refused", "verdict"):
        return row.get(key)
    return (row.get("scores") or {}).get(key)


def combine(summaries: Sequence[Mapping[str, Any]], seeds_note: str) -> dict[str, Any]:
    """Repeat 0's summary with a ``repeats`` block: per metric the values, mean, sd, min and max across repeats,
    and the flaky entries with their outcome in each repeat."""
    first = copy.deepcopy(dict(summaries[0]))
    per_metric: dict[str, dict[str, Any]] = {}
    for m in METRIC_NAMES:
        values = [s["metrics"].get(m) for s in summaries]
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
    rows = [{e["id"]: e for e in s["entries"]} for s in summaries]
    flaky = []
    for entry in summaries[0]["entries"]:
        eid = entry["id"]
        changed = {}
        for key in OUTCOMES:
            seen = [_outcome(r[eid], key) if eid in r else None for r in rows]
            if len(set(map(repr, seen))) > 1:
                changed[key] = seen
        if changed:
            flaky.append({"id": eid, "question": entry.get("question"), "changed": changed})
    first["repeats"] = {
        "n": len(summaries),
        "seeds": seeds_note,
        "run_keys": [s["config"].get("run_key") for s in summaries],
        "metrics": per_metric,
        "flaky": flaky,
    }
    return first


def format_repeats(block: Mapping[str, Any], width: int = 100) -> list[str]:
    lines = [f"repeats {block['n']} ({block['seeds']}): mean (sd) [min, max] across repeats"]
    for m, s in block["metrics"].items():
        if s["mean"] is None:
            continue
        lines.append(f"  {m:20s} {s['mean']:.3f} ({s['sd']:.3f}) [{s['min']:.3f}, {s['max']:.3f}]")
    flaky = block["flaky"]
    lines.append(f"flaky entries (an outcome changed between repeats): {len(flaky)}")
    for f in flaky[:20]:
        what = "; ".join(f"{k} {v}" for k, v in f["changed"].items())
        lines.append(f"  {f['id']}: {what}"[:width])
    if len(flaky) > 20:
        lines.append(f"  ... {len(flaky) - 20} more in the summary's repeats.flaky")
    return lines
