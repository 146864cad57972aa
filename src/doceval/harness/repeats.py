"""`doceval eval --repeats N`: every entry answered and judged N times, and the repeats counted.

Repeat 0 sends exactly the single run's requests (its judge identity, cache entries and journals); repeat r >= 1
asks every LLM role with seed = (its seed or 0) + r, and a user's assistant is sent the repeat index and seed
(:func:`doceval.system.external.agents.with_sampling`); the assistant is probed once, before repeat 0. The
runs are combined by :func:`doceval.scoring.repeats.combine` (entry means, spread, flaky entries, every
repeat's answers; docs/design.md section 8.1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from doceval.common.naming import is_own_agent
from doceval.common.notes import print_note
from doceval.config import schema
from doceval.harness.evaluate import evaluate
from doceval.harness.plan import EvalOptions, agent_name
from doceval.scoring.repeats import combine, seeded
from doceval.summary import Summary

if TYPE_CHECKING:
    from doceval.config.schema import Config

LLM_ROLES = ("answerer", "judge")


def repeat_config(cfg: Config, r: int) -> Config:
    """The configuration of repeat ``r``: every LLM role asks with seed = (its seed or 0) + r (r >= 1)."""
    return dataclasses.replace(cfg, answerer=seeded(cfg.answerer, r), judge=seeded(cfg.judge, r))


def sampled_roles(cfg: Config, external_agent: bool) -> list[str]:
    """What can change between repeats: the user's assistant, and every LLM role."""
    roles = ["system"] if external_agent else []
    blocks = {"answerer": cfg.answerer, "judge": cfg.judge}
    return roles + [r for r in LLM_ROLES if isinstance(blocks[r], schema.AnswererOpenAI | schema.JudgeOpenAI)]


def seeds_note(roles: Sequence[str]) -> str:
    """The repeats block's ``seeds``: how each repeat was asked."""
    asked = ", ".join(roles) if roles else "no role"
    return f"repeat 0: the single run's requests; repeat r >= 1: seed = (seed or 0) + r for {asked}" + (
        "; the assistant is sent its repeat index and seed (seed + r)" if "system" in roles else ""
    )


def evaluate_repeats(cfg: Config, options: EvalOptions, repeats: int) -> Summary:
    """One evaluation, or ``repeats`` of them (each with its own seeds and journals) combined (typed once, after
    combining); the user's assistant is probed once, before repeat 0."""
    if repeats == 1:
        return evaluate(cfg, options)
    roles = sampled_roles(cfg, not is_own_agent(agent_name(cfg, options)))
    if not roles:
        print_note(
            "--repeats: nothing in this run is sampled (no LLM role, doceval's own agent): the repeats "
            "will agree"
        )
    summaries = [
        evaluate(repeat_config(cfg, r), dataclasses.replace(options, repeat=r, repeats=repeats))
        for r in range(repeats)
    ]
    return Summary.from_mapping(combine(summaries, seeds_note(roles)))


def format_repeats(block: Mapping[str, Any], width: int = 100) -> list[str]:
    lines = [
        f"repeats {block['n']} ({block['seeds']}): the headline is the mean over repeats; the run-level "
        "figure of each repeat: mean (sd) [min, max]"
    ]
    for m, s in block["metrics"].items():
        if s["mean"] is None:
            continue
        lines.append(f"  {m:20s} {s['mean']:.3f} ({s['sd']:.3f}) [{s['min']:.3f}, {s['max']:.3f}]")
    flaky = block["flaky"]
    answered = sum(bool(f.get("answer_changed")) for f in flaky)
    lines.append(
        f"flaky entries (an outcome changed between repeats): {len(flaky)} ({answered} whose answer "
        f"changed, {len(flaky) - answered} only the judge's verdict)"
    )
    for f in flaky[:20]:
        what = "; ".join(f"{k} {v}" for k, v in f["changed"].items())
        lines.append(f"  {f['id']} ({f.get('what', '?')}): {what}"[:width])
    if len(flaky) > 20:
        lines.append(f"  ... {len(flaky) - 20} more in the summary's repeats.flaky")
    return lines
