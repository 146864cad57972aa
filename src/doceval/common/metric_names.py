"""The metrics' names and properties, declared once and numpy-free, so the configuration can validate a gate
(:mod:`doceval.config.schema`) without loading the scorers: each :class:`MetricInfo` names its population (which
entries it is a mean over), its direction, whether the cut-off k applies and the display subsets it appears in
(``tags``). :mod:`doceval.scoring.registry` pairs each with its per-entry function of the same name in
:mod:`doceval.scoring.metrics`; adding a metric is one entry here plus that function (docs/design.md section 4
holds the definitions).

The flat names of a summary's conversation figures (``metrics.conversations``, doceval.scoring.conversations),
one naming for the MLflow run metrics, the gate's thresholds and ``doceval history``:

- ``conversations.<metric>``: every metric over all turns;
- ``conversations.turn1.<metric>``, ``conversations.turn2.<metric>``, ``conversations.turn3_plus.<metric>``:
  by turn position (1, 2, 3+);
- ``conversations.needs_memory.<metric>``, ``conversations.no_memory_needed.<metric>``: by ``needs_memory``;
- ``conversations.all_turns_correct``: the share of conversations with every turn correct;
- ``conversations.memory_benefit.<metric>``, ``conversations.standalone_ceiling.<metric>``,
  ``conversations.memory_recovery.<metric>``, ``conversations.memory_leak.<metric>``: the memory figures
  (recovery: benefit / ceiling; positive leak: memory from other conversations made the turn worse, so lower is
  better).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Population = Literal["in_scope", "out_of_scope", "judged"]
Family = Literal["retrieval", "answer"]

# Display subsets (a tag -> where the subset is shown). A metric's tag carries its place in that subset, so
# subsets whose order predates the registry keep it; equal places fall back to registry order.
TAGS: dict[str, str] = {
    "headline": "the run's description in MLflow (doceval.tracking.shaping.headline_line)",
    "sweep": "the sweep table and points.csv columns (doceval.app.sweep)",
    "short": "the two a floor trades off, where space is short: the sweep plot, a sweep point's line, "
    "calibrate's printed line",
    "history": "`doceval history` without --metric",
    "ann": "ANN vs exact (doceval.stages.ann)",
    "floor_curve": "a floor sweep's curves: floors.json and the trade-off (doceval.harness.floor_search.sweep)",
    "curve_csv": "eval/calibration/curves/*.csv columns, for `dvc plots`",
    "tradeoff_curve": "the refusal trade-off's curves (doceval.harness.tradeoff)",
    "tradeoff_effect": "per-library floors against the global floor (eval/tradeoff)",
    "flaky": "the per-entry outcomes compared across `eval --repeats` (doceval.harness.repeats)",
    "answer_text": "the metrics that read the answer's text: not measured when doceval's answerer cannot know "
    "the text of what a user's retriever returned (doceval.harness.evaluate.answer_text_unknown)",
    "memory": "the memory benefit and memory leak of conversations (doceval.scoring.conversations)",
    "graded": "the metrics at grade >= 1: they repeat their grade-2 rows unless the judgments have a grade 1 and "
    "relevance.threshold is 2, so tables show them only then (doceval.results.summaries.shown_metrics)",
}


@dataclass(frozen=True)
class MetricInfo:
    name: str  # the key in summaries, metrics.json, MLflow and the gate config
    family: Family  # retrieval: from the ranked list after floors and k; answer: from the system's answer
    population: Population  # the entries it is a mean over (scope always from the label)
    higher_is_better: bool
    at_k: bool  # the cut-off k applies (reported as NAME@k)
    description: str
    # display subset (a key of TAGS) -> the metric's place in it
    tags: Mapping[str, int] = field(default_factory=dict, hash=False)

    def label(self, k: int | None) -> str:
        return f"{self.name}@{k}" if self.at_k and k is not None else self.name


METRICS: tuple[MetricInfo, ...] = (
    MetricInfo(
        "hit_rate",
        "retrieval",
        "in_scope",
        True,
        True,
        "1 if a relevant document is in R",
        tags={
            "headline": 1,
            "sweep": 1,
            "short": 1,
            "history": 1,
            "ann": 1,
            "floor_curve": 1,
            "curve_csv": 1,
            "tradeoff_curve": 3,
            "tradeoff_effect": 1,
            "flaky": 2,
            "memory": 1,
        },
    ),
    MetricInfo(
        "recall",
        "retrieval",
        "in_scope",
        True,
        True,
        "|R ∩ relevant| / |relevant|",
        tags={"headline": 2, "sweep": 2, "ann": 2, "floor_curve": 2, "tradeoff_effect": 2},
    ),
    MetricInfo(
        "mrr",
        "retrieval",
        "in_scope",
        True,
        True,
        "1/rank of the first relevant document in R",
        tags={"headline": 3, "sweep": 3, "ann": 3, "floor_curve": 3, "curve_csv": 3, "tradeoff_effect": 3},
    ),
    MetricInfo(
        "ndcg",
        "retrieval",
        "in_scope",
        True,
        True,
        "graded-gain nDCG over R (grade 2, 1, 0)",
        tags={"ann": 4, "floor_curve": 4},
    ),
    MetricInfo(
        "hit_rate_rel1", "retrieval", "in_scope", True, True, "hit_rate at grade >= 1", tags={"graded": 1}
    ),
    MetricInfo(
        "recall_rel1", "retrieval", "in_scope", True, True, "recall at grade >= 1", tags={"graded": 2}
    ),
    MetricInfo("mrr_rel1", "retrieval", "in_scope", True, True, "mrr at grade >= 1", tags={"graded": 3}),
    MetricInfo(
        "judged_share",
        "retrieval",
        "in_scope",
        True,
        True,
        "share of R the judgments cover (any grade): 1 by construction for a pooled system; precision@k "
        "without graded judgments (doceval.common.naming.judged_share_note)",
    ),
    MetricInfo(
        "refused_correctly",
        "retrieval",
        "out_of_scope",
        True,
        False,
        "1 if R is empty",
        tags={
            "headline": 4,
            "sweep": 4,
            "short": 2,
            "history": 2,
            "floor_curve": 5,
            "curve_csv": 2,
            "tradeoff_curve": 1,
            "tradeoff_effect": 4,
            "memory": 2,
        },
    ),
    MetricInfo(
        "answer_accuracy",
        "answer",
        "judged",
        True,
        False,
        "the judge's verdict (refused: 0)",
        tags={"headline": 6, "answer_text": 1, "memory": 4},
    ),
    MetricInfo(
        "version_correctness",
        "answer",
        "in_scope",
        True,
        False,
        "every expected API and no forbidden API in the answer (refused: 0)",
        tags={"sweep": 5, "flaky": 1, "answer_text": 2, "memory": 3},
    ),
    MetricInfo("refusal_rate", "answer", "out_of_scope", True, False, "1 if the system refused"),
    MetricInfo(
        "overrefusal_rate",
        "answer",
        "in_scope",
        False,
        False,
        "1 if the system refused",
        tags={
            "headline": 5,
            "sweep": 6,
            "history": 3,
            "floor_curve": 6,
            "tradeoff_curve": 2,
            "tradeoff_effect": 5,
        },
    ),
)

METRIC_NAMES: tuple[str, ...] = tuple(x.name for x in METRICS)
RETRIEVAL_NAMES: tuple[str, ...] = tuple(x.name for x in METRICS if x.family == "retrieval")
ANSWER_NAMES: tuple[str, ...] = tuple(x.name for x in METRICS if x.family == "answer")
AT_K_NAMES: tuple[str, ...] = tuple(x.name for x in METRICS if x.at_k)
LOWER_IS_BETTER: frozenset[str] = frozenset(x.name for x in METRICS if not x.higher_is_better)


def names(
    tag: str | None = None, *, family: Family | None = None, population: Population | None = None
) -> tuple[str, ...]:
    """The names of the metrics in display subset ``tag`` (by their place there, then registry order), of
    ``family`` and of ``population``; no filter: every metric in registry order. An unknown tag is a
    KeyError, so a typo cannot silently show an empty table."""
    if tag is not None and tag not in TAGS:
        raise KeyError(f"unknown metric tag {tag!r}; known: {', '.join(TAGS)}")
    chosen = [
        (x.tags.get(tag, 0) if tag is not None else 0, i, x.name)
        for i, x in enumerate(METRICS)
        if (tag is None or tag in x.tags)
        and (family is None or x.family == family)
        and (population is None or x.population == population)
    ]
    return tuple(name for _, _, name in sorted(chosen))


# ------------------------------------------------------------------------------ conversation figures

PREFIX = "conversations"
POSITION_GROUPS = {"1": "turn1", "2": "turn2", "3+": "turn3_plus"}  # by_position keys -> name part
MEMORY_GROUPS = {"true": "needs_memory", "false": "no_memory_needed"}  # by_needs_memory keys -> name part
# memory figure rows: the value is under "benefit" / "ceiling" / "recovery" / "leak" (scoring.conversations), or
# "value" in a block written as {metric: {"value", "ci95", "n"}}.
MEMORY_FIGURES = {
    "memory_benefit": "benefit",
    "standalone_ceiling": "ceiling",
    "memory_recovery": "recovery",
    "memory_leak": "leak",
}


def conversation_metric_names() -> tuple[str, ...]:
    """Every valid flat name, in display order (whatever a summary holds)."""
    out = [f"{PREFIX}.{m}" for m in METRIC_NAMES]
    for part in (*POSITION_GROUPS.values(), *MEMORY_GROUPS.values()):
        out += [f"{PREFIX}.{part}.{m}" for m in METRIC_NAMES]
    out.append(f"{PREFIX}.all_turns_correct")
    for figure in MEMORY_FIGURES:
        out += [f"{PREFIX}.{figure}.{m}" for m in names("memory")]
    return tuple(out)


def is_conversation_metric(name: str) -> bool:
    return name.startswith(PREFIX + ".")


def lower_is_better(name: str) -> bool:
    """A flat name's direction: its base metric's, and a memory leak is lower-is-better."""
    if name.startswith(f"{PREFIX}.memory_leak."):
        return True
    return name.rsplit(".", 1)[-1] in LOWER_IS_BETTER


def naming_help() -> str:
    """The conversation names as patterns, for an error that lists what is valid."""
    positions = "|".join(POSITION_GROUPS.values())
    memory = "|".join(MEMORY_GROUPS.values())
    figures = "|".join(MEMORY_FIGURES)
    return (
        f"on conversations: {PREFIX}.METRIC, {PREFIX}.{{{positions}}}.METRIC, {PREFIX}.{{{memory}}}.METRIC, "
        f"{PREFIX}.all_turns_correct, {PREFIX}.{{{figures}}}.{{{'|'.join(names('memory'))}}}"
    )


def unknown_metric(with_conversations: bool) -> str:
    """What an error about an unknown metric name adds: the valid names (and, where a conversation figure may be
    named too, their patterns)."""
    text = f"unknown metric; valid metrics: {', '.join(METRIC_NAMES)}"
    return f"{text}; {naming_help()}" if with_conversations else text
