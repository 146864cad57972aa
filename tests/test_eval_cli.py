"""`doceval eval` end to end on a tiny corpus (bm25; offline, and with an OpenAI-compatible answerer and judge
on the local test server: answering then judging, both resumable, one budget), floors and calibration by hand,
and every bad input the harness promises to reject with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from openai_server import FakeOpenAI
from tiny_project import make_tiny_project

from doceval.cli.main import main
from doceval.harness.floor_search import calibrate_library
from doceval.scoring.metrics import build_matrix
from doceval.scoring.registry import AT_K_NAMES

ROOT = Path(__file__).resolve().parents[1]

DOCS = {
    "pydantic@2.8.2": [
        (
            "pydantic.main.BaseModel.model_dump",
            "def model_dump(self)\n\nGenerate a dictionary representation of the model.",
        ),
        (
            "pydantic.main.BaseModel.model_validate",
            "def model_validate(obj)\n\nValidate a pydantic model instance from an object.",
        ),
        ("pydantic.fields.Field", "def Field(default)\n\nCreate a field with a default value and metadata."),
    ],
    "click@8.1.7": [
        (
            "click.decorators.option",
            "def option(*param_decls)\n\nAttach an option to the command, with a default.",
        ),
        (
            "click.core.Group.result_callback",
            "def result_callback(self)\n\nA decorator for a callback after all subcommands.",
        ),
    ],
}

GOLDEN = [
    {"id": "a1", "question": "dictionary representation of a model", "library": "pydantic", "version": "2.8.2",
     "out_of_scope": False, "relevant_ids": ["pydantic@2.8.2:pydantic.main.BaseModel.model_dump"],
     "expected_apis": ["model_dump"], "forbidden_apis": [".dict("], "split": "test", "kind": "version_trap"},
    {"id": "a2", "question": "callback after subcommands", "library": "click", "version": "8.1.7",
     "out_of_scope": False, "relevant_ids": ["click@8.1.7:click.core.Group.result_callback"],
     "expected_apis": ["result_callback"], "forbidden_apis": [], "split": "test", "kind": "lookup"},
    {"id": "a3", "question": "field default value", "library": "pydantic", "version": "2.8.2",
     "out_of_scope": False, "relevant_ids": ["pydantic@2.8.2:pydantic.fields.Field"],
     "expected_apis": ["Field"], "forbidden_apis": [], "split": "calibration", "kind": "lookup"},
    {"id": "u1", "question": "routes in flask blueprints", "library": "flask", "version": "3.0.0",
     "out_of_scope": True, "relevant_ids": [], "expected_apis": [], "forbidden_apis": [], "split": "test",
     "kind": "unindexed_library"},
    {"id": "u2", "question": "what is the best default option for pizza toppings", "library": "click", "version": "8.1.7",
     "out_of_scope": True, "relevant_ids": [], "expected_apis": [], "forbidden_apis": [], "split": None,
     "kind": "off_topic"},
]  # fmt: skip


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_tiny_project(tmp_path, DOCS, "".join(json.dumps({**e, "reference_answer": "ref " + " ".join(e["expected_apis"])}) + "\n"
                              for e in GOLDEN))  # fmt: skip
    monkeypatch.chdir(tmp_path)
    return tmp_path


def eval_args(*extra: str) -> list[str]:
    return ["eval", "--no-track", "--quiet", "--output", "out.json", *extra]


def overrides() -> list[str]:
    return ["retriever=bm25", "floors=zero"]


def test_eval_writes_a_summary_with_effective_config(project: Path) -> None:
    assert main(eval_args("--split", "test", *overrides())) == 0
    summary = json.loads((project / "out.json").read_text())
    assert set(summary) == {"metrics", "config", "entries", "complete"} and summary["complete"] is True
    ids = [e["id"] for e in summary["entries"]]
    assert ids == ["a1", "a2", "u1", "u2"]  # the untagged u2 belongs to every split
    cfg = summary["config"]
    assert cfg["split"] == "test" and cfg["k"] == 5 and cfg["retriever"]["name"] == "bm25"
    assert cfg["floors"] == {
        "global": 0.0,
        "per_library": {},
        "source": "config",
        "provenance": {},
        "signal": "score",
    }
    assert len(cfg["golden"]["md5"]) == 32 and "git_commit" in cfg["provenance"]
    a1 = summary["entries"][0]
    assert a1["retrieved"][0][0] == "pydantic@2.8.2:pydantic.main.BaseModel.model_dump"
    assert a1["scores"]["hit_rate"] == 1.0 and a1["scores"]["mrr"] == 1.0
    u1 = summary["entries"][2]
    assert u1["refused"] and u1["refusal_reason"].startswith("router:") and u1["retrieved"] == []
    m = summary["metrics"]
    assert m["answer_accuracy"] is None and m["not_judged"] is True
    assert m["counts"]["n_in_scope"] == 2 and m["counts"]["n_out_of_scope"] == 2
    assert m["ci95"]["hit_rate"] is not None
    # k travels with the metrics it applies to.
    assert m["cutoffs"] == dict.fromkeys(AT_K_NAMES, 5)  # the registry's at-k metrics, not a list of our own


def test_floor_above_every_score_refuses_everything(project: Path) -> None:
    assert main(eval_args("--split", "test", "--score-floor", "1000", *overrides())) == 0
    m = json.loads((project / "out.json").read_text())["metrics"]
    assert m["hit_rate"] == 0.0 and m["refused_correctly"] == 1.0
    assert m["overrefusal_rate"] == 1.0 and m["refusal_rate"] == 1.0 and m["version_correctness"] == 0.0


def test_per_library_floor_only_touches_that_library(project: Path) -> None:
    assert main(eval_args("--split", "test", "--floor", "click=1000", *overrides())) == 0
    summary = json.loads((project / "out.json").read_text())
    by_id = {e["id"]: e for e in summary["entries"]}
    assert by_id["a2"]["refused"] and not by_id["a1"]["refused"]
    assert summary["config"]["floors"]["per_library"] == {"click": 1000.0}
    assert summary["config"]["floors"]["source"] == "cli"


def test_overrides_never_edit_shipped_defaults(project: Path) -> None:
    before = {p: p.read_bytes() for p in (ROOT / "conf").rglob("*.yaml")}
    params = (ROOT / "params.yaml").read_bytes()
    assert main(eval_args("--split", "test", "--score-floor", "0.5", "k=3", *overrides())) == 0
    assert {p: p.read_bytes() for p in (ROOT / "conf").rglob("*.yaml")} == before
    assert (ROOT / "params.yaml").read_bytes() == params
    assert json.loads((project / "out.json").read_text())["config"]["k"] == 3


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--floor", "pydantic0.3"], "expected LIB=VALUE"),
        (["--floor", "pydantic=abc"], "is not a number"),
        (["--floor", "django=0.3"], "known libraries: click, pydantic"),
        (["--score-floor", "-1"], "outside the bm25 retriever's score range"),
        (["--limit", "0"], "--limit 0"),
        (["--split", "nope"], "known splits: calibration, test"),
        (["--golden", "missing.jsonl"], "missing.jsonl: golden set not found"),
    ],
)
def test_bad_input_exits_2_naming_the_flag(project: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                           needle: str) -> None:  # fmt: skip
    assert main(eval_args(*args, *overrides())) == 2
    assert needle in capsys.readouterr().err
    assert not (project / "out.json").exists()


def test_floors_calibrated_on_the_reported_split_are_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifact = {"global": 0.1, "per_library": {}, "provenance": {"split": "test"}}
    (project / "floors.json").write_text(json.dumps(artifact))
    args = eval_args("--split", "test", "retriever=bm25", "floors=calibrated", "floors.path=floors.json")
    assert main(args) == 2
    assert "train-on-test" in capsys.readouterr().err
    artifact["provenance"]["split"] = "calibration"
    (project / "floors.json").write_text(json.dumps(artifact))
    assert main(args) == 0
    cfg = json.loads((project / "out.json").read_text())["config"]
    assert cfg["floors"]["source"] == "calibrated:floors.json" and cfg["floors"]["global"] == 0.1


def test_floors_calibrated_on_other_labels_are_named(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifact = {
        "global": 0.1,
        "per_library": {},
        "provenance": {"split": "calibration", "golden_md5": "0" * 32},
    }
    (project / "floors.json").write_text(json.dumps(artifact))
    args = eval_args("--split", "test", "retriever=bm25", "floors=calibrated", "floors.path=floors.json")
    assert main(args) == 0  # allowed: the entry ids are disjoint
    assert f"calibrated on golden md5 {'0' * 32}" in capsys.readouterr().err
    summary = json.loads((project / "out.json").read_text())
    artifact["provenance"]["golden_md5"] = summary["config"]["golden"]["md5"]
    (project / "floors.json").write_text(json.dumps(artifact))
    assert main(args) == 0
    assert "calibrated on golden md5" not in capsys.readouterr().err


def test_compare_rejects_a_file_that_is_not_a_summary(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "bad.json").write_text(json.dumps({"hello": 1}))
    assert main(eval_args("--split", "test", *overrides())) == 0
    assert main(["compare", "out.json", "bad.json", "--no-gate"]) == 2
    assert "bad.json" in capsys.readouterr().err


def test_gate_exit_codes_through_the_cli(project: Path) -> None:
    assert main(eval_args("--split", "test", *overrides())) == 0
    assert main(["gate", "out.json"]) == 3  # u2 (off-topic) gets bm25 sources: refused_correctly < 1
    assert main(eval_args("--split", "test", "--score-floor", "1000", *overrides())) == 0
    assert main(["gate", "out.json"]) == 3  # refuses everything: hit_rate 0
    (project / "lenient.yaml").write_text("thresholds:\n  refused_correctly: 1.0\n")
    assert main(["gate", "out.json", "--config", "lenient.yaml"]) == 0


def test_calibration_picks_the_lowest_floor_of_the_best_interval() -> None:
    """Hand-computed: A1 relevant at 0.8, A2 relevant at 0.5, U1 tops at 0.6.

    floor <= 0.5: hit 1.0 + refused 0 = 1.0; (0.5, 0.6]: 0.5 + 0 = 0.5; (0.6, 0.8]: 0.5 + 1 = 1.5 (best);
    above 0.8: 0 + 1 = 1.0. The lowest floor of the best interval is the next float above 0.6.
    """
    matrix = build_matrix(
        [[("d1", 0.8), ("x", 0.3)], [("y", 0.55), ("d2", 0.5)], [("z", 0.6)]], [{"d1"}, {"d2"}, set()]
    )
    oos = np.array([False, False, True])
    cal = calibrate_library("lib", matrix, oos, k=5, objective="hit_rate+refused_correctly", low=0.0,
                            plot_grid=np.linspace(0, 1, 11))  # fmt: skip
    assert cal.floor == np.nextafter(0.6, np.inf)
    assert cal.objective == pytest.approx(1.5)
    assert cal.separable is False
    assert cal.in_scope_top == [0.5, 0.65, 0.8] and cal.out_of_scope_top == [0.6, 0.6, 0.6]


def test_calibration_reports_separable_scores() -> None:
    matrix = build_matrix([[("d1", 0.9)], [("z", 0.2)]], [{"d1"}, set()])
    cal = calibrate_library("lib", matrix, np.array([False, True]), k=3, objective="hit_rate+refused_correctly",
                            low=0.0, plot_grid=np.linspace(0, 1, 5))  # fmt: skip
    assert cal.separable is True and cal.objective == 2.0 and cal.floor == np.nextafter(0.2, np.inf)


def test_unreachable_mlflow_uri_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["eval", "--quiet", "--output", "out.json", "--split", "test", *overrides(),
            "tracking.uri=http://127.0.0.1:9"]  # fmt: skip
    assert main(args) == 2
    assert "cannot be reached" in capsys.readouterr().err
    assert not (project / "out.json").exists()  # checked before any work is done


def test_decision_accuracy_objective_weighs_entries_by_prevalence() -> None:
    """Same case as above: floor <= 0.5 decides 2 of 3 right (both hits, U1 answered); (0.6, 0.8] also 2 of 3
    (A1 hit, U1 refused); the lowest floor of the best value wins: the range minimum."""
    matrix = build_matrix(
        [[("d1", 0.8), ("x", 0.3)], [("y", 0.55), ("d2", 0.5)], [("z", 0.6)]], [{"d1"}, {"d2"}, set()]
    )
    cal = calibrate_library("lib", matrix, np.array([False, False, True]), k=5, objective="decision_accuracy",
                            low=0.0, plot_grid=np.linspace(0, 1, 11))  # fmt: skip
    assert cal.floor == 0.0 and cal.objective == pytest.approx(2 / 3)


def test_floors_calibrated_for_another_retriever_are_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifact = {
        "global": 0.7,
        "per_library": {},
        "provenance": {"split": "calibration", "retriever": {"name": "dense"}},
    }
    (project / "floors.json").write_text(json.dumps(artifact))
    args = eval_args("--split", "test", "retriever=bm25", "floors=calibrated", "floors.path=floors.json")
    assert main(args) == 2
    assert "calibrated for retriever {'name': 'dense'}" in capsys.readouterr().err
    artifact["provenance"]["retriever"] = {"name": "bm25", "k1": 1.5, "b": 0.75}
    (project / "floors.json").write_text(json.dumps(artifact))
    assert main(args) == 0


# ------------------------------------------------------------------------------------ LLM answerer and judge


def llm_overrides(server: FakeOpenAI, *extra: str) -> list[str]:
    url = server.base_url
    return [*overrides(), "answerer=openai", "judge=openai", f"answerer.base_url={url}", f"judge.base_url={url}",
            "answerer.model=m", "judge.model=j", "answerer.max_retries=0", "judge.max_retries=0", *extra]  # fmt: skip


def judge_prompts(server: FakeOpenAI) -> list[str]:
    """The <answer> of every judge request the server saw."""
    texts = ["\n".join(m["content"] for m in body["messages"]) for body in server.bodies]
    return [t.split("<answer>")[1].split("</answer>")[0].strip() for t in texts if '"verdict"' in t]


def test_llm_eval_answers_then_judges_and_resumes_from_both_journals(
    project: Path, openai_server: FakeOpenAI
) -> None:
    args = eval_args("--split", "test", *llm_overrides(openai_server))
    assert main(args) == 0
    summary = json.loads((project / "out.json").read_text())
    m, usage, rows = summary["metrics"], summary["config"]["usage"], summary["entries"]
    answered = [e for e in rows if not e["refused"]]
    assert answered and any(e["refused"] for e in rows)  # u1 is refused by the router
    judged = [e for e in answered if not e["out_of_scope"]]  # an out-of-scope answer is never judged
    # Judged once per in-scope answer given; a refused entry never reaches the judge.
    assert sorted(judge_prompts(openai_server)) == sorted(e["answer"] for e in judged)
    assert all(e["verdict"] is None and e["judge_error"] is None for e in rows if e["refused"])
    assert (
        m["not_judged"] is False
        and m["counts"]["n_judged"] == len(judged)
        and m["counts"]["judge_errors"] == 0
    )
    assert m["answer_accuracy"] is not None
    assert usage["by_role"]["answerer"]["requests"] == len(answered)
    assert usage["by_role"]["judge"]["requests"] == len(judged)
    assert usage["this_invocation"] == usage["by_role"] and usage["resumed"] == 0
    run_dir = project / "data" / "runs" / "eval" / summary["config"]["run_key"]
    assert len((run_dir / "journal.jsonl").read_text().splitlines()) == len(rows)
    assert len((run_dir / "judge.jsonl").read_text().splitlines()) == len(judged)

    # The run finished: the same command asks the system again (doceval's LLM calls hit their cache), the
    # finished run's journals set aside in previous/ (issue 27: a redeployed system is never scored stale).
    openai_server.reset_stats()
    assert main(args) == 0
    rerun = json.loads((project / "out.json").read_text())
    assert rerun["config"]["usage"]["resumed"] == 0 and rerun["config"]["usage"]["resumed_verdicts"] == 0
    assert rerun["config"]["usage"]["journal"]["mode"] == "rerun"
    assert (run_dir / "previous" / "journal.jsonl").is_file() and rerun["metrics"] == m
    # --resume replays the finished run: everything comes from the journals, not even the LLM cache is asked.
    openai_server.reset_stats()
    assert main([*args, "--resume"]) == 0
    again = json.loads((project / "out.json").read_text())
    assert again["config"]["usage"]["journal"]["mode"] == "resume-finished"
    assert openai_server.requests == 0 and again["config"]["usage"]["this_invocation"] == {}
    assert again["config"]["usage"]["resumed"] == len(rows)
    assert again["config"]["usage"]["resumed_verdicts"] == len(judged)
    # The whole run's cost, resumed included: the run replayed is the rerun, whose calls hit the LLM cache.
    assert again["config"]["usage"]["by_role"] == rerun["config"]["usage"]["by_role"]
    assert again["entries"] == rerun["entries"]

    # Cache hits cost nothing, and each call has its own measured time (the replay keeps the rerun's, above).
    def unpriced(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in e.items() if k not in ("usage", "timing")} for e in entries]

    assert again["metrics"] == m and unpriced(again["entries"]) == unpriced(rows)


def test_judge_errors_are_counted_and_excluded_from_accuracy(
    project: Path, openai_server: FakeOpenAI
) -> None:
    openai_server.judge_mode = "malformed"
    assert main(eval_args("--split", "test", *llm_overrides(openai_server))) == 0
    summary = json.loads((project / "out.json").read_text())
    m, rows = summary["metrics"], summary["entries"]
    in_scope_answered = [e for e in rows if not e["refused"] and not e["out_of_scope"]]
    assert m["counts"]["judge_errors"] == len(in_scope_answered) and m["counts"]["n_judged"] == 0
    assert all(
        e["verdict"] is None and e["judge_error"].startswith("malformed judge output")
        for e in in_scope_answered
    )
    assert in_scope_answered and all(e["scores"]["answer_accuracy"] is None for e in in_scope_answered)
    assert m["not_judged"] is False


def test_one_run_budget_stops_answering_or_judging_cleanly_and_resumes(
    project: Path, openai_server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    # Judging costs far more than answering here, so a budget can cover the answers but not one verdict.
    prices = ["answerer.price_per_1k_prompt=0.001", "judge.price_per_1k_prompt=1.0"]
    priced = eval_args("--split", "test", *llm_overrides(openai_server, *prices, "answerer.cache_path=priced.sqlite",
                                                           "judge.cache_path=priced.sqlite"))  # fmt: skip
    assert main(priced) == 0
    cost = json.loads((project / "out.json").read_text())["config"]["usage"]["by_role"]
    answers_usd, judge_usd = cost["answerer"]["cost_usd"], cost["judge"]["cost_usd"]
    (project / "out.json").unlink()
    capsys.readouterr()
    openai_server.reset_stats()

    def run(budget: float | None) -> int:
        value = "null" if budget is None else repr(budget)
        return main(
            eval_args("--split", "test", *llm_overrides(openai_server, *prices, f"++run.budget_usd={value}"))
        )

    # A budget stop is an incomplete run (exit 4, issue 42 A9), its summary written and marked so.
    assert run(answers_usd / 10) == 4
    err = capsys.readouterr().err
    assert "run incomplete" in err and f"run.budget_usd={answers_usd / 10} was reached" in err
    stopped = json.loads((project / "out.json").read_text())
    assert stopped["complete"] is False and "the agent answered" in stopped["incomplete"]["reason"]
    assert "rerun to resume" in stopped["incomplete"]["reason"]
    assert openai_server.chat_requests == 0  # the first answer could already exceed it: nothing was sent

    assert run(2 * answers_usd + judge_usd / 10) == 4
    err = capsys.readouterr().err
    stopped = json.loads((project / "out.json").read_text())
    reason = stopped["incomplete"]["reason"]
    assert "run incomplete" in err and "0 of 2 answers judged" in reason and "judge.jsonl" in reason
    assert stopped["complete"] is False and stopped["metrics"]["answer_accuracy"] is None
    answered = openai_server.chat_requests
    assert answered > 0 and not judge_prompts(openai_server)  # every answer, and not one verdict

    openai_server.reset_stats()
    assert run(None) == 0
    summary = json.loads((project / "out.json").read_text())
    usage = summary["config"]["usage"]
    assert usage["resumed"] == len(summary["entries"]) and "answerer" not in usage["this_invocation"]
    judged = [e for e in summary["entries"] if not e["refused"] and not e["out_of_scope"]]
    assert usage["this_invocation"]["judge"]["requests"] == openai_server.chat_requests == len(judged) > 0
    assert usage["by_role"]["answerer"]["cost_usd"] == pytest.approx(
        answers_usd
    )  # resumed answers' cost kept
    assert summary["config"]["run"]["budget_usd"] is None


def test_overrides_and_flags_mix_in_any_order(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 39 H21: overrides after a flag were "unrecognized arguments"; they join the others in the order
    given, and --floor's LIB=VALUE stays the flag's (never read as an override)."""
    argv = ["eval", "retriever=bm25", "--no-track", "k=3", "--output", "mixed.json", "--floor", "pydantic=0.3",
            "floors=zero", "--quiet", "--split", "test", "k=2"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    recorded = json.loads((project / "mixed.json").read_text())["config"]
    assert recorded["k"] == 2  # the later override wins, as Hydra applies them in order
    assert recorded["retriever"]["name"] == "bm25"
    assert recorded["floors"]["per_library"] == {"pydantic": 0.3} and recorded["floors"]["source"] == "cli"
    with pytest.raises(SystemExit) as usage:  # argparse's exit, after its message
        main(["eval", "k=3", "--output", "x.json", "--no-such-flag", "floors=zero"])
    assert usage.value.code == 2 and "unrecognized arguments: --no-such-flag" in capsys.readouterr().err
