"""Memory benefit and leak from real replays, and the conversations stage (issue 30, items 3 and 6): the replay
with memory reset before each needs_memory turn (a user's assistant gets a fresh session for that turn alone;
doceval's agent an empty memory, the starting pin and no query rewrite), and one summary holding the
conversations block with memory_benefit and memory_leak from the three replays, on a tiny bm25 corpus."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from tiny_project import make_tiny_project

from doceval.cli.main import main
from doceval.config.compose import compose
from doceval.config.schema import Config
from doceval.errors import UsageError
from doceval.harness.agents import run_external
from doceval.harness.candidate_cache import check_candidates
from doceval.harness.candidates import compute_candidates
from doceval.harness.evaluate import EvalOptions, evaluate
from doceval.harness.floors import Floors
from doceval.harness.plan import RunPlan
from doceval.inputs.corpus import load_corpus
from doceval.inputs.docs import Document, write_corpus
from doceval.inputs.golden import GoldenEntry
from doceval.seam import Probe
from doceval.stages import conversations
from doceval.system.docchat.conversation import follow_conversation, versions_by_library
from doceval.system.docchat.runner import run_agent
from doceval.system.docchat.types import MemoryItem, Passage, SearchResult
from doceval.system.external.agents import function_agent

CONF = Path(__file__).resolve().parents[1] / "conf"
START = ("pydantic", "2.8.2")
VERSIONS = versions_by_library(["pydantic@1.10.17", "pydantic@2.8.2"])

FUNCTION_AGENT = compose(["agent=function"]).agent  # the deadline and reply cap conf/ gives a callable


def turn(conversation: str, n: int, question: str, version: str, needs_memory: bool) -> GoldenEntry:
    """A conversation's turn as the golden parser flattens it (the contract of issue 30)."""
    return GoldenEntry(f"{conversation}#{n}", question, "pydantic", version, False, (), "", (), (), "test",
                       "how_to", conversation=conversation, turn=n, needs_memory=needs_memory,
                       start_pin=START)  # fmt: skip


ENTRIES = [
    turn("c1", 1, "How do I convert a model to a dict?", "2.8.2", False),
    # Memory surfaces earlier questions sharing words with this one (doceval.system.docchat.memory).
    turn("c1", 2, "and how do I convert a model to a dict in 1.10?", "1.10.17", True),
    turn("c1", 3, "which argument skips None when I convert a model to a dict there?", "1.10.17", True),
    turn("c2", 1, "How do I convert a model to a dict?", "2.8.2", False),
]
RESET = frozenset({"c1#2", "c1#3"})


def plan_of(entries: list[GoldenEntry]) -> RunPlan:
    return RunPlan("function", 5, None, "test", None, Path("golden.jsonl"), "md5", entries,
                   Floors(float("-inf"), {}, source="none"), None, 1, "score")  # fmt: skip


# --------------------------------------------------------------------------------- what a reset turn is asked


def test_a_reset_turn_is_retrieved_alone_at_the_starting_pin_and_is_no_context_of_later_turns() -> None:
    questions = ["How do I convert a model to a dict?", "and in 1.10?", "what about exclude_none?"]
    kept = follow_conversation(questions, START, VERSIONS, "previous")
    assert (kept[1].library, kept[1].version) == ("pydantic", "1.10.17")
    reset = follow_conversation(questions, START, VERSIONS, "previous", [False, True, False])
    # The reset turn: its own question, the starting pin (the tracker does not follow "1.10").
    assert (reset[1].query, reset[1].library, reset[1].version) == ("and in 1.10?", *START)
    # The next turn goes on in the conversation, which never saw the reset turn: its rewrite skips it.
    assert reset[2].query == f"{questions[0]} {questions[2]}"
    assert (reset[2].library, reset[2].version) == START


class Recorder:
    """A user's assistant as a function: records the session of every call."""

    def __init__(self) -> None:
        self.sessions: dict[str, str] = {}
        self.lock = threading.Lock()

    def __call__(self, question: str, library: str, version: str, session_id: str) -> dict[str, Any]:
        with self.lock:
            self.sessions[question] = session_id
        return {"answer": f"{library} {version}", "sources": [], "refused": False}


def test_function_assistant_gets_a_fresh_session_for_each_needs_memory_turn_alone() -> None:
    plan = plan_of(ENTRIES)
    out = run_external(plan.probes(), function_agent(Recorder(), FUNCTION_AGENT), progress=False,
                       conversation_of=plan.conversations(), reset_ids={"c1#2"})  # fmt: skip
    sessions = {i: r.session_id for i, r in out.responses.items()}
    assert sessions["c1#2"] not in {sessions["c1#1"], sessions["c1#3"], sessions["c2#1"]}
    assert sessions["c1#3"] == sessions["c1#1"]  # the conversation's session goes on afterwards
    assert sessions["c1#1"] != sessions["c2#1"]
    # Without a reset every turn of c1 shares one session (as before this replay existed).
    plain = run_external(plan.probes(), function_agent(Recorder(), FUNCTION_AGENT), progress=False,
                         conversation_of=plan.conversations())  # fmt: skip
    assert plain.responses["c1#2"].session_id == plain.responses["c1#1"].session_id


class MemoryAnswerer:
    """Answers with the probe's pin and records what memory surfaced for each question."""

    name = "memory-recorder"

    def __init__(self) -> None:
        self.seen: dict[str, list[str]] = {}

    def answer(
        self, probe: Probe, passages: list[Passage], memory: list[MemoryItem]
    ) -> tuple[str, bool, None]:
        self.seen[probe.id] = [m.question for m in memory]
        return f"{probe.library} {probe.version}: convert model dict", False, None


def always_found(probe: Probe) -> SearchResult:
    return SearchResult([Passage("pydantic@2.8.2:a", 1.0, "a\nconvert model dict")], False, None)


def test_doceval_agent_answers_a_reset_turn_with_an_empty_memory_and_keeps_the_conversations() -> None:
    plan = plan_of(ENTRIES)
    answerer = MemoryAnswerer()
    run_agent(plan.probes(), always_found, answerer, progress=False, conversation_of=plan.conversations(),
              reset_ids={"c1#2"})  # fmt: skip
    assert answerer.seen["c1#2"] == []
    # The reset turn's own answer is not in the conversation's memory; turn 1's still is.
    assert answerer.seen["c1#3"] == ["How do I convert a model to a dict?"]
    kept = MemoryAnswerer()
    run_agent(plan.probes(), always_found, kept, progress=False, conversation_of=plan.conversations())
    assert kept.seen["c1#2"] == ["How do I convert a model to a dict?"]


# --------------------------------------------------------------------------------- a tiny corpus, real replays

DOCS = {
    "pydantic@2.8.2": [
        ("pydantic.main.BaseModel.model_dump", "Convert a model to a dict with model_dump()."),
    ],
    "pydantic@1.10.17": [
        ("pydantic.main.BaseModel.dict", "Convert a model to a dict with dict(exclude_none=True)."),
    ],
}
DICT_1 = "pydantic@1.10.17:pydantic.main.BaseModel.dict"
DUMP_2 = "pydantic@2.8.2:pydantic.main.BaseModel.model_dump"


def golden_line(conversation: str, turns: list[tuple[str, str, str, bool]]) -> dict[str, Any]:
    """One conversation line of a golden set: (question, version, relevant id, needs_memory) per turn."""
    return {
        "id": conversation,
        "split": "test",
        "kind": "conversation",
        "turns": [
            {"question": q, "library": "pydantic", "version": v, "out_of_scope": False, "relevant_ids": [rel],
             "reference_answer": "Call it.", "expected_apis": [], "forbidden_apis": [],
             "kind": "follow_up_version_switch" if needs else "first_turn", "needs_memory": needs}
            for q, v, rel, needs in turns
        ],
    }  # fmt: skip


def conversation_lines() -> str:
    lines = [
        golden_line("conv-a", [("How do I convert a model to a dict?", "2.8.2", DUMP_2, False),
                               ("and in 1.10?", "1.10.17", DICT_1, True)]),
        golden_line("conv-b", [("How do I convert a model to a dict?", "2.8.2", DUMP_2, False),
                               ("and what about 1.10.17?", "1.10.17", DICT_1, True),
                               ("How do I convert a model to a dict in 2.8?", "2.8.2", DUMP_2, False)]),
    ]  # fmt: skip
    return "".join(json.dumps(line) + "\n" for line in lines)


def tiny_project(tmp_path: Path) -> Config:
    corpus_dir = tmp_path / "docs"
    docs = {pin: [Document(f"{pin}:{path}", *pin.split("@"), path, "function", text) for path, text in items]
            for pin, items in DOCS.items()}  # fmt: skip
    write_corpus(docs, corpus_dir, 1500, {})
    golden = tmp_path / "conversations.jsonl"
    golden.write_text(conversation_lines(), encoding="utf-8")
    return compose(["retriever=bm25", "floors=zero", "k=1", "bootstrap=200", "tracking.enabled=false",
                    f"paths.docs={corpus_dir}", f"paths.runs={tmp_path / 'runs'}", f"golden={golden}",
                    f"golden_conversations={golden}", f"paths.index={tmp_path / 'index'}",
                    f"paths.cache={tmp_path / 'cache'}", f"paths.eval={tmp_path / 'eval'}"],
                   conf_dir=CONF)  # fmt: skip


def test_the_reset_replay_is_another_run_asked_at_the_starting_pin(tmp_path: Path) -> None:
    cfg = tiny_project(tmp_path)
    options = EvalOptions(progress=False, golden=Path(cfg.golden_conversations))
    kept = evaluate(cfg, options)
    reset = evaluate(cfg, dataclasses.replace(options, memory_reset=True))
    kept_rows = {r.id: r.recorded for r in kept.entries}
    reset_rows = {r.id: r.recorded for r in reset.entries}
    # With memory "and in 1.10?" is followed to 1.10.17; reset, it is asked at the starting pin 2.8.2.
    assert kept_rows["conv-a#2"]["scores"]["hit_rate"] == 1.0
    assert reset_rows["conv-a#2"]["scores"]["hit_rate"] == 0.0
    assert kept_rows["conv-a#2"]["answer"].startswith("According to the pydantic 1.10.17 docs")
    # Alone, "and in 1.10?" shares no word with the 2.8.2 docs: nothing clears the floor, so it is refused.
    assert reset_rows["conv-a#2"]["answer"] is None and reset_rows["conv-a#2"]["refused"] is True
    assert reset.settings.memory == {"isolate": True, "reset": "needs_memory", "rewrite": "previous"}
    assert kept.settings.memory == {"isolate": True, "rewrite": "previous"}
    assert reset.settings.run_key != kept.settings.run_key
    plain = evaluate(
        dataclasses.replace(cfg, memory=dataclasses.replace(cfg.memory, rewrite="none")), options
    )
    assert plain.settings.memory == {"isolate": True, "rewrite": "none"}
    with pytest.raises(UsageError, match="--memory-reset needs_memory with warm memory"):
        evaluate(cfg, dataclasses.replace(options, memory_reset=True, warm_memory=True))


def test_a_cache_retrieved_without_the_reset_is_not_used_for_a_reset_run(tmp_path: Path) -> None:
    cfg = tiny_project(tmp_path)
    corpus = load_corpus(Path(cfg.paths.docs))
    cands = compute_candidates(cfg, corpus, ENTRIES, Path("golden.jsonl"), "md5", progress=False)
    check_candidates(cands, ENTRIES, "md5", cfg.retriever, 1, rewrite="previous")
    with pytest.raises(UsageError, match="--memory-reset"):
        check_candidates(cands, ENTRIES, "md5", cfg.retriever, 1, rewrite="previous", memory_reset=True)
    reset = compute_candidates(cfg, corpus, ENTRIES, Path("golden.jsonl"), "md5", progress=False,
                               memory_reset=True)  # fmt: skip
    assert reset.meta["memory_reset"] == "needs_memory"
    assert reset.ranked["c1#2"][0][0] == DUMP_2 and cands.ranked["c1#2"][0][0] == DICT_1


def test_the_stage_writes_one_summary_with_memory_benefit_and_leak_and_flat_metrics(tmp_path: Path) -> None:
    cfg = tiny_project(tmp_path)
    summary = conversations.run(cfg, progress=False)
    block = summary.metrics.conversations
    assert block is not None
    benefit, leak = block["memory_benefit"], block["memory_leak"]
    # Both needs_memory turns name 1.10: followed with memory (hit), asked at 2.8.2 when reset (miss).
    assert benefit["hit_rate"]["with_memory"] == 1.0 and benefit["hit_rate"]["memory_reset"] == 0.0
    assert benefit["hit_rate"]["benefit"] == 1.0 and benefit["hit_rate"]["n_turns"] == 2
    assert benefit["hit_rate"]["n_conversations"] == 2
    # Two conversations differ: too few for an interval, and every output says so instead of printing one.
    assert benefit["hit_rate"]["ci95"] is None
    assert benefit["hit_rate"]["ci_note"] == "too few differing conversations (n=2)"
    # The three turns that need no memory name their pin or start at it: warm memory changes no hit.
    assert leak["hit_rate"]["leak"] == 0.0 and leak["hit_rate"]["n_turns"] == 3
    assert benefit["answer_accuracy"]["benefit"] is None  # not judged: not measured, never 0
    assert block["replays"]["memory_reset"]["memory"] == {
        "isolate": True,
        "reset": "needs_memory",
        "rewrite": "previous",
    }
    assert block["replays"]["warm_memory"]["memory"] == {"isolate": False, "rewrite": "previous"}
    assert summary.complete is True
    written = json.loads((Path(cfg.paths.eval) / "conversations" / "summary.json").read_text())
    assert written["metrics"]["conversations"]["memory_benefit"] == json.loads(json.dumps(benefit))
    flat = json.loads((Path(cfg.paths.eval) / "conversations" / "metrics.json").read_text())
    assert (
        flat["conversations.memory_benefit.hit_rate"] == 1.0
        and flat["conversations.memory_leak.hit_rate"] == 0.0
    )
    assert "conversations.memory_benefit.hit_rate_ci_lo" not in flat
    assert flat["conversations.memory_benefit.hit_rate_ci_note"] == "too few differing conversations (n=2)"
    assert flat["conversations.all_turns_correct"] == block["per_conversation"]["all_turns_correct"]
    assert flat["conversations.hit_rate"] == 1.0 and flat["conversations.turn2.hit_rate"] == 1.0
    assert flat["conversations.memory_benefit.answer_accuracy"] is None
    assert not (Path(cfg.paths.eval) / "metrics.json").exists()  # the single-question metrics are untouched


# One single question over the tiny corpus (a golden set without conversations).
SINGLE_QUESTION = {"id": "q1", "question": "How do I convert a model to a dict?", "library": "pydantic",
                   "version": "2.8.2", "out_of_scope": False, "relevant_ids": [DUMP_2], "reference_answer": "Call it.",
                   "expected_apis": [], "forbidden_apis": [], "split": "test", "kind": "how_to"}  # fmt: skip


def test_the_stage_refuses_a_golden_set_without_conversations(tmp_path: Path) -> None:
    cfg = tiny_project(tmp_path)
    single = tmp_path / "single.jsonl"
    single.write_text(json.dumps(SINGLE_QUESTION) + "\n")
    with pytest.raises(UsageError, match="holds no conversation"):
        conversations.run(dataclasses.replace(cfg, golden_conversations=str(single)), progress=False)
    with pytest.raises(UsageError, match="set memory themselves"):
        conversations.replay_conversations(cfg, EvalOptions(progress=False, warm_memory=True))


OVERRIDES = ["retriever=bm25", "floors=zero", "k=1", "bootstrap=200", "tracking.enabled=false"]


def test_the_cli_flag_and_the_stage_command_on_a_tiny_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_tiny_project(tmp_path, {pin: list(items) for pin, items in DOCS.items()}, conversation_lines())
    (tmp_path / "data" / "golden" / "conversations.jsonl").write_text(conversation_lines(), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    eval_args = ["eval", "--no-track", "--quiet", "--golden", "data/golden/conversations.jsonl", *OVERRIDES]
    assert main([*eval_args, "--output", "reset.json", "--memory-reset", "needs_memory"]) == 0
    reset = json.loads(Path("reset.json").read_text())
    assert reset["config"]["memory"] == {"isolate": True, "reset": "needs_memory", "rewrite": "previous"}
    assert {r["id"]: r["scores"]["hit_rate"] for r in reset["entries"]}["conv-a#2"] == 0.0
    assert main([*eval_args, "--output", "both.json", "--memory-reset", "needs_memory", "--warm-memory"]) == 2
    # The DVC stage's command reads params.yaml, as `dvc repro` runs it.
    assert main(["params", *OVERRIDES]) == 0
    assert main(["conversations", "--quiet"]) == 0
    flat = json.loads(Path("eval/conversations/metrics.json").read_text())
    assert (
        flat["conversations.memory_benefit.hit_rate"] == 1.0
        and flat["n_conversations"] == 2
        and flat["n_turns"] == 5
    )
