"""DVC stage `conversations`: the conversation golden set's split (``golden_conversations``), replayed three
ways with the same system and floors, -> eval/conversations/summary.json + a flat metrics.json.

1. with memory (the run reported): one memory or session per conversation, reset between conversations;
2. ``--memory-reset needs_memory``: each needs_memory turn asked without its conversation's context;
3. ``--warm-memory``: one memory for the whole run, conversations in golden-set order.

The summary is the first replay's, with ``metrics.conversations.memory_benefit`` (1 against 2, on needs_memory
turns) and ``memory_leak`` (1 against 3, on the other turns), each with its paired cluster interval, and
``replays`` naming the other two runs. The retrieve stage caches the single-question set's candidates only:
doceval's agent retrieves the conversations live (dense over 2 x the turns of the split, seconds), since a
reset turn is searched with another query and pin than the same turn with memory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval import tracking
from doceval.common.io import check_writable, write_json_atomic
from doceval.errors import UsageError
from doceval.harness.evaluate import EvalOptions, evaluate
from doceval.harness.plan import plan_run, retrieve_live
from doceval.scoring.conversation_names import conversation_figures
from doceval.scoring.conversations import ClusterSettings, memory_benefit, memory_leak

if TYPE_CHECKING:
    from doceval.config.schema import Config

FOLDER = "conversations"  # under paths.eval


def _replay_record(summary: Mapping[str, Any]) -> dict[str, Any]:
    recorded = summary["config"]
    return {"run_key": recorded["run_key"], "memory": recorded["memory"], "complete": summary["complete"]}


def replay_conversations(cfg: Config, options: EvalOptions) -> dict[str, Any]:
    """The with-memory summary of ``options``' golden set and split, its conversations block holding the
    memory benefit and leak measured from the reset and warm replays (same plan, floors and system)."""
    if options.warm_memory or options.memory_reset or not cfg.memory.isolate:
        raise UsageError(
            "the conversation replays set memory themselves (with memory, --memory-reset, --warm-memory): "
            "run them with memory.isolate=true and neither flag"
        )
    plan = retrieve_live(cfg, options, plan_run(cfg, options))
    if not plan.conversations():
        split = "every split" if plan.split is None else f"split {plan.split!r}"
        raise UsageError(
            f"{plan.golden_path}: {split} holds no conversation (an entry with turns); point "
            "golden_conversations (conf/config.yaml) at a conversation golden set (data/golden/README.md)"
        )
    summary = evaluate(cfg, options, plan)
    reset_options = dataclasses.replace(options, memory_reset=True)
    # doceval's agent searches a reset turn with its own question and the starting pin: retrieved again.
    reset_plan = plan if plan.agent is not None else dataclasses.replace(plan, awaits_retrieval=True)
    reset = evaluate(cfg, reset_options, retrieve_live(cfg, reset_options, reset_plan))
    warm = evaluate(cfg, dataclasses.replace(options, warm_memory=True), plan)
    settings = ClusterSettings.of_summary(summary)
    block = summary["metrics"]["conversations"]
    block["memory_benefit"] = memory_benefit(summary["entries"], reset["entries"], settings)
    block["memory_leak"] = memory_leak(summary["entries"], warm["entries"], settings)
    block["replays"] = {"memory_reset": _replay_record(reset), "warm_memory": _replay_record(warm)}
    summary["complete"] = all(s["complete"] for s in (summary, reset, warm))
    return summary


def flat_metrics(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The DVC metrics file, by the names MLflow, the gate and history use (doceval.scoring.conversation_names):
    every figure of the conversation block with its interval as ``_ci_lo``/``_ci_hi``, or ``_ci_note`` saying why
    it has none; null where not measured."""
    block = summary["metrics"]["conversations"]
    out: dict[str, Any] = {
        "split": summary["config"]["split"],
        "k": summary["config"]["k"],
        "n_conversations": block["n_conversations"],
        "n_turns": block["n_turns"],
        "n_needs_memory": block["n_needs_memory"],
    }
    for name, figure in conversation_figures(summary["metrics"]).items():
        out[name] = figure.value
        if figure.ci95 is not None:
            out[f"{name}_ci_lo"], out[f"{name}_ci_hi"] = figure.ci95
        elif figure.ci_note:
            out[f"{name}_ci_note"] = figure.ci_note
    return out


def run(cfg: Config, progress: bool = True) -> dict[str, Any]:
    """Write ``<paths.eval>/conversations/{summary,metrics}.json`` for the configured split of
    ``golden_conversations`` (floors as configured: the calibrate stage's, fit on the single-question
    calibration split)."""
    out = Path(cfg.paths.eval) / FOLDER
    fix = f"make {out} writable, or set paths.eval to a writable folder (conf/, then `doceval params`)"
    for name in ("summary.json", "metrics.json"):
        check_writable(out / name, str(out / name), fix)
    tracking.check_configured(cfg)
    summary = replay_conversations(cfg, EvalOptions(golden=Path(cfg.golden_conversations), progress=progress))
    write_json_atomic(out / "summary.json", summary)
    write_json_atomic(out / "metrics.json", flat_metrics(summary))
    return summary


def track(cfg: Config, summary: Mapping[str, Any]) -> str | None:
    """Log the with-memory run (its conversations block holds the memory figures)."""
    return tracking.log_configured_run(cfg, summary, {}, run_name=None, tags={"stage": FOLDER})
