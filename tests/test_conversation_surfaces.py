"""Conversations everywhere results go (issue 30 item 5): MLflow (one trace per turn in its conversation's
session, read back from a real sqlite store; the conversation block as run metrics), the report's
Conversations section, compare per turn position and all_turns_correct, the gate on conversation metrics,
and history of the logged conversation metrics."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

import doceval
from doceval.cli.main import main
from doceval.errors import UsageError
from doceval.results.comparison import compare, format_compare
from doceval.results.gating import check_gate_config, gate, load_gate_config
from doceval.results.markdown import render_report
from doceval.scoring.conversation_names import conversation_figures, conversation_metric_names
from doceval.scoring.conversations import ClusterSettings, conversation_metrics
from doceval.scoring.proportions import mcnemar_exact_p, newcombe_paired
from doceval.tracking import log_run
from doceval.tracking.traces import session_of

SESSION_KEY = "mlflow.trace.session"  # mlflow.tracing.constant.TraceMetadataKey.TRACE_SESSION in 3.17

DOCS = {
    "pydantic@2.8:dump": "model_dump turns a pydantic 2.8 model into a dict",
    "pydantic@1.10:dict": "dict turns a pydantic 1.10 model into a dict",
    "httpx@0.27:async": "AsyncClient sends async requests with httpx",
}


def golden_turn(question: str, pin: str, relevant: list[str], **fields: Any) -> dict[str, Any]:
    library, version = pin.split("@")
    out_of_scope = not relevant
    rec = {"question": question, "library": library, "version": version, "out_of_scope": out_of_scope,
           "relevant_ids": relevant, "reference_answer": "" if out_of_scope else "see the docs",
           "expected_apis": [], "forbidden_apis": [], "kind": "first_turn", "needs_memory": False}  # fmt: skip
    rec.update(fields)
    return rec


GOLDEN = [
    {"id": "conv-a", "split": "test", "kind": "conversation", "turns": [
        golden_turn("pydantic 2.8 model dump to dict", "pydantic@2.8", ["pydantic@2.8:dump"]),
        golden_turn("and in 1.10?", "pydantic@1.10", ["pydantic@1.10:dict"], kind="follow_up_version_switch",
                    needs_memory=True),
        golden_turn("what is the capital of France?", "pydantic@2.8", [], kind="out_of_scope_follow_up"),
    ]},
    {"id": "q-single", "split": "test", **golden_turn("httpx async requests", "httpx@0.27", ["httpx@0.27:async"],
                                                      kind="lookup")},
    {"id": "conv-b", "split": "test", "kind": "conversation", "turns": [
        golden_turn("httpx async requests client", "httpx@0.27", ["httpx@0.27:async"]),
        golden_turn("and for a pydantic 2.8 model dump?", "pydantic@2.8", ["pydantic@2.8:dump"],
                    kind="topic_shift"),
        golden_turn("and in 1.10?", "pydantic@1.10", ["pydantic@1.10:dict"], kind="follow_up_version_switch",
                    needs_memory=True),
    ]},
]  # fmt: skip


class MemoryAssistant:
    """A user's assistant with memory per session: a follow-up ("and in 1.10?") is read with the session's
    previous question, and a question sharing no word with the docs is refused."""

    def __init__(self) -> None:
        self.previous: dict[str, str] = {}

    def __call__(self, *, question: str, library: str, version: str, session_id: str) -> dict[str, Any]:
        query = f"{self.previous.get(session_id, '')} {question}"
        self.previous[session_id] = question
        words = set(query.lower().replace("?", "").split())
        scored = sorted(((len(words & set(t.split())), d) for d, t in DOCS.items()), reverse=True)
        if "1.10" in question:
            scored = [(9, "pydantic@1.10:dict")]
        sources = [d for s, d in scored if s >= 3][:2]
        return {"answer": "see the docs" if sources else "", "sources": sources, "refused": not sources}


@pytest.fixture(scope="module")
def conversation_summary(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("conversations")
    path = folder / "golden.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in GOLDEN), encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(
            folder
        )  # the run's journal (data/runs/eval/) goes beside the golden set, not into the checkout
        return dict(doceval.evaluate(path, agent=MemoryAssistant(), k=2, split="all"))


@pytest.fixture
def summary(conversation_summary: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(conversation_summary)


# ------------------------------------------------------------------------------------------------ MLflow


@pytest.fixture(scope="module")
def logged(conversation_summary: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The summary logged as a run with its traces in a real sqlite store: (store URI, run id)."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    return uri, log_run(conversation_summary, uri=uri, run_name="conversations")


def _run_traces(uri: str, run_id: str) -> list[Any]:
    client = MlflowClient(uri)
    run = client.get_run(run_id)
    return list(client.search_traces(locations=[run.info.experiment_id], run_id=run_id, max_results=100))


@pytest.mark.slow
def test_every_turn_trace_carries_its_conversation_session_and_position(logged: tuple[str, str]) -> None:
    uri, run_id = logged
    traces = {t.info.tags["doceval.entry_id"]: t for t in _run_traces(uri, run_id)}
    assert sorted(traces) == [
        "conv-a#1",
        "conv-a#2",
        "conv-a#3",
        "conv-b#1",
        "conv-b#2",
        "conv-b#3",
        "q-single",
    ]
    for entry_id, trace in traces.items():
        meta, tags = trace.info.trace_metadata, trace.info.tags
        if entry_id == "q-single":  # a single question is no session
            assert SESSION_KEY not in meta and "doceval.turn" not in tags
            continue
        conversation, turn = entry_id.split("#")
        assert meta[SESSION_KEY] == session_of(run_id, conversation) == f"{conversation} @ {run_id}"
        assert tags["doceval.conversation"] == conversation and tags["doceval.turn"] == turn
        assert tags["doceval.needs_memory"] == ("true" if entry_id in ("conv-a#2", "conv-b#3") else "false")


@pytest.mark.slow
def test_a_session_search_returns_one_conversations_turns_in_order(logged: tuple[str, str]) -> None:
    uri, run_id = logged
    client = MlflowClient(uri)
    experiment = client.get_run(run_id).info.experiment_id
    for conversation in ("conv-a", "conv-b"):
        found = client.search_traces(
            locations=[experiment],
            filter_string=f"metadata.`{SESSION_KEY}` = '{session_of(run_id, conversation)}'",
            order_by=["timestamp_ms ASC"],
        )
        assert [t.info.tags["doceval.entry_id"] for t in found] == [f"{conversation}#{n}" for n in (1, 2, 3)]


@pytest.mark.slow
def test_the_conversation_block_is_logged_as_run_metrics(
    logged: tuple[str, str], conversation_summary: dict[str, Any]
) -> None:
    uri, run_id = logged
    logged_metrics = MlflowClient(uri).get_run(run_id).data.metrics
    block = conversation_summary["metrics"]["conversations"]
    assert logged_metrics["conversations.hit_rate"] == pytest.approx(block["turns"]["hit_rate"])
    assert logged_metrics["conversations.hit_rate_ci_lo"] == pytest.approx(
        block["turns"]["ci95"]["hit_rate"][0]
    )
    assert logged_metrics["conversations.turn2.hit_rate"] == pytest.approx(
        block["by_position"]["2"]["hit_rate"]
    )
    turn3 = block["by_position"]["3+"]["refused_correctly"]
    assert logged_metrics["conversations.turn3_plus.refused_correctly"] == pytest.approx(turn3)
    per = block["per_conversation"]["all_turns_correct"]
    if per is None:  # not measured: never logged as a number
        assert "conversations.all_turns_correct" not in logged_metrics
    else:
        assert logged_metrics["conversations.all_turns_correct"] == pytest.approx(per)
    # Every logged conversation metric is a name the gate and history accept.
    logged_names = {
        k for k in logged_metrics if k.startswith("conversations.") and not k.endswith(("_lo", "_hi"))
    }
    assert logged_names and logged_names <= set(conversation_metric_names())


def test_a_single_question_summary_logs_no_conversation_metric(conversation_summary: dict[str, Any]) -> None:
    metrics = {k: v for k, v in conversation_summary["metrics"].items() if k != "conversations"}
    assert conversation_figures(metrics) == {}


# -------------------------------------------------------------------------------------------------- gate


def _set_turn(summary: dict[str, Any], entry_id: str, stage: str, **scores: float) -> None:
    """Make one turn fail (or pass) and recompute the conversation block, as scoring would."""
    entry = next(e for e in summary["entries"] if e["id"] == entry_id)
    entry["stage"] = stage
    entry["scores"].update(scores)
    block = conversation_metrics(summary["entries"], ClusterSettings.of_summary(summary))
    summary["metrics"]["conversations"] = block


def test_the_gate_thresholds_a_turn_position_metric_and_all_turns_correct(summary: dict[str, Any]) -> None:
    _set_turn(summary, "conv-b#2", "relevant_not_in_top_k", hit_rate=0.0)
    rules = check_gate_config({"thresholds": {"hit_rate": 0.5, "conversations.turn1.hit_rate": 0.9,
                                              "conversations.turn2.hit_rate": 0.9,
                                              "conversations.all_turns_correct": 0.6}})  # fmt: skip
    verdict = gate(summary, rules)
    assert not verdict.passed
    assert [f.metric for f in verdict.failures] == [
        "conversations.turn2.hit_rate",
        "conversations.all_turns_correct",
    ]
    assert verdict.failures[0].reason == (
        "conversations.turn2.hit_rate >= 0.90: conversations.turn2.hit_rate = 0.5000, short by 0.4000"
    )
    assert "conversations.all_turns_correct >= 0.60" in verdict.line


def test_a_memory_leak_threshold_is_lower_is_better(summary: dict[str, Any]) -> None:
    summary["metrics"]["conversations"]["memory_leak"] = {
        "hit_rate": {"isolated": 1.0, "warm_memory": 0.75, "leak": 0.25, "ci95": [0.05, 0.5], "n_turns": 4}
    }
    verdict = gate(summary, check_gate_config({"thresholds": {"conversations.memory_leak.hit_rate": 0.1}}))
    assert [f.reason for f in verdict.failures] == [
        "conversations.memory_leak.hit_rate <= 0.10: conversations.memory_leak.hit_rate = 0.2500, over by 0.1500"
    ]


def test_a_conversation_threshold_on_a_run_without_conversations_fails_as_not_measured(
    summary: dict[str, Any],
) -> None:
    del summary["metrics"]["conversations"]
    verdict = gate(summary, check_gate_config({"thresholds": {"conversations.hit_rate": 0.5}}))
    assert [f.reason for f in verdict.failures] == [
        "conversations.hit_rate >= 0.50: not measured (the summary has no conversations: evaluate a golden set "
        "with conversation entries)"
    ]


def test_an_unknown_conversation_metric_is_exit_2_listing_the_valid_names(
    tmp_path: Path, summary: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "gate.yaml"
    config.write_text("thresholds:\n  conversations.turn4.hit_rate: 0.5\n", encoding="utf-8")
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(summary), encoding="utf-8")
    with pytest.raises(UsageError) as err:
        load_gate_config(config)
    message = str(err.value)
    assert message.startswith(
        f"{config}: thresholds.conversations.turn4.hit_rate: unknown metric; valid metrics:"
    )
    assert "conversations.{turn1|turn2|turn3_plus}.METRIC" in message
    assert "conversations.all_turns_correct" in message
    assert main(["gate", str(path), "--config", str(config)]) == 2
    assert "thresholds.conversations.turn4.hit_rate: unknown metric" in capsys.readouterr().err
    config.write_text("thresholds:\n  conversations.turn2.hit_rate: 0.5\n", encoding="utf-8")
    assert main(["gate", str(path), "--config", str(config)]) == 0


# ------------------------------------------------------------------------------------------------ report


def _section(report: str) -> list[str]:
    lines = report.splitlines()
    start = lines.index("## Conversations")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    return lines[start:end]


def test_the_report_has_a_conversations_section_per_turn_position_and_memory(summary: dict[str, Any]) -> None:
    _set_turn(summary, "conv-b#2", "relevant_not_in_top_k", hit_rate=0.0)
    block = summary["metrics"]["conversations"]
    section = _section(render_report(summary))
    assert section[2] == "2 conversations, 6 turns, 2 of which need an earlier turn (needs_memory)."
    assert section[4] == ("| metric | all turns | turn 1 | turn 2 | turn 3+ | needs memory: no "
                          "| needs memory: yes |")  # fmt: skip
    lo, hi = block["turns"]["ci95"]["hit_rate"]
    hit = next(line for line in section if line.startswith("| hit_rate |"))
    assert hit.startswith(
        f"| hit_rate | 0.8000 [{lo:.4f}, {hi:.4f}] | 1.0000 (n<10) | 0.5000 (n<10) | 1.0000 (n<10) "
    )
    refused = next(line for line in section if line.startswith("| refused_correctly |"))
    assert refused.split(" | ")[2:4] == ["n/a", "n/a"]  # no out-of-scope turn at positions 1 and 2
    assert "Not measured on any turn: answer_accuracy." in section
    per = block["per_conversation"]
    lo, hi = per["ci95"]
    at = next(i for i, line in enumerate(section) if line.startswith("All turns correct:"))
    assert section[at].startswith(f"All turns correct: 0.5000 [{lo:.4f}, {hi:.4f}] over 2 conversations")
    assert section[at + 4 : at + 6] == ["| turn 2 | 1 |", "| none (all correct) | 1 |"]
    assert "### Memory benefit" not in section


def test_the_report_shows_memory_benefit_and_leak_when_measured(summary: dict[str, Any]) -> None:
    block = summary["metrics"]["conversations"]
    block["memory_benefit"] = {
        "hit_rate": {"with_memory": 1.0, "memory_reset": 0.5, "benefit": 0.5, "ci95": [0.1, 0.9],
                     "ci_method": "cluster-bca", "n_turns": 2, "n_conversations": 2},
        "answer_accuracy": {"with_memory": None, "memory_reset": None, "benefit": None, "ci95": None,
                            "ci_method": None, "n_turns": 0, "n_conversations": 0},
    }  # fmt: skip
    block["memory_leak"] = {"refused_correctly": {"isolated": 1.0, "warm_memory": 0.0, "leak": 1.0,
                                                  "ci95": [0.2, 1.0], "ci_method": "cluster-wilson-bounded",
                                                  "n_turns": 1, "n_conversations": 1}}  # fmt: skip
    section = _section(render_report(summary))
    assert "| hit_rate | 1.0000 | 0.5000 | +0.5000 [+0.1000, +0.9000] | cluster-bca | 2 |" in section
    assert "| answer_accuracy | not measured | - | - | - | 0 |" in section  # never a 0
    leak = section.index("### Memory leak")
    assert section[leak + 4] == "| metric | isolated | warm memory | leak [95% CI] | interval | n |"
    assert section[leak + 6] == (
        "| refused_correctly | 1.0000 | 0.0000 | +1.0000 [+0.2000, +1.0000] | cluster-wilson-bounded | 1 |"
    )


def test_a_single_question_report_has_no_conversations_section(summary: dict[str, Any]) -> None:
    del summary["metrics"]["conversations"]
    assert "## Conversations" not in render_report(summary)


# ----------------------------------------------------------------------------------------------- compare


def test_compare_shows_which_turn_positions_changed_and_all_turns_correct_paired_by_conversation(
    summary: dict[str, Any],
) -> None:
    new = copy.deepcopy(summary)
    _set_turn(new, "conv-b#2", "relevant_not_in_top_k", hit_rate=0.0)  # turn 2 of conv-b breaks
    result = compare(summary, new)
    assert [(p.position, p.n_turns, p.better, p.worse, p.other) for p in result.positions] == [
        ("1", 2, 0, 0, 0), ("2", 2, 0, 1, 0), ("3+", 2, 0, 0, 0)
    ]  # fmt: skip
    overall = result.all_turns_correct
    assert overall is not None
    assert (overall.base, overall.new, overall.change, overall.n_paired) == (1.0, 0.5, -0.5, 2)
    assert (overall.wins, overall.ties, overall.losses) == (0, 1, 1)
    assert overall.ci == pytest.approx(
        newcombe_paired(1, 1, 0, 0, 0.05)
    )  # both, base only, new only, neither
    assert overall.p_value == pytest.approx(mcnemar_exact_p(1, 0))
    text = format_compare(result).splitlines()
    at = text.index("turns by position (baseline -> new; failing -> correct is better):")
    assert text[at + 2] == "  turn 2: 0 better, 1 worse, 0 other stage changes, of 2 turns"
    assert text[at + 4].startswith("all_turns_correct: 1.0000 -> 0.5000, change -0.5000 [")
    # And back: the same turn is counted better.
    back = compare(new, summary)
    assert [(p.better, p.worse) for p in back.positions][1] == (1, 0)


def test_compare_of_single_question_runs_has_no_conversation_lines(summary: dict[str, Any]) -> None:
    for e in summary["entries"]:
        for key in ("conversation", "turn", "needs_memory"):
            e.pop(key, None)
    del summary["metrics"]["conversations"]
    result = compare(summary, copy.deepcopy(summary))
    assert result.positions == [] and result.all_turns_correct is None
    assert "turns by position" not in format_compare(result)


# ----------------------------------------------------------------------------------------------- history


def _git(root: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}  # fmt: skip
    return subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


@pytest.mark.slow
def test_history_prints_and_plots_a_logged_conversation_metric(
    tmp_path: Path,
    summary: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    _git(tmp_path, "init", "-q")
    commits = []
    for i, (entry_id, stage) in enumerate((("conv-a#1", "ok"), ("conv-b#2", "relevant_not_in_top_k"))):
        _git(tmp_path, "commit", "-q", "--allow-empty", "-m", f"c{i}")
        commits.append(_git(tmp_path, "rev-parse", "HEAD"))
        run = copy.deepcopy(summary)
        _set_turn(run, entry_id, stage, hit_rate=1.0 if stage == "ok" else 0.0)
        run["config"]["provenance"] = {**(run["config"].get("provenance") or {}), "git_commit": commits[-1]}
        log_run(run, uri=uri, root=tmp_path, run_name=f"run{i}")
    capsys.readouterr()
    name = "conversations.turn2.hit_rate"
    assert (
        main(["history", "--tracking-uri", uri, "--split", "all", "--metric", name, "--plot", "h.png"]) == 0
    )
    out = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in out if line[:8] in {c[:8] for c in commits}]
    assert [r[0] for r in rows] == [c[:8] for c in commits]
    assert rows[0][-1] == "1.000" and rows[1][-2:] == ["0.500", "-0.500"]  # too few turns: no interval logged
    assert (tmp_path / "h.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["history", "--tracking-uri", uri, "--metric", "conversations.turn9.hit_rate"]) == 2
    assert "conversations.{turn1|turn2|turn3_plus}.METRIC" in capsys.readouterr().err


def test_a_turn_answered_within_its_predecessors_millisecond_is_still_ordered_after_it() -> None:
    """The session view orders a conversation's turns by start time (ms): equal times would leave the order to
    the store, so each turn's trace moves to at least 1 ms after the previous turn of its conversation."""
    from mlflow.entities import TraceInfo, TraceLocation, TraceState

    from doceval.tracking.traces import _after_previous_turn

    def trace(ms: int) -> tuple[TraceInfo, list[dict[str, Any]]]:
        info = TraceInfo(trace_id=f"t{ms}", trace_location=TraceLocation.from_experiment_id("0"),
                         request_time=ms, state=TraceState.OK)  # fmt: skip
        return info, [{"start_time_unix_nano": ms * 1_000_000, "end_time_unix_nano": ms * 1_000_000 + 300}]

    seen: dict[str, int] = {}
    turns = [(trace(100), "c#1"), (trace(100), "c#2"), (trace(100), "c#3"), (trace(90), "d#1"),
             (trace(250), "c#4")]  # fmt: skip
    for (info, spans), entry_id in turns:
        _after_previous_turn(info, spans, {"id": entry_id, "conversation": entry_id.split("#")[0]}, seen)
    # another conversation's turn is left alone; the spans move with their trace and keep their durations
    assert [info.request_time for (info, _), _ in turns] == [100, 101, 102, 90, 250]
    assert [spans[0]["start_time_unix_nano"] // 1_000_000 for (_, spans), _ in turns] == [
        100,
        101,
        102,
        90,
        250,
    ]
    assert all(s[0]["end_time_unix_nano"] - s[0]["start_time_unix_nano"] == 300 for (_, s), _ in turns)
    single, single_spans = trace(100)
    _after_previous_turn(single, single_spans, {"id": "q1"}, seen)  # a single question is no turn
    assert single.request_time == 100 and single_spans[0]["start_time_unix_nano"] == 100_000_000


def test_show_prints_the_conversations_line(
    tmp_path: Path, summary: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """`doceval show` (the end of `make repro`): the headline table, then one line for a conversation replay."""
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(summary), encoding="utf-8")
    assert main(["show", str(path), "--conversations", str(path)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    per = summary["metrics"]["conversations"]["per_conversation"]
    assert last.startswith(f"conversations={per['n_conversations']} turns=")
    assert f"all_turns_correct {per['all_turns_correct']:.3f}" in last
    assert "memory benefit not measured" in last  # one replay: the conversations stage measures memory
