"""Golden set v2's machinery: graded qrels beside a golden set (authoritative, in the labels' md5), version
strings (`expected_any`, `allow_forbidden`, the v2 rules), the contrast list, the pool of unjudged documents,
the label audit, `relevance.threshold` from the CLI, and the shipped v2 files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from test_scope import DOCS, _entry, _golden

from doceval.cli.main import main
from doceval.errors import UsageError
from doceval.inputs.audit import audit_sample, read_verdicts
from doceval.inputs.docs import Document, write_corpus
from doceval.inputs.golden import GoldenError, parse_golden
from doceval.inputs.qrels import labels_md5, qrels_path, unjudged
from doceval.results.audit import summarise
from doceval.scoring.contrast import contrast_only
from doceval.scoring.metrics import contains_apis
from doceval.scoring.proportions import wilson

ROOT = Path(__file__).resolve().parents[1]


def _qrels(golden: Path, rows: list[tuple[str, str, int]]) -> Path:
    path = qrels_path(golden)
    path.write_text("".join(json.dumps({"id": i, "doc_id": d, "grade": g, "judged_by": "test", "reason": "r"}) + "\n"
                            for i, d, g in rows))  # fmt: skip
    return path


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    docs = {
        pin: [Document(f"{pin}:{p}", "lib", pin.split("@")[1], p, "function", text) for p, text in items]
        for pin, items in DOCS.items()
    }
    write_corpus(docs, tmp_path / "docs", 1500, {})
    return tmp_path / "docs"


# ------------------------------------------------------------------------------------------ qrels


def test_qrels_are_authoritative_and_part_of_the_labels_md5(tmp_path: Path) -> None:
    golden = _golden(tmp_path, [_entry("a", relevant_ids=["lib@1.0:lib.load"])])
    before = labels_md5(golden)
    _qrels(golden, [("a", "lib@1.0:lib.load", 2), ("a", "lib@1.0:lib.helpers", 1), ("a", "lib@1.0:x", 0)])
    (entry,) = parse_golden(golden)
    assert entry.grades == {"lib@1.0:lib.load": 2, "lib@1.0:lib.helpers": 1, "lib@1.0:x": 0}
    assert labels_md5(golden) != before  # a regraded document changes what every summary records
    _qrels(golden, [("a", "lib@1.0:lib.load", 2), ("a", "lib@1.0:lib.helpers", 2)])
    with pytest.raises(UsageError, match=r"relevant_ids must be exactly its grade-2 documents.*lib.helpers"):
        parse_golden(golden)


@pytest.mark.parametrize(
    "line,needle",
    [({"id": "a", "doc_id": "lib@1.0:x", "grade": 3, "judged_by": "t"}, "grade: 3 is not a grade"),
     ({"id": "zz", "doc_id": "lib@1.0:x", "grade": 0, "judged_by": "t"}, "id: 'zz' is not an entry"),
     ({"id": "a", "doc_id": "lib@2.0:lib.load", "grade": 0, "judged_by": "t"}, "is not a document of lib@1.0"),
     ({"id": "a", "doc_id": "lib@1.0:x", "grade": 0}, "judged_by: missing"),
     ({"id": "a", "doc_id": "lib@1.0:lib.load", "grade": 2, "judged_by": "t"}, "judged twice")],
)  # fmt: skip
def test_bad_qrels_lines_name_file_line_and_field(tmp_path: Path, line: dict[str, Any], needle: str) -> None:
    golden = _golden(tmp_path, [_entry("a", relevant_ids=["lib@1.0:lib.load"])])
    path = qrels_path(golden)
    path.write_text(json.dumps({"id": "a", "doc_id": "lib@1.0:lib.load", "grade": 2, "judged_by": "t"}) + "\n"
                    + json.dumps(line) + "\n")  # fmt: skip
    with pytest.raises(UsageError) as err:
        parse_golden(golden)
    assert f"{path}:2:" in str(err.value) and needle in str(err.value)


def test_pool_lists_what_runs_retrieved_and_nobody_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden = _golden(tmp_path, [_entry("a", relevant_ids=["lib@1.0:lib.load"])])
    _qrels(golden, [("a", "lib@1.0:lib.load", 2), ("a", "lib@1.0:lib.helpers", 0)])
    run = {"entries": [{"id": "a", "retrieved": [["lib@1.0:lib.helpers", 0.9], ["lib@1.0:lib.legacy_parse", 0.8],
                                                 ["lib@1.0:lib.load", 0.7], ["lib@1.0:lib.other", 0.1]]}]}  # fmt: skip
    rows = unjudged(parse_golden(golden), [run], k=3)
    assert [(r["id"], r["doc_id"], r["grade"]) for r in rows] == [("a", "lib@1.0:lib.legacy_parse", None)]
    run["entries"][0]["scores"] = {}
    (tmp_path / "run.json").write_text(json.dumps({**run, "metrics": {}, "config": {}}))
    out = tmp_path / "pool.jsonl"
    assert (
        main(["golden", "pool", str(tmp_path / "run.json"), "--golden", str(golden), "--out", str(out)]) == 0
    )
    assert [json.loads(x)["doc_id"] for x in out.read_text().splitlines()] == [
        "lib@1.0:lib.legacy_parse",
        "lib@1.0:lib.other",
    ]
    assert "2 unjudged document(s) over 1 entries" in capsys.readouterr().err


# ------------------------------------------------------------------------------- version strings


def test_expected_any_needs_one_of_each_group() -> None:
    groups = [["scalars(", "execute("], ["one_or_none"]]
    assert contains_apis("session.scalars(stmt).one_or_none()", ["stmt"], ["query("], [groups[0]])
    assert contains_apis("session.execute(stmt) then one_or_none", [], [], groups)
    assert not contains_apis("session.get(User, 1)", [], [], groups)
    assert not contains_apis("session.scalars(q).one_or_none() or session.query(", [], ["query("], groups)


def test_v2_rules_are_errors_for_a_graded_set_and_warnings_for_an_older_one(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [_entry("q", question="how do I use lib.save?", forbidden_apis=["lib.save"]),
            _entry("ok", question="how do I use lib.save?", forbidden_apis=["lib.save"], allow_forbidden=["lib.save"]),
            _entry("c", expected_apis=["load"], expected_any=[["dump(", "lib.save"]], forbidden_apis=["lib.save"],
                   allow_forbidden=["lib.save"], reference_answer="lib.load it, lib.dump(it) back")]  # fmt: skip
    golden = _golden(tmp_path, rows)
    assert main(["golden", "validate", str(golden), "--corpus", str(corpus_dir)]) == 0  # an older set: warns
    out = capsys.readouterr().out
    assert "entry q: forbids 'lib.save', which its own question contains" in out
    assert "entry c: expects 'lib.save', which contains the forbidden 'lib.save'" in out
    _qrels(golden, [(r["id"], "lib@1.0:lib.load", 2) for r in rows])
    assert main(["golden", "validate", str(golden), "--corpus", str(corpus_dir)]) == 2  # v2 format: an error
    err = capsys.readouterr().err
    assert (
        "golden set has 1 problem" in err
        and "entry q: forbids 'lib.save'" in err
        and "allow_forbidden" in err
    )


def test_bad_version_string_fields_are_reported(tmp_path: Path) -> None:
    golden = _golden(tmp_path, [_entry("a", expected_any=[["only-one"]], allow_forbidden=["not-forbidden"])])
    with pytest.raises(GoldenError) as err:
        parse_golden(golden)
    text = str(err.value)
    assert "expected_any: must be a list of groups of at least two alternatives" in text
    assert "allow_forbidden: 'not-forbidden' is not one of the entry's forbidden_apis" in text


def test_contrast_only_finds_the_metrics_false_negatives() -> None:
    expected, forbidden = ["model_dump"], [".dict("]
    contrast = "Use m.model_dump() instead of .dict(), which is deprecated in v2."
    assert [name for name, _ in contrast_only(contrast, expected, forbidden)] == [".dict("]
    assert contrast_only("Call m.dict() or m.model_dump().", expected, forbidden) == []  # a plain use: wrong
    assert contrast_only("Call m.model_dump().", expected, forbidden) == []  # passes: nothing to list
    assert contrast_only("Instead of .dict( use to_json", expected, forbidden) == []  # misses model_dump


# ------------------------------------------------------------------------------------------ audit


def test_audit_sample_is_seeded_and_stratified_and_the_rate_has_its_wilson_interval(tmp_path: Path) -> None:
    entries = parse_golden(ROOT / "data" / "golden" / "v2.jsonl")
    a, b = audit_sample(entries, 60, seed=3), audit_sample(entries, 60, seed=3)
    assert [e.id for e in a] == [e.id for e in b] != [e.id for e in audit_sample(entries, 60, seed=4)]
    kinds = {(e.out_of_scope, e.kind) for e in entries}
    assert {(e.out_of_scope, e.kind) for e in a} == kinds and len(a) == 60  # every stratum represented
    verdicts = tmp_path / "v.jsonl"
    rows = [
        {"id": e.id, "stratum": "s", "verdict": "WRONG" if i < 2 else "OK", "reason": "x"}
        for i, e in enumerate(a)
    ]
    verdicts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = summarise(read_verdicts(verdicts, [e.id for e in entries]))
    assert summary["counts"] == {"OK": 58, "MINOR": 0, "WRONG": 2}
    assert summary["wrong_ci95"] == pytest.approx(list(wilson(2, 60)))
    rows[0] = {**rows[0], "verdict": "BAD"}
    verdicts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UsageError, match=r"v.jsonl:1: verdict: 'BAD'"):
        read_verdicts(verdicts, [e.id for e in entries])


# ------------------------------------------------------------------------------- the shipped v2


def test_shipped_v2_keeps_v1_ids_and_its_qrels_cover_the_pool() -> None:
    v1 = {e.id: e for e in parse_golden(ROOT / "data" / "golden" / "v1.jsonl")}
    v2 = {e.id: e for e in parse_golden(ROOT / "data" / "golden" / "v2.jsonl")}
    assert set(v1) == set(v2) and all(v1[i].split == v2[i].split for i in v1)
    for e in v2.values():
        assert e.qrels is not None
        if not e.out_of_scope:
            assert set(e.relevant_ids) == {d for d, g in e.grades.items() if g == 2} and e.relevant_ids
            assert len(e.grades) >= len(e.relevant_ids)
    gained = sum(
        bool(set(v2[i].relevant_ids) - set(v1[i].relevant_ids)) for i in v1 if not v2[i].out_of_scope
    )
    assert gained >= 30  # the pool found answers v1 did not list


def test_shipped_audit_is_the_seeded_sample_of_the_shipped_v2_with_a_verdict_per_row() -> None:
    golden = ROOT / "data" / "golden"
    entries = parse_golden(golden / "v2.jsonl")
    for name, seed in (("v2.audit.jsonl", 4), ("v2.audit-seed3.jsonl", 3), ("v2.audit-seed2.jsonl", 2)):
        ids = [json.loads(x)["id"] for x in (golden / name).read_text().splitlines()]
        # the rows are the documented draw, so anyone can redraw them: no hand-picked sample
        assert ids == [e.id for e in audit_sample(entries, 120, seed=seed)], name
        summary = summarise(read_verdicts(golden / name, [e.id for e in entries]))
        assert summary["n"] == 120 and sum(summary["counts"].values()) == 120


def test_relevance_threshold_option_from_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corpus_dir: Path
) -> None:
    (tmp_path / "conf").symlink_to(ROOT / "conf")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "docs").symlink_to(corpus_dir)
    golden = _golden(
        tmp_path, [_entry("a", question="load a file strictly", relevant_ids=["lib@1.0:lib.load"])]
    )
    _qrels(golden, [("a", "lib@1.0:lib.load", 2), ("a", "lib@1.0:lib.helpers", 1)])
    monkeypatch.chdir(tmp_path)
    results = {}
    for threshold in (2, 1):
        out = f"t{threshold}.json"
        args = ["eval", "--no-track", "--quiet", "--golden", str(golden), "--output", out, "--split", "all",
                "retriever=bm25", "floors=zero", f"relevance.threshold={threshold}"]  # fmt: skip
        assert main(args) == 0
        results[threshold] = json.loads((tmp_path / out).read_text())["metrics"]
    # bm25 retrieves load and legacy_parse (unjudged), not helpers (grade 1): it counts as relevant only at
    # threshold 1, and the *_rel1 metrics count it at both.
    assert (results[2]["recall"], results[2]["recall_rel1"]) == (1.0, 0.5)
    assert (results[1]["recall"], results[1]["recall_rel1"]) == (0.5, 0.5)
    assert results[2]["judged_share"] == results[1]["judged_share"] == 0.5  # legacy_parse was never judged
    # nDCG: DCG = 2 (load first); ideal = 2 + 1/log2(3); the grades are the gains, whatever the threshold
    assert results[1]["ndcg"] == results[2]["ndcg"] == pytest.approx(2 / (2 + 1 / math.log2(3)))
    assert main(["eval", "--no-track", "--quiet", "--golden", str(golden), "--output", "x.json",
                 "relevance.threshold=3"]) == 2  # fmt: skip
