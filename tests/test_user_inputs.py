"""The user's own docs and golden set: JSON-array golden sets, the default pin when no doceval corpus is
configured, `golden validate --ids`, `doceval ids`, and `docs --folder` writing beside paths.docs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from doceval.cli.main import main
from doceval.errors import UsageError
from doceval.inputs.golden import (
    DEFAULT_PIN,
    GoldenError,
    parse_golden,
    read_ids,
    select_split,
    statistics,
)
from doceval.inputs.splits import write_splits


def entry(**overrides) -> dict:
    rec = {
        "id": "q1",
        "question": "How late can I return a parcel?",
        "library": "shop",
        "version": "2024",
        "out_of_scope": False,
        "relevant_ids": ["shop@2024:handbook.returns"],
        "reference_answer": "Within 30 days.",
        "expected_apis": [],
        "forbidden_apis": [],
        "split": None,
        "kind": "lookup",
    }
    rec.update(overrides)
    return rec


def own(**overrides) -> dict:
    """An entry with the user's own ids and no library/version (no doceval corpus)."""
    rec = entry(**{"relevant_ids": ["D4", "handbook/returns.md#late-fees"], **overrides})
    for name in ("library", "version"):
        if name not in overrides:
            del rec[name]
    return rec


def write_jsonl(path: Path, recs: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    return path


def write_array(path: Path, recs: list, prefix: str = "") -> Path:
    path.write_text(prefix + json.dumps(recs, indent=2) + "\n", encoding="utf-8")
    return path


def problems(path: Path, **kwargs) -> list[str]:
    with pytest.raises(GoldenError) as err:
        parse_golden(path, **kwargs)
    return [str(p) for p in err.value.problems]


# ------------------------------------------------------------------------------------- JSON array files


def test_a_json_array_parses_like_the_jsonl_file(tmp_path):
    recs = [entry(), entry(id="q2", split="test", note="kept"), entry(id="u1", out_of_scope=True,
            relevant_ids=[], reference_answer="", kind="off_topic")]  # fmt: skip
    jsonl = parse_golden(write_jsonl(tmp_path / "g.jsonl", recs))
    array = parse_golden(write_array(tmp_path / "g.json", recs))
    assert array == jsonl  # line numbers (JSONL) and positions (array) agree here: one entry per line
    assert [e.line for e in array] == [1, 2, 3]
    assert array[1].extra == {"note": "kept"}
    assert statistics(array) == statistics(jsonl)
    assert [e.id for e in select_split(array, "test")] == ["q1", "q2", "u1"]


def test_an_array_with_leading_whitespace_and_a_bom_is_an_array(tmp_path):
    path = tmp_path / "g.json"
    path.write_text("\ufeff\n  " + json.dumps([entry()]), encoding="utf-8")
    assert [e.id for e in parse_golden(path)] == ["q1"]
    # A BOM does not break a JSONL file either.
    path.write_text("\ufeff" + json.dumps(entry()) + "\n", encoding="utf-8")
    assert [e.id for e in parse_golden(path)] == ["q1"]


def test_array_problems_name_the_entry_position_its_id_and_the_field(tmp_path):
    no_kind = entry(id="q3")
    del no_kind["kind"]
    recs = [entry(), entry(id="q2", out_of_scope="yes"), no_kind, "not an object", entry(), {"id": 7}]
    path = write_array(tmp_path / "g.json", recs)
    got = problems(path)
    assert got[:4] == [
        f"{path}: entry 2 (id q2): out_of_scope: must be true or false, got str",
        f'{path}: entry 3 (id q3): kind: missing; add "kind" (a string)',
        f"{path}: entry 4: (entry): each entry must be a JSON object",
        f"{path}: entry 5 (id q1): id: duplicate id 'q1' (first on entry 1)",
    ]
    assert got[4] == f"{path}: entry 6: id: must be a string, got int"  # no usable id: the position only
    assert all(p.startswith(f"{path}: entry 6: ") for p in got[4:])


def test_an_array_that_is_not_valid_json_names_the_line(tmp_path):
    path = tmp_path / "g.json"
    path.write_text('[\n  {"id": "q1"},\n  {"id": \n]\n', encoding="utf-8")
    (got,) = problems(path)
    assert got.startswith(f"{path}:4: (json): not valid JSON")
    assert "read as a JSON array" in got


def test_an_empty_array_has_no_entries(tmp_path):
    with pytest.raises(UsageError, match="has no entries"):
        parse_golden(write_array(tmp_path / "g.json", []))


def test_write_splits_keeps_an_array_an_array(tmp_path):
    recs = [own(id=f"q{i}") for i in range(6)]
    path = write_array(tmp_path / "g.json", recs)
    counts = write_splits(path, seed=0, default_pin=DEFAULT_PIN)
    assert counts == {"calibration": 3, "test": 3}
    data = json.loads(path.read_text())
    assert isinstance(data, list) and [r["id"] for r in data] == [r["id"] for r in recs]
    assert all("library" not in r for r in data)  # the default pin is not written into the file
    assert {r["split"] for r in data} == {"calibration", "test"}


# -------------------------------------------------------------------------------------------- default pin


def test_the_default_pin_is_given_to_entries_without_library_and_version(tmp_path):
    path = write_array(tmp_path / "g.json", [own(), own(id="q2", library="Shop", version="2024",
                       relevant_ids=["D9"])])  # fmt: skip
    first, second = parse_golden(path, default_pin=DEFAULT_PIN)
    assert (first.library, first.version) == DEFAULT_PIN and first.pin == "docs@1"
    assert first.relevant_ids == ("D4", "handbook/returns.md#late-fees")  # the user's ids, any form
    assert second.pin == "shop@2024"  # an entry that names its pin keeps it


@pytest.mark.parametrize(("present", "missing"), [("library", "version"), ("version", "library")])
def test_library_and_version_go_together(tmp_path, present, missing):
    path = write_jsonl(tmp_path / "g.jsonl", [own(**{present: "x"})])
    (got,) = problems(path, default_pin=DEFAULT_PIN)
    assert got.startswith(f'{path}:1: {missing}: missing; "library" and "version" go together')
    assert "docs@1" in got


def test_library_and_version_stay_required_when_a_doceval_corpus_is_configured(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", [own()])
    assert problems(path) == [
        f'{path}:1: library: missing; add "library" (a string)',
        f'{path}:1: version: missing; add "version" (a string)',
    ]
    # ... and relevant ids must be documents of the entry's pin.
    path = write_jsonl(tmp_path / "g.jsonl", [own(library="shop", version="2024")])
    got = problems(path)
    assert len(got) == 2 and all("is not a document of shop@2024" in p for p in got)


def test_relevant_ids_are_checked_against_given_ids_with_the_default_pin(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", [own()])
    assert parse_golden(path, corpus_ids={"D4", "handbook/returns.md#late-fees"}, default_pin=DEFAULT_PIN)
    (got,) = problems(path, corpus_ids={"D4"}, default_pin=DEFAULT_PIN, ids_source="ids.txt")
    assert got == f"{path}:1: relevant_ids: 'handbook/returns.md#late-fees' is not in ids.txt"


def test_read_ids_skips_blank_and_comment_lines(tmp_path):
    path = tmp_path / "ids.txt"
    path.write_text("# my ids\nD4\n\n  handbook/returns.md#late-fees  \n   # indented comment\n")
    assert read_ids(path) == {"D4", "handbook/returns.md#late-fees"}
    path.write_text("# nothing\n\n")
    with pytest.raises(UsageError, match="no document ids"):
        read_ids(path)
    with pytest.raises(UsageError, match="file not found"):
        read_ids(tmp_path / "missing.txt")


# ----------------------------------------------------------------------------- golden validate --ids


def test_cli_golden_validate_ids_passes_and_fails(tmp_path, capsys):
    ids = tmp_path / "ids.txt"
    ids.write_text("# the retriever's ids\nD4\nhandbook/returns.md#late-fees\nD5\n")
    good = write_array(tmp_path / "good.json", [own(), own(id="q2", relevant_ids=["D5"])])
    # The corpus is not loaded: there is no data/docs anywhere near tmp_path.
    assert main(["golden", "validate", str(good), "--ids", str(ids), "--corpus", "x"]) == 2
    assert "--ids and --corpus: choose one" in capsys.readouterr().err
    assert main(["golden", "validate", str(good), "--ids", str(ids)]) == 0
    out = capsys.readouterr().out
    assert f"{good}: 2 entries, valid (relevant ids checked against {ids})" in out
    assert "docs@1" in out  # statistics by pin

    bad = write_jsonl(tmp_path / "bad.jsonl", [own(), own(id="q2", relevant_ids=["D4", "D404"])])
    assert main(["golden", "validate", str(bad), "--ids", str(ids)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2: relevant_ids: 'D404' is not in {ids} (--ids)" in err
    assert "golden set has 1 problem:" in err

    bad_array = write_array(tmp_path / "bad.json", [own(), own(id="q2", relevant_ids=["D404"])])
    assert main(["golden", "validate", str(bad_array), "--ids", str(ids)]) == 2
    assert f"{bad_array}: entry 2 (id q2): relevant_ids: 'D404' is not in {ids}" in capsys.readouterr().err


def test_cli_golden_validate_no_corpus_allows_the_default_pin(tmp_path, capsys):
    path = write_jsonl(tmp_path / "g.jsonl", [own()])
    assert main(["golden", "validate", str(path), "--no-corpus"]) == 0
    assert "1 entries, valid (corpus not checked)" in capsys.readouterr().out
    assert main(["golden", "validate", str(path), "--corpus", str(tmp_path / "nothing")]) == 2
    assert "corpus manifest not found" in capsys.readouterr().err


def test_cli_golden_split_accepts_entries_without_a_pin(tmp_path, capsys):
    path = write_jsonl(tmp_path / "g.jsonl", [own(id=f"q{i}") for i in range(4)])
    assert main(["golden", "split", str(path), "--seed", "1"]) == 0
    assert "split tags written" in capsys.readouterr().out
    assert {e.split for e in parse_golden(path, default_pin=DEFAULT_PIN)} == {"calibration", "test"}


# ------------------------------------------------------------------------------ docs --folder, doceval ids


def _docs_folder(root: Path) -> Path:
    (root / "policies").mkdir(parents=True)
    (root / "handbook.md").write_text(
        "# Returns\n\nReturn within 30 days.\n\n# Late Fees\n\nFive euros a day.\n", encoding="utf-8"
    )
    (root / "policies" / "privacy.rst").write_text("Privacy\n=======\n\nWe keep nothing.\n", encoding="utf-8")
    return root


def _params(tmp_path: Path) -> Path:
    from doceval.config.compose import compose
    from doceval.config.objects import config_dict

    params = config_dict(compose())  # a complete params.yaml: the shipped composition, no wheels to build
    params["docs"] = {**params["docs"], "folders": [], "libraries": []}
    params["paths"] = {**params["paths"], "docs": "data/docs", "cache": "data/cache"}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    return path


FOLDER_IDS = [
    "shop@2024:handbook.late_fees",
    "shop@2024:handbook.returns",
    "shop@2024:policies.privacy.privacy",
]


def test_docs_folder_writes_its_own_corpus_and_leaves_paths_docs_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _params(tmp_path)
    docs = tmp_path / "data" / "docs"
    docs.mkdir(parents=True)
    (docs / "manifest.json").write_text('{"pins": {"other@1": {"source": "elsewhere"}}}\n')
    folder = _docs_folder(tmp_path / "src")
    assert main(["docs", "--folder", str(folder), "--library", "Shop", "--version", "2024", "--quiet"]) == 0
    out = capsys.readouterr().out
    target = Path("data/folders/shop@2024")
    assert (target / "corpus.jsonl").is_file() and (target / "manifest.json").is_file()
    assert sorted(p.name for p in docs.iterdir()) == ["manifest.json"]
    assert (docs / "manifest.json").read_text() == '{"pins": {"other@1": {"source": "elsewhere"}}}\n'
    assert f"wrote shop@2024 (3 documents) to {target}" in out
    assert f"doceval ids --docs {target}" in out
    assert f"paths.docs={target}" in out and "doceval eval --golden" in out

    assert main(["docs", "--folder", str(folder), "--library", "Shop", "--version", "2024", "--quiet",
                 "--out", "elsewhere/corpus"]) == 0  # fmt: skip
    assert (tmp_path / "elsewhere" / "corpus" / "manifest.json").is_file()
    capsys.readouterr()

    # paths.docs only when --out names it, and over the project's corpus only with --replace.
    assert main(["docs", "--folder", str(folder), "--library", "Shop", "--version", "2024", "--quiet",
                 "--out", "data/docs"]) == 2  # fmt: skip
    assert "data/docs holds another corpus (other@1)" in capsys.readouterr().err
    assert main(["docs", "--folder", str(folder), "--library", "Shop", "--version", "2024", "--quiet",
                 "--out", "data/docs", "--replace"]) == 0  # fmt: skip
    assert json.loads((docs / "manifest.json").read_text())["pins"]["shop@2024"]["documents"] == 3
    assert "is paths.docs" in capsys.readouterr().out


def test_docs_out_without_folder_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _params(tmp_path)
    assert main(["docs", "--out", "x", "--quiet"]) == 2
    assert "--out: only with --folder" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_doceval_ids_lists_a_folder_corpus(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _params(tmp_path)
    folder = _docs_folder(tmp_path / "src")
    out = tmp_path / "corpora" / "shop"
    assert main(["docs", "--folder", str(folder), "--library", "shop", "--version", "2024", "--quiet",
                 "--out", str(out)]) == 0  # fmt: skip
    assert main(["docs", "--folder", str(folder), "--library", "other", "--version", "1", "--quiet",
                 "--out", "data/docs"]) == 0  # fmt: skip
    capsys.readouterr()

    assert main(["ids", "--docs", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == FOLDER_IDS
    assert main(["ids", "--docs", str(out), "--count"]) == 0
    assert capsys.readouterr().out == "shop@2024\t3\n"
    assert main(["ids", "--docs", str(out), "--pin", "shop@2024"]) == 0
    assert capsys.readouterr().out.splitlines() == FOLDER_IDS
    assert main(["ids", "--docs", str(out), "--pin", "nope@1"]) == 2
    err = capsys.readouterr().err
    assert "--pin nope@1: not in" in err and "its pins: shop@2024" in err

    # Without --docs: paths.docs from params.yaml.
    assert main(["ids", "--count"]) == 0
    assert capsys.readouterr().out == "other@1\t3\n"
    assert main(["ids", "--docs", str(tmp_path / "empty")]) == 2
    assert "no built corpus here" in capsys.readouterr().err

    # The listed ids are what `golden validate --ids` and the corpus check accept.
    ids = tmp_path / "ids.txt"
    assert main(["ids", "--docs", str(out)]) == 0
    ids.write_text(capsys.readouterr().out)
    golden = write_array(tmp_path / "g.json", [entry(relevant_ids=["shop@2024:handbook.returns"])])
    assert main(["golden", "validate", str(golden), "--ids", str(ids)]) == 0
    assert main(["golden", "validate", str(golden), "--corpus", str(out)]) == 0
