"""Conversation labels at the bar (issue 41, item 4): the turns whose labels came from a source entry that asks
more (or less) than the turn does are fixed, each as conversations.changes.md records it."""

from __future__ import annotations

from pathlib import Path

from doceval.inputs.golden import GoldenEntry, parse_golden
from doceval.scoring.metrics import contains_apis

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"


def _turns() -> dict[str, GoldenEntry]:
    return {e.id: e for e in parse_golden(GOLDEN / "conversations.jsonl")}


def _passes(turn: GoldenEntry, answer: str) -> bool:
    return contains_apis(answer, turn.expected_apis, turn.forbidden_apis, turn.expected_any)


def test_a_right_answer_to_and_in_2_8_about_exporting_what_was_sent_passes() -> None:
    turn = _turns()["conv-pyd1-06#3"]  # V5: it required model_fields_set, which the turn never asks about
    assert _passes(
        turn, "In pydantic 2.8 call `m.model_dump(exclude_unset=True)`: only the fields that were set."
    )
    assert not _passes(turn, "Call `m.dict(exclude_unset=True)`.")  # the 1.x call still fails
    assert "pydantic@2.8.2:pydantic.main.BaseModel.model_fields_set" not in turn.relevant_ids
    assert turn.grades["pydantic@2.8.2:pydantic.main.BaseModel.model_fields_set"] == 1


def test_a_turn_that_requires_typing_asks_for_it() -> None:
    turns = _turns()
    columns = turns["conv-sqla14-01#3"]  # V5: Mapped[ required, = Column( forbidden, typing never asked
    assert "Mapped[" in columns.expected_apis and "type annotations" in columns.question
    assert _passes(
        columns, "id: Mapped[int] = mapped_column(primary_key=True); name: Mapped[str] = mapped_column()"
    )
    color = turns["conv-pyd2-06#2"]  # as_hex required, the hex string never asked
    assert "as_hex" in color.expected_apis and "hex string" in color.question


def test_the_2_21_partial_answer_says_what_its_docs_say_of_nested_schemas() -> None:
    turn = _turns()["conv-mm3-05#3"]  # the turn follows "including inside a nested 'address' schema"
    assert "Nested" in turn.reference_answer and "partial=True" in turn.reference_answer


def test_every_label_change_of_the_sweep_is_recorded_with_its_reason() -> None:
    changes = (GOLDEN / "conversations.changes.md").read_text(encoding="utf-8")
    sweep = changes[changes.index("## Issue 41 label sweep") :]
    for turn in ("conv-pyd1-06#3", "conv-sqla14-01#3", "conv-pyd2-06#2", "conv-mm3-05#3"):
        assert f"- `{turn}` (" in sweep, turn
