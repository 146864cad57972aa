"""What each step of an evaluation hands the next (:mod:`doceval.harness.evaluate` runs the steps,
:mod:`doceval.harness.summary` reads all three): how the LLM work is done (:class:`AgentSetup`), what the system
replied (:class:`SystemRun`), and the judge's verdicts with the answer metrics (:class:`AnswerScores`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from doceval.config import schema
from doceval.harness.plan import EvalOptions, RunPlan
from doceval.scoring.judge import Judge
from doceval.scoring.judging import JudgeRecord, JudgingOutcome
from doceval.seam import Reply
from doceval.system.docchat.answerers import Answerer


@dataclass(frozen=True)
class AgentSetup:
    """How the LLM work of a run is done: the answerer (doceval's agent only) and judge, memory, the run's
    budget and concurrency (shared by answering and judging), and the journals (None: not journaled)."""

    answerer_cfg: schema.Answerer | None  # the configured answerer; None: the user's assistant answers
    judge_cfg: schema.Judge  # the configured judge (judge=none with --no-judge)
    answerer: Answerer | None  # None: the user's assistant answers
    judge: Judge | None  # None: not judged (answer_accuracy null)
    warm: bool
    budget_usd: float | None
    max_concurrency: int
    key: str
    agent_journal: Path | None
    judge_journal: Path | None
    # run.max_abandoned: calls of the user's function left running past their deadline before the run stops
    max_abandoned: int | None
    rewrite: str  # memory.rewrite: how doceval's agent retrieves for a conversation's follow-up
    # --memory-reset needs_memory: each needs_memory turn asked without its conversation's context
    memory_reset: bool = False
    # engine=ray: the user's assistant is called on Ray actors (doceval.engine.fanout); None or local: threads
    engine: schema.Engine | None = None
    # --memory-reset standalone: the reset turns ask their standalone rewrites (EvalOptions.standalone)
    standalone: bool = False

    @property
    def reset_mode(self) -> str | None:
        """What the summary records as ``config.memory.reset``: None, "needs_memory" or "standalone"."""
        return reset_mode(self) if self.memory_reset else None

    def reset_ids(self, plan: RunPlan) -> frozenset[str]:
        """The turns asked without their conversation's context (none unless ``memory_reset``)."""
        if not self.memory_reset:
            return frozenset()
        return frozenset(e.id for e in plan.entries if e.conversation is not None and e.needs_memory)


def reset_mode(how: EvalOptions | AgentSetup) -> str:
    """Which reset a replay asks (``--memory-reset``): "standalone" (the rewrites) or "needs_memory"."""
    return "standalone" if how.standalone else "needs_memory"


@dataclass
class SystemRun:
    replies: dict[str, Reply]  # the entries the system was asked about, in entry order
    usage_by_role: dict[str, dict[str, float]]  # the system's LLM usage (doceval's agent), whole run
    resumed: int
    stopped: bool = False  # --max-errors (or run.max_abandoned) exceeded: later entries were never asked
    n_errors: int = 0
    stop_reason: str | None = None


@dataclass(frozen=True)
class AnswerScores:
    per_entry: dict[str, np.ndarray]  # every answer metric of the registry, NaN where it does not apply
    verdicts: dict[str, JudgeRecord]  # judged entries only
    judging: JudgingOutcome | None  # None: no judge configured
    stopped: str | None = None  # why judging stopped early (the budget); the run is then incomplete
