"""DVC stage `conversations` (and `doceval conversations OVERRIDES`): the conversation golden set's split
(``golden_conversations``), replayed four ways with the same system and floors, -> eval/conversations/.

1. with memory (the run reported): one memory or session per conversation, reset between conversations;
2. ``--memory-reset needs_memory``: each needs_memory turn asked without its conversation's context;
3. ``--memory-reset standalone``: each needs_memory turn asked as its standalone rewrite, at its own pin (only
   when every needs_memory turn of the split has one; otherwise recovery is "not measured", saying why);
4. ``--warm-memory``: one memory for the whole run, conversations in golden-set order.

The summary is the first replay's, with ``metrics.conversations.memory_benefit`` (1 against 2, on needs_memory
turns), ``standalone_ceiling`` (3 against 2), ``memory_recovery`` (benefit / ceiling) and ``memory_leak`` (1
against 4, on the other turns), each with its paired cluster interval, and ``replays`` naming the other runs.
Every replay is kept beside it (``replays/{memory_reset,warm_memory,standalone}.json``: the replay's summary,
its per-turn rows in ``entries``), so each figure can be recomputed from the files. The retrieve stage caches the
single-question set's candidates only: doceval's agent retrieves the conversations live (dense over the turns
of the split per replay, seconds), since a reset or standalone turn is searched with another query and pin.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval import tracking
from doceval.common.io import atomic_dir, check_writable, output_folder, write_json_atomic
from doceval.errors import UsageError
from doceval.harness.evaluate import EvalOptions, evaluate
from doceval.harness.plan import RunPlan, plan_run, retrieve_live
from doceval.harness.summary import pipeline_record
from doceval.inputs.configured import refuse_stage_overlap
from doceval.inputs.standalone import missing_standalone, standalone_entries
from doceval.scoring.conversation_names import conversation_figures
from doceval.scoring.conversations import (
    ClusterSettings,
    memory_benefit,
    memory_leak,
    memory_recovery,
    not_measured_block,
    standalone_ceiling,
)
from doceval.summary import Summary, as_summary

if TYPE_CHECKING:
    from doceval.config.schema import Config

FOLDER = "conversations"  # under paths.eval
REPLAYS = ("memory_reset", "warm_memory", "standalone")  # replays/<name>.json beside summary.json
KEY = "golden_conversations"  # the config key naming the conversation set


def _replay_record(typed: Summary) -> dict[str, Any]:
    return {
        "run_key": typed.settings.run_key,
        "memory": dict(typed.settings.memory),
        "complete": typed.complete,
    }


def conversation_golden(cfg: Config) -> Path:
    """The conversation set ``golden_conversations`` names, or a UsageError naming that key and the fix."""
    fix = (
        f"set {KEY} to your conversation set: `doceval init DIR --conversations FILE` for a new project, the same "
        f"on an existing one to add it, or `{KEY}=PATH` in doceval.yaml's overrides then `doceval params` "
        "(format: docs/design.md section 3)"
    )
    if cfg.golden_conversations is None:
        raise UsageError(f"{KEY} is not set (null): this project has no conversation set; {fix}")
    path = Path(cfg.golden_conversations)
    if path.is_dir():
        raise UsageError(f"{KEY}={path}: is a directory, not a conversation set; name its JSONL file ({fix})")
    if not path.is_file():
        raise UsageError(f"{KEY}={path}: no such file; {fix}")
    return path


def _standalone_plan(plan: RunPlan) -> RunPlan:
    """The plan of the standalone replay: the needs_memory turns ask their rewrites (retrieved again by doceval's
    agent, whose candidates were searched with the follow-ups)."""
    return dataclasses.replace(
        plan,
        entries=standalone_entries(plan.entries),
        all_entries=standalone_entries(plan.all_entries),
        awaits_retrieval=plan.agent is None,
    )


def _standalone_gap(plan: RunPlan) -> str | None:
    """Why the standalone replay cannot run (needs_memory turns of the split without a rewrite), or None."""
    needing = [e for e in plan.entries if e.conversation is not None and e.needs_memory]
    missing = missing_standalone(needing)
    if not needing:
        return "the split has no needs_memory turn"
    if missing:
        return (
            f"{len(missing)} of {len(needing)} needs_memory turns of {plan.golden_path} have no standalone rewrite "
            f"(e.g. {missing[0]}); add `standalone` to each (docs/design.md section 3)"
        )
    return None


def replay_conversations(
    cfg: Config, options: EvalOptions
) -> tuple[Summary, dict[str, Summary | dict[str, Any]]]:
    """The with-memory summary of ``options``' golden set and split, its conversations block holding memory
    benefit, standalone ceiling, memory recovery and leak from the other replays (same plan, floors and system),
    and the other replays' summaries by name (:data:`REPLAYS`; a standalone replay that could not run is
    ``{"not_measured": why, "entries": []}``)."""
    if options.warm_memory or options.memory_reset or not cfg.memory.isolate:
        raise UsageError(
            "the conversation replays set memory themselves (with memory, --memory-reset, --warm-memory): "
            "run them with memory.isolate=true and neither flag"
        )
    plan = retrieve_live(cfg, options, plan_run(cfg, options))
    if not plan.conversations():
        split = "every split" if plan.split is None else f"split {plan.split!r}"
        raise UsageError(
            f"{plan.golden_path}: {split} holds no conversation (an entry with turns); point {KEY} at a "
            "conversation golden set (docs/design.md section 3, data/golden/README.md)"
        )
    summary = evaluate(cfg, options, plan)
    reset_options = dataclasses.replace(options, memory_reset=True)
    # doceval's agent searches a reset turn with its own question and the starting pin: retrieved again.
    reset_plan = plan if plan.agent is not None else dataclasses.replace(plan, awaits_retrieval=True)
    reset = evaluate(cfg, reset_options, retrieve_live(cfg, reset_options, reset_plan))
    warm = evaluate(cfg, dataclasses.replace(options, warm_memory=True), plan)
    gap = _standalone_gap(plan)
    alone: Summary | dict[str, Any] = {"not_measured": gap, "entries": []}
    if gap is None:
        alone_options = dataclasses.replace(options, memory_reset=True, standalone=True)
        alone = evaluate(cfg, alone_options, retrieve_live(cfg, alone_options, _standalone_plan(plan)))
    settings = ClusterSettings.of_summary(summary)
    measures: dict[str, Any] = {"memory_benefit": memory_benefit(summary.rows, reset.rows, settings)}
    if isinstance(alone, Summary):
        measures["standalone_ceiling"] = standalone_ceiling(alone.rows, reset.rows, settings)
        measures["memory_recovery"] = memory_recovery(summary.rows, reset.rows, alone.rows, settings)
    else:
        measures["standalone_ceiling"] = not_measured_block("ceiling", str(gap))
        measures["memory_recovery"] = not_measured_block("recovery", str(gap))
    measures["memory_leak"] = memory_leak(summary.rows, warm.rows, settings)
    measures["replays"] = {
        "memory_reset": _replay_record(reset),
        "warm_memory": _replay_record(warm),
        "standalone": _replay_record(alone) if isinstance(alone, Summary) else {"not_measured": gap},
    }
    ran = (summary, reset, warm, *([alone] if isinstance(alone, Summary) else []))
    typed = summary.with_conversation_measures(measures, complete=all(s.complete for s in ran))
    return typed, {"memory_reset": reset, "warm_memory": warm, "standalone": alone}


def flat_metrics(summary: Summary | Mapping[str, Any]) -> dict[str, Any]:
    """The DVC metrics file, by the names MLflow, the gate and history use (doceval.scoring.conversation_names):
    every figure of the conversation block with its interval as ``_ci_lo``/``_ci_hi``, or ``_ci_note`` saying why
    it has none; null where not measured."""
    typed = as_summary(summary)
    block = typed.metrics.conversations or {}
    out: dict[str, Any] = {
        "split": typed.settings.split,
        "k": typed.settings.k,
        "n_conversations": block["n_conversations"],
        "n_turns": block["n_turns"],
        "n_needs_memory": block["n_needs_memory"],
    }
    for name, figure in conversation_figures(typed.metrics.recorded).items():
        out[name] = figure.value
        if figure.ci95 is not None:
            out[f"{name}_ci_lo"], out[f"{name}_ci_hi"] = figure.ci95
        elif figure.ci_note:
            out[f"{name}_ci_note"] = figure.ci_note
    return out


def output_dir(cfg: Config, out: Path | None = None) -> Path:
    """Where the stage writes: ``out``, or ``<paths.eval>/conversations``."""
    return out if out is not None else Path(cfg.paths.eval) / FOLDER


def run(cfg: Config, progress: bool = True, out: Path | None = None) -> Summary:
    """Write ``summary.json``, ``metrics.json`` and ``replays/`` into :func:`output_dir` for the configured split
    of ``golden_conversations`` (floors as configured: the calibrate stage's, fit on the single-question
    calibration split)."""
    folder = output_dir(cfg, out)
    fix = f"make {folder} writable, or set paths.eval to a writable folder (conf/, then `doceval params`)"
    for name in ("summary.json", "metrics.json"):
        check_writable(folder / name, str(folder / name), fix)
    refuse_stage_overlap(cfg, [("the conversations folder (paths.eval)", folder)])
    output_folder(folder / "replays", str(folder / "replays"), fix)
    golden = conversation_golden(cfg)
    tracking.check_configured(cfg)
    summary, replays = replay_conversations(cfg, EvalOptions(golden=golden, progress=progress))
    with atomic_dir(folder / "replays") as tmp:
        for name in REPLAYS:
            replay = replays[name]  # a standalone replay that could not run has no config: written as it is
            write_json_atomic(
                tmp / f"{name}.json", pipeline_record(replay) if isinstance(replay, Summary) else replay
            )
    write_json_atomic(folder / "summary.json", pipeline_record(summary))  # MLflow gets the whole summary
    write_json_atomic(folder / "metrics.json", flat_metrics(summary))
    return summary


def track(cfg: Config, summary: Summary, out: Path | None = None) -> str | None:
    """Log the with-memory run (its conversations block holds the memory figures), with the replays' files as
    its ``replays/`` artifacts."""
    replays = output_dir(cfg, out) / "replays"
    artifacts = {"replays": replays} if replays.is_dir() else {}
    return tracking.log_configured_run(cfg, summary, artifacts, run_name=None, tags={"stage": FOLDER})
