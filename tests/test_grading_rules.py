"""The grading rules of a graded golden set (doceval.inputs.grading, docs/design.md section 3.4) on a tiny corpus
and qrels written here: grading_candidate and inconsistent_grade, both directions, as warnings and under
``golden validate --strict``, the qrels line's ``checked``, conversation turns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from doceval.cli.main import main
from doceval.inputs.doc_examples import api_name
from doceval.inputs.docs import Document, write_corpus
from doceval.inputs.qrels import qrels_path

DOCS = [
    ("lib.load", "def lib.load(path)\n\nLoad a file."),
    ("lib.io.load", "def lib.io.load(stream)\n\nLoad from a stream."),
    ("lib.reload", "def lib.reload(path)\n\nLoad again."),  # ends with "load", not on a component boundary
    ("lib.LOAD", "constant lib.LOAD\n\nA load flag."),  # another case: not the name `load`
    ("lib.dump", "def lib.dump(obj)\n\nWrite a file; see load."),
]
PIN = "lib@1.0"


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    docs = {PIN: [Document(f"{PIN}:{p}", "lib", "1.0", p, "function", text) for p, text in DOCS]}
    write_corpus(docs, tmp_path / "docs", 1500, {})
    return tmp_path / "docs"


def _entry(eid: str, **fields: Any) -> dict[str, Any]:
    base = {"id": eid, "question": f"question {eid}?", "library": "lib", "version": "1.0", "out_of_scope": False,
            "relevant_ids": [f"{PIN}:lib.load"], "reference_answer": "use lib.load(path)", "expected_apis": [".load("],
            "forbidden_apis": [], "split": "test", "kind": "lookup"}  # fmt: skip
    return {**base, **fields}


def _write(tmp_path: Path, rows: list[dict[str, Any]], qrels: list[dict[str, Any]]) -> Path:
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    qrels_path(path).write_text("".join(json.dumps(q) + "\n" for q in qrels), encoding="utf-8")
    return path


def _judged(eid: str, doc: str, grade: int, **more: Any) -> dict[str, Any]:
    return {"id": eid, "doc_id": f"{PIN}:{doc}", "grade": grade, "judged_by": "test", "reason": "r", **more}


def _validate(path: Path, corpus_dir: Path, *extra: str) -> int:
    return main(["golden", "validate", str(path), "--corpus", str(corpus_dir), *extra])


@pytest.mark.parametrize(
    ("raw", "name"),
    [(".dict(", "dict"), ("@validator", "validator"), ("pre=True", "pre"), ("Mapped[", "Mapped"),
     ("begin()", "begin"), ("Query.scalar", "Query.scalar"), ("type hint", None), ("scalars().one(", None),
     ("=validator(", None), ("pydantic-extra-types", None)],
)  # fmt: skip
def test_expected_strings_are_normalised_to_dotted_names(raw: str, name: str | None) -> None:
    assert api_name(raw) == name


def test_a_document_of_an_expected_api_unjudged_or_below_2_is_a_candidate(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a: lib.io.load is unjudged; b: it is graded 1; c: it is graded 2 (relevant), so no candidate (c is of
    # another kind, so its grade is not compared with b's).
    rows = [
        _entry("a"),
        _entry("b"),
        _entry("c", kind="version_trap", relevant_ids=[f"{PIN}:lib.load", f"{PIN}:lib.io.load"]),
    ]
    qrels = [
        _judged("a", "lib.load", 2),
        _judged("b", "lib.load", 2),
        _judged("b", "lib.io.load", 1),
        _judged("c", "lib.load", 2),
        _judged("c", "lib.io.load", 2),
    ]
    path = _write(tmp_path, rows, qrels)
    assert _validate(path, corpus_dir) == 0  # warnings only
    out = capsys.readouterr().out
    assert "2 grading_candidate pair(s) over 2 entries, 0 inconsistent_grade" in out
    warnings = [x for x in out.splitlines() if x.startswith("  warning: ") and "documents the expected" in x]
    assert len(warnings) == 2
    assert (
        f"{path}:1: qrels: entry a: {PIN}:lib.io.load documents the expected 'load' itself but is unjudged"
        in out
    )
    assert (
        f"{path}:2: qrels: entry b: {PIN}:lib.io.load documents the expected 'load' itself but is graded 1"
        in out
    )
    assert "entry c:" not in out
    # neither the substring match (lib.reload) nor another case (lib.LOAD) is a candidate
    assert "lib.reload" not in out and "lib.LOAD" not in out


def test_strict_makes_the_grading_rules_errors(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, [_entry("a")], [_judged("a", "lib.load", 2)])
    assert _validate(path, corpus_dir, "--strict") == 2
    err = capsys.readouterr().err
    assert "golden set has 1 problem:" in err
    assert f"{path}:1: qrels: entry a: {PIN}:lib.io.load documents the expected 'load' itself" in err
    assert "fix: read it: grade it 2" in err
    # the same set, judged: clean under --strict too
    path = _write(tmp_path, [_entry("a", relevant_ids=[f"{PIN}:lib.load", f"{PIN}:lib.io.load"])],
                  [_judged("a", "lib.load", 2), _judged("a", "lib.io.load", 2)])  # fmt: skip
    assert _validate(path, corpus_dir, "--strict") == 0
    assert "0 grading_candidate pair(s) over 0 entries, 0 inconsistent_grade" in capsys.readouterr().out


def test_one_document_graded_differently_across_entries_of_one_kind_is_inconsistent(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = [f"{PIN}:lib.load", f"{PIN}:lib.io.load"]
    rows = [
        _entry("a", relevant_ids=both),  # lib.io.load: 2
        _entry("b"),  # lib.io.load: 1, same kind: inconsistent with a
        _entry("c", kind="version_trap"),  # lib.io.load: 1, another kind: not compared with a
        _entry("d", kind="version_trap"),  # lib.io.load: 1, as c: consistent
    ]
    qrels = [_judged(e, "lib.load", 2) for e in "abcd"]
    qrels += [_judged("a", "lib.io.load", 2), *(_judged(e, "lib.io.load", 1) for e in "bcd")]
    path = _write(tmp_path, rows, qrels)
    assert _validate(path, corpus_dir) == 0
    out = capsys.readouterr().out
    assert "1 inconsistent_grade document(s)" in out
    row = next(x for x in out.splitlines() if "graded differently" in x)
    assert (
        f"{path}:1: qrels: entry a: {PIN}:lib.io.load is graded differently across the lookup entries" in row
    )
    assert row.endswith("a=2, b=1; fix: apply one grade for the same reason (regrade the odd ones), or give in "
                        'each line\'s reason what makes the entries differ and add "checked": ["inconsistent_grade"] '
                        "to each")  # fmt: skip
    assert "version_trap entries" not in out
    assert _validate(path, corpus_dir, "--strict") == 2
    assert "graded differently" in capsys.readouterr().err


def test_a_judgment_checked_under_a_rule_keeps_its_grade_but_an_unjudged_pair_stays(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = [f"{PIN}:lib.load", f"{PIN}:lib.io.load"]
    rows = [_entry("a", relevant_ids=both), _entry("b"), _entry("c")]
    qrels = [_judged(e, "lib.load", 2) for e in "abc"]
    qrels += [
        _judged("a", "lib.io.load", 2, checked=["inconsistent_grade"]),
        _judged("b", "lib.io.load", 1, checked=["grading_candidate", "inconsistent_grade"]),
    ]  # c: lib.io.load unjudged
    path = _write(tmp_path, rows, qrels)
    assert _validate(path, corpus_dir, "--strict") == 2
    err = capsys.readouterr().err
    assert "golden set has 1 problem:" in err and f"entry c: {PIN}:lib.io.load" in err and "unjudged" in err
    qrels_path(path).write_text(json.dumps(_judged("a", "lib.load", 2, checked=["stale"])) + "\n")
    assert _validate(path, corpus_dir) == 2
    err = capsys.readouterr().err
    assert f"{qrels_path(path)}:1: checked: ['stale']: must be a list of grading rules" in err


def test_conversation_turns_pass_the_same_checks(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    turn = {k: v for k, v in _entry("x").items() if k not in ("id", "split")}
    conversation = {"id": "conv-1", "split": "test", "kind": "conversation",
                    "turns": [{**turn, "kind": "first_turn", "needs_memory": False},
                              {**turn, "kind": "follow_up_reference", "needs_memory": True}]}  # fmt: skip
    qrels = [_judged("conv-1#1", "lib.load", 2), _judged("conv-1#1", "lib.io.load", 0)]
    qrels += [_judged("conv-1#2", "lib.load", 2), _judged("conv-1#2", "lib.io.load", 0)]
    path = _write(tmp_path, [conversation], qrels)
    assert _validate(path, corpus_dir, "--strict") == 2
    err = capsys.readouterr().err
    assert "golden set has 2 problems:" in err
    assert f"entry conv-1#1: {PIN}:lib.io.load documents the expected 'load' itself but is graded 0" in err
    assert f"entry conv-1#2: {PIN}:lib.io.load documents the expected 'load' itself but is graded 0" in err


def test_a_set_without_qrels_is_not_graded_and_strict_needs_the_corpus(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "plain.jsonl"
    path.write_text(json.dumps(_entry("a")) + "\n", encoding="utf-8")
    assert _validate(path, corpus_dir, "--strict") == 0
    assert "grading rules: not checked (" in capsys.readouterr().out
    assert main(["golden", "validate", str(path), "--no-corpus", "--strict"]) == 2
    assert "--strict: the grading rules need the corpus" in capsys.readouterr().err
