"""Results a person can read (issue 29, item 6): entries.csv says what happened to each entry, traces carry the
measured time of each call to the user's system, tables never cut a metric name or an interval, progress off a
terminal is a line per step (no bar frames), the headline names the floors option, and the Python API returns
the documented Summary and takes a built-in retriever's name. Real runs of the harness over a user's function
and assistant on a three-entry golden set; nothing mocked."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from test_eval_cli import project as project  # noqa: F401 - the tiny project fixture

import doceval
from doceval.app.sweep import format_points
from doceval.cli.common import print_headline
from doceval.common.naming import judged_share_label
from doceval.common.progress import Progress
from doceval.common.redact import register_secret
from doceval.errors import UsageError
from doceval.results.comparison import compare, format_compare
from doceval.results.history import format_history
from doceval.results.summaries import shown_metrics
from doceval.scoring.registry import METRICS, names
from doceval.tracking.shaping import ENTRY_COLUMNS, entries_csv

DOCS = {"D1": "late fees are five dollars per day", "D2": "returns are accepted within thirty days",
        "D3": "shipping is free over fifty dollars"}  # fmt: skip
SECRET = "tok-readable-0123456789abcdef"
ROWS = [
    ("q1", "how much are late fees", ["D1"], "5 dollars"),
    ("q2", f"when are returns accepted {SECRET}", ["D2"], "30"),
    ("q3", "do you sell pizza", [], ""),
]


@pytest.fixture
def golden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # a user's own folder: no conf/, no corpus
    rows = [{"id": i, "question": q, "relevant_ids": rel, "reference_answer": ref, "out_of_scope": not rel,
             "expected_apis": [], "forbidden_apis": [], "split": None, "library": "shop", "version": "1.0",
             "kind": "lookup" if rel else "off_topic"} for i, q, rel, ref in ROWS]  # fmt: skip
    path = tmp_path / "golden.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def overlap(question: str, k: int) -> list[tuple[str, float]]:
    words = set(question.split())
    scored = [(d, float(len(words & set(t.split())))) for d, t in DOCS.items()]
    return [(d, s) for d, s in sorted(scored, key=lambda x: -x[1]) if s >= 2][:k]


def _headline(summary: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_headline(summary)
    return out.getvalue()


# ------------------------------------------------------------------------------------------- entries.csv


def test_entries_csv_says_what_happened_to_each_entry_scrubbed(golden: Path) -> None:
    register_secret(SECRET)
    summary = doceval.evaluate(golden, retriever=overlap, k=2)
    rows = list(csv.DictReader(io.StringIO(entries_csv(summary["entries"]))))
    assert list(rows[0])[: len(ENTRY_COLUMNS)] == list(ENTRY_COLUMNS)
    q1, q2, q3 = rows
    # the ids are no corpus doceval can read, so the answer is not graded (tests/test_not_measured.py)
    assert (q1["question"], q1["pin"], q1["stage"]) == (
        "how much are late fees",
        "shop@1.0",
        "answer_not_measured",
    )
    assert q1["top_ids"] == "D1:3.000"  # id:score, best first, the floors and k applied
    assert q1["answer"] and len(q1["answer"]) <= 200 and q1["system_error"] == ""
    assert float(q1["duration_s"]) > 0  # the agent's call, measured
    assert SECRET not in q2["question"] and "<redacted>" in q2["question"]
    assert q3["refused"] == "True" and q3["top_ids"] == "" and q3["stage"] == "correct_refusal"
    assert q1["hit_rate"] == "1.0"  # the scores follow


def test_entries_csv_cuts_the_answer_at_200_characters() -> None:
    entry = {"id": "q1", "answer": "x" * 500, "retrieved": [[f"D{i}", 1.0 - i / 10] for i in range(8)]}
    row = next(csv.DictReader(io.StringIO(entries_csv([entry]))))
    assert row["answer"] == "x" * 200
    assert row["top_ids"] == "D0:1.000 D1:0.900 D2:0.800 D3:0.700 D4:0.600"  # the top 5


# ---------------------------------------------------------------------------------------------- timing


def test_each_call_to_the_users_assistant_is_timed_and_its_trace_lasts_as_long(golden: Path) -> None:
    own: dict[str, tuple[float, float]] = {}

    def assistant(question: str, library: str, version: str, session_id: str) -> dict[str, Any]:
        start, t0 = time.time(), time.perf_counter()
        hits = overlap(question, 2)
        time.sleep(0.01)
        own[question] = (start, time.perf_counter() - t0)
        return {"answer": " ".join(DOCS[d] for d, _ in hits) or None,
                "sources": [{"id": d, "score": s} for d, s in hits], "refused": not hits}  # fmt: skip

    summary = doceval.evaluate(golden, agent=assistant, k=2)
    for entry in summary["entries"]:
        start, elapsed = own[entry["question"]]
        timing = entry["timing"]
        # measured around the call: it starts no later and lasts no shorter than the call's own clock says
        assert timing["start"] <= start and timing["duration_s"] >= elapsed > 0
    # lazy: mlflow (seconds) only for the trace's own records
    from doceval.tracking.traces import build_trace

    entry = summary["entries"][0]
    info, spans = build_trace(entry, run_id="0" * 32, experiment_id="1", recorded=summary["config"],
                              start_ms=0)  # fmt: skip
    root, call = spans[0], next(s for s in spans if s["name"] == "assistant call")
    duration_ns = round(entry["timing"]["duration_s"] * 1e9)
    # (nanoseconds from float seconds: equal to within a microsecond of rounding)
    assert abs(call["end_time_unix_nano"] - call["start_time_unix_nano"] - duration_ns) < 1000
    assert abs(root["start_time_unix_nano"] - entry["timing"]["start"] * 1e9) < 1000
    assert info.execution_duration >= 10  # ms, as measured (the call sleeps 10 ms), not 0
    assert abs(info.execution_duration - duration_ns / 1e6) <= 1
    assert abs(info.request_time - entry["timing"]["start"] * 1000) <= 1


def test_doceval_agent_over_a_retriever_function_times_search_answerer_and_the_function(golden: Path) -> None:
    summary = doceval.evaluate(golden, retriever=overlap, k=2)
    timing = summary["entries"][0]["timing"]
    assert {"start", "duration_s", "search_s", "answerer_s", "retrieve_start", "retrieve_s"} <= set(timing)
    assert timing["duration_s"] >= timing["search_s"] + timing["answerer_s"] and timing["retrieve_s"] > 0


# ---------------------------------------------------------------------------------------------- tables


def test_no_table_cuts_a_metric_name_or_an_interval(golden: Path) -> None:
    summary = doceval.evaluate(golden, retriever=overlap, k=2)
    m = summary["metrics"]
    headline = _headline(summary).split()
    for metric in METRICS:  # *_rel1 rows only with graded judgments; judged_share shown as what it is
        shown = judged_share_label(summary["config"], 2) if metric.name == "judged_share" else metric.label(2)
        assert (shown in headline) is (metric.name in shown_metrics(summary)), metric.name
    assert "precision@2" in headline
    for name, ci in m["ci95"].items():
        if ci:
            assert f"[{ci[0]:.3f}," in headline and f"{ci[1]:.3f}]" in headline, name
    compared = format_compare(compare(summary, summary)).split()
    assert all(name in compared or f"{name}*" in compared for name in shown_metrics(summary))
    sweep = format_points([{"overrides": ["k=2"], "metrics": m, "ci95": m["ci95"], "counts": m["counts"]}])
    assert sweep.splitlines()[0].split() == ["point", "n", *names("sweep")]
    ci = m["ci95"]["hit_rate"]
    assert f"{m['hit_rate']:.3f} [{ci[0]:.2f},{ci[1]:.2f}]" in sweep.splitlines()[2]  # n and intervals (C9)
    assert sweep.splitlines()[2].split()[1] == f"{m['counts']['n_in_scope']}/{m['counts']['n_out_of_scope']}"
    every = [metric.name for metric in METRICS]
    rows = [{"commit": "a" * 40, "time": 0.0, "dirty": False, "family": {},
             "metrics": {n: {"value": 0.5, "ci": [0.25, 0.75]} for n in every}}]  # fmt: skip
    history = format_history(rows, every)
    assert history[1].split() == ["commit", "date", "dirty", *every]
    assert history[3].count("0.500 [0.25,0.75]") == len(every)


def test_the_headline_names_the_floors_option(golden: Path) -> None:
    summary = doceval.evaluate(golden, retriever=overlap, k=2)  # a callable runs under floors=zero
    assert _headline(summary).splitlines()[0].endswith("floors=zero")
    raised = doceval.evaluate(golden, retriever=overlap, k=2, overrides=["floors=zero", "floors.global=1.5"])
    assert _headline(raised).splitlines()[0].endswith("floors=config (global 1.5)")


# -------------------------------------------------------------------------------------------- progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_off_a_terminal_is_one_line_per_step(golden: Path) -> None:
    log = io.StringIO()  # a log file: not a terminal
    with contextlib.redirect_stderr(log):
        doceval.evaluate(golden, retriever=overlap, k=2, progress=True)
    text = log.getvalue()
    assert "\r" not in text  # no bar frames
    lines = text.splitlines()
    assert len(lines) <= 3, lines
    assert any(line.startswith("retrieve (function): 3/3 q in ") for line in lines), lines
    assert any(line.startswith("agent: 3/3 entry in ") for line in lines), lines
    sweep_log = io.StringIO()
    with contextlib.redirect_stderr(sweep_log), Progress(12, "sweep", "point") as bar:
        for _ in range(12):
            bar.update(1)
    assert sweep_log.getvalue().startswith("sweep: 12/12 point in ") and sweep_log.getvalue().count("\n") == 1


def test_progress_on_a_terminal_is_a_bar() -> None:
    tty = _Terminal()
    with contextlib.redirect_stderr(tty), Progress(3, "agent", "entry") as bar:
        bar.update(3)
    assert "\r" in tty.getvalue() and "3/3" in tty.getvalue()
    quiet = io.StringIO()
    with contextlib.redirect_stderr(quiet), Progress(3, "agent", "entry", enabled=False) as bar:
        bar.update(3)
    assert quiet.getvalue() == ""


# --------------------------------------------------------------------------------------------- the API


def test_evaluate_returns_the_documented_summary(golden: Path) -> None:
    summary = doceval.evaluate(golden, retriever=overlap, k=2)
    assert isinstance(summary, doceval.Summary) and isinstance(summary, dict)
    assert summary.metrics["hit_rate"] == summary["metrics"]["hit_rate"] == 1.0
    assert summary.config["k"] == 2 and [e["id"] for e in summary.entries] == ["q1", "q2", "q3"]
    assert summary.complete is True
    assert json.loads(json.dumps(summary))["metrics"]["hit_rate"] == 1.0  # still the JSON object


def test_evaluate_takes_a_built_in_retriever_name(project: Path) -> None:
    summary = doceval.evaluate(
        "data/golden/v2.1.jsonl", retriever="bm25", overrides=["floors=zero"], split="test"
    )
    assert summary.config["retriever"]["name"] == "bm25"
    assert summary.entries[0]["retrieved"][0][0] == "pydantic@2.8.2:pydantic.main.BaseModel.model_dump"
    with pytest.raises(UsageError, match=r"retriever='bm99'.*bm25.*dense"):
        doceval.evaluate("data/golden/v2.1.jsonl", retriever="bm99")
