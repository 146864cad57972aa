"""The conversation set's audits of every turn by two assessors (issue 41, item 4): `doceval golden audit --all`
writes a sheet of every turn with its conversation's context and a blank assessor column, and `--verdicts A
--verdicts B --adjudication FILE` reads both filled sheets and the adjudication of their disagreements into the
audit table's WRONG rate and Wilson bound. Checked on a small fixture here; over the real verdict files of each
round once the assessors have filled them (data/golden/README.md, "The conversation audits"): every completed
round's row is recomputed from its three files, and the target is judged on the latest round only, once its
sheets are filled (rounds 2 and 3 did not meet it and were fixed; round 4, which audited the fixed file, met it)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from test_memory_recovery import standalone_lines

from doceval.cli.main import main
from doceval.inputs.golden import parse_golden

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
ROUNDS = {
    2: "second",
    3: "third",
    4: "fourth",
}  # round -> the word its README row starts with; the last is the latest


def _sheets(n: int) -> list[Path]:
    return [GOLDEN / "audit" / f"conversations-{n}.{name}.jsonl" for name in ("A", "B")]


def _adjudication(n: int) -> Path:
    return GOLDEN / "audit" / f"conversations-{n}.adjudication.jsonl"


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def wilson_by_hand(wrong: int, n: int) -> tuple[float, float]:
    """The Wilson score interval at 95% (z = 1.959964), written out."""
    z, p = 1.959964, wrong / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - half) / (1 + z * z / n)), min(1.0, (centre + half) / (1 + z * z / n))


def final_verdicts(
    a: list[dict[str, Any]], b: list[dict[str, Any]], ruling: list[dict[str, Any]]
) -> dict[str, str]:
    """Each entry's verdict: the assessors' when they agree, the adjudicator's when not."""
    other, adjudicated = {r["id"]: r["verdict"] for r in b}, {r["id"]: r["verdict"] for r in ruling}
    return {r["id"]: r["verdict"] if r["verdict"] == other[r["id"]] else adjudicated[r["id"]] for r in a}


@pytest.fixture
def sheets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "conv.jsonl").write_text(standalone_lines(), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for name in ("A", "B"):
        assert main(["golden", "audit", "conv.jsonl", "--all", "--out", f"{name}.jsonl"]) == 0
    return tmp_path


def test_the_sheet_holds_every_turn_with_its_conversation_and_blank_verdicts(sheets: Path) -> None:
    rows = _read(sheets / "A.jsonl")
    assert [r["id"] for r in rows] == ["conv-a#1", "conv-a#2", "conv-b#1", "conv-b#2", "conv-b#3"]
    assert all(r["verdict"] is None and r["reason"] is None and r["assessor"] is None for r in rows)
    turn = rows[1]
    assert (turn["start_pin"], turn["pin"], turn["needs_memory"]) == (
        "pydantic@2.8.2",
        "pydantic@1.10.17",
        True,
    )
    assert turn["standalone"] == "How do I convert a pydantic 1.10 model to a dict?"
    assert turn["earlier_turns"] == [{"turn": 1, "question": "How do I convert a model to a dict?",
                                      "pin": "pydantic@2.8.2", "reference_answer": "Call it."}]  # fmt: skip
    for key in (
        "relevant_ids",
        "grades",
        "reference_answer",
        "expected_apis",
        "expected_any",
        "forbidden_apis",
    ):
        assert key in turn


def _fill(path: Path, assessor: str, verdicts: dict[str, str]) -> None:
    rows = _read(path)
    for r in rows:
        r["verdict"], r["assessor"] = verdicts.get(r["id"], "OK"), assessor
        r["reason"] = None if r["verdict"] == "OK" else f"{assessor}: why"
    _write(path, rows)


def test_two_assessors_and_an_adjudication_give_the_audit_table_s_figures(
    sheets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(sheets / "A.jsonl", "assessor A", {"conv-a#2": "WRONG", "conv-b#3": "MINOR"})
    _fill(sheets / "B.jsonl", "assessor B", {"conv-a#2": "WRONG", "conv-b#2": "WRONG"})
    args = ["golden", "audit", "conv.jsonl", "--verdicts", "A.jsonl", "--verdicts", "B.jsonl"]
    capsys.readouterr()
    assert main(args) == 2  # two disagreements, no adjudication
    assert "disagree on 2 entries (conv-b#2, conv-b#3)" in capsys.readouterr().err
    ruling = [{"id": "conv-b#2", "verdict": "OK", "reason": "the rewrite names 1.10.17", "adjudicator": "lead"},
              {"id": "conv-b#3", "verdict": "MINOR", "reason": "clumsy reference", "adjudicator": "lead"}]  # fmt: skip
    _write(sheets / "adj.jsonl", ruling)
    assert main([*args, "--adjudication", "adj.jsonl"]) == 0
    out = capsys.readouterr().out
    final = final_verdicts(_read(sheets / "A.jsonl"), _read(sheets / "B.jsonl"), ruling)
    wrong, n = sum(v == "WRONG" for v in final.values()), len(final)
    lo, hi = wilson_by_hand(wrong, n)
    assert (wrong, n) == (1, 5)
    assert f"label error rate (WRONG): {wrong / n:.1%} (95% Wilson interval {lo:.1%} to {hi:.1%})" in out
    assert "same verdict on 3 of 5" in out and "adjudicated: 2 (conv-b#2, conv-b#3)" in out
    assert "target (WRONG at most 2%, upper bound at most 5%): not met" in out
    # A ruling on a row the assessors agreed on, an assessor named twice: exit 2 naming the problem.
    _write(
        sheets / "adj.jsonl",
        [*ruling, {"id": "conv-a#2", "verdict": "OK", "reason": "x", "adjudicator": "l"}],
    )
    assert main([*args, "--adjudication", "adj.jsonl"]) == 2
    assert "'conv-a#2' is not an entry the assessors disagreed on" in capsys.readouterr().err
    _fill(sheets / "B.jsonl", "assessor A", {})
    assert main([*args, "--adjudication", "adj.jsonl"]) == 2
    assert "both name assessor 'assessor A'" in capsys.readouterr().err


def _completed(n: int) -> tuple[int, int, float, float]:
    """Round ``n``'s (WRONG, turns, Wilson low, Wilson high) from its three files; skips while a verdict is blank."""
    a, b = (_read(p) for p in _sheets(n))
    blank = sum(r["verdict"] is None for r in (*a, *b))
    if blank:
        pytest.skip(
            f"the {ROUNDS[n]} conversation audit is prepared, not done: {blank} of {len(a) + len(b)} verdicts in "
            f"{_sheets(n)[0].name} and {_sheets(n)[1].name} are blank (the assessors fill them: data/golden/README.md)"
        )
    turns = [e.id for e in parse_golden(GOLDEN / "conversations.jsonl")]
    assert sorted(r["id"] for r in a) == sorted(r["id"] for r in b) == sorted(turns) and len(turns) >= 144
    final = final_verdicts(a, b, _read(_adjudication(n)))
    wrong, n_turns = sum(v == "WRONG" for v in final.values()), len(final)
    return (wrong, n_turns, *wilson_by_hand(wrong, n_turns))


def _meets_target(wrong: int, n: int, hi: float) -> bool:
    return wrong / n <= 0.02 and hi <= 0.05


@pytest.mark.parametrize("n", sorted(ROUNDS))
def test_each_completed_audit_round_matches_its_readme_row(
    n: int, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong, turns, lo, hi = _completed(n)
    a, b = _sheets(n)
    argv = ["golden", "audit", str(GOLDEN / "conversations.jsonl"), "--verdicts", str(a), "--verdicts", str(b),
            "--adjudication", str(_adjudication(n))]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"{wrong / turns:.1%} (95% Wilson interval {lo:.1%} to {hi:.1%})" in out
    met = _meets_target(wrong, turns, hi)
    assert f"target (WRONG at most 2%, upper bound at most 5%): {'met' if met else 'not met'}" in out
    readme = (GOLDEN / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if re.match(rf"\| (\*\*)?{ROUNDS[n]} audit\b", line))
    assert re.search(rf"\b{wrong} of {turns}\b", row) and f"{wrong / turns:.1%} ({lo:.1%}–{hi:.1%})" in row, (
        row
    )
    target = row.rstrip(" |").rsplit("|", 1)[1]  # the row's last column says whether the round met the target
    assert ("not met" in target) is (not met) and ("met" in target), row


def test_the_latest_audit_round_meets_the_target() -> None:
    latest = max(ROUNDS)
    assert all(p.is_file() for p in (*_sheets(latest), _adjudication(latest))), (
        f"round {latest}'s sheets are not prepared (data/golden/README.md)"
    )
    wrong, turns, _, hi = _completed(latest)
    assert _meets_target(wrong, turns, hi), (wrong, turns, hi)


def test_a_prepared_round_s_blank_sheets_show_the_file_as_it_stands(tmp_path: Path) -> None:
    """The latest round's sheets, while blank, are what `golden audit --all` writes from the labels now: a label
    changed after they were written would be audited in its old form."""
    latest = max(ROUNDS)
    sheets = _sheets(latest)
    if any(r["verdict"] is not None for p in sheets for r in _read(p)):
        pytest.skip(f"round {latest}'s sheets hold verdicts: they keep the labels as they were audited")
    fresh = tmp_path / "fresh.jsonl"
    assert main(["golden", "audit", str(GOLDEN / "conversations.jsonl"), "--all", "--out", str(fresh)]) == 0
    for sheet in sheets:
        assert _read(sheet) == _read(fresh), f"{sheet.name} is stale: write it again (data/golden/README.md)"
    assert _adjudication(latest).read_text(encoding="utf-8") == ""
