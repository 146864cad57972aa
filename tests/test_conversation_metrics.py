"""Conversation metrics (doceval.scoring.conversations, docs/design.md 4.6) from summary entry rows, against
hand-computed expectations: means over turns, by position and needs_memory, per conversation, memory benefit
and leak, and intervals that resample whole conversations."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import doceval
from doceval.cli.common import print_headline
from doceval.scoring.conversations import (
    ClusterSettings,
    cluster_interval,
    conversation_metrics,
    first_failing_turn,
    memory_benefit,
    memory_leak,
)
from doceval.scoring.intervals import interval
from doceval.scoring.proportions import midp, wilson
from doceval.scoring.registry import METRIC_NAMES
from doceval.scoring.stats import bootstrap_means, cluster_bootstrap_ratios, sign_flip_interval

SETTINGS = ClusterSettings(n_boot=2000, seed=7, binary_method="midp")


def turn(
    conv: str | None, n: int, *, memory: bool = False, stage: str = "ok", **scores: float
) -> dict[str, Any]:
    """One summary entry row of a conversation's turn: the fields the module reads."""
    oos = "refused_correctly" in scores
    row: dict[str, Any] = {"id": f"{conv}#{n}", "out_of_scope": oos, "stage": stage,
                           "scores": {m: scores.get(m) for m in METRIC_NAMES}}  # fmt: skip
    if conv is not None:
        row.update(conversation=conv, turn=n, needs_memory=memory)
    return row


# c1: fails at turn 2; c2: all correct (turn 2 out of scope, refused); c3: fails at turn 1, has a turn 4.
ROWS = [
    turn("c1", 1, hit_rate=1.0),
    turn("c1", 2, memory=True, stage="relevant_not_in_top_k", hit_rate=0.0),
    turn("c1", 3, memory=True, hit_rate=1.0),
    turn("c2", 1, hit_rate=1.0),
    turn("c2", 2, stage="correct_refusal", refused_correctly=1.0),
    turn("c3", 1, stage="relevant_not_in_top_k", hit_rate=0.0),
    turn("c3", 2, memory=True, hit_rate=1.0),
    turn("c3", 3, hit_rate=1.0),
    turn("c3", 4, stage="relevant_not_in_top_k", hit_rate=0.0),
    turn(None, 1, stage="relevant_not_in_top_k", hit_rate=0.0),  # a single question: ignored
]


def test_every_metric_over_turns_by_position_and_by_needs_memory() -> None:
    block = conversation_metrics(ROWS, SETTINGS)
    assert block is not None
    assert (block["n_conversations"], block["n_turns"], block["n_needs_memory"]) == (3, 9, 3)
    turns = block["turns"]
    # The turn-weighted mean (5 of 8 scored turns), not the mean of the conversations' means.
    assert turns["hit_rate"] == pytest.approx(5 / 8)
    assert turns["counts"]["n_hit_rate"] == 8
    assert turns["refused_correctly"] == 1.0 and turns["counts"]["n_refused_correctly"] == 1
    # A metric nothing measured is null, never 0.
    assert turns["answer_accuracy"] is None and turns["ci95"]["answer_accuracy"] is None
    pos = block["by_position"]
    assert list(pos) == ["1", "2", "3+"]
    assert [pos[p]["hit_rate"] for p in pos] == pytest.approx([2 / 3, 1 / 2, 2 / 3])
    assert [pos[p]["n_turns"] for p in pos] == [3, 3, 3]
    mem = block["by_needs_memory"]
    assert mem["true"]["hit_rate"] == pytest.approx(2 / 3) and mem["true"]["n_turns"] == 3
    assert mem["false"]["hit_rate"] == pytest.approx(3 / 5) and mem["false"]["n_turns"] == 6
    # A breakdown measured on fewer than 10 turns states it instead of printing an interval.
    assert "hit_rate" in pos["1"]["too_few"] and pos["1"]["ci95"]["hit_rate"] is None


def test_three_conversations_get_the_wilson_interval_with_n_the_number_of_conversations() -> None:
    block = conversation_metrics(ROWS, SETTINGS)
    assert block is not None
    assert block["turns"]["ci_method"]["hit_rate"] == "cluster-wilson-bounded"
    assert block["turns"]["ci95"]["hit_rate"] == pytest.approx(list(wilson(5 / 8 * 3, 3)))
    assert block["intervals"] == {"unit": "conversation", "method": "cluster-bca",
                                  "fallback": "cluster-wilson-bounded", "paired": "cluster-sign-flip",
                                  "bootstrap": 2000, "seed": 7}  # fmt: skip


def test_per_conversation_all_turns_correct_and_first_failing_turn() -> None:
    block = conversation_metrics(ROWS, SETTINGS)
    assert block is not None
    per = block["per_conversation"]
    assert per["all_turns_correct"] == pytest.approx(1 / 3)
    assert (per["n_conversations"], per["n_measured"], per["n_not_measured"]) == (3, 3, 0)
    assert per["first_failing_turn"] == {"1": 1, "2": 1, "none": 1}
    # Conversations are independent of one another: the summary's binary interval over 1 of 3.
    assert per["ci95"] == pytest.approx(list(midp(1, 3))) and per["ci_method"] == "midp"


def test_first_failing_turn_reads_turns_in_order_and_a_system_error_is_not_a_failure() -> None:
    later_fail = [turn("c", 3, stage="judged_incorrect"), turn("c", 1, stage="system_error"), turn("c", 2)]
    assert first_failing_turn(later_fail) == 3
    assert first_failing_turn([turn("c", 1, stage="system_error"), turn("c", 2)]) == "not_measured"
    assert first_failing_turn([turn("c", 1), turn("c", 2, stage="correct_refusal")]) is None
    rows = [
        turn("a", 1),
        turn("a", 2, stage="system_error"),
        turn("b", 1),
        turn("b", 2, stage="router_refused"),
    ]
    per = conversation_metrics(rows, SETTINGS)["per_conversation"]  # type: ignore[index]
    # The unmeasured conversation leaves the population instead of counting as failed.
    assert (per["all_turns_correct"], per["n_measured"], per["n_not_measured"]) == (0.0, 1, 1)
    assert per["first_failing_turn"] == {"2": 1, "none": 0}


def test_a_single_question_run_gains_no_block() -> None:
    assert conversation_metrics([turn(None, 1, hit_rate=1.0)], SETTINGS) is None


def _clustered(n_conv: int, turns_each: int) -> list[np.ndarray]:
    # Half the conversations right on every turn, half wrong on every turn: perfectly correlated turns.
    return [np.full(turns_each, 1.0 if i % 2 else 0.0) for i in range(n_conv)]


def test_the_cluster_bootstrap_moves_all_turns_of_a_conversation_together() -> None:
    clusters = _clustered(12, 3)
    sums = np.array([c.sum() for c in clusters])
    counts = np.array([float(c.size) for c in clusters])
    ratios = cluster_bootstrap_ratios(sums, counts, 500, np.random.default_rng(0))
    # Whole conversations drawn: every resampled mean is (conversations right) / 12.
    assert np.allclose(ratios * 12, np.round(ratios * 12))
    # Drawing turns one by one would give means in steps of 1/36: the check above can fail.
    turn_means = bootstrap_means(np.concatenate(clusters), 500, np.random.default_rng(0))
    assert not np.allclose(turn_means * 12, np.round(turn_means * 12))


def test_the_cluster_interval_is_wider_than_one_that_treats_turns_as_independent() -> None:
    clusters = _clustered(12, 5)
    ci, method = cluster_interval(clusters, SETTINGS)
    assert method == "cluster-bca" and ci is not None
    independent = interval(np.concatenate(clusters), binary_method="midp")
    assert independent is not None
    assert ci[0] < 0.5 < ci[1]
    assert ci[1] - ci[0] > 1.5 * (independent.hi - independent.lo)


def test_the_same_seed_gives_the_same_interval_and_a_summary_supplies_it() -> None:
    summary = {"metrics": {"intervals": {"bootstrap": 300, "seed": 11, "binary": "wilson"}}}
    settings = ClusterSettings.of_summary(summary)
    assert settings == ClusterSettings(n_boot=300, seed=11, binary_method="wilson")
    uneven = [np.array([1.0, 0.0, 1.0]), *_clustered(11, 2)]
    assert cluster_interval(uneven, settings) == cluster_interval(uneven, settings)
    assert cluster_interval(uneven, settings)[1] == "cluster-bca"


WITH_MEMORY = [
    turn("a", 1, hit_rate=1.0),
    turn("a", 2, memory=True, hit_rate=1.0, version_correctness=1.0),
    turn("a", 3, memory=True, hit_rate=1.0, version_correctness=1.0),
    turn("b", 1, hit_rate=0.0),
    turn("b", 2, memory=True, hit_rate=0.0, version_correctness=0.0),
    turn("b", 3, memory=True, refused_correctly=1.0),
    turn("b", 4, memory=True, hit_rate=1.0),  # not in the other replay: unpaired, left out
]
MEMORY_RESET = [
    turn("a", 1, hit_rate=0.0),  # turn 1 needs no memory: not part of the benefit
    turn("a", 2, memory=True, hit_rate=0.0, version_correctness=0.0),
    turn("a", 3, memory=True, hit_rate=1.0, version_correctness=0.0),
    turn("b", 1, hit_rate=0.0),
    turn("b", 2, memory=True, hit_rate=0.0, version_correctness=0.0),
    turn("b", 3, memory=True, refused_correctly=0.0),
]


def test_memory_benefit_on_needs_memory_turns_paired_by_turn_id() -> None:
    benefit = memory_benefit(WITH_MEMORY, MEMORY_RESET, SETTINGS)
    assert list(benefit) == ["hit_rate", "refused_correctly", "version_correctness", "answer_accuracy"]
    hit = benefit["hit_rate"]
    assert (hit["with_memory"], hit["memory_reset"]) == pytest.approx((2 / 3, 1 / 3))
    assert hit["benefit"] == pytest.approx(1 / 3)
    assert (hit["n_turns"], hit["n_conversations"]) == (3, 2)
    # Differences [1, 0, 0]: one conversation of two differs, too few for an interval; the row says why.
    assert (hit["ci95"], hit["ci_method"]) == (None, None)
    assert hit["ci_note"] == "too few differing conversations (n=1)"
    assert benefit["version_correctness"]["benefit"] == pytest.approx(2 / 3)
    assert benefit["refused_correctly"]["benefit"] == 1.0 and benefit["refused_correctly"]["n_turns"] == 1
    # Not judged in either replay: null, not 0.
    accuracy = benefit["answer_accuracy"]
    assert (accuracy["benefit"], accuracy["ci95"], accuracy["n_turns"]) == (None, None, 0)


def test_memory_leak_on_turns_that_need_no_memory_is_isolated_minus_warm() -> None:
    isolated = [turn("a", 1, hit_rate=1.0), turn("a", 2, memory=True, hit_rate=1.0), turn("b", 1, hit_rate=1.0),
                turn("b", 2, stage="correct_refusal", refused_correctly=1.0)]  # fmt: skip
    warm = [turn("a", 1, hit_rate=1.0), turn("a", 2, memory=True, hit_rate=0.0), turn("b", 1, hit_rate=0.0),
            turn("b", 2, stage="hallucinated_out_of_scope", refused_correctly=0.0)]  # fmt: skip
    leak = memory_leak(isolated, warm, SETTINGS)
    # a#2 needs memory: not a leak turn. hit_rate over a#1, b#1: (1 + 1)/2 - (1 + 0)/2.
    assert (leak["hit_rate"]["isolated"], leak["hit_rate"]["warm_memory"]) == (1.0, 0.5)
    assert leak["hit_rate"]["leak"] == 0.5 and leak["hit_rate"]["n_turns"] == 2
    assert leak["refused_correctly"]["leak"] == 1.0 and leak["refused_correctly"]["n_conversations"] == 1


def test_paired_benefit_over_many_conversations_gets_the_sign_flip_interval_over_conversations() -> None:
    with_memory, reset = [], []
    for i in range(14):
        helped = i % 3 != 0  # memory helps both follow-ups of two conversations in three
        for n in (2, 3):
            with_memory.append(turn(f"c{i}", n, memory=True, hit_rate=1.0 if helped else 0.0))
            reset.append(turn(f"c{i}", n, memory=True, hit_rate=0.0))
    hit = memory_benefit(with_memory, reset, SETTINGS)["hit_rate"]
    assert hit["benefit"] == pytest.approx(9 / 14) and hit["ci_method"] == "cluster-sign-flip"
    assert hit["ci95"][0] < 9 / 14 < hit["ci95"][1] and hit["ci_note"] is None
    # 14 conversations, each summing its two turns: the flips are drawn (2**14 > 4,096), seeded.
    sums, counts = np.array([2.0 if i % 3 else 0.0 for i in range(14)]), np.full(14, 2.0)
    assert hit["ci95"] == pytest.approx(list(sign_flip_interval(sums, counts, n_flips=2000, seed=7)[0]))
    assert (hit["n_turns"], hit["n_conversations"]) == (28, 14)


# ------------------------------------------------------------------------------- summary and headline

DOCS = {"D1": "late fees are five dollars per day", "D2": "returns are accepted within thirty days"}


def overlap(question: str, k: int) -> list[tuple[str, float]]:
    words = set(question.split())
    scored = [(d, float(len(words & set(t.split())))) for d, t in DOCS.items()]
    return [(d, s) for d, s in sorted(scored, key=lambda x: -x[1]) if s >= 2][:k]


@pytest.fixture
def summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)  # a user's own folder: no conf/, no corpus
    rows = [("q1", "how much are late fees", ["D1"]), ("q2", "when are returns accepted", ["D2"]),
            ("q3", "do you sell pizza", [])]  # fmt: skip
    golden = [{"id": i, "question": q, "relevant_ids": rel, "reference_answer": "x" if rel else "", "out_of_scope": not rel,
               "expected_apis": [], "forbidden_apis": [], "split": None, "library": "shop", "version": "1.0",
               "kind": "lookup" if rel else "off_topic"} for i, q, rel in rows]  # fmt: skip
    path = tmp_path / "golden.json"
    path.write_text(json.dumps(golden), encoding="utf-8")
    return dict(doceval.evaluate(path, retriever=overlap, k=2))


def _headline(summary: dict[str, Any]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_headline(summary)
    return out.getvalue()


def test_a_single_question_summary_gains_no_key(summary: dict[str, Any]) -> None:
    assert "conversations" not in summary["metrics"]
    assert not {"conversation", "turn", "needs_memory"} & {key for e in summary["entries"] for key in e}
    assert "conversations=" not in _headline(summary)


def test_the_headline_prints_the_conversation_block_when_present(summary: dict[str, Any]) -> None:
    # The run's real rows, read as the three turns of one conversation.
    for n, entry in enumerate(summary["entries"], start=1):
        entry.update(conversation="conv-1", turn=n, needs_memory=n > 1)
    block = conversation_metrics(summary["entries"], ClusterSettings.of_summary(summary))
    assert block is not None
    summary["metrics"]["conversations"] = block
    lines = _headline(summary).splitlines()
    start = lines.index("conversations=1 turns=3 needs_memory=2 (intervals resample whole conversations)")
    header = lines[start + 1].split()
    assert header == ["metric", "turns", "95%", "CI", "turn", "1", "turn", "2", "turn", "3+", "memory=no",
                      "memory=yes"]  # fmt: skip
    hit = next(line for line in lines[start:] if line.startswith("hit_rate@2"))
    lo, hi = wilson(1.0, 1)
    assert hit.split() == ["hit_rate@2", "1.0000", f"[{lo:.3f},", f"{hi:.3f}]", "1.0000", "1.0000", "n/a",
                           "1.0000", "1.0000"]  # fmt: skip
    accuracy = next(line for line in lines[start:] if line.startswith("answer_accuracy"))
    assert accuracy.split()[1:] == ["not", "measured"]
    # The answers' text is unknown (a retriever function's ids): no turn could be checked, so no conversation
    # is counted right or wrong.
    assert lines[-1] == "all_turns_correct=not measured (n=0, not measured=1) first_failing_turn none:0"
    # Once the turns are checked, the conversation counts, with its interval (mid-P over 1 of 1).
    for entry in summary["entries"]:
        entry["stage"] = "correct_refusal" if entry["out_of_scope"] else "ok"
    summary["metrics"]["conversations"] = conversation_metrics(
        summary["entries"], ClusterSettings.of_summary(summary)
    )
    lo, hi = midp(1, 1)
    assert _headline(summary).splitlines()[-1] == (
        f"all_turns_correct=1.0000 [{lo:.3f}, {hi:.3f}] (n=1) first_failing_turn none:1"
    )
