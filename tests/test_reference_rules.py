"""An entry's version strings against its own reference answer (doceval.inputs.selfcheck, docs/design.md section
3.3): ``reference_fails_strings`` (an error for graded sets and under --strict) and ``expected_inside_name`` (a
warning: the reference offers an API that holds an expected string glued to a longer name, which the one matcher
does not find, so an answer giving only that API scores 0; issue 41's second conversation audit found six turns
so). ``expected_in_question`` (a warning: the entry's own question satisfies an expected string or a whole group, so
it checks nothing; the third conversation audit's class (c)). The shipped sets: no reference fails its strings,
and every ``expected_inside_name`` and ``expected_in_question`` warning left is read and listed, with its reason,
in the set's changes file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from doceval.cli.main import main
from doceval.common.apimatch import fold, glued
from doceval.inputs.docs import Document, write_corpus
from doceval.inputs.golden import GoldenEntry, parse_golden
from doceval.inputs.qrels import qrels_path
from doceval.inputs.selfcheck import IN_QUESTION, INSIDE_NAME, REFERENCE_FAILS, reference_findings

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
PIN = "orm@2.0"


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    text = "class orm.Session(bind, autobegin=True)\n\nA session. Session.begin() starts a transaction."
    write_corpus({PIN: [Document(f"{PIN}:orm.Session", "orm", "2.0", "orm.Session", "class", text)]},
                 tmp_path / "docs", 1500, {})  # fmt: skip
    return tmp_path / "docs"


def _entry(eid: str, reference: str, **fields: Any) -> dict[str, Any]:
    return {"id": eid, "question": f"question {eid}?", "library": "orm", "version": "2.0", "out_of_scope": False,
            "relevant_ids": [f"{PIN}:orm.Session"], "reference_answer": reference, "expected_apis": ["begin"],
            "forbidden_apis": [], "split": "test", "kind": "lookup", **fields}  # fmt: skip


def _write(tmp_path: Path, rows: list[dict[str, Any]], graded: bool) -> Path:
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if graded:
        qrels = [{"id": r["id"], "doc_id": f"{PIN}:orm.Session", "grade": 2, "judged_by": "t", "reason": "r"}
                 for r in rows]  # fmt: skip
        qrels_path(path).write_text("".join(json.dumps(q) + "\n" for q in qrels), encoding="utf-8")
    return path


def _validate(path: Path, corpus_dir: Path, *extra: str) -> int:
    return main(["golden", "validate", str(path), "--corpus", str(corpus_dir), *extra])


def test_glued_finds_the_longer_identifiers_the_matcher_skips() -> None:
    text = fold("m.model_dump_json(x) or Session(autobegin=False); @validates; model_dump(); begin")
    assert [text[a:b] for a, b in glued("model_dump", text)] == ["model_dump_json"]
    assert [text[a:b] for a, b in glued("begin", text)] == ["autobegin"]
    assert [text[a:b] for a, b in glued("validate", text)] == ["validates"]
    assert glued("session(", text) == [] and glued("", text) == []  # found as a name; an empty string nowhere


FAILS = [
    _entry("lacks", "Pass autobegin=False."),  # the expected `begin` is only inside autobegin
    _entry("any-none", "Call Session.begin().", expected_any=[["commit(", "rollback("]]),
    _entry("forbidden", "Session.begin(), never autocommit=True.", forbidden_apis=["autocommit=True"],
           allow_forbidden={"autocommit=True": "a waiver is for the scope checks; scoring still rejects it"}),
]  # fmt: skip


def test_a_reference_that_fails_its_own_strings_is_an_error_in_a_graded_set(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, [*FAILS, _entry("ok", "Use Session.begin().")], graded=True)
    assert _validate(path, corpus_dir) == 2
    err = capsys.readouterr().err
    assert "golden set has 3 problems" in err, err
    for eid, why in [("lacks", "lacks the expected 'begin'"),
                     ("any-none", "names none of the alternatives ['commit(', 'rollback(']"),
                     ("forbidden", "uses the forbidden 'autocommit=True'")]:  # fmt: skip
        row = next(line for line in err.splitlines() if f"reference_answer: entry {eid}: " in line)
        assert why in row and "fix: make the reference answer right" in row, row


def test_an_older_set_warns_and_strict_makes_it_an_error(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, [FAILS[0], _entry("ok", "Use Session.begin().")], graded=False)
    assert _validate(path, corpus_dir) == 0
    out = capsys.readouterr().out
    assert "warning:" in out and "entry lacks: its own reference answer fails its version strings" in out
    assert _validate(path, corpus_dir, "--strict") == 2
    assert "golden set has 1 problem:" in capsys.readouterr().err


def _inside(e: dict[str, Any]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    entry = GoldenEntry(id=e["id"], question=e["question"], library="orm", version="2.0", out_of_scope=False,
                        relevant_ids=(), reference_answer=e["reference_answer"], split="test", kind="lookup",
                        expected_apis=tuple(e["expected_apis"]), forbidden_apis=(),
                        expected_any=tuple(tuple(g) for g in e.get("expected_any", [])))  # fmt: skip
    reference_findings(entry, lambda rule, field, detail, *_: found.append((rule, detail)))
    return [(rule, detail) for rule, detail in found if rule == INSIDE_NAME]


def test_an_expected_string_glued_inside_an_api_the_reference_offers_is_a_warning() -> None:
    # The audit's case (conv-sqla20-02#1): the reference offers autobegin=False, which `begin` does not match.
    both = "Pass `Session(engine, autobegin=False)` and call Session.begin() yourself."
    assert _inside(_entry("a", both)) == [(INSIDE_NAME, "begin in autobegin")]
    # Prose that contains the word is no API; a longer API the group accepts is no problem.
    assert _inside(_entry("b", "Otherwise it keeps beginning transactions; call begin().")) == []
    group = [["scalar_one_or_none", "one_or_none("]]
    assert _inside(_entry("c", "result.scalar_one_or_none()", expected_apis=[], expected_any=group)) == []
    # A group none of whose alternatives the longer API satisfies (conv-sqla14-01#1).
    group = [["declarative_base", "as_declarative"]]
    ref = "declarative_base(), or @registry().as_declarative_base() on a class"
    assert _inside(_entry("d", ref, expected_apis=[], expected_any=group)) == [
        (INSIDE_NAME, "declarative_base in as_declarative_base(")
    ]


def test_the_warning_is_printed_and_does_not_fail_strict(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, [_entry("a", "Pass autobegin=False, then Session.begin().")], graded=True)
    assert _validate(path, corpus_dir, "--strict") == 0
    out = capsys.readouterr().out
    assert "entry a: its reference answer names 'autobegin', which holds the expected 'begin'" in out


# "- `ENTRY` keeps `STRING in API`: REASON": a read expected_inside_name warning, in a changes file's section;
# "- `ENTRY` keeps `STRING` (in its question): REASON": a read expected_in_question warning (a group as A|B)
_KEPT = re.compile(r"^- `([^`]+)` keeps `([^`]+)`: (.{20,})$")
_KEPT_IN_QUESTION = re.compile(r"^- `([^`]+)` keeps `([^`]+)` \(in its question\): (.{20,})$")


@pytest.mark.parametrize(
    ("name", "changes"),
    [("v2.1.jsonl", "v2.1.changes.md"), ("conversations.jsonl", "conversations.changes.md")],
)
def test_the_shipped_sets_pass_their_own_strings_and_every_warning_left_is_read(
    name: str, changes: str
) -> None:
    found: list[tuple[str, str, str]] = []
    for e in parse_golden(GOLDEN / name):
        reference_findings(e, lambda rule, field, detail, *_, e=e: found.append((rule, e.id, detail)))
    assert [f for f in found if f[0] == REFERENCE_FAILS] == []
    text = (GOLDEN / changes).read_text(encoding="utf-8")
    kept = {(m[1], m[2]) for line in text.splitlines() if (m := _KEPT.match(line))}
    assert {(eid, detail) for rule, eid, detail in found if rule == INSIDE_NAME} == kept
    in_question = {(m[1], m[2]) for line in text.splitlines() if (m := _KEPT_IN_QUESTION.match(line))}
    assert {(eid, detail) for rule, eid, detail in found if rule == IN_QUESTION} == in_question


def _in_question(question: str, **fields: Any) -> list[str]:
    found: list[tuple[str, str]] = []
    e = _entry("q", "Use @validates('n') and raise ValidationError.", **fields)
    entry = GoldenEntry(id="q", question=question, library="orm", version="2.0", out_of_scope=False,
                        relevant_ids=(), reference_answer=e["reference_answer"], split="test", kind="lookup",
                        expected_apis=tuple(e["expected_apis"]), forbidden_apis=(),
                        expected_any=tuple(tuple(g) for g in e.get("expected_any", [])))  # fmt: skip
    reference_findings(entry, lambda rule, field, detail, *_: found.append((rule, detail)))
    return [detail for rule, detail in found if rule == IN_QUESTION]


def test_a_string_the_question_itself_satisfies_is_a_warning() -> None:
    # The third audit's case (conv-mm2-04#1): the question's own "validate" satisfied the whole group, so the
    # wrong Range(min=0) passed; so did "auto-begin" for ["begin", "autobegin"] (conv-sqla20-02#1).
    question = "How do I validate that a number is strictly greater than 0 with marshmallow validators?"
    assert _in_question(question, expected_apis=[], expected_any=[["validate", "validates"]]) == [
        "validate|validates"
    ]
    assert _in_question("Can I stop it from auto-begin?", expected_apis=["begin"]) == ["begin"]
    # A group that asks for what a right answer adds (and an expected string glued inside the question's longer
    # word) is no finding.
    group = [["validates(", "ValidationError", "lambda", "NoneOf"]]
    assert _in_question(question, expected_apis=[], expected_any=group) == []
    assert _in_question("Should I set autobegin?", expected_apis=["begin"]) == []


def test_the_question_warning_is_printed_and_does_not_fail_strict(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {
        **_entry("a", "Use Session.begin()."),
        "question": "When does Session.begin() start a transaction?",
    }
    path = _write(tmp_path, [row], graded=True)
    assert _validate(path, corpus_dir, "--strict") == 0
    out = capsys.readouterr().out
    assert "expected_apis: entry a: its own question satisfies the expected 'begin'" in out
