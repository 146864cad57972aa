"""No misleading number (issue 29, item 4): with a user's retriever function, doceval's answerer answers from
the text of documents it knows (the corpus at paths.docs), and when it cannot know that text the metrics that
read the answer are "not measured" in the summary, the headline, compare, the report and the gate (exit 2),
never a number made by grading the ids. A user's function that returns nothing is its own refusal (not a
floor's), and relevant ids are checked whenever the corpus' ids are known."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tiny_project import make_tiny_project

from doceval.cli.main import main
from doceval.common.redact import forget_secrets, register_secret
from doceval.config import compose
from doceval.config.compose import flatten
from doceval.config.objects import config_dict
from doceval.results.markdown import render_report
from doceval.scoring.registry import names
from doceval.system.retrievers import RETRIEVERS, needs_index
from doceval.tracking.configured import effective_params
from doceval.tracking.shaping import _param_value, entries_csv

DOCS = {
    "pydantic@2.8.2": [
        ("pydantic.main.BaseModel.model_dump", "def model_dump(self)\n\nGenerate a dictionary of the model."),
        ("pydantic.fields.Field", "def Field(default)\n\nCreate a field with a default value."),
    ],
    "click@8.1.7": [
        ("click.decorators.option", "def option(*param_decls)\n\nAttach an option to the command."),
    ],
}
DUMP = "pydantic@2.8.2:pydantic.main.BaseModel.model_dump"
FIELD = "pydantic@2.8.2:pydantic.fields.Field"
OPTION = "click@8.1.7:click.decorators.option"
GOLDEN = [
    {"id": "a1", "question": "dictionary of a model", "library": "pydantic", "version": "2.8.2",
     "out_of_scope": False, "relevant_ids": [DUMP], "expected_apis": ["model_dump"], "forbidden_apis": [],
     "split": "test", "kind": "lookup", "reference_answer": "model_dump"},
    {"id": "a2", "question": "field default value", "library": "pydantic", "version": "2.8.2",
     "out_of_scope": False, "relevant_ids": [FIELD], "expected_apis": ["Field"], "forbidden_apis": [],
     "split": "test", "kind": "lookup", "reference_answer": "Field"},
    {"id": "a3", "question": "attach an option", "library": "click", "version": "8.1.7",
     "out_of_scope": False, "relevant_ids": [OPTION], "expected_apis": ["option"], "forbidden_apis": [],
     "split": "test", "kind": "lookup", "reference_answer": "option"},
]  # fmt: skip
# The user's retriever: the corpus' own ids by question (a3: nothing, its refusal), or ids doceval never saw.
MODULE = f"""
HITS = {{"dictionary of a model": ["{DUMP}"], "field default value": ["{FIELD}"]}}

def known(question, k):
    return HITS.get(question, [])

def foreign(question, k):
    return ["mine-" + str(len(question))] if question in HITS else []

def mixed(question, k):
    return known(question, k) + ["elsewhere:doc"]

def assistant(question, library, version, session_id):
    hits = known(question, 3)
    return {{"answer": "see " + " ".join(hits) if hits else None, "refused": not hits,
            "sources": [{{"id": d, "score": 1.0}} for d in hits]}}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    make_tiny_project(tmp_path, DOCS, "".join(json.dumps(e) + "\n" for e in GOLDEN))
    (tmp_path / "userret.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("userret", None)


def run(out: str, *args: str) -> tuple[int, dict[str, Any] | None]:
    path = Path(out)
    rc = main(
        ["eval", "--split", "all", "--no-track", "--quiet", "--output", out, "retriever=function", *args]
    )
    return rc, json.loads(path.read_text()) if path.exists() else None


def by_id(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in summary["entries"]}


def test_a_function_over_the_built_corpus_is_answered_from_the_documents_text(project: Path) -> None:
    rc, s = run("known.json", "retriever.target=userret:known")
    assert rc == 0 and s is not None
    a1 = by_id(s)["a1"]
    # The passage's text, not the id joined into a sentence (main answered "...: pydantic@2.8.2:...").
    assert "Generate a dictionary of the model" in a1["answer"]
    assert "not_measured" not in s["metrics"]
    # a1 and a2 answered with their expected API; a3 refused by the function: 2 of 3 in scope.
    assert s["metrics"]["version_correctness"] == pytest.approx(2 / 3)
    assert s["config"]["golden"]["corpus_pins"] == sorted(DOCS)


def test_ids_doceval_cannot_read_leave_the_answer_metrics_not_measured(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # paths.docs names no corpus: the function's ids are its own, their text unknown.
    main(["eval", "--split", "all", "--no-track", "--output", "own.json", "retriever=function",
          "retriever.target=userret:foreign", "paths.docs=nowhere"])  # fmt: skip
    s = json.loads(Path("own.json").read_text())
    text = names("answer_text")
    assert set(text) == {"answer_accuracy", "version_correctness"}
    for m in text:
        assert s["metrics"][m] is None and m in s["metrics"]["not_measured"]
        assert all(e["scores"][m] is None for e in s["entries"])
    assert "not documents of a doceval corpus" in s["metrics"]["not_measured"]["version_correctness"]
    # Refusals are the retriever's own behaviour: still measured.
    assert s["metrics"]["overrefusal_rate"] == pytest.approx(1 / 3)
    stages = {e["id"]: e["stage"] for e in s["entries"]}
    # a1, a2: their relevant document is not among the function's ids; nothing is graded as a missing API.
    assert "answer_missing_expected_api" not in stages.values()
    out = capsys.readouterr().out
    assert "not measured" in out and "version_correctness" in out


def test_an_id_outside_the_known_corpus_is_named_and_not_measured(project: Path) -> None:
    rc, s = run("mixed.json", "retriever.target=userret:mixed")
    assert rc == 0 and s is not None
    why = s["metrics"]["not_measured"]["version_correctness"]
    assert "'elsewhere:doc'" in why and "not documents of data/docs" in why
    assert s["metrics"]["hit_rate"] == pytest.approx(2 / 3)  # retrieval is measured as usual
    stages = {e["id"]: e["stage"] for e in s["entries"]}
    assert stages == {"a1": "answer_not_measured", "a2": "answer_not_measured", "a3": "relevant_not_in_top_k"}


def test_a_typo_in_relevant_ids_exits_2_when_the_corpus_is_known(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [dict(e) for e in GOLDEN]
    rows[1]["relevant_ids"] = ["pydantic@2.8.2:pydantic.fields.Feild"]
    Path("typo.jsonl").write_text("".join(json.dumps(e) + "\n" for e in rows), encoding="utf-8")
    rc = main(["eval", "--golden", "typo.jsonl", "--split", "all", "--no-track", "--quiet", "--output",
               "t.json", "retriever=function", "retriever.target=userret:known"])  # fmt: skip
    assert rc == 2
    assert "pydantic.fields.Feild" in capsys.readouterr().err


def test_a_functions_empty_result_is_its_own_refusal_not_a_floors(project: Path) -> None:
    rc, s = run("known.json", "retriever.target=userret:known")
    assert rc == 0 and s is not None
    a3 = by_id(s)["a3"]
    assert a3["refused"] and a3["stage"] == "retriever_refused"
    assert a3["refusal_reason"] == "retriever: returned no document"


def _two_runs() -> tuple[dict[str, Any], dict[str, Any]]:
    rc, base = run("base.json", "retriever.target=userret:known")
    assert rc == 0 and base is not None
    rc, new = run("new.json", "retriever.target=userret:foreign", "paths.docs=nowhere")
    assert rc == 0 and new is not None
    return base, new


def test_compare_tests_no_metric_that_was_not_measured(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _two_runs()
    capsys.readouterr()
    main(["compare", "base.json", "new.json", "--no-gate"])
    out = capsys.readouterr().out
    assert "new.json: answer_accuracy, version_correctness not measured" in out
    row = next(line for line in out.splitlines() if line.startswith("version_correctness"))
    # baseline mean shown; no new value, change, interval or p-value for a number that does not exist.
    assert row.split()[1:6] == ["0.6667", "n/a", "n/a", "n/a", "n/a"]


def test_a_gate_rule_on_a_metric_not_measured_exits_2_naming_it(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _two_runs()
    Path("gate.yaml").write_text("thresholds:\n  version_correctness: 0.5\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["gate", "new.json", "--config", "gate.yaml"]) == 2
    assert "version_correctness was not measured" in capsys.readouterr().err
    assert main(["gate", "base.json", "--config", "gate.yaml"]) == 0  # measured: judged as usual
    Path("nr.yaml").write_text(
        "non_regression:\n  enabled: true\n  metrics: [version_correctness]\n  mode: point\n",
        encoding="utf-8",
    )
    assert main(["gate", "base.json", "--config", "nr.yaml", "--baseline", "new.json"]) == 2


def test_the_report_says_not_measured_and_why(project: Path) -> None:
    _, new = _two_runs()
    report = render_report(new)
    assert "| version_correctness | not measured |" in report
    assert "**Not measured**: answer_accuracy, version_correctness:" in report


def test_entries_csv_scrubs_registered_secrets_whoever_calls_it() -> None:
    secret = "sk-live-0123456789abcdef"
    register_secret(secret)
    try:
        text = entries_csv([{"id": "q1", "kind": f"token {secret}", "scores": {"hit_rate": 1.0}}])
    finally:
        forget_secrets()
    assert secret not in text and "<redacted>" in text


# ------------------------------------------------------------------------------------ MLflow params

# What a summary's config block records that is not a param (where the run read and wrote, what it cost).
_NOT_PARAMS = ("usage", "provenance", "system", "golden", "candidates", "run_key", "judge_id", "corpus_hash")


def param_mismatches(params: dict[str, str], recorded: dict[str, Any]) -> list[str]:
    """Every key the summary's config block and the logged params share, where they disagree; and the
    effective keys that must be logged at all."""
    flat = flatten({k: v for k, v in recorded.items() if k not in _NOT_PARAMS and k != "split"})
    flat["split.name"] = recorded["split"] or "all"
    wrong = [f"{k}: param {params[k]!r}, summary {_param_value(v)!r}" for k, v in flat.items()
             if k in params and params[k] != _param_value(v)]  # fmt: skip
    missing = [k for k in ("memory.isolate", "retriever.name", "answerer.name", "floors.source", "k")
               if k not in params]  # fmt: skip
    return wrong + [f"{k}: not logged" for k in missing]


def tracked(tmp: Path, *args: str) -> tuple[dict[str, Any], dict[str, str], str]:
    """A tracked `doceval eval` into a sqlite store under ``tmp``: its summary, its params and run name."""
    # lazy: mlflow takes seconds to import; only these tests read a store
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp / 'mlruns' / 'mlflow.db'}"
    out = tmp / "tracked.json"
    rc = main(["eval", "--split", "all", "--quiet", "--output", str(out), f"tracking.uri={uri}",
               "tracking.traces=false", *args])  # fmt: skip
    assert rc == 0
    summary = json.loads(out.read_text())
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              order_by=["attributes.start_time DESC"], max_results=1)  # fmt: skip
    return summary, dict(runs[0].data.params), str(runs[0].info.run_name)


RUNNABLE = {
    "retriever=overlap": ["retriever=overlap", "floors=zero"],
    "retriever=bm25": ["retriever=bm25", "--score-floor", "0.5"],
    "retriever=function": ["retriever=function", "retriever.target=userret:known"],
    "agent=function": ["agent=function", "agent.target=userret:assistant"],
    "agent=docchat": ["agent=docchat", "retriever=bm25", "floors=zero", "--warm-memory"],
}


@pytest.mark.slow
@pytest.mark.parametrize("option", sorted(RUNNABLE))
def test_logged_params_are_what_the_summary_says_ran(project: Path, option: str) -> None:
    summary, params, name = tracked(project, *RUNNABLE[option])
    recorded = summary["config"]
    assert param_mismatches(params, recorded) == []
    warm = recorded["memory"]["isolate"] is False
    assert warm == ("--warm-memory" in RUNNABLE[option])
    assert params["memory.isolate"] == str(not warm)
    assert (" · warm memory" in name) == warm  # a warm run is named apart from the isolated one


@pytest.mark.slow
def test_an_http_assistants_params_are_what_ran(project: Path) -> None:
    # lazy: the fake assistant server is a test helper only this test needs
    from fake_agent import running_agent

    with running_agent() as srv:
        summary, params, name = tracked(project, "agent=http", f"agent.url={srv.url}", "--warm-memory")
    assert param_mismatches(params, summary["config"]) == []
    # The composed retriever (dense) did not run: the params say the assistant's.
    assert params["retriever.name"] == "agent:http" and "retriever.embedder" not in params
    assert params["memory.isolate"] == "False" and " · warm memory" in name


@pytest.mark.parametrize("option", [n for n in RETRIEVERS.names() if needs_index(n)])
def test_index_retrievers_params_are_their_recorded_block(option: str) -> None:
    # These need a vector index (not built here); the summary records their block as composed
    # (doceval.harness.summary), and the params take every block from the summary's record.
    cfg = compose.compose([f"retriever={option}", "store=qdrant_edge"])
    recorded = {"split": "test", "k": cfg.k, "retriever": config_dict(cfg.retriever), "memory": {"isolate": False},
                "floors": {"source": "config", "global": 0.2, "per_library": {}, "signal": "score"},
                "answerer": config_dict(cfg.answerer), "judge": config_dict(cfg.judge)}  # fmt: skip
    params = {k: _param_value(v) for k, v in effective_params(cfg, recorded).items()}
    assert param_mismatches(params, recorded) == []
    assert params["retriever.name"] == option and params["floors.global"] == "0.2"
