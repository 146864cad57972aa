"""Golden-set validation (every problem, with file:line:field), split selection and stratified assignment."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from doceval.cli.main import main
from doceval.errors import UsageError
from doceval.inputs.corpus import load_corpus
from doceval.inputs.docs import Document, write_corpus
from doceval.inputs.golden import GoldenError, parse_golden, select_split
from doceval.inputs.scope import load_checked_golden
from doceval.inputs.splits import assign_splits, write_splits

CORPUS_IDS = {"lib@1.0:lib.a", "lib@1.0:lib.b", "lib@2.0:lib.a"}


def entry(**overrides) -> dict:
    rec = {
        "id": "q1",
        "question": "How do I call a?",
        "library": "lib",
        "version": "1.0",
        "out_of_scope": False,
        "relevant_ids": ["lib@1.0:lib.a"],
        "reference_answer": "Call lib.a().",
        "expected_apis": ["lib.a"],
        "forbidden_apis": [],
        "split": None,
        "kind": "lookup",
    }
    rec.update(overrides)
    return rec


def oos(**overrides) -> dict:
    base = {"id": "u1", "out_of_scope": True, "relevant_ids": [], "reference_answer": "", "expected_apis": [],
            "kind": "nonexistent_api"}  # fmt: skip
    return entry(**{**base, **overrides})


def write(tmp_path: Path, lines: list) -> Path:
    path = tmp_path / "golden.jsonl"
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8"
    )
    return path


def problems(path: Path, corpus_ids=None) -> list[str]:
    with pytest.raises(GoldenError) as err:
        parse_golden(path, corpus_ids=corpus_ids)
    assert str(err.value).startswith(f"golden set has {len(err.value.problems)} problem")
    return [str(p) for p in err.value.problems]


# ------------------------------------------------------------------------------------------ validation


def test_a_valid_file_loads(tmp_path):
    path = write(tmp_path, [entry(), "", oos(split="test"), entry(id="q2", library="LIB", extra_field=1)])
    entries = parse_golden(path, corpus_ids=CORPUS_IDS)
    assert [e.id for e in entries] == ["q1", "u1", "q2"]
    assert [e.line for e in entries] == [1, 3, 4]  # blank lines are skipped but still counted
    assert entries[0].pin == "lib@1.0" and entries[0].relevant_ids == ("lib@1.0:lib.a",)
    assert entries[2].library == "lib" and entries[2].extra == {"extra_field": 1}
    assert entries[1].out_of_scope and entries[1].split == "test"


def test_bad_json(tmp_path):
    path = write(tmp_path, [entry(), '{"id": "q2", "question": ', entry(id="q3")])
    got = problems(path)
    assert len(got) == 1 and got[0].startswith(f"{path}:2: (json): not valid JSON")


def test_a_line_that_is_not_an_object(tmp_path):
    path = write(tmp_path, [entry(), '["q1"]', "42"])
    assert problems(path) == [
        f"{path}:2: (entry): each line must be a JSON object",
        f"{path}:3: (entry): each line must be a JSON object",
    ]
    # A file that starts with `[` is a JSON array of entries, not JSONL.
    path = write(tmp_path, ['["q1"]'])
    assert problems(path) == [f"{path}: entry 1: (entry): each entry must be a JSON object"]


def test_missing_field(tmp_path):
    rec = entry()
    del rec["kind"]
    path = write(tmp_path, [rec])
    assert problems(path) == [f'{path}:1: kind: missing; add "kind" (a string)']


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("out_of_scope", "yes", "must be true or false, got str"),
        ("out_of_scope", 0, "must be true or false, got int"),
        ("relevant_ids", "lib@1.0:lib.a", "must be a list of document ids, got str"),
        ("question", True, "must be a string, got bool"),
        ("split", 1, "must be a string or null, got int"),
        ("expected_apis", ["lib.a", 3], "every item must be a non-empty string"),
        ("id", "  ", "must not be empty"),
    ],
)
def test_wrong_type(tmp_path, field, value, message):
    path = write(tmp_path, [entry(**{field: value})])
    assert problems(path) == [f"{path}:1: {field}: {message}"]


def test_duplicate_id(tmp_path):
    path = write(tmp_path, [entry(), entry(id="q2"), entry()])
    assert problems(path) == [f"{path}:3: id: duplicate id 'q1' (first on line 1)"]


def test_in_scope_without_relevant_ids(tmp_path):
    path = write(tmp_path, [entry(relevant_ids=[])])
    (got,) = problems(path)
    assert got.startswith(
        f"{path}:1: relevant_ids: an in-scope entry needs at least one relevant document id"
    )


def test_out_of_scope_with_relevant_ids(tmp_path):
    path = write(tmp_path, [oos(relevant_ids=["lib@1.0:lib.a"])])
    (got,) = problems(path)
    assert got.startswith(f"{path}:1: relevant_ids: an out-of-scope entry must have no relevant ids")


def test_relevant_id_absent_from_the_corpus(tmp_path):
    path = write(tmp_path, [entry(relevant_ids=["lib@1.0:lib.a", "lib@1.0:lib.zzz"])])
    (got,) = problems(path, corpus_ids=CORPUS_IDS)
    assert got.startswith(f"{path}:1: relevant_ids: 'lib@1.0:lib.zzz' is not in the built corpus")
    assert parse_golden(path, corpus_ids=None)  # without a corpus the id cannot be checked


def test_relevant_id_of_another_pin(tmp_path):
    path = write(tmp_path, [entry(relevant_ids=["lib@2.0:lib.a"])])
    (got,) = problems(path, corpus_ids=CORPUS_IDS)
    assert (
        got
        == f"{path}:1: relevant_ids: 'lib@2.0:lib.a' is not a document of lib@1.0 (ids are LIB@VERSION:path)"
    )


def test_unknown_split(tmp_path):
    path = write(tmp_path, [entry(split="train")])
    assert problems(path) == [
        f"{path}:1: split: unknown split 'train'; use one of ['calibration', 'test'] or null"
    ]


def test_in_scope_without_reference_answer(tmp_path):
    path = write(tmp_path, [entry(reference_answer=" ")])
    assert problems(path) == [f"{path}:1: reference_answer: an in-scope entry needs a reference answer"]


def test_every_problem_is_listed_not_just_the_first(tmp_path):
    bad_type = entry(id="q2", out_of_scope="yes")
    no_question = entry(id="q3")
    del no_question["question"]
    path = write(
        tmp_path,
        [
            entry(),  # 1: fine
            "{not json",  # 2
            bad_type,  # 3
            no_question,  # 4
            entry(),  # 5: duplicate of 1
            entry(id="q6", relevant_ids=[]),  # 6
            oos(id="u7", relevant_ids=["lib@1.0:lib.a"]),  # 7
            entry(id="q8", relevant_ids=["lib@1.0:lib.nope"]),  # 8
            entry(id="q9", relevant_ids=["lib@2.0:lib.a"]),  # 9
            entry(id="q10", split="dev"),  # 10
        ],
    )
    got = problems(path, corpus_ids=CORPUS_IDS)
    assert [(p.split(":")[1], p.split(": ")[1]) for p in got] == [
        ("2", "(json)"),
        ("3", "out_of_scope"),
        ("4", "question"),
        ("5", "id"),
        ("6", "relevant_ids"),
        ("7", "relevant_ids"),
        ("8", "relevant_ids"),
        ("9", "relevant_ids"),
        ("10", "split"),
    ]
    # Several problems on one line are all reported too.
    path = write(tmp_path, [entry(out_of_scope="yes", kind=3, relevant_ids="x")])
    assert {p.split(": ")[1] for p in problems(path)} == {"out_of_scope", "kind", "relevant_ids"}


def test_missing_or_empty_file(tmp_path):
    with pytest.raises(UsageError, match="golden set not found"):
        parse_golden(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(UsageError, match="has no entries"):
        parse_golden(tmp_path / "empty.jsonl")


# ---------------------------------------------------------------------------------------------- splits


def test_select_split_includes_untagged_entries(tmp_path):
    path = write(tmp_path, [entry(id="a", split="calibration"), entry(id="b", split="test"), entry(id="c")])
    entries = parse_golden(path)
    assert [e.id for e in select_split(entries, "calibration")] == ["a", "c"]
    assert [e.id for e in select_split(entries, "test")] == ["b", "c"]
    assert [e.id for e in select_split(entries, None)] == ["a", "b", "c"]


def test_select_split_with_no_entries_lists_the_known_splits(tmp_path):
    path = write(tmp_path, [entry(id="a", split="test"), entry(id="b")])
    entries = parse_golden(path)
    with pytest.raises(UsageError) as err:
        select_split(entries, "calibration", path)
    assert "--split calibration" in str(err.value) and str(path) in str(err.value)
    assert "known splits: test" in str(err.value)


def test_an_untagged_golden_set_is_unaffected_by_the_split(tmp_path):
    """The seed's rule: untagged entries belong to every split, so an untagged set runs whole."""
    untagged = parse_golden(write(tmp_path, [entry(id="a"), entry(id="b")]))
    assert [e.id for e in select_split(untagged, "test")] == ["a", "b"]
    assert [e.id for e in select_split(untagged, "calibration")] == ["a", "b"]


def _many_entries(tmp_path: Path) -> list:
    recs = []
    sizes = {("lib", "1.0", "lookup"): 7, ("lib", "1.0", "paraphrase"): 4, ("lib", "2.0", "lookup"): 5,
             ("lib", "2.0", "version_trap"): 3, ("other", "1.0", "unindexed_library"): 3}  # fmt: skip
    for (library, version, kind), n in sizes.items():
        for i in range(n):
            base = oos if kind == "unindexed_library" else entry
            relevant = [] if kind == "unindexed_library" else [f"{library}@{version}:lib.a"]
            recs.append(
                base(id=f"{library}-{version}-{kind}-{i}", library=library, version=version, kind=kind,
                     relevant_ids=relevant)
            )  # fmt: skip
    return parse_golden(write(tmp_path, recs))


def test_assign_splits_is_deterministic_balanced_and_stratified(tmp_path):
    entries = _many_entries(tmp_path)
    first = assign_splits(entries, seed=0)
    assert first == assign_splits(list(reversed(entries)), seed=0)  # input order does not matter
    assert set(first) == {e.id for e in entries} and set(first.values()) == {"calibration", "test"}
    assert assign_splits(entries, seed=1) != first
    for seed in range(5):
        split = assign_splits(entries, seed=seed)
        totals = Counter(split.values())
        assert abs(totals["calibration"] - totals["test"]) <= 1  # 22 entries, 5 strata (3 odd)
        for pin_kind in {(e.pin, e.kind) for e in entries}:
            counts = Counter(split[e.id] for e in entries if (e.pin, e.kind) == pin_kind)
            assert abs(counts["calibration"] - counts["test"]) <= 1, (seed, pin_kind)


def test_write_splits_tags_the_file_in_place(tmp_path):
    entries = _many_entries(tmp_path)
    path = tmp_path / "golden.jsonl"
    counts = write_splits(path, seed=0)
    assert sum(counts.values()) == len(entries)
    tagged = parse_golden(path)
    assert [e.id for e in tagged] == [e.id for e in entries]  # line order kept
    assert {e.id: e.split for e in tagged} == assign_splits(entries, seed=0)


# ------------------------------------------------------------------------------------------------- CLI


def test_cli_golden_validate_exit_codes(tmp_path, capsys):
    good = write(tmp_path, [entry(), oos()])
    assert main(["golden", "validate", str(good), "--no-corpus"]) == 0
    out = capsys.readouterr().out
    assert f"{good}: 2 entries, valid (corpus not checked)" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(entry()) + "\n" + json.dumps(entry(id="q2", out_of_scope="yes")) + "\n")
    assert main(["golden", "validate", str(bad), "--no-corpus"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2: out_of_scope: must be true or false, got str" in err
    assert main(["golden", "validate", str(tmp_path / "missing.jsonl"), "--no-corpus"]) == 2
    assert "golden set not found" in capsys.readouterr().err


def test_cli_golden_validate_checks_ids_against_the_built_corpus(tmp_path, capsys):
    from doceval.inputs.docs import Document, write_corpus

    doc = Document("lib@1.0:lib.a", "lib", "1.0", "lib.a", "function", "def lib.a()\n\nDoes a.")
    write_corpus({"lib@1.0": [doc]}, tmp_path / "docs", 1500, {})
    good = write(tmp_path, [entry()])
    assert main(["golden", "validate", str(good), "--corpus", str(tmp_path / "docs")]) == 0
    assert "1 entries, valid against" in capsys.readouterr().out
    bad = write(tmp_path, [entry(relevant_ids=["lib@1.0:lib.b"])])
    assert main(["golden", "validate", str(bad), "--corpus", str(tmp_path / "docs")]) == 2
    assert "'lib@1.0:lib.b' is not in the built corpus" in capsys.readouterr().err


def test_an_extra_field_nested_100k_deep_is_exit_2_naming_its_line(tmp_path, capsys):
    """Issue 39 H10: json.loads raised RecursionError (exit 1, a traceback); nesting is bounded where it is
    read, and the line is named like any other bad JSON (a JSON array names its line too)."""
    deep = json.dumps(entry(id="q2"))[:-1] + ', "notes": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path = write(tmp_path, [entry(), deep])
    assert main(["golden", "validate", str(path), "--no-corpus"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{path}:2: (json): not valid JSON: nested deeper than 100 levels" in err and "Traceback" not in err
    )
    array = tmp_path / "golden.json"
    array.write_text("[\n" + json.dumps(entry()) + ",\n" + deep + "\n]\n", encoding="utf-8")
    assert main(["golden", "validate", str(array), "--no-corpus"]) == 2
    assert f"{array}:3: (json): not valid JSON: nested deeper than 100 levels" in capsys.readouterr().err
    shallow = write(tmp_path, [entry(notes=json.loads("[" * 99 + "]" * 99))])  # 100 levels with the entry
    assert main(["golden", "validate", str(shallow), "--no-corpus"]) == 0


def test_a_qrels_judgment_of_a_missing_document_is_an_error(tmp_path, capsys):
    """Issue 39 H18: a qrels line naming a document of the right pin that the built corpus lacks passed
    validation (only relevant ids were checked for existence); it is an error of every validation against
    documents (the corpus, an --ids file, and a run), as relevant_id_missing is."""
    docs = [Document(f"lib@1.0:lib.{n}", "lib", "1.0", f"lib.{n}", "function", f"def lib.{n}()\n\nDoes {n}.")
            for n in ("a", "b")]  # fmt: skip
    write_corpus({"lib@1.0": docs}, tmp_path / "docs", 1500, {})
    path = write(tmp_path, [entry()])
    judged = [{"id": "q1", "doc_id": "lib@1.0:lib.a", "grade": 2, "judged_by": "me", "reason": "answers"},
              {"id": "q1", "doc_id": "lib@1.0:lib.b", "grade": 0, "judged_by": "me", "reason": "other API"}]  # fmt: skip
    qrels = tmp_path / "golden.qrels.jsonl"
    qrels.write_text("".join(json.dumps(j) + "\n" for j in judged), encoding="utf-8")
    assert main(["golden", "validate", str(path), "--corpus", str(tmp_path / "docs")]) == 0
    capsys.readouterr()
    judged[1]["doc_id"] = "lib@1.0:lib.typo"  # the right pin, no such document
    qrels.write_text("".join(json.dumps(j) + "\n" for j in judged), encoding="utf-8")
    assert main(["golden", "validate", str(path), "--corpus", str(tmp_path / "docs")]) == 2
    err = capsys.readouterr().err
    assert f"{path}:1: qrels: entry q1: 'lib@1.0:lib.typo' is judged in the qrels (grade 0)" in err
    with pytest.raises(GoldenError, match="is judged in the qrels"):  # what every run loads its labels with
        load_checked_golden(path, load_corpus(tmp_path / "docs"))
    ids = tmp_path / "ids.txt"
    ids.write_text("lib@1.0:lib.a\nlib@1.0:lib.b\n", encoding="utf-8")
    assert main(["golden", "validate", str(path), "--ids", str(ids)]) == 2
    assert f"{qrels}:2: doc_id: 'lib@1.0:lib.typo' is not in {ids} (--ids)" in capsys.readouterr().err
