"""Judging apart from answering: agreement statistics on hand-computed cases (and scikit-learn's kappa), the
label file's checks, `doceval judge validate` against the local OpenAI-compatible server (repeats, flips, cache,
the doceval-judge MLflow experiment), `doceval judge rescore` on a recorded run, and the shipped label set."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from openai_server import FakeOpenAI
from sklearn.metrics import cohen_kappa_score
from test_eval_cli import DOCS, GOLDEN, eval_args, overrides
from tiny_project import make_tiny_project

from doceval.cli.main import main
from doceval.errors import UsageError
from doceval.inputs.golden import parse_golden
from doceval.inputs.judge_labels import CATEGORIES, read_labels
from doceval.results.markdown import render_report
from doceval.scoring.agreement import agreement, cohen_kappa, confusion, kappa_interval, repeat_stability

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The eval CLI's tiny project, with reference answers that name their API (`x()`), as the test server's
    rule judge reads them."""
    refs = {e["id"]: " ".join(f"Call `{a}()`." for a in e["expected_apis"]) for e in GOLDEN}
    make_tiny_project(tmp_path, DOCS, "".join(json.dumps({**e, "reference_answer": refs[e["id"]]}) + "\n"
                                              for e in GOLDEN))  # fmt: skip
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ------------------------------------------------------------------------------------------ statistics


def test_kappa_on_hand_computed_cases() -> None:
    # observed 3/4; chance 0.5 * 0.25 + 0.5 * 0.75 = 0.5 -> (0.75 - 0.5) / 0.5 = 0.5
    assert cohen_kappa([True, True, False, False], [True, False, False, False]) == pytest.approx(0.5)
    assert cohen_kappa([True, False], [True, False]) == 1.0
    assert cohen_kappa([True, False], [False, True]) == pytest.approx(-1.0)
    assert cohen_kappa([True, True], [True, True]) == 1.0  # both constant and equal: perfect, not 0/0
    assert cohen_kappa([], []) is None


def test_kappa_matches_scikit_learn_on_random_raters() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = int(rng.integers(5, 60))
        h, j = rng.random(n) < rng.random(), rng.random(n) < rng.random()
        if len(set(h)) == 1 and len(set(j)) == 1:
            continue  # scikit-learn returns NaN there
        assert cohen_kappa(list(h), list(j)) == pytest.approx(cohen_kappa_score(h, j))


def test_agreement_counts_judge_errors_apart_and_reports_per_category() -> None:
    human = [True, True, False, False, False]
    judge = [True, None, True, False, False]
    cats = ["correct", "correct", "partial", "refusal", "refusal"]
    a = agreement(human, judge, cats, n_boot=200)
    assert a["n"] == 4 and a["judge_errors"] == 1 and a["accuracy"] == pytest.approx(0.75)
    assert a["confusion"] == {
        "correct": {"correct": 1, "incorrect": 0},
        "incorrect": {"correct": 1, "incorrect": 2},
    }
    assert a["kappa"] == pytest.approx(cohen_kappa([True, False, False, False], [True, True, False, False]))
    assert a["by_category"]["correct"] == {"n": 1, "agreement": 1.0, "human_correct": 1, "judge_correct": 1,
                                           "judge_errors": 1}  # fmt: skip
    assert a["by_category"]["partial"]["agreement"] == 0.0 and a["by_category"]["refusal"]["agreement"] == 1.0
    assert confusion([True], [False]) == {"correct": {"correct": 0, "incorrect": 1},
                                          "incorrect": {"correct": 0, "incorrect": 0}}  # fmt: skip


def test_kappa_interval_is_seeded_and_contains_the_estimate() -> None:
    rng = np.random.default_rng(1)
    h = list(rng.random(80) < 0.4)
    j = [x if rng.random() < 0.85 else not x for x in h]
    lo, hi = kappa_interval(h, j, seed=3) or (0.0, 0.0)
    assert lo < (cohen_kappa(h, j) or 0) < hi and (lo, hi) == kappa_interval(h, j, seed=3)
    assert kappa_interval([True], [True]) is None


def test_repeat_stability_counts_rows_whose_verdict_changes() -> None:
    human = [True, False, True]
    s = repeat_stability([[True, False, None], [True, True, None], [True, False, None]], human)
    assert s["flipped"] == 1 and s["flip_rate"] == pytest.approx(1 / 3) and s["flipped_rows"] == [1]
    assert s["kappa_max"] == 1.0 and s["kappa_min"] == pytest.approx(0.0) and s["kappa_sd"] > 0


# ------------------------------------------------------------------------------------------ label file


def _golden() -> dict[str, object]:
    path = ROOT / "data" / "golden" / "v2.1.jsonl"
    return {e.id: e for e in parse_golden(path)}


def _row(**over: object) -> dict[str, object]:
    row = {"id": "r1", "entry_id": "pyd2-001", "category": "correct", "candidate": "use model_dump",
           "verdict": "correct", "reason": "as the reference", "split": "test", "labelled_by": "test"}  # fmt: skip
    row.update(over)
    return row


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        (_row(verdict="maybe"), ":1: verdict: 'maybe'; use correct or incorrect"),
        (_row(entry_id="nope-1"), ":1: entry_id: 'nope-1' is not an entry of the golden set"),
        (_row(entry_id="oosA-001"), "is out of scope"),
        (_row(category="great"), ":1: category: 'great'"),
        (_row(split="train"), ":1: split: 'train'"),
        ({k: v for k, v in _row().items() if k != "candidate"}, ":1: candidate: missing"),
    ],
)
def test_bad_label_rows_are_named_with_file_line_and_field(
    tmp_path: Path, row: dict[str, object], needle: str
) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(UsageError) as err:
        read_labels(path, _golden())  # type: ignore[arg-type]
    assert needle in str(err.value) and str(path) in str(err.value)


def test_duplicate_label_ids_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(_row()) + "\n" + json.dumps(_row()) + "\n")
    with pytest.raises(UsageError, match=":2: id: 'r1' appears twice"):
        read_labels(path, _golden())  # type: ignore[arg-type]


def test_the_shipped_label_sets_cover_every_category_on_both_halves() -> None:
    v1 = read_labels(ROOT / "data" / "judge" / "v1.jsonl", _golden())  # type: ignore[arg-type]
    v2 = read_labels(ROOT / "data" / "judge" / "v2.jsonl", _golden())  # type: ignore[arg-type]
    assert len(v1) >= 150 and len(v2) >= 40
    for split in ("calibration", "test"):
        cats = {r.category for r in (*v1, *v2) if r.split == split}
        assert cats == set(CATEGORIES) - {"concise_correct", "alternative_correct"}, split  # those two: v3
    # v2 holds the two kinds the offline judge is weakest on, half each, labels agreeing with the kind.
    assert {r.category for r in v2} == {"partial", "paraphrased_correct"}
    assert all(r.correct == (r.category == "paraphrased_correct") for r in v2)
    assert {r.correct for r in v1} == {True, False}


# ------------------------------------------------------------------------------------------ validate (CLI)


def _labels_file(project: Path) -> Path:
    """Two candidates per in-scope tiny entry: one with the reference's API, one without."""
    rows = []
    for e in GOLDEN:
        if e["out_of_scope"]:
            continue
        api = e["expected_apis"][0]
        rows.append(
            _row(id=f"{e['id']}-good", entry_id=e["id"], candidate=f"Call `{api}()` for that.", split="test")
        )
        rows.append(_row(id=f"{e['id']}-bad", entry_id=e["id"], category="invented_api", verdict="incorrect",
                         candidate="Call `make_magic()` for that.", split="test"))  # fmt: skip
    path = project / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _judge_overrides(server: FakeOpenAI) -> list[str]:
    return ["judge=openai", f"judge.base_url={server.base_url}", "judge.model=j", "judge.max_retries=0"]


@pytest.mark.slow
def test_validate_against_the_local_server_with_repeats_flips_cache_and_mlflow(
    project: Path,
    openai_server: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    labels = _labels_file(project)
    uri = f"sqlite:///{project / 'mlruns.db'}"
    args = ["judge", "validate", str(labels), "--quiet", "--repeats", "3", "--output", "report.json",
            *_judge_overrides(openai_server), f"tracking.uri={uri}"]  # fmt: skip
    openai_server.judge_mode = "seeded"
    try:
        assert main(args) == 0
    finally:
        openai_server.judge_mode = "rule"
    report = json.loads((project / "report.json").read_text())
    a = report["agreement"]
    assert a["n"] == 6 and a["judge_errors"] == 0 and set(a["by_category"]) == {"correct", "invented_api"}
    assert report["repeats"]["repeats"] == 3 and len(report["rows"][0]["judge"]) == 3
    # each repeat asks with its own seed, so the unstable judge flips some rows
    assert report["repeats"]["flipped"] >= 1 and report["repeats"]["flip_rate"] > 0
    assert report["usage"]["cache"]["misses"] == 18 and openai_server.chat_requests == 18
    assert report["judge"]["hash"] and report["judge"]["identity"]["model"] == "j"
    out = capsys.readouterr().out
    assert "Cohen's kappa" in out and "flip rate" in out and "doceval-judge" in out
    # logged to its own experiment with the judge's hash
    con = sqlite3.connect(project / "mlruns.db")
    exp = con.execute("select experiment_id from experiments where name = 'doceval-judge'").fetchone()
    assert exp is not None
    tags = dict(con.execute("select key, value from tags").fetchall())
    assert tags["judge_hash"] == report["judge"]["hash"]
    # a rerun is answered from the cache: no request reaches the server
    before = openai_server.chat_requests
    assert main(args) == 0
    assert openai_server.chat_requests == before
    again = json.loads((project / "report.json").read_text())
    assert again["usage"]["cache"] == {"hits": 18, "misses": 0} and again["rows"] == report["rows"]


def test_the_judge_hash_changes_with_what_decides_a_verdict(project: Path, openai_server: FakeOpenAI) -> None:
    labels = _labels_file(project)
    hashes = set()
    for extra in ([], ["judge.temperature=0.5"], ["judge.seed=4"], ["judge.model=other"]):
        assert main(["judge", "validate", str(labels), "--quiet", "--no-track", "--output", "r.json",
                     *_judge_overrides(openai_server), *extra]) == 0  # fmt: skip
        hashes.add(json.loads((project / "r.json").read_text())["judge"]["hash"])
    assert len(hashes) == 4
    # the key, retries and concurrency do not decide a verdict
    assert main(["judge", "validate", str(labels), "--quiet", "--no-track", "--output", "r.json",
                 *_judge_overrides(openai_server), "judge.max_concurrency=2"]) == 0  # fmt: skip


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--repeats", "0"], "--repeats 0: must be at least 1"),
        (["judge=none"], "judge=none: nothing to validate"),
        (["--split", "calibration"], "no labelled rows in split 'calibration'"),
    ],
)
def test_validate_bad_input_exits_2(
    project: Path,
    openai_server: FakeOpenAI,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    needle: str,
) -> None:
    labels = _labels_file(project)
    judge = [] if "judge=none" in extra else _judge_overrides(openai_server)
    assert main(["judge", "validate", str(labels), "--quiet", "--no-track", *judge, *extra]) == 2
    assert needle in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ rescore


def test_rescore_rejudges_a_recorded_run_without_calling_the_system(
    project: Path, openai_server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    # an LLM answerer with no judge: answers recorded, answer_accuracy not judged
    url = openai_server.base_url
    answerer = ["answerer=openai", f"answerer.base_url={url}", "answerer.model=m", "answerer.max_retries=0"]
    assert main(eval_args("--split", "test", *overrides(), *answerer)) == 0
    first = json.loads((project / "out.json").read_text())
    assert first["metrics"]["answer_accuracy"] is None and first["config"]["judge_id"] is None
    openai_server.reset_stats()
    openai_server.bodies.clear()
    args = ["judge", "rescore", "out.json", "--output", "rescored.json", "--no-track", "--quiet",
            *_judge_overrides(openai_server)]  # fmt: skip
    assert main(args) == 0
    new = json.loads((project / "rescored.json").read_text())
    bodies = ["\n".join(m["content"] for m in b["messages"]) for b in openai_server.bodies]
    assert bodies and all('"verdict"' in b for b in bodies)  # only the judge was asked
    # out-of-scope answers are not judged (issue 42 A11): no metric reads their verdict
    answered = [e for e in new["entries"] if not e["refused"] and not e["out_of_scope"]]
    assert len(bodies) == len(answered) and new["metrics"]["counts"]["n_judged"] == len(answered)
    assert new["metrics"]["answer_accuracy"] is not None and new["metrics"]["not_judged"] is False
    assert [e["answer"] for e in new["entries"]] == [e["answer"] for e in first["entries"]]
    assert new["metrics"]["hit_rate"] == first["metrics"]["hit_rate"]
    src = new["config"]["rescored_from"]
    assert (
        src["path"] == "out.json"
        and src["run_key"] == first["config"]["run_key"]
        and len(src["sha256"]) == 64
    )
    assert (
        new["config"]["judge_id"]["identity"]["model"] == "j" and new["config"]["judge"]["name"] == "openai"
    )
    assert "answer_accuracy" in capsys.readouterr().out
    md = render_report(new)
    assert f"Judge hash `{new['config']['judge_id']['hash']}`" in md and "Re-judged from `out.json`" in md


def test_rescore_refuses_a_summary_without_answers_or_with_changed_labels(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(eval_args("--split", "test", *overrides())) == 0
    summary = json.loads((project / "out.json").read_text())
    for e in summary["entries"]:
        del e["answer"]
    (project / "noanswers.json").write_text(json.dumps(summary))
    args = ["judge", "rescore", "noanswers.json", "--output", "x.json", "--no-track", "judge=reference"]
    assert main(args) == 2
    assert "records no answers" in capsys.readouterr().err
    summary = json.loads((project / "out.json").read_text())
    summary["config"]["golden"]["md5"] = "0" * 32
    (project / "oldlabels.json").write_text(json.dumps(summary))
    assert (
        main(["judge", "rescore", "oldlabels.json", "--output", "x.json", "--no-track", "judge=reference"])
        == 2
    )
    assert "was answered against golden md5 " + "0" * 32 in capsys.readouterr().err
    assert not (project / "x.json").exists()


@pytest.mark.slow
def test_the_shipped_reference_threshold_is_the_calibrated_one(capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    shipped = yaml.safe_load((ROOT / "conf" / "judge" / "reference.yaml").read_text())
    # calibrated jointly on both label files' calibration halves, as conf/judge/reference.yaml says
    labels = [str(ROOT / "data" / "judge" / f) for f in ("v1.jsonl", "v2.jsonl")]
    assert main(["judge", "calibrate", *labels, "--quiet",
                 "--golden", str(ROOT / "data" / "golden" / "v2.1.jsonl")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert f"facts_threshold {shipped['facts_threshold']} threshold {shipped['threshold']} " in out


@pytest.mark.slow
def test_eval_with_the_shipped_reference_judge_runs_offline(project: Path) -> None:
    assert main(eval_args("--split", "test", *overrides(), "judge=reference")) == 0
    summary = json.loads((project / "out.json").read_text())
    judged = [e for e in summary["entries"] if e["verdict"] is not None]
    assert (
        judged and summary["metrics"]["answer_accuracy"] is not None and not summary["metrics"]["not_judged"]
    )
    ident = summary["config"]["judge_id"]["identity"]
    assert ident["name"] == "reference" and ident["threshold"] == summary["config"]["judge"]["threshold"]
    assert ident["facts_threshold"] == summary["config"]["judge"]["facts_threshold"]
    # a verdict the version strings decide says so; one the key facts decide names them; one that gets past
    # both names the similarity and its threshold
    assert all(
        "version strings" in e["verdict_reason"]
        or "key facts" in e["verdict_reason"]
        or "similarity" in e["verdict_reason"]
        for e in judged
    )


def test_the_bar_for_printing_answer_accuracy_and_the_reports_wording() -> None:
    from doceval.scoring.agreement import reported_figure, trusted
    from doceval.stages.report import judge_agreement_lines

    def report(kappa: float | None, base: float | None, lo: float = 0.05) -> dict[str, object]:
        diff = None if kappa is None or base is None else kappa - base
        return {"agreement": {"kappa": kappa, "kappa_ci95": [0.1, 0.9], "accuracy": 0.8, "n": 96},
                "version_strings_alone": {"kappa": base},
                "components": {"version_strings": {"kappa": base}, "key_facts": {"kappa": 0.6},
                               "similarity": {"kappa": 0.1}},
                "beats_strings": {"difference": diff, "ci95": [lo, 0.4], "beats": lo > 0},
                "judge": {"hash": "h"},
                "labels": {"path": "data/judge/v1.jsonl", "split": "test", "md5": "m"}}  # fmt: skip

    assert trusted(report(0.7, 0.5))[0] is True and reported_figure(report(0.7, 0.5)) == "judge"
    assert trusted(report(0.55, 0.5)) == (False, "kappa 0.550 is below 0.6")
    # above strings by the point estimate, but the paired interval reaches 0: not evidence enough
    ok, why = trusted(report(0.75, 0.5, lo=-0.02))
    assert not ok and why.startswith("kappa 0.750 does not beat version strings alone (0.500)")
    assert "[-0.020, 0.400]" in why and reported_figure(report(0.75, 0.5, lo=-0.02)) == "version strings"
    assert trusted(report(None, 0.5))[0] is False
    below = "\n".join(judge_agreement_lines(report(0.537, 0.503, lo=-0.1)))  # type: ignore[arg-type]
    assert "Cohen's kappa 0.537 [0.100, 0.900]" in below and "stays **not judged**" in below
    assert "The answer figure reported is **version strings**" in below
    assert "key facts alone 0.600" in below and "paired bootstrap): +0.034 [-0.100, +0.400]" in below
    above = "\n".join(judge_agreement_lines(report(0.7, 0.5)))  # type: ignore[arg-type]
    assert "It clears the bar" in above and "version strings**" not in above


def test_the_documented_agreement_is_the_pipelines() -> None:
    """The figures in docs/judge.md, docs/results.md and data/judge/README.md are the ones the judge stage last
    wrote (eval/judge/reference.json)."""
    report = json.loads((ROOT / "eval" / "judge" / "reference.json").read_text())
    a = report["agreement"]
    lo, hi = a["kappa_ci95"]
    figure = f"{a['kappa']:.3f} [{lo:.3f}, {hi:.3f}]"
    for page in ("judge.md", "results.md"):
        assert figure in (ROOT / "docs" / page).read_text(), page
    assert f"{a['kappa']:.3f} ({lo:.3f}–{hi:.3f})" in (ROOT / "data" / "judge" / "README.md").read_text()


@pytest.mark.slow
def test_validate_reports_components_the_paired_bootstrap_and_each_label_file(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The offline judge over two label files: the combined figures, each file's, each component alone and the
    paired difference against version strings, in the JSON report and on the terminal."""
    first = _labels_file(project)
    second = project / "more.jsonl"
    # the same ids in another file (a v2 repeats v1's numbering): rows stay apart, prefixed by their file
    second.write_text(first.read_text())
    args = ["judge", "validate", str(first), str(second), "judge=reference", "--quiet", "--no-track",
            "--output", "r.json"]  # fmt: skip
    assert main(args) == 0
    report = json.loads((project / "r.json").read_text())
    assert report["labels"]["paths"] == [str(first), str(second)] and report["n_rows"] == 12
    assert len({r["id"] for r in report["rows"]}) == 12 and report["rows"][0]["id"].startswith(f"{first}:")
    assert set(report["components"]) == {"version_strings", "key_facts", "similarity"}
    for block in (report, *report["by_file"].values()):
        parts = block["components"]
        assert parts["version_strings"] == block["version_strings_alone"]
        assert all(len(p["kappa_ci95"]) == 2 and p["n"] == block["agreement"]["n"] for p in parts.values())
        beats = block["beats_strings"]
        expected = (block["agreement"]["kappa"] or 0) - (block["version_strings_alone"]["kappa"] or 0)
        assert beats["difference"] == pytest.approx(expected) and beats["beats"] == (beats["ci95"][0] > 0)
    assert list(report["by_file"]) == [str(first), str(second)]
    assert all(b["n_rows"] == 6 for b in report["by_file"].values())
    # identical files give identical figures, and each row records each component's verdict
    one, two = report["by_file"].values()
    assert one["agreement"]["kappa"] == two["agreement"]["kappa"]
    assert all(isinstance(r["key_facts"], bool) and isinstance(r["similarity"], bool) for r in report["rows"])
    out = capsys.readouterr().out
    assert "key_facts        kappa" in out and "judge - strings" in out and "beats strings:" in out
    assert f"{second} (6 rows):" in out


@pytest.mark.slow
def test_a_lone_surrogate_in_a_label_file_is_judged_not_a_crash(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39 H11: a candidate (or reference) holding a lone surrogate ("\\ud800" in the JSON) crashed the
    offline judge's tokenizer; it is read as the text \\udXXX, like a reply's in a run."""
    path = _labels_file(project)
    lines = path.read_text().splitlines()
    lines[0] = lines[0].replace("for that.", "for that \\ud800 here.")  # a JSON escape: a lone surrogate
    path.write_text("\n".join(lines) + "\n")
    args = ["judge", "validate", str(path), "judge=reference", "--quiet", "--no-track", "--output", "r.json"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    rows = json.loads((project / "r.json").read_text())["rows"]
    assert len(rows) == 6 and all(r["similarity"] is not None for r in rows)


def test_label_files_that_cannot_be_read_together_are_named(project: Path) -> None:
    from doceval.inputs.judge_labels import read_label_files

    labels = _labels_file(project)
    golden = {e.id: e for e in parse_golden(project / "data" / "golden" / "v2.1.jsonl")}
    with pytest.raises(UsageError, match="judge_validation.labels: no label file"):
        read_label_files([], golden, "test")
    with pytest.raises(UsageError, match="named twice"):
        read_label_files([labels, labels], golden, "test")
    with pytest.raises(UsageError, match="no labelled rows in split 'calibration'"):
        read_label_files([labels], golden, "calibration")
    one = read_label_files([labels], golden, "all")
    # one file keeps its ids as written; its md5 is the file's own
    assert one.files == {str(labels): list(range(6))} and one.rows[0].id == "a1-good"
    assert one.info["md5s"] == [one.info["md5"]] and one.info["path"] == str(labels)
