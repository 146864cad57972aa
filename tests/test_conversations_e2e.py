"""Conversations end to end through the command line (issue 30): a golden set holding conversations is parsed,
replayed by doceval's agent over a two-version corpus (bm25, no index) and scored turn by turn, by position and
per conversation, with the follow-up "and in 1.10?" answered from the 1.10 docs."""

from __future__ import annotations

import json
from pathlib import Path

from doceval.cli.main import main
from doceval.inputs.docs import Document, write_corpus
from doceval.stages.report import conversation_lines

DOCS = {
    "pydantic@2.8.2": [
        ("pydantic.main.BaseModel.model_dump", "Convert a model to a dict with model_dump()."),
        ("pydantic.fields.Field", "Field(default=None) makes a field optional with a default."),
    ],
    "pydantic@1.10.17": [
        ("pydantic.main.BaseModel.dict", "Convert a model to a dict with dict()."),
        ("pydantic.fields.Field", "Field(default=None) makes a field optional with a default."),
    ],
}


def _turn(
    question: str, pin: str, doc: str | None, expected: list[str], kind: str, needs_memory: bool
) -> dict:
    library, version = pin.split("@")
    return {"question": question, "library": library, "version": version, "out_of_scope": doc is None,
            "relevant_ids": [f"{pin}:{doc}"] if doc else [], "reference_answer": "See the docs." if doc else "",
            "expected_apis": expected, "forbidden_apis": [], "kind": kind, "needs_memory": needs_memory}  # fmt: skip


def _golden(path: Path) -> None:
    conversations = [
        {"id": "conv-a", "split": "test", "kind": "conversation", "turns": [
            _turn("How do I convert a model to a dict?", "pydantic@2.8.2", "pydantic.main.BaseModel.model_dump",
                  ["model_dump("], "first_turn", False),
            _turn("and in 1.10?", "pydantic@1.10.17", "pydantic.main.BaseModel.dict", ["dict("],
                  "follow_up_version_switch", True),
            _turn("and in 3.0?", "pydantic@3.0", None, [], "unindexed_library", True),
        ]},
        {"id": "conv-b", "split": "test", "kind": "conversation", "turns": [
            _turn("How do I make a field optional with a default?", "pydantic@1.10.17", "pydantic.fields.Field",
                  ["Field("], "first_turn", False),
            _turn("and how do I convert a model to a dict?", "pydantic@1.10.17", "pydantic.main.BaseModel.dict",
                  ["dict("], "topic_shift", False),
        ]},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(c) + "\n" for c in conversations), encoding="utf-8")


def test_a_conversation_golden_set_is_replayed_and_scored_turn_by_turn(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    docs = {pin: [Document(f"{pin}:{p}", *pin.split("@"), p, "function", text) for p, text in items]
            for pin, items in DOCS.items()}  # fmt: skip
    write_corpus(docs, tmp_path / "docs", 1500, {})
    _golden(tmp_path / "conversations.jsonl")
    out = tmp_path / "summary.json"
    code = main(["eval", "--golden", str(tmp_path / "conversations.jsonl"), "--split", "all", "--no-track",
                 "--quiet", "--no-judge", "--output", str(out), "retriever=bm25", "floors=zero", "k=1",
                 f"paths.docs={tmp_path / 'docs'}", f"paths.runs={tmp_path / 'runs'}",
                 f"paths.index={tmp_path / 'index'}", f"paths.cache={tmp_path / 'cache'}"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    summary = json.loads(out.read_text())
    rows = {row["id"]: row for row in summary["entries"]}
    assert list(rows) == ["conv-a#1", "conv-a#2", "conv-a#3", "conv-b#1", "conv-b#2"]
    assert (rows["conv-a#2"]["conversation"], rows["conv-a#2"]["turn"], rows["conv-a#2"]["needs_memory"]) == (
        "conv-a", 2, True)  # fmt: skip
    # The probe carried pydantic 2.8.2 (the conversation's start); the agent followed "and in 1.10?".
    assert rows["conv-a#2"]["retrieved"][0][0] == "pydantic@1.10.17:pydantic.main.BaseModel.dict"
    assert rows["conv-a#2"]["scores"]["hit_rate"] == 1.0
    assert rows["conv-a#3"]["refused"] is True  # "and in 3.0?": not indexed, refused by the router
    block = summary["metrics"]["conversations"]
    assert block["turns"]["hit_rate"] == 1.0 and block["turns"]["counts"]["n_hit_rate"] == 4
    assert set(block["by_position"]) == {"1", "2", "3+"} and set(block["by_needs_memory"]) == {
        "true",
        "false",
    }
    assert block["per_conversation"]["n_measured"] + block["per_conversation"]["n_not_measured"] == 2
    printed = capsys.readouterr().out
    assert "all_turns_correct" in printed  # the headline's conversation table
    # The pipeline report's section for the conversations stage names the set and split it replayed.
    lines = conversation_lines(summary, Path("eval/conversations/summary.json"))
    assert lines[1] == "## Conversations" and "split `all`, k = 1" in lines[3]
    assert "system under test `bm25`, floors `zero`" in lines[3]
    assert any(line.startswith("| hit_rate | 1.0000") for line in lines)
