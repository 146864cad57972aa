"""Golden set v2.1 (issue 32, item 2): v2 with every grading-rule warning judged, then fixed after its seed-8 audit.
It validates strictly against the real corpus, keeps v2's entries, and every qrels change is listed, with its
reason, in its changes file: the grading-rule pass against v2, the seed-8 fixes against the pass."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from doceval.cli.main import main

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
V2, V21 = GOLDEN / "v2.jsonl", GOLDEN / "v2.1.jsonl"
PASS = "doceval team, v2.1 grading-rule pass 2026-12-06"
SEED8 = "doceval team, v2.1 seed-8 audit fixes 2026-12-06"
SEED8_SECTION = "## After the seed-8 audit"
# a changes-file line: "- ENTRY | DOC | OLD→NEW | checked | REASON"
_CHANGE = re.compile(r"^- (\S+) \| (\S+) \| (unjudged|[012])→([012]) \| (\S+) \| (.+)$")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _qrels(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["id"], r["doc_id"]): r for r in _lines(path)}


Listing = dict[tuple[str, str], tuple[str, int, str, str]]


def _changes(path: Path) -> tuple[Listing, Listing]:
    """(entry, doc) -> (old grade or 'unjudged', new grade, checked, reason) for every listed change: those of the
    grading-rule pass, and those of the section after the seed-8 audit (old = the grade the pass left)."""
    passes: tuple[Listing, Listing] = ({}, {})
    listed = passes[0]
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(SEED8_SECTION):
            listed = passes[1]
        m = _CHANGE.match(line)
        if m:
            assert (m[1], m[2]) not in listed, f"{path.name} lists {m[1]} {m[2]} twice in one pass"
            listed[(m[1], m[2])] = (m[3], int(m[4]), m[5], m[6])
    return passes


def _line_of(r: dict[str, Any]) -> tuple[int, str, str]:
    return r["grade"], ",".join(r.get("checked", [])) or "-", r["reason"]


def _check_seed8(new: dict[tuple[str, str], dict[str, Any]], first: Listing, seed8: Listing) -> None:
    """Every seed-8 change is the qrels line as it stands, starts from the grade the pass left, and is the only
    kind of line judged by the seed-8 fixes."""
    assert seed8, "the seed-8 section lists no change"
    assert {k for k, r in new.items() if r["judged_by"] == SEED8} == set(seed8)
    for key, (before, *now) in seed8.items():
        assert tuple(now) == _line_of(new[key]), key
        if key in first:
            assert before == str(first[key][1]), (
                f"{key}: the seed-8 change does not start from the pass's grade"
            )


@pytest.mark.parametrize("name", ["v2.1.jsonl", "conversations.jsonl"])
def test_validates_strictly_with_no_grading_warning(
    name: str, real_corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["golden", "validate", str(GOLDEN / name), "--corpus", str(real_corpus_dir), "--strict"]) == 0
    out = capsys.readouterr().out
    assert "0 grading_candidate pair(s) over 0 entries, 0 inconsistent_grade document(s)" in out
    assert "grading_candidate" not in out.replace("0 grading_candidate pair(s)", "")


def test_v21_keeps_v2s_entries_splits_and_scopes() -> None:
    keys = ("id", "question", "library", "version", "out_of_scope", "split", "kind")
    old, new = _lines(V2), _lines(V21)
    assert [tuple(e[k] for k in keys) for e in new] == [tuple(e[k] for k in keys) for e in old]


def test_every_v21_qrels_change_is_listed_with_its_grades_and_reason() -> None:
    old, new = _qrels(GOLDEN / "v2.qrels.jsonl"), _qrels(GOLDEN / "v2.1.qrels.jsonl")
    assert set(old) <= set(new), "v2.1 drops judgments of v2"
    changed = {k: r for k, r in new.items() if old.get(k) != r}
    first, seed8 = _changes(GOLDEN / "v2.1.changes.md")
    assert set(first) | set(seed8) == set(changed)
    _check_seed8(new, first, seed8)
    for key, listing in first.items():
        before = "unjudged" if key not in old else str(old[key]["grade"])
        assert listing[0] == before, key
        if key not in seed8:  # a line the seed-8 fixes changed again is checked against that section
            assert listing[1:] == _line_of(changed[key]), key
            assert changed[key]["judged_by"] == PASS, key
    for key in set(seed8) - set(first):
        assert seed8[key][0] == ("unjudged" if key not in old else str(old[key]["grade"])), key


def test_every_conversation_judgment_of_the_pass_is_listed() -> None:
    qrels = _qrels(GOLDEN / "conversations.qrels.jsonl")
    ours = {k: r for k, r in qrels.items() if r["judged_by"] == PASS}
    first, seed8 = _changes(GOLDEN / "conversations.changes.md")
    assert ours and set(ours) <= set(first) and set(first) - set(ours) <= set(seed8)
    for key, r in ours.items():
        assert first[key][1:] == _line_of(r), key
    _check_seed8(qrels, first, seed8)


@pytest.mark.parametrize("name", ["v2.1.qrels.jsonl", "conversations.qrels.jsonl"])
def test_every_checked_judgment_gives_its_reason(name: str) -> None:
    checked = [r for r in _lines(GOLDEN / name) if r.get("checked")]
    assert checked
    for r in checked:
        assert len(r["reason"].strip()) >= 20, (r["id"], r["doc_id"])
