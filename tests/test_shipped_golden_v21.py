"""Golden set v2.1 (issue 32, item 2): v2 with every grading-rule warning judged, then fixed after its seed-8,
seed-9 and seed-10 audits and after the conversation set's second, third and fourth audits (issue 41), whose turns
copy its entries. It validates strictly against the real corpus, keeps v2's entries, and every qrels change is
listed, with its reason, in its changes file: the grading-rule pass against v2, each audit's fixes against the file
as the previous section left it."""

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
SECOND_AUDIT = "doceval team, second conversation audit fixes 2026-12-07"
THIRD_AUDIT = "doceval team, third conversation audit fixes 2026-12-07"
FOURTH_AUDIT = "doceval team, fourth conversation audit fixes 2026-12-07"
# each audit's section of a changes file, and the judged_by of the qrels lines it changed, in order
AUDITS = (
    ("## After the seed-8 audit", "doceval team, v2.1 seed-8 audit fixes 2026-12-06"),
    ("## After the seed-9 audit", "doceval team, v2.1 seed-9 audit fixes 2026-12-06"),
    ("## After the seed-10 audit", "doceval team, v2.1 seed-10 audit fixes 2026-12-06"),
    ("## After the second conversation audit", SECOND_AUDIT),
    ("## After the third audit", THIRD_AUDIT),
    ("## After the fourth audit", FOURTH_AUDIT),
)
# conversations.changes.md goes on with the turns' own sweep (issue 41 item 4), after the audits it shares with v2.1,
# then the fixes of the conversations' second, third and fourth audits (which reach v2.1 through the turns' sources)
CONVERSATION_PASSES = (
    *AUDITS[:3],
    ("## Issue 41 label sweep", "doceval team, conversation label sweep (issue 41) 2026-12-06"),
    ("## After the second audit", SECOND_AUDIT),
    ("## After the third audit", THIRD_AUDIT),
    ("## After the fourth audit", FOURTH_AUDIT),
)
# a changes-file line: "- ENTRY | DOC | OLD→NEW | checked | REASON"
_CHANGE = re.compile(r"^- (\S+) \| (\S+) \| (unjudged|[012])→([012]) \| (\S+) \| (.+)$")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _qrels(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["id"], r["doc_id"]): r for r in _lines(path)}


Listing = dict[tuple[str, str], tuple[str, int, str, str]]


def _changes(path: Path, audits: tuple[tuple[str, str], ...] = AUDITS) -> list[Listing]:
    """(entry, doc) -> (old grade or 'unjudged', new grade, checked, reason) for every listed change: those of the
    grading-rule pass, then those of each audit's section (old = the grade the sections before it left)."""
    passes: list[Listing] = [{} for _ in range(len(audits) + 1)]
    listed = passes[0]
    for line in path.read_text(encoding="utf-8").splitlines():
        for n, (section, _) in enumerate(audits, 1):
            if line.startswith(section):
                listed = passes[n]
        m = _CHANGE.match(line)
        if m:
            assert (m[1], m[2]) not in listed, f"{path.name} lists {m[1]} {m[2]} twice in one pass"
            listed[(m[1], m[2])] = (m[3], int(m[4]), m[5], m[6])
    return passes


def _line_of(r: dict[str, Any]) -> tuple[int, str, str]:
    return r["grade"], ",".join(r.get("checked", [])) or "-", r["reason"]


def _check_audits(
    new: dict[tuple[str, str], dict[str, Any]],
    passes: list[Listing],
    every: bool = True,
    audits: tuple[tuple[str, str], ...] = AUDITS,
) -> None:
    """Each audit section's change starts from the grade the sections before it left, is the qrels line as it
    stands unless a later section changed it again, and is the only kind of line judged by that audit's fixes."""
    for n, (section, judged_by) in enumerate(audits, 1):
        fixes, earlier, later = passes[n], passes[:n], passes[n + 1 :]
        redone = set().union(*later)
        assert fixes or not every, f"{section!r} lists no change"
        assert {k for k, r in new.items() if r["judged_by"] == judged_by} == set(fixes) - redone
        for key, (before, *now) in fixes.items():
            if key not in redone:
                assert tuple(now) == _line_of(new[key]), key
            last = [p[key] for p in earlier if key in p]
            if last:
                assert before == str(last[-1][1]), (
                    f"{key}: {section!r} does not start from the grade left before it"
                )


@pytest.mark.slow
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
    passes = _changes(GOLDEN / "v2.1.changes.md")
    first, audits = passes[0], passes[1:]
    assert set().union(*passes) == set(changed)
    _check_audits(new, passes)
    redone = set().union(*audits)
    for key, listing in first.items():
        before = "unjudged" if key not in old else str(old[key]["grade"])
        assert listing[0] == before, key
        if key not in redone:  # a line an audit's fixes changed again is checked against that section
            assert listing[1:] == _line_of(changed[key]), key
            assert changed[key]["judged_by"] == PASS, key
    for n, fixes in enumerate(audits, 1):
        for key in set(fixes) - set().union(*passes[:n]):  # first changed by this audit: starts from v2
            assert fixes[key][0] == ("unjudged" if key not in old else str(old[key]["grade"])), key


def test_every_conversation_judgment_of_the_pass_is_listed() -> None:
    qrels = _qrels(GOLDEN / "conversations.qrels.jsonl")
    ours = {k: r for k, r in qrels.items() if r["judged_by"] == PASS}
    passes = _changes(GOLDEN / "conversations.changes.md", CONVERSATION_PASSES)
    first = passes[0]
    assert ours and set(ours) <= set(first) and set(first) - set(ours) <= set().union(*passes[1:])
    for key, r in ours.items():
        assert first[key][1:] == _line_of(r), key
    # an audit's fixes reach the turns only where a turn copies the entry
    _check_audits(qrels, passes, every=False, audits=CONVERSATION_PASSES)


@pytest.mark.parametrize("name", ["v2.1.qrels.jsonl", "conversations.qrels.jsonl"])
def test_every_checked_judgment_gives_its_reason(name: str) -> None:
    checked = [r for r in _lines(GOLDEN / name) if r.get("checked")]
    assert checked
    for r in checked:
        assert len(r["reason"].strip()) >= 20, (r["id"], r["doc_id"])
