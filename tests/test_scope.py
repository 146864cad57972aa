"""Scope labels against the corpus of the run (doceval.inputs.scope, docs/design.md section 3.3): every rule
on a tiny corpus, the frozen-set record, the run-time check, corpus pins in the summary and compare, and the
pairing of each shipped corpus with its golden set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from doceval.cli.main import main
from doceval.config.compose import compose
from doceval.errors import UsageError
from doceval.inputs.corpus import load_corpus
from doceval.inputs.docs import Document, write_corpus
from doceval.inputs.golden import GoldenError, parse_golden
from doceval.inputs.scope import findings_path, load_checked_golden
from doceval.results import compare

ROOT = Path(__file__).resolve().parents[1]

DOCS = {
    "lib@1.0": [
        ("lib.load", "def lib.load(path)\n\nLoad a file. Use lib.dump to write it back."),
        ("lib.legacy_parse", "def lib.legacy_parse(text)\n\nDeprecated: use lib.load instead."),
        ("lib.helpers", "module lib.helpers\n\nCalls SomeSpecialFormat when needed."),
    ],
    "lib@2.0": [("lib.load", "def lib.load(path, *, strict)\n\nLoad a file strictly.")],
}


def _entry(eid: str, **fields: Any) -> dict[str, Any]:
    base = {"id": eid, "question": f"question {eid}?", "library": "lib", "version": "1.0", "out_of_scope": False,
            "relevant_ids": ["lib@1.0:lib.load"], "reference_answer": "use lib.load", "expected_apis": ["load"],
            "forbidden_apis": [], "split": "test", "kind": "lookup"}  # fmt: skip
    return {**base, **fields}


def _oos(eid: str, kind: str, **fields: Any) -> dict[str, Any]:
    return _entry(eid, out_of_scope=True, relevant_ids=[], reference_answer="", expected_apis=[], kind=kind,
                  **fields)  # fmt: skip


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    docs = {
        pin: [Document(f"{pin}:{p}", "lib", pin.split("@")[1], p, "function", text) for p, text in items]
        for pin, items in DOCS.items()
    }
    write_corpus(docs, tmp_path / "docs", 1500, {})
    return tmp_path / "docs"


def _golden(tmp_path: Path, rows: list[dict[str, Any]], name: str = "golden.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _validate(path: Path, corpus_dir: Path, *extra: str) -> int:
    return main(["golden", "validate", str(path), "--corpus", str(corpus_dir), *extra])


BAD = [
    _entry("ok"),
    _oos("u-indexed", "unindexed_library", version="2.0"),  # line 2: lib@2.0 is indexed
    _entry("in-missing-pin", version="3.0", relevant_ids=["lib@3.0:lib.load"]),  # line 3
    _entry("bad-id", relevant_ids=["lib@1.0:lib.lod"]),  # line 4
    _oos("nx-unnamed", "nonexistent_api"),  # line 5
    _oos("nx-documented", "nonexistent_api", forbidden_apis=["lib.dump"]),  # line 6: lib@1.0 mentions it
    _entry("forbids-supported", version="2.0", relevant_ids=["lib@2.0:lib.load"], forbidden_apis=["strict"]),
    _entry("bad-evidence", evidence={"lib@1.0:lib.load": "Load a folder."}),  # line 8
    _entry("expects-absent", expected_apis=["load", "mode='r'"]),  # line 9: a warning only
]


def test_every_rule_is_reported_with_line_field_id_and_fix(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _golden(tmp_path, BAD)
    assert _validate(path, corpus_dir) == 2
    err = capsys.readouterr().err
    expected = [
        (2, "kind", "u-indexed", "labelled unindexed_library, but the corpus indexes lib@2.0", "relabel"),
        (3, "library", "in-missing-pin", "the corpus does not index lib@3.0", "add lib@3.0 to the corpus"),
        (4, "relevant_ids", "bad-id", "'lib@1.0:lib.lod' is not in the built corpus", "check the dotted path"),
        (5, "forbidden_apis", "nx-unnamed", "must name the API it asks about", "put the API name"),
        (6, "forbidden_apis", "nx-documented", "asks about 'lib.dump' as nonexistent, but lib@1.0 documents",
         "relabel the entry in scope"),
        (7, "forbidden_apis", "forbids-supported", "forbids 'strict', which lib@2.0 documents without marking",
         "drop the name"),
        (8, "evidence", "bad-evidence", "the evidence quote for lib@1.0:lib.load does not occur", "quote"),
    ]  # fmt: skip
    assert "golden set has 7 problems" in err
    for line, field, eid, message, fix in expected:
        row = next((x for x in err.splitlines() if f"{path}:{line}: {field}: entry {eid}: " in x), None)
        assert row is not None, (line, err)
        assert message in row and f"fix: {fix}" in row
    assert "expects-absent" not in err  # a warning does not fail


def test_a_clean_set_passes_and_prints_statistics_and_warnings(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        _entry("ok", evidence={"lib@1.0:lib.load": "Load  a\nfile."}),  # whitespace-normalised quote
        _entry("deprecated-ok", forbidden_apis=["legacy_parse"]),  # documented, but marked deprecated
        _entry("glued-ok", forbidden_apis=["SpecialFormat"]),  # only inside SomeSpecialFormat: not the name
        _oos("nx-ok", "nonexistent_api", forbidden_apis=["lib.save"]),
        _oos("u-ok", "unindexed_library", library="other", version="9"),
        _entry(
            "expects-absent", expected_apis=["load", "mode='r'"], reference_answer="lib.load(p, mode='r')"
        ),
    ]
    assert _validate(_golden(tmp_path, rows), corpus_dir) == 0
    out = capsys.readouterr().out
    assert (
        "forbidden names of in-scope entries: 2; in their own pin's documents: 1 (1 marked in every document "
        "that uses them, 0 not: 0 of those kept by a waiver)" in out
    )
    assert "nonexistent_api names: 1 (0 documented in their pin)" in out
    assert "evidence quotes: 1; not found in their document: 0" in out
    assert "1 warning(s):" in out and "entry expects-absent: expects \"mode='r'\"" in out


def test_a_frozen_set_records_its_findings_and_a_changed_file_voids_the_record(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [_entry("ok"), _oos("nx-documented", "nonexistent_api", forbidden_apis=["lib.dump"])]
    path = _golden(tmp_path, rows)
    assert _validate(path, corpus_dir) == 2
    assert _validate(path, corpus_dir, "--record-findings") == 0
    record = json.loads(findings_path(path).read_text())
    assert [(f["id"], f["rule"], f["detail"]) for f in record["findings"]] == [
        ("nx-documented", "nonexistent_api_documented", "lib.dump")
    ]
    capsys.readouterr()
    assert _validate(path, corpus_dir) == 0  # frozen: the recorded finding is a warning now
    out = capsys.readouterr().out
    assert "1 known finding(s)" in out and "entry nx-documented" in out and "recorded for the frozen" in out
    # Any edit changes the md5: the record no longer applies and says why.
    _golden(tmp_path, [*rows, _entry("new")])
    assert _validate(path, corpus_dir) == 2
    err = capsys.readouterr().err
    assert "entry nx-documented" in err and "records the findings of another version" in err


def test_a_label_wrong_for_the_corpus_can_never_be_recorded(
    tmp_path: Path, corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _golden(tmp_path, [_entry("ok"), _oos("u-indexed", "unindexed_library", version="2.0")])
    assert _validate(path, corpus_dir, "--record-findings") == 2
    assert "cannot be recorded" in capsys.readouterr().err and not findings_path(path).exists()
    # A hand-written record does not help either.
    findings_path(path).write_text(json.dumps({"golden_md5": "x", "findings": []}))
    with pytest.raises(GoldenError, match="u-indexed: labelled unindexed_library"):
        load_checked_golden(path, load_corpus(corpus_dir))


def test_a_broken_findings_file_is_a_usage_error(tmp_path: Path, corpus_dir: Path) -> None:
    path = _golden(tmp_path, [_entry("ok")])
    findings_path(path).write_text("{not json")
    with pytest.raises(UsageError, match=r"golden\.findings\.json: not a findings file"):
        load_checked_golden(path, load_corpus(corpus_dir))


# --------------------------------------------------------------------- at run time, and in the summary


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "conf").symlink_to(ROOT / "conf")
    docs = {
        pin: [Document(f"{pin}:{p}", "lib", pin.split("@")[1], p, "function", text) for p, text in items]
        for pin, items in DOCS.items()
    }
    write_corpus(docs, tmp_path / "data" / "docs", 1500, {})
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _eval(golden: Path, out: str) -> int:
    return main(["eval", "--no-track", "--quiet", "--golden", str(golden), "--output", out, "--split", "all",
                 "retriever=bm25", "floors=zero"])  # fmt: skip


def test_eval_refuses_a_scope_label_wrong_for_the_corpus(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _golden(project, [_entry("ok"), _oos("u-indexed", "unindexed_library", version="2.0")])
    assert _eval(path, "out.json") == 2
    assert "entry u-indexed: labelled unindexed_library" in capsys.readouterr().err
    assert not (project / "out.json").exists()


def test_summaries_record_corpus_pins_and_compare_refuses_different_corpora(project: Path) -> None:
    path = _golden(project, [_entry("ok"), _oos("u-ok", "unindexed_library", library="other", version="9")])
    assert _eval(path, "a.json") == 0
    a = json.loads((project / "a.json").read_text())
    assert a["config"]["golden"]["corpus_pins"] == ["lib@1.0", "lib@2.0"]
    b = json.loads(json.dumps(a))
    b["config"]["golden"]["corpus_pins"] = ["lib@1.0", "lib@2.0", "other@9"]
    with pytest.raises(UsageError, match=r"only in NEW: other@9.*--allow-different-corpus"):
        compare(a, b)
    result = compare(a, b, allow_different_corpus=True)
    assert any("different corpora" in n for n in result.notes)
    (project / "b.json").write_text(json.dumps(b))
    assert main(["compare", "a.json", "b.json", "--no-gate"]) == 2
    assert main(["compare", "a.json", "b.json", "--no-gate", "--allow-different-corpus"]) == 0


# ------------------------------------------------------------------- each corpus with its golden set


def test_each_shipped_corpus_names_its_golden_set_and_golden_follows_it() -> None:
    for option, golden in (("default", "data/golden/v2.1.jsonl"), ("extended", "data/golden/extended.jsonl")):
        cfg = compose([f"docs={option}"], conf_dir=ROOT / "conf")
        assert cfg.docs.golden_set == golden and cfg.golden == golden
        assert (ROOT / golden).is_file()
    assert compose(["docs=extended", "golden=x.jsonl"], conf_dir=ROOT / "conf").golden == "x.jsonl"
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert all("${golden}" in stages[s]["deps"] for s in ("retrieve", "calibrate", "evaluate"))


def test_extended_golden_set_keeps_v1_and_relabels_the_two_stale_entries() -> None:
    v1 = {e.id: e for e in parse_golden(ROOT / "data" / "golden" / "v1.jsonl")}
    ext = {e.id: e for e in parse_golden(ROOT / "data" / "golden" / "extended.jsonl")}
    assert set(v1) <= set(ext)
    for eid in ("oosB-31", "oosB-32"):
        assert v1[eid].kind == "unindexed_library" and not ext[eid].out_of_scope
    new = [e for e in ext.values() if e.id not in v1]
    for pin in ("pandas@1.5.3", "pandas@2.2.2", "numpy@1.26.4", "numpy@2.0.1"):
        assert sum(e.pin == pin and not e.out_of_scope for e in new) >= 10, pin
    assert all(e.forbidden_apis for e in new if e.kind == "nonexistent_api")
