"""Replaying conversations (issue 30, item 2): every probe of a conversation carries its starting pin, a user's
assistant gets one session id per conversation (a function here, and a real HTTP server on 127.0.0.1), doceval's
agent keeps one memory per conversation and follows "and in 1.10?" to the right pin, and a conversation
interrupted part-way is replayed from its first turn on resume, never counted twice."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_agent import running_agent

from doceval.config import schema
from doceval.config.compose import compose
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
from doceval.system.docchat.conversation import PinTracker, follow_conversation, versions_by_library
from doceval.system.docchat.runner import run_agent
from doceval.system.docchat.types import MemoryItem, Passage, SearchResult
from doceval.system.external.agents import function_agent, make_agent

CONF = Path(__file__).resolve().parents[1] / "conf"
VERSIONS = versions_by_library(
    ["pydantic@1.10.17", "pydantic@2.8.2", "sqlalchemy@1.4.52", "sqlalchemy@2.0.31"]
)

FUNCTION_AGENT = compose(["agent=function"]).agent  # the deadline and reply cap conf/ gives a callable


def entry(
    entry_id: str, question: str, library: str = "pydantic", version: str = "2.8.2", **kw: Any
) -> GoldenEntry:
    return GoldenEntry(entry_id, question, library, version, False, (), "", (), (), "test", "how_to", **kw)


def turn(
    conversation: str, n: int, question: str, library: str, version: str, start: tuple[str, str]
) -> GoldenEntry:
    """A conversation's turn as the golden parser flattens it (contract of issue 30)."""
    return dataclasses.replace(entry(f"{conversation}#{n}", question, library, version), conversation=conversation,
                               turn=n, needs_memory=n > 1, start_pin=start)  # fmt: skip


# Two conversations and a single question between them, in golden-set order. Turn 2 of c1 is labelled
# pydantic 1.10.17: its probe must still say 2.8.2 (the picker's pin), following it is the system's job.
START = ("pydantic", "2.8.2")
ENTRIES = [
    turn("c1", 1, "How do I convert a model to a dict?", "pydantic", "2.8.2", START),
    turn("c1", 2, "and in 1.10?", "pydantic", "1.10.17", START),
    turn("c1", 3, "how do I exclude a field from that dict?", "pydantic", "1.10.17", START),
    entry("single", "How do I validate an email?"),
    turn("c2", 1, "How do I open a session?", "sqlalchemy", "2.0.31", ("sqlalchemy", "2.0.31")),
    turn("c2", 2, "what about 1.4?", "sqlalchemy", "1.4.52", ("sqlalchemy", "2.0.31")),
]


def plan_of(entries: list[GoldenEntry], **kw: Any) -> RunPlan:
    return RunPlan("function", 5, None, "test", None, Path("golden.jsonl"), "md5", entries,
                   Floors(float("-inf"), {}, source="none"), None, 1, "score", **kw)  # fmt: skip


# --------------------------------------------------------------------------------- the pin tracker


def test_the_tracker_follows_a_named_version_or_library_and_keeps_the_pin_otherwise() -> None:
    tracker = PinTracker(("pydantic", "2.8.2"), VERSIONS)
    assert tracker.follow("and in 1.10?") == ("pydantic", "1.10.17")  # a version prefix of the corpus'
    assert tracker.follow("how do I make that field optional?") == ("pydantic", "1.10.17")  # carried
    assert tracker.follow("does it work on Python 3.11?") == (
        "pydantic",
        "1.10.17",
    )  # another product's version
    assert tracker.follow("and in 2.x?") == ("pydantic", "2.8.2")
    assert tracker.follow("and in 3.0?") == ("pydantic", "3.0")  # not indexed: the router will refuse it
    assert tracker.follow("what about sqlalchemy?") == ("sqlalchemy", "2.0.31")  # another library: its newest
    assert tracker.follow("and sqlalchemy 1.4?") == ("sqlalchemy", "1.4.52")


def test_the_rewrite_prepends_the_previous_question_and_turn_one_keeps_the_start_pin() -> None:
    questions = ["How do I convert a model to a dict?", "and in 1.10?"]
    previous = follow_conversation(questions, START, VERSIONS, "previous")
    assert [(q.query, q.library, q.version) for q in previous] == [
        ("How do I convert a model to a dict?", "pydantic", "2.8.2"),
        ("How do I convert a model to a dict? and in 1.10?", "pydantic", "1.10.17"),
    ]
    assert [q.query for q in follow_conversation(questions, START, VERSIONS, "none")] == questions


# --------------------------------------------------------------------------- a user's assistant


class Recorder:
    """A user's assistant as a function: records every call it gets, and answers with the session's turn count."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail_on = fail_on
        self.lock = threading.Lock()

    def __call__(self, question: str, library: str, version: str, session_id: str) -> dict[str, Any]:
        with self.lock:
            self.calls.append(
                {"question": question, "library": library, "version": version, "session": session_id}
            )
        if question == self.fail_on:
            raise RuntimeError("the assistant crashed")
        return {"answer": f"{library} {version}: {question}", "sources": [], "refused": False}


def test_function_assistant_gets_one_session_per_conversation_the_start_pin_and_turns_in_order() -> None:
    plan = plan_of(ENTRIES)
    recorder = Recorder()
    out = run_external(plan.probes(), function_agent(recorder, FUNCTION_AGENT), max_concurrency=4, progress=False,
                       conversation_of=plan.conversations())  # fmt: skip
    assert out.n_errors == 0 and list(out.responses) == [e.id for e in ENTRIES]
    # Every probe carries its conversation's starting pin, never the turn's label.
    pins = {c["question"]: (c["library"], c["version"]) for c in recorder.calls}
    assert pins["and in 1.10?"] == ("pydantic", "2.8.2") and pins["what about 1.4?"] == (
        "sqlalchemy",
        "2.0.31",
    )
    sessions = {e.id: out.responses[e.id].session_id for e in ENTRIES}
    assert sessions["c1#1"] == sessions["c1#2"] == sessions["c1#3"]
    assert sessions["c2#1"] == sessions["c2#2"]
    assert len({sessions["c1#1"], sessions["c2#1"], sessions["single"]}) == 3
    # Turns of one conversation are called in order, even with other conversations running concurrently.
    asked = [c["question"] for c in recorder.calls if c["session"] == sessions["c1#1"]]
    assert asked == [e.question for e in ENTRIES[:3]]


def test_warm_memory_keeps_one_session_for_the_run_in_golden_set_order() -> None:
    plan = plan_of(ENTRIES)
    recorder = Recorder()
    out = run_external(plan.probes(), function_agent(recorder, FUNCTION_AGENT), warm_memory=True, max_concurrency=4,
                       progress=False, conversation_of=plan.conversations())  # fmt: skip
    assert len({r.session_id for r in out.responses.values()}) == 1
    assert [c["question"] for c in recorder.calls] == [e.question for e in ENTRIES]


def test_http_assistant_gets_one_session_id_per_conversation_over_real_http() -> None:
    plan = plan_of(ENTRIES)
    base = compose(["agent=http"], conf_dir=CONF).agent
    assert isinstance(base, schema.AgentHttp)
    with running_agent() as server:
        cfg = dataclasses.replace(base, url=server.url, headers_env={}, timeout_s=5, max_retries=0)
        out = run_external(plan.probes(), make_agent(cfg), max_concurrency=3, progress=False,
                           conversation_of=plan.conversations())  # fmt: skip
        requests = list(server.requests)
    assert out.n_errors == 0
    by_question = {r["question"]: r for r in requests}
    assert len(requests) == len(ENTRIES)
    c1 = {by_question[e.question]["session_id"] for e in ENTRIES[:3]}
    c2 = {by_question[e.question]["session_id"] for e in ENTRIES[4:]}
    assert len(c1) == 1 and len(c2) == 1 and c1 != c2
    assert by_question["How do I validate an email?"]["session_id"] not in c1 | c2
    assert (by_question["and in 1.10?"]["library"], by_question["and in 1.10?"]["version"]) == START
    # In order on the wire: turn n of c1 reached the server after turn n-1.
    order = [r["question"] for r in requests if r["session_id"] in c1]
    assert order == [e.question for e in ENTRIES[:3]]


def test_an_interrupted_conversation_is_replayed_from_its_first_turn_in_a_new_session(tmp_path: Path) -> None:
    plan = plan_of(ENTRIES)
    journal = tmp_path / "journal.jsonl"
    first = run_external(plan.probes(), function_agent(Recorder(fail_on="and in 1.10?"), FUNCTION_AGENT), journal_path=journal,
                         max_concurrency=1, max_errors=0, progress=False,
                         conversation_of=plan.conversations())  # fmt: skip
    assert first.stopped and first.responses["c1#2"].error is not None
    assert "c1#3" not in first.responses  # the conversation stops where the run stopped
    old_session = first.responses["c1#1"].session_id
    recorder = Recorder()
    again = run_external(plan.probes(), function_agent(recorder, FUNCTION_AGENT), journal_path=journal, max_concurrency=1,
                         progress=False, conversation_of=plan.conversations())  # fmt: skip
    asked = [c["question"] for c in recorder.calls]
    # c1 whole again (its journaled turn 1 is dropped), then what was never asked; nothing twice.
    assert asked == [e.question for e in ENTRIES]
    assert again.resumed == 0 and again.n_errors == 0 and list(again.responses) == [e.id for e in ENTRIES]
    new_sessions = {again.responses[f"c1#{n}"].session_id for n in (1, 2, 3)}
    assert len(new_sessions) == 1 and old_session not in new_sessions
    # A third run resumes everything: whole conversations are kept.
    third = Recorder()
    done = run_external(plan.probes(), function_agent(third, FUNCTION_AGENT), journal_path=journal, progress=False,
                        conversation_of=plan.conversations())  # fmt: skip
    assert third.calls == [] and done.resumed == len(ENTRIES)


# --------------------------------------------------------------------------------- doceval's agent


class MemoryAnswerer:
    """Answers with the probe's pin and records what memory surfaced for each question."""

    name = "memory-recorder"

    def __init__(self, interrupt_on: str | None = None) -> None:
        self.seen: dict[str, list[str]] = {}
        self.interrupt_on = interrupt_on

    def answer(
        self, probe: Probe, passages: list[Passage], memory: list[MemoryItem]
    ) -> tuple[str, bool, None]:
        if probe.question == self.interrupt_on:
            raise KeyboardInterrupt
        self.seen[probe.question] = [m.question for m in memory]
        return f"{probe.library} {probe.version}: dict model field", False, None


def always_found(probe: Probe) -> SearchResult:
    return SearchResult([Passage("pydantic@2.8.2:a", 1.0, "a\nmodel dict field")], False, None)


def docchat_probes() -> tuple[list[Probe], dict[str, str]]:
    entries = [
        turn("c1", 1, "how do I dump a model to a dict", "pydantic", "2.8.2", START),
        turn("c1", 2, "and how do I dump a model field", "pydantic", "2.8.2", START),
        turn("c2", 1, "how do I dump a model to a dict", "pydantic", "2.8.2", START),
    ]
    plan = plan_of(entries)
    return plan.probes(), plan.conversations()


def test_agent_memory_is_kept_across_a_conversation_and_reset_between_conversations() -> None:
    probes, conversations = docchat_probes()
    answerer = MemoryAnswerer()
    out = run_agent(
        probes, always_found, answerer, max_concurrency=2, progress=False, conversation_of=conversations
    )
    assert out.records["c1#2"].memory_used == [
        "how do I dump a model to a dict"
    ]  # turn 1 of its conversation
    assert out.records["c2#1"].memory_used == []  # c1's answers never reach c2
    # Without conversations (every entry alone) memory is reset per entry, as before.
    alone = run_agent(probes, always_found, MemoryAnswerer(), progress=False)
    assert alone.records["c1#2"].memory_used == []


def test_agent_replays_an_interrupted_conversation_from_its_first_turn(tmp_path: Path) -> None:
    probes, conversations = docchat_probes()
    journal = tmp_path / "journal.jsonl"
    with pytest.raises(KeyboardInterrupt):  # killed between turn 1 and turn 2 of c1
        run_agent(probes, always_found, MemoryAnswerer(interrupt_on="and how do I dump a model field"),
                  journal_path=journal, progress=False, conversation_of=conversations)  # fmt: skip
    assert journal.read_text().count('"c1#1"') == 1
    answerer = MemoryAnswerer()
    out = run_agent(probes, always_found, answerer, journal_path=journal, progress=False,
                    conversation_of=conversations)  # fmt: skip
    # Turn 1 answered again, so turn 2 recalls it from the conversation's memory; each turn counted once.
    assert set(answerer.seen) == {"how do I dump a model to a dict", "and how do I dump a model field"}
    assert out.resumed == 0 and out.records["c1#2"].memory_used == ["how do I dump a model to a dict"]
    assert list(out.records) == ["c1#1", "c1#2", "c2#1"]


DOCS = {
    "pydantic@2.8.2": [
        ("pydantic.main.BaseModel.model_dump", "Convert a model to a dict with model_dump().")
    ],
    "pydantic@1.10.17": [("pydantic.main.BaseModel.dict", "Convert a model to a dict with dict().")],
}


def test_doceval_agent_answers_and_in_1_10_with_the_right_pin(tmp_path: Path) -> None:
    corpus_dir = tmp_path / "docs"
    docs = {pin: [Document(f"{pin}:{path}", *pin.split("@"), path, "function", text) for path, text in items]
            for pin, items in DOCS.items()}  # fmt: skip
    write_corpus(docs, corpus_dir, 1500, {})
    corpus = load_corpus(corpus_dir)
    cfg = compose(["retriever=bm25", f"paths.docs={corpus_dir}", f"paths.runs={tmp_path / 'runs'}",
                   f"paths.index={tmp_path / 'index'}", f"paths.cache={tmp_path / 'cache'}"], conf_dir=CONF)  # fmt: skip
    entries = [
        turn("c1", 1, "How do I convert a model to a dict?", "pydantic", "2.8.2", START),
        turn("c1", 2, "and in 1.10?", "pydantic", "1.10.17", START),
        turn("c1", 3, "and in 3.0?", "pydantic", "3.0", START),
    ]
    entries = [dataclasses.replace(e, relevant_ids=(f"{e.pin}:{DOCS[e.pin][0][0]}",)) if e.pin in DOCS else
               dataclasses.replace(e, out_of_scope=True) for e in entries]  # fmt: skip
    cands = compute_candidates(cfg, corpus, entries, Path("golden.jsonl"), "md5", progress=False)
    assert cands.meta["rewrite"] == "previous"
    plan = RunPlan("docchat", 1, None, "test", corpus, Path("golden.jsonl"), "md5", entries,
                   Floors(0.0, {}, source="cli"), cands, 1, "score", all_entries=entries)  # fmt: skip
    summary = evaluate(cfg, EvalOptions(progress=False, no_judge=True, run_dir=tmp_path / "run"), plan)
    rows = {row.id: row.recorded for row in summary.entries}
    assert cands.ranked["c1#2"][0][0] == "pydantic@1.10.17:pydantic.main.BaseModel.dict"
    assert rows["c1#2"]["answer"].startswith("According to the pydantic 1.10.17 docs")
    assert rows["c1#1"]["answer"].startswith("According to the pydantic 2.8.2 docs")
    # A follow-up to a version the corpus does not index is refused by the router, as the label wants.
    assert "router: pydantic 3.0 is not indexed" in str(rows["c1#3"]["refusal_reason"])
    # A cache built with another rewrite holds other candidates for the turns: loud, never silently reused.
    with pytest.raises(UsageError, match="memory.rewrite"):
        check_candidates(cands, entries, "md5", cfg.retriever, 1, rewrite="none")


def test_single_question_entries_keep_their_own_pin_and_query() -> None:
    single = entry("s1", "and in 1.10?")
    assert plan_of([single]).probes() == [Probe("s1", "and in 1.10?", "pydantic", "2.8.2")]
    assert plan_of([single]).conversations() == {}
