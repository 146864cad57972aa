"""The typed run summary (issue 44 M1, docs/design.md section 4.1): built from a summary's JSON object it gives
that object back exactly (key order included), so the files the pipeline writes do not change; its typed fields
read what readers decide on; older summaries (0.1.0's shape) still load; ``doceval.Summary`` stays a dict users
index and ``json.dump`` with the typed summary under it."""

from __future__ import annotations

import copy
import gzip
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import summary_reference

import doceval
from doceval.summary import Summary

ROOT = Path(__file__).resolve().parents[1]
# The pipeline's own summaries where this checkout has run it (dvc repro), beside the pinned headline references.
PIPELINE_SUMMARIES = sorted((ROOT / "eval").glob("**/summary.json"))


def _reference(fixture: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress((summary_reference.FOLDER / fixture).read_bytes()))
    return data


def _round_trip(data: dict[str, Any]) -> None:
    typed = Summary.from_mapping(data)
    # Not sort_keys: the order the pipeline wrote is part of what must not change.
    assert json.dumps(typed.to_dict(), ensure_ascii=False) == json.dumps(data, ensure_ascii=False)


@pytest.mark.parametrize("fixture", sorted(summary_reference.SUMMARIES.values()))
def test_the_headline_summaries_round_trip_exactly(fixture: str) -> None:
    _round_trip(_reference(fixture))


@pytest.mark.parametrize(
    "path", PIPELINE_SUMMARIES, ids=[str(p.relative_to(ROOT)) for p in PIPELINE_SUMMARIES]
)
def test_the_pipelines_summaries_round_trip_exactly(path: Path) -> None:
    _round_trip(json.loads(path.read_text(encoding="utf-8")))


def test_the_headline_summary_reads_by_attribute() -> None:
    data = _reference("summary.json.gz")
    typed = Summary.from_mapping(data)
    recorded = data["config"]
    assert typed.settings.split == recorded["split"] and typed.settings.k == recorded["k"]
    assert typed.settings.floors.source == recorded["floors"]["source"]
    assert typed.settings.floors.calibrated is recorded["floors"]["source"].startswith("calibrated")
    assert typed.settings.floors.global_floor == recorded["floors"]["global"]
    assert typed.settings.floors.per_library == recorded["floors"]["per_library"]
    assert typed.settings.golden.md5 == recorded["golden"]["md5"]
    assert typed.settings.judge_id == recorded["judge_id"]
    assert typed.metrics.value("hit_rate") == data["metrics"]["hit_rate"]
    assert typed.metrics.values["hit_rate"].ci95 == tuple(data["metrics"]["ci95"]["hit_rate"])
    # Not measured stays None, never 0.
    assert (
        typed.metrics.value("answer_accuracy") is None
        and not typed.metrics.values["answer_accuracy"].measured
    )
    assert typed.entry_ids == tuple(e["id"] for e in data["entries"])
    assert typed.entries[0].scores == data["entries"][0]["scores"]
    assert typed.complete is data["complete"] and typed.incomplete is None


def test_the_typed_summary_does_not_follow_later_changes_to_its_source() -> None:
    data = _reference("summary.json.gz")
    typed = Summary.from_mapping(data)
    data["config"]["k"] = 99
    data["metrics"]["hit_rate"] = 0.0
    assert typed.settings.k != 99 and typed.to_dict()["config"]["k"] != 99
    assert typed.metrics.value("hit_rate") != 0.0


# What doceval 0.1.0 wrote (src/doceval/harness/evaluate.py at 231c280): no "complete", no system, judge_id,
# cutoffs or entry stages; floors without their signal.
SUMMARY_0_1_0: dict[str, Any] = {
    "metrics": {
        "hit_rate": 0.5,
        "recall": 0.5,
        "refused_correctly": None,
        "answer_accuracy": None,
        "counts": {"n_entries": 2, "n_in_scope": 2, "n_out_of_scope": 0},
        "ci95": {"hit_rate": [0.1, 0.9]},
        "by_library": {"click": {"hit_rate": 0.5}},
        "not_judged": True,
    },
    "config": {
        "split": "test",
        "k": 5,
        "limit": None,
        "retriever": {"name": "bm25"},
        "floors": {"global": 0.2, "per_library": {"click": 0.3}, "source": "config"},
        "answerer": {"name": "extractive"},
        "judge": {"name": "none"},
        "memory": {"isolate": True},
        "golden": {"path": "data/golden/golden.jsonl", "md5": "0" * 32},
        "candidates": {"candidates_k": 50, "index_hash": "abc", "corpus_hash": "def", "live": False},
        "corpus_hash": "def",
        "run_key": "k1",
        "usage": {"by_role": {}, "this_invocation": {}, "cache": {}, "resumed": 0},
        "provenance": {"git_commit": "231c280", "versions": {}},
    },
    "entries": [
        {"id": f"e{i}", "split": "test", "library": "click", "version": "8.1.7", "kind": "lookup",
         "question": "q", "out_of_scope": False, "relevant_ids": ["d1"], "retrieved": [["d1", 0.9]],
         "refused": False, "refusal_reason": None, "answer": "a", "verdict": None, "verdict_reason": None,
         "judge_error": None, "memory_used": False, "scores": {"hit_rate": float(i == 0), "recall": float(i == 0)}}
        for i in range(2)
    ],
}  # fmt: skip


def test_a_summary_shaped_like_0_1_0_loads(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps(SUMMARY_0_1_0), encoding="utf-8")
    loaded = doceval.load_summary(path)
    assert json.loads(json.dumps(loaded)) == SUMMARY_0_1_0  # json.dump it: nothing added, nothing lost
    assert (
        loaded.complete is True and loaded.typed.incomplete is None
    )  # no key: an older run counts as complete
    settings = loaded.settings
    assert (settings.split, settings.k, settings.name, settings.judge_id) == ("test", 5, None, None)
    assert settings.system == {} and settings.floors.signal is None and not settings.floors.calibrated
    assert settings.floors.per_library == {"click": 0.3} and settings.golden.corpus_pins is None
    assert settings.candidates.candidates_k == 50 and settings.git_commit == "231c280"
    assert loaded.typed.metrics.cutoffs == {} and loaded.typed.metrics.value("mrr") is None
    assert [e.stage for e in loaded.typed.entries] == [None, None]
    assert loaded.typed.entries[1].retrieved_ids == ("d1",)


def test_doceval_summary_is_a_read_only_mapping_over_the_typed_summary() -> None:
    data = _reference("conversations.json.gz")
    summary = doceval.Summary(data)
    assert summary["metrics"] == data["metrics"] and summary.metrics == data["metrics"]
    assert json.dumps(summary) == json.dumps(data)  # json.dump it, key order included
    assert summary.typed.settings is summary.settings and summary.settings.k == data["config"]["k"]
    assert summary.typed.metrics.conversations == data["metrics"]["conversations"]
    with pytest.raises(TypeError, match="read-only"):
        summary["complete"] = False
    summary.notes = ["note: x"]
    for other in (copy.copy(summary), copy.deepcopy(summary), pickle.loads(pickle.dumps(summary))):
        assert other == summary and other.notes == ["note: x"] and other.settings == summary.settings


def test_an_incomplete_run_says_why_by_attribute() -> None:
    stopped = {**SUMMARY_0_1_0, "complete": False,
               "incomplete": {"reason": "budget", "entries_scored": 1, "entries_in_split": 2}}  # fmt: skip
    typed = Summary.from_mapping(stopped)
    assert typed.complete is False and typed.incomplete is not None
    assert (typed.incomplete.reason, typed.incomplete.entries_scored, typed.incomplete.entries_in_split) == (
        "budget",
        1,
        2,
    )
    assert list(typed.to_dict()) == ["metrics", "config", "entries", "complete", "incomplete"]


def test_the_conversations_stage_adds_its_measures_to_a_new_summary() -> None:
    data = _reference("conversations.json.gz")
    block = data["metrics"]["conversations"]
    measures = {k: block[k] for k in ("memory_benefit", "memory_leak", "replays") if k in block}
    assert len(measures) == 3  # the pinned conversations run holds them
    held = {k: v for k, v in block.items() if k not in measures}
    before = {**data, "metrics": {**data["metrics"], "conversations": held}}
    typed = Summary.from_mapping(before)
    added = typed.with_conversation_measures(measures, complete=False)
    # The block gains the measures after what it held, in their order; the rest of the file is as it was.
    assert list(added.to_dict()["metrics"]["conversations"]) == [*held, *measures]
    assert added.complete is False and list(added.to_dict()) == list(before)
    assert added.metrics.conversations is not None and added.metrics.conversations["memory_benefit"] == (
        measures.get("memory_benefit")
    )
    # The summary it came from is left as it was (frozen), and a run without conversations is refused.
    assert "memory_benefit" not in (typed.metrics.conversations or {}) and typed.complete is data["complete"]
    with pytest.raises(ValueError, match="no conversations block"):
        Summary.from_mapping(_reference("summary.json.gz")).with_conversation_measures({}, complete=True)


def test_what_readers_decide_on_reads_by_attribute() -> None:
    data = _reference("summary.json.gz")
    metrics = {**data["metrics"], "not_measured": {"answer_accuracy": "ids only"}}
    typed = Summary.from_mapping(
        {**data, "metrics": metrics, "repeats": {"n": 2}, "entries_source": "traces of run 0"}
    )
    assert typed.metrics.not_measured == {"answer_accuracy": "ids only"}
    assert typed.metrics.intervals == data["metrics"]["intervals"]
    assert typed.repeats == {"n": 2} and typed.entries_source == "traces of run 0"
    assert typed.rows == data["entries"] and [e.scores for e in typed.entries] == [
        e["scores"] for e in data["entries"]
    ]
    plain = Summary.from_mapping(data)
    assert plain.repeats is None and plain.entries_source is None and plain.metrics.not_measured == {}
