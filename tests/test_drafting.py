"""`doceval golden draft` and its review loop (docs/design.md section 3.5), on small folder corpora built in
tmp_path: the statements and names it reads, the differences it reports on the planted library and on the
acme fixture (whose hand-written golden set says what changed), the drafts it writes (each passing the
validator), the loaders' refusal of drafts, accepting verdicts, and the LLM phrasing path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from drafting_fixture import PLANTED, reported, write_library
from openai_server import FakeOpenAI

from doceval import api
from doceval.cli.main import main
from doceval.config.compose import compose
from doceval.drafting.names import calls, code_fragments, imports
from doceval.drafting.questions import present_tense, task_question
from doceval.drafting.run import DraftOptions, differences_path, draft_golden
from doceval.drafting.statements import statements
from doceval.errors import UsageError
from doceval.harness.plan import EvalOptions, load_inputs
from doceval.inputs.corpus import load_corpus
from doceval.inputs.folders import build_folders_corpus
from doceval.inputs.golden import GoldenError, parse_golden
from doceval.inputs.qrels import qrels_path
from doceval.inputs.scope import load_checked_golden

ROOT = Path(__file__).resolve().parents[1]


def _corpus(tmp: Path, library_root: Path, library: str) -> Path:
    out = tmp / "docs"
    build_folders_corpus([(library_root, library, None)], out, 1500)
    return out


@pytest.fixture
def shipit(tmp_path: Path) -> Path:
    return _corpus(tmp_path, write_library(tmp_path / "lib", migration=False), "shipit")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------------ reading
@pytest.mark.parametrize(
    ("text", "documented", "pair"),
    [
        ("def c.Group.result_callback(self)\n\n.. versionchanged:: 8.0\n    Renamed from ``resultcallback``.",
         "result_callback", ("resultcallback", "result_callback", "renamed")),
        ("def p.BaseModel.dict(self)\n\nDeprecated: The `dict` method is deprecated; use `model_dump` instead.",
         "dict", ("dict", "model_dump", "deprecated")),
        ("def p.parse_obj_as(t)\n\nDeprecated: `parse_obj_as` is deprecated. Use `TypeAdapter.validate_python` "
         "instead.", "parse_obj_as", ("parse_obj_as", "validate_python", "deprecated")),
        ("# Migrating\n\n`enqueue_in` was removed: use `submit(delay=...)` instead.", "",
         ("enqueue_in", "submit", "removed")),
        ("# Migrating\n\n`dispatch` was renamed to `ship`.", "", ("dispatch", "ship", "renamed")),
    ],
)  # fmt: skip
def test_statements_read_the_old_and_new_name(text: str, documented: str, pair: tuple[str, str, str]) -> None:
    assert [(s.old, s.new, s.how) for s in statements(text, documented)] == [pair]


def test_a_sentence_that_states_nothing_gives_no_statement() -> None:
    assert list(statements("def f()\n\nUse `foo` to do it. Deprecated in 2.0.", "f")) == []


def test_names_are_read_from_code_not_from_prose() -> None:
    text = "# Sending\n\nSubmit a job with `queue.submit(send, 1)`.\n\n```python\nfrom acme.tasks import retry\n```\n"
    fragments = code_fragments(text)
    assert fragments[0] == ""  # a heading is prose
    assert "submit" in {c.rsplit(".", 1)[-1] for f in fragments for c in calls(f)}
    assert ("acme.tasks", "retry") in {i for f in fragments for i in imports(f)}


def test_questions_ask_for_the_task() -> None:
    assert present_tense("Applies") == "apply" and present_tense("Passes") == "pass"
    assert task_question("click", "8.1.7", "Adds a result callback to the command.") == (
        "In click 8.1.7, how do I add a result callback to the command?"
    )
    assert task_question("acme", "2.0", "Submitting jobs", heading=True) == (
        "In acme 2.0, what do I use for submitting jobs?"
    )


# -------------------------------------------------------------------------------------------- differences
@pytest.mark.parametrize("migration", [False, True])
def test_the_planted_differences_and_no_other(tmp_path: Path, migration: bool) -> None:
    corpus = _corpus(tmp_path, write_library(tmp_path / "lib", migration), "shipit")
    draft_golden(DraftOptions(corpus, tmp_path / "draft.jsonl"))
    assert reported(_lines(differences_path(tmp_path / "draft.jsonl"))) == PLANTED


def test_the_acme_fixture_differences_are_those_its_golden_set_tests(tmp_path: Path) -> None:
    """The hand-written acme golden set traps enqueue/submit and result/fetch_result, enqueue_in (gone in 2.0)
    and every (new in 2.0): the drafter finds exactly these from the docs alone."""
    corpus = tmp_path / "docs"
    build_folders_corpus([(ROOT / "tests" / "fixtures" / "acme" / "docs", "acme", None)], corpus, 1500)
    draft_golden(DraftOptions(corpus, tmp_path / "draft.jsonl"))
    assert reported(_lines(differences_path(tmp_path / "draft.jsonl"))) == {
        ("renamed", "enqueue", "submit"),
        ("renamed", "result", "fetch_result"),
        ("removed", "enqueue_in", ""),
        ("added", "", "every"),
    }


def test_every_written_draft_passes_validate_strict(shipit: Path, tmp_path: Path) -> None:
    out = tmp_path / "draft.jsonl"
    draft_golden(DraftOptions(shipit, out))
    assert main(["golden", "validate", str(out), "--corpus", str(shipit), "--strict"]) == 0
    lines = _lines(out)
    assert lines and all(r["draft"] is True and r["provenance"]["rule"] for r in lines)
    kinds = {r["kind"] for r in lines}
    assert {
        "version_trap",
        "lookup",
        "nonexistent_api",
        "unindexed_library",
        "off_topic",
        "conversation",
    } <= kinds
    trap = next(
        r for r in lines if r["provenance"]["rule"] == "renamed.trap_new" and ".ship(" in r["expected_apis"]
    )
    assert trap["forbidden_apis"] == [".dispatch("] and "dispatch" not in trap["question"]
    conv = next(r for r in lines if r["kind"] == "conversation")
    assert conv["turns"][1]["needs_memory"] is True and conv["turns"][1]["standalone"].startswith(
        "In shipit 2.0"
    )
    grades = {(q["id"], q["doc_id"]): q["grade"] for q in _lines(qrels_path(out))}
    assert grades[(trap["id"], "shipit@2.0:client.sending_parcels")] == 2


def test_same_seed_same_drafts(shipit: Path, tmp_path: Path) -> None:
    draft_golden(DraftOptions(shipit, tmp_path / "a.jsonl", seed=3))
    draft_golden(DraftOptions(shipit, tmp_path / "b.jsonl", seed=3))
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_draft_refuses_to_write_over_a_file(
    shipit: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "draft.jsonl"
    out.write_text("mine\n", encoding="utf-8")
    assert main(["golden", "draft", "--corpus", str(shipit), "--out", str(out)]) == 2
    assert "--replace" in capsys.readouterr().err and out.read_text(encoding="utf-8") == "mine\n"
    assert main(["golden", "draft", "--corpus", str(shipit), "--out", str(out), "--library", "nope"]) == 2


# ------------------------------------------------------------------------------------------------ loaders
def _drafted(shipit: Path, tmp_path: Path) -> Path:
    out = tmp_path / "draft.jsonl"
    draft_golden(DraftOptions(shipit, out))
    return out


def test_parse_golden_refuses_drafts_unless_allowed(shipit: Path, tmp_path: Path) -> None:
    out = _drafted(shipit, tmp_path)
    with pytest.raises(UsageError, match=r"drafts .*--allow-drafts"):
        parse_golden(out)
    entries = parse_golden(out, allow_drafts=True)
    assert entries and all(e.draft for e in entries)
    assert any(e.conversation is not None for e in entries)  # a conversation's draft flag reaches its turns
    with pytest.raises(UsageError, match="drafts"):
        load_checked_golden(out, load_corpus(shipit))  # the retrieve stage's loader


def test_a_draft_flag_must_be_a_bool(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    entry = {"id": "a", "question": "q", "library": "x", "version": "1", "out_of_scope": True, "relevant_ids": [],
             "reference_answer": "", "expected_apis": [], "forbidden_apis": [], "split": None, "kind": "off_topic",
             "draft": "yes", "provenance": "a rule"}  # fmt: skip
    path.write_text(json.dumps(entry) + "\n", encoding="utf-8")
    with pytest.raises(GoldenError) as err:
        parse_golden(path, allow_drafts=True)
    assert "draft: must be true or false" in str(err.value) and "provenance: must be an object" in str(
        err.value
    )


def test_every_scoring_loader_refuses_drafts(
    shipit: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _drafted(shipit, tmp_path)
    monkeypatch.chdir(tmp_path)
    flags = ["--golden", str(out), "--split", "all", "--no-track", "--quiet", "--output", "s.json"]
    overrides = ["retriever=bm25", "floors=zero", f"paths.docs={shipit}"]
    assert main(["eval", *flags, *overrides]) == 2
    assert "--allow-drafts" in capsys.readouterr().err and not Path("s.json").exists()
    cfg = compose([f"golden={out}", *overrides])  # the calibrate, evaluate and conversations stages' loader
    with pytest.raises(UsageError, match="drafts"):
        load_inputs(cfg, EvalOptions(progress=False))
    with pytest.raises(UsageError, match="drafts"):
        api.evaluate(out, retriever="bm25", overrides=[f"paths.docs={shipit}", "floors=zero"])
    assert main(["judge", "validate", "--golden", str(out), "--no-track"]) == 2
    assert main(["judge", "rescore", "s.json", "--golden", str(out), "--no-track", "--output", "r.json"]) == 2
    (tmp_path / "myret.py").write_text("def retrieve(question, k):\n    return []\n", encoding="utf-8")
    sweep = [
        "sweep",
        "--no-track",
        "retriever=function",
        "retriever.target=myret:retrieve",
        f"golden={out}",
        "k=1,2",
    ]
    assert main(sweep) == 2
    assert "drafts" in capsys.readouterr().err


def test_allow_drafts_scores_them_and_the_summary_says_so(
    shipit: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = _drafted(shipit, tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["eval", "--golden", str(out), "--split", "all", "--no-track", "--quiet", "--output", "s.json",
            "--allow-drafts", "retriever=bm25", "floors=zero", f"paths.docs={shipit}"]  # fmt: skip
    assert main(args) == 0
    golden = json.loads(Path("s.json").read_text(encoding="utf-8"))["config"]["golden"]
    assert golden["allow_drafts"] is True and golden["drafts"] == len(parse_golden(out, allow_drafts=True))
    summary = api.evaluate(
        out, retriever="bm25", overrides=[f"paths.docs={shipit}", "floors=zero"], allow_drafts=True
    )
    assert summary["config"]["golden"]["allow_drafts"] is True


# ------------------------------------------------------------------------------------------------- review
def test_accept_keeps_reviewed_drafts_with_their_provenance(shipit: Path, tmp_path: Path) -> None:
    out = _drafted(shipit, tmp_path)
    sheet = tmp_path / "review.jsonl"
    assert main(["golden", "review", str(out), "--out", str(sheet)]) == 0
    rows = _lines(sheet)
    assert all(r["verdict"] is None and "provenance" in r for r in rows)
    conv = next(r["id"].split("#")[0] for r in rows if "#" in r["id"])
    wrong = next(r["id"] for r in rows if "#" not in r["id"])
    unreviewed = next(r["id"] for r in rows if "#" not in r["id"] and r["id"] != wrong)
    for r in rows:
        if r["id"] == wrong or r["id"] == f"{conv}#2":
            r.update(verdict="WRONG", reason="planted by the test", reviewer="t")
        elif r["id"] != unreviewed:
            r.update(verdict="OK", reviewer="t")
    sheet.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    accepted = tmp_path / "accepted.jsonl"
    assert main(["golden", "accept", str(out), "--verdicts", str(sheet), "--out", str(accepted)]) == 0
    lines = _lines(accepted)
    ids = {r["id"] for r in lines}
    # One WRONG turn drops its conversation; an unreviewed draft is left out.
    assert wrong not in ids and unreviewed not in ids and conv not in ids
    assert all("draft" not in r and r["provenance"]["review"][0]["verdict"] == "OK" for r in lines)
    assert {q["id"].split("#")[0] for q in _lines(qrels_path(accepted))} <= ids
    assert parse_golden(accepted)  # no drafts left: every loader takes it
    assert main(["golden", "validate", str(accepted), "--corpus", str(shipit), "--strict"]) == 0
    assert main(["golden", "accept", str(out), "--verdicts", str(sheet), "--out", str(out)]) == 2  # an input


def test_a_missing_verdicts_file_is_bad_input(
    shipit: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _drafted(shipit, tmp_path)
    missing = str(tmp_path / "nope.jsonl")
    assert (
        main(["golden", "accept", str(out), "--verdicts", missing, "--out", str(tmp_path / "a.jsonl")]) == 2
    )
    assert main(["golden", "audit", str(out), "--verdicts", missing]) == 2
    err = capsys.readouterr().err
    assert "no verdicts file" in err and "Traceback" not in err


# ----------------------------------------------------------------------------------------------- phrasing
def test_llm_phrasing_changes_questions_and_no_label(shipit: Path, tmp_path: Path) -> None:
    with FakeOpenAI() as server:
        settings = tmp_path / "llm.yaml"
        settings.write_text(f"model: test\nbase_url: {server.base_url}\napi_key_env: DOCEVAL_TEST_KEY\n"
                            "cache_path: null\n", encoding="utf-8")  # fmt: skip
        plain, phrased = tmp_path / "plain.jsonl", tmp_path / "phrased.jsonl"
        assert main(["golden", "draft", "--corpus", str(shipit), "--out", str(plain), "--seed", "5"]) == 0
        args = [
            "golden",
            "draft",
            "--corpus",
            str(shipit),
            "--out",
            str(phrased),
            "--seed",
            "5",
            "--llm",
            str(settings),
        ]
        assert main(args) == 0
        assert server.chat_requests > 0
    a, b = _lines(plain), _lines(phrased)
    assert [r["id"] for r in a] == [r["id"] for r in b]
    changed = 0
    for x, y in zip(a, b, strict=True):
        changed += x.get("question") != y.get("question")
        assert y["provenance"].pop("phrasing").startswith(("llm:test", "template"))
        x["provenance"].pop("phrasing")
        for rec in (x, y):
            rec.pop("question", None)
            for turn in rec.get("turns", [])[:1]:
                turn.pop("question")
            for turn in rec.get("turns", [])[1:]:
                turn.pop("standalone")
        assert x == y  # every label identical
    assert changed > 0
    assert qrels_path(plain).read_bytes() == qrels_path(phrased).read_bytes()


def test_an_llm_settings_file_is_the_shipped_block_changed_and_checked_by_the_schema(tmp_path: Path) -> None:
    from doceval.cli.drafting import _llm
    from doceval.config.compose import llm_settings

    settings = tmp_path / "llm.yaml"
    settings.write_text("model: m\nmax_tokens: 99\ncache_path: null\n", encoding="utf-8")
    assert _llm(str(settings)) == llm_settings("answerer", model="m", max_tokens=99, cache_path=None)
    assert _llm("default") == llm_settings("answerer")  # bare --llm: conf/answerer/openai.yaml as it is
    settings.write_text("model: m\nmax_tokens: 0\n", encoding="utf-8")
    with pytest.raises(
        UsageError, match=rf"--llm {settings}: answerer\.max_tokens=0: expected an integer >= 1"
    ):
        _llm(str(settings))
    settings.write_text("model: m\nprice_per_1k_prompt: 0.1\nprice_per_1m_prompt: 100\n", encoding="utf-8")
    with pytest.raises(
        UsageError, match=r"answerer\.price_per_1m_prompt=100 and answerer\.price_per_1k_prompt=0.1"
    ):
        _llm(str(settings))
