"""The held-out judge label set v3 (data/judge/README.md, "v3"): the seeded draw and plan the README states
produce the shipped rows, the labelling sheet shows labellers nothing but pin, question and answer, every
entry's required/optional facts are recorded, and the rows, merged in the label-file format, load."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from doceval.inputs.golden import parse_golden
from doceval.inputs.judge_labels import CATEGORIES, read_labels

ROOT = Path(__file__).resolve().parents[1]
JUDGE = ROOT / "data" / "judge"
GOLDEN = ROOT / "data" / "golden" / "v2.1.jsonl"
SHEET_KEYS = {"id", "pin", "question", "candidate", "verdict", "reason"}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _readme_draw() -> list[tuple[str, list[str]]]:
    """The draw and category plan exactly as the README's v3 section states them (seeds 41 and 42)."""
    golden = _jsonl(GOLDEN)
    used = {r["entry_id"] for f in ("v1.jsonl", "v2.jsonl") for r in _jsonl(JUDGE / f)}
    pins = sorted({(e["library"], e["version"]) for e in golden if not e["out_of_scope"]})
    rng = random.Random(41)
    two_calibration = set(rng.sample(pins, 4))
    entries: list[str] = []
    for pin in pins:
        picked: list[str] = []
        for split in ("calibration", "test"):
            n = 2 if (pin in two_calibration) == (split == "calibration") else 1
            pool = sorted(e["id"] for e in golden if (e["library"], e["version"]) == pin and e["split"] == split
                          and not e["out_of_scope"] and e["id"] not in used)  # fmt: skip
            picked += rng.sample(pool, n)
        entries += sorted(picked)  # the plan deals its slots in pin order, then id order
    slots = ["concise_correct"] * 8 + ["alternative_correct"] * 8 + ["verbose_correct"] * 8
    slots += ["partial"] * 12 + ["other_version"] * 12
    plan_rng = random.Random(42)
    while True:
        plan_rng.shuffle(slots)
        if all(slots[2 * i] != slots[2 * i + 1] for i in range(len(entries))):
            break
    return [(e, [slots[2 * i], slots[2 * i + 1]]) for i, e in enumerate(entries)]


def test_the_readme_draw_and_plan_give_the_shipped_rows() -> None:
    writer = _jsonl(JUDGE / "v3.writer.jsonl")
    shipped = Counter((r["entry_id"], r["category"]) for r in writer)
    planned = Counter((e, c) for e, cats in _readme_draw() for c in cats)
    assert shipped == planned and len(writer) == 48
    assert [r["id"] for r in writer] == [f"h{i:03d}" for i in range(1, 49)]
    golden = {e["id"]: e for e in _jsonl(GOLDEN)}
    assert all(r["split"] == golden[r["entry_id"]]["split"] for r in writer)
    assert Counter(r["split"] for r in writer) == {"calibration": 24, "test": 24}
    assert set(Counter(r["pin"] for r in writer).values()) == {6}


def test_the_sheet_shows_only_pin_question_and_answer_with_blank_verdicts() -> None:
    sheet = _jsonl(JUDGE / "v3.sheet.jsonl")
    writer = {r["id"]: r for r in _jsonl(JUDGE / "v3.writer.jsonl")}
    golden = {e["id"]: e for e in _jsonl(GOLDEN)}
    assert [r["id"] for r in sheet] == list(writer)
    for row in sheet:
        assert set(row) == SHEET_KEYS and row["verdict"] == "" and row["reason"] == ""
        entry = golden[writer[row["id"]]["entry_id"]]
        assert row["pin"] == f"{entry['library']}@{entry['version']}" and row["question"] == entry["question"]
        assert row["candidate"].strip() and entry["reference_answer"] not in row["candidate"]


def test_every_drawn_entry_has_required_and_optional_facts_with_reasons() -> None:
    facts = _jsonl(JUDGE / "v3.facts.jsonl")
    entries = {r["entry_id"] for r in _jsonl(JUDGE / "v3.writer.jsonl")}
    assert [f["entry_id"] for f in facts] == sorted(entries, key=[f["entry_id"] for f in facts].index)
    assert {f["entry_id"] for f in facts} == entries and len(facts) == 24
    for f in facts:
        assert f["required"], f["entry_id"]
        for item in (*f["required"], *f["optional"]):
            assert item["fact"].strip() and item["reason"].strip(), f["entry_id"]


@pytest.mark.parametrize("category", ["concise_correct", "alternative_correct"])
def test_the_v3_categories_are_label_categories(category: str) -> None:
    assert category in CATEGORIES


MERGED_FIELDS = ("id", "entry_id", "pin", "question", "category", "candidate", "verdict", "reason",
                 "second_reason", "split", "labelled_by")  # fmt: skip
LABELLERS = (
    "labeller-a",
    "labeller-b",
)  # the first labeller's reason is `reason`, the second's `second_reason`
LABELLED_BY = (
    "doceval team, 2026-12-06: written by judgedata without reading the reference answers; labelled by "
    "labeller-a and labeller-b, each blind to category, reference answers and each other; no disagreements to "
    "adjudicate (the two labellers agreed on all 48 rows)"
)


def merge_v3() -> str:
    """data/judge/v3.jsonl exactly as the README's "Merging" steps build it from the parts: one row per writer
    row in id order, entry/pin/category/split from the writer file, question and candidate from the sheet, the
    agreed verdict, the first labeller's reason and the second's. Raises on a disagreement (none was found:
    an adjudicator would have to decide it, recorded in `adjudication`)."""
    writer = sorted(_jsonl(JUDGE / "v3.writer.jsonl"), key=lambda r: r["id"])
    sheet = {r["id"]: r for r in _jsonl(JUDGE / "v3.sheet.jsonl")}
    first, second = ({r["id"]: r for r in _jsonl(JUDGE / f"v3.labels.{who}.jsonl")} for who in LABELLERS)
    rows = []
    for w in writer:
        a, b = first[w["id"]], second[w["id"]]
        if a["verdict"] != b["verdict"]:
            raise AssertionError(f"{w['id']}: the labellers disagree; it needs an adjudication")
        values = {**w, "question": sheet[w["id"]]["question"], "candidate": sheet[w["id"]]["candidate"],
                  "verdict": a["verdict"], "reason": a["reason"], "second_reason": b["reason"],
                  "labelled_by": LABELLED_BY}  # fmt: skip
        rows.append({key: values[key] for key in MERGED_FIELDS})
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def test_v3_jsonl_is_the_merge_of_its_parts() -> None:
    """The shipped v3.jsonl rebuilds byte for byte from the sheet, the writer file and the two label files."""
    assert (JUDGE / "v3.jsonl").read_text(encoding="utf-8") == merge_v3()


def test_the_two_v3_labellers_agree_on_every_row_and_with_the_categories() -> None:
    """Step 1: agreement and Cohen's kappa of the two labellers (48/48, kappa 1.0: nothing to adjudicate);
    step 3: the labels against the writer's categories (every correct category labelled correct, every
    partial and other_version incorrect: no row to list)."""
    from doceval.scoring.agreement import cohen_kappa

    first, second = ({r["id"]: r["verdict"] == "correct" for r in _jsonl(JUDGE / f"v3.labels.{who}.jsonl")}
                     for who in LABELLERS)  # fmt: skip
    ids = [r["id"] for r in _jsonl(JUDGE / "v3.writer.jsonl")]
    assert sorted(first) == sorted(second) == sorted(ids)
    assert sum(first[i] == second[i] for i in ids) == 48
    assert cohen_kappa([first[i] for i in ids], [second[i] for i in ids]) == 1.0
    correct_categories = {"concise_correct", "alternative_correct", "verbose_correct"}
    differs = [r["id"] for r in _jsonl(JUDGE / "v3.jsonl") if (r["verdict"] == "correct")
               != (r["category"] in correct_categories)]  # fmt: skip
    assert differs == []


def test_v3_loads_in_the_label_format_with_its_entries_categories_and_splits() -> None:
    rows = read_labels(JUDGE / "v3.jsonl", {e.id: e for e in parse_golden(GOLDEN)})
    assert len(rows) == 48
    assert Counter(r.category for r in rows) == {"partial": 12, "other_version": 12, "concise_correct": 8,
                                                 "alternative_correct": 8, "verbose_correct": 8}  # fmt: skip
    assert Counter(r.split for r in rows) == {"calibration": 24, "test": 24}
    assert sum(r.correct for r in rows) == 24
