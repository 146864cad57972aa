"""Memory against a real counterfactual, every replay kept (issue 41, items 2 and 3): a needs_memory turn's
`standalone` rewrite (validated, warned about when it still reads like a follow-up), the standalone replay asking
it at the turn's own pin, the standalone ceiling and memory recovery (benefit / ceiling) with an interval that
inverts the paired cluster interval, "not measured" for a set without rewrites, and the replays written beside
the summary so that every conversation figure can be recomputed from the files."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_conversation_pipeline import DICT_1, conversation_lines, tiny_project

from doceval.cli.main import main
from doceval.errors import UsageError
from doceval.harness.evaluate import EvalOptions, evaluate
from doceval.inputs.golden import GoldenError, parse_golden
from doceval.inputs.standalone import follow_up_reasons, standalone_warnings
from doceval.scoring.conversations import (
    RECOVERY_METHOD,
    ClusterSettings,
    cluster_paired_interval,
    conversation_metrics,
    memory_benefit,
    memory_leak,
    memory_recovery,
    ratio_interval,
    standalone_ceiling,
)
from doceval.scoring.registry import names
from doceval.stages import conversations

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_recovery.py"
STANDALONES = {
    ("conv-a", 2): "How do I convert a pydantic 1.10 model to a dict?",
    ("conv-b", 2): "pydantic 1.10.17: how do I convert a model to a dict?",
}


def standalone_lines(rewrites: dict[tuple[str, int], str] = STANDALONES) -> str:
    """The tiny pipeline's conversations (test_conversation_pipeline), each needs_memory turn with its rewrite."""
    lines = [json.loads(line) for line in conversation_lines().splitlines()]
    for line in lines:
        for n, turn in enumerate(line["turns"], 1):
            if (line["id"], n) in rewrites:
                turn["standalone"] = rewrites[(line["id"], n)]
    return "".join(json.dumps(line) + "\n" for line in lines)


def project_with(tmp_path: Path, text: str) -> Any:
    cfg = tiny_project(tmp_path)
    Path(cfg.golden_conversations).write_text(text, encoding="utf-8")
    return cfg


# ------------------------------------------------------------------------------- the field and its warnings


def test_a_standalone_is_a_non_empty_string_on_a_needs_memory_turn_only(tmp_path: Path) -> None:
    line = json.loads(standalone_lines().splitlines()[0])
    line["turns"][0]["standalone"] = (
        "How do I convert a pydantic 2.8 model to a dict?"  # turn 1 needs no memory
    )
    line["turns"][1]["standalone"] = ""
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(GoldenError) as caught:
        parse_golden(path)
    text = str(caught.value)
    assert "turns[1].standalone: a turn that needs no memory is already its own standalone question" in text
    assert "turns[2].standalone: must be a non-empty string" in text


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("and in 1.10?", "too short"),
        ("and how do I convert a pydantic 1.10 model to a dict?", "opens like a follow-up ('and how')"),
        ("What about a pydantic 1.10 model, how do I convert it to a dict?", "opens like a follow-up"),
        ("pydantic 1.10: how do I convert that model to a dict here?", "refers back ('that model')"),
        ("pydantic 1.10: how would that look for converting a model to a dict?", "refers back ('would that look')"),
        ("How do I convert a 1.10 model to a dict, without pydantic's help?", ""),  # names both: no reason
        ("How do I convert a model to a dict in version 1.10 of it all?", "names no library (pydantic)"),
        ("How do I convert a pydantic model to a dict, skipping None values?", "names no version (pydantic 1.10.17)"),
        ("and in 1.10?", "not rewritten"),
    ],
)  # fmt: skip
def test_a_standalone_that_reads_like_a_follow_up_is_named_by_its_rule(
    text: str, reason: str, tmp_path: Path
) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(standalone_lines(), encoding="utf-8")
    entries = parse_golden(path)
    turn = next(e for e in entries if e.id == "conv-a#2")
    reasons = follow_up_reasons(text, turn, {"pydantic", "click"}, {"1.10.17", "2.8.2"})
    if reason:
        assert any(reason in r for r in reasons), reasons
    else:
        assert reasons == []
    # One library, one version of it: a standalone need not name them (a user's own set, docs@1).
    assert not [r for r in follow_up_reasons(text, turn, {"pydantic"}, {"1.10.17"}) if "names no" in r]


def test_golden_validate_counts_the_rewrites_and_warns_about_follow_ups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(
        standalone_lines({("conv-a", 2): "and in 1.10?", **{("conv-b", 2): STANDALONES[("conv-b", 2)]}})
    )
    assert main(["golden", "validate", str(path), "--no-corpus"]) == 0
    out = capsys.readouterr().out
    assert "standalone rewrites: 2 of 2 needs_memory turns" in out
    assert (
        f"warning: {path}:1: turns[2].standalone: entry conv-a#2: reads like a follow-up: not rewritten"
        in out
    )
    assert "conv-b#2" not in out
    path.write_text(standalone_lines({}))
    assert main(["golden", "validate", str(path), "--no-corpus"]) == 0
    assert (
        "standalone rewrites: 0 of 2 needs_memory turns (memory recovery is measured only"
        in capsys.readouterr().out
    )
    assert standalone_warnings(parse_golden(path), str(path)) == []


def test_doceval_s_conversation_set_has_a_clean_standalone_for_every_needs_memory_turn() -> None:
    path = Path(__file__).resolve().parents[1] / "data" / "golden" / "conversations.jsonl"
    entries = parse_golden(path)
    needing = [e for e in entries if e.needs_memory]
    assert len(needing) == 76 and all(isinstance(e.extra.get("standalone"), str) for e in needing)
    assert standalone_warnings(entries, str(path)) == []


# ------------------------------------------------------------------------------- the standalone replay


def test_the_standalone_replay_asks_the_rewrite_at_the_turn_s_own_pin(tmp_path: Path) -> None:
    cfg = project_with(tmp_path, standalone_lines())
    options = EvalOptions(progress=False, golden=Path(cfg.golden_conversations), memory_reset=True)
    reset = evaluate(cfg, options)
    alone = evaluate(cfg, dataclasses.replace(options, standalone=True))
    rows = {r.id: r.recorded for r in alone.entries}
    # "and in 1.10?" alone, at the starting pin 2.8.2, is refused; its rewrite, at 1.10.17, finds the document.
    assert {r.id: r.scores["hit_rate"] for r in reset.entries}["conv-a#2"] == 0.0
    assert rows["conv-a#2"]["scores"]["hit_rate"] == 1.0 and rows["conv-a#2"]["retrieved"][0][0] == DICT_1
    assert rows["conv-a#2"]["question"] == STANDALONES[("conv-a", 2)]
    assert rows["conv-a#1"]["question"] == "How do I convert a model to a dict?"  # other turns as they are
    assert alone.settings.memory["reset"] == "standalone" and reset.settings.memory["reset"] == "needs_memory"
    assert alone.settings.run_key != reset.settings.run_key


def test_eval_memory_reset_standalone_names_the_turns_without_a_rewrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = project_with(tmp_path, standalone_lines({("conv-a", 2): STANDALONES[("conv-a", 2)]}))
    with pytest.raises(UsageError, match=r"1 needs_memory turn\(s\) have no standalone rewrite \(conv-b#2\)"):
        evaluate(cfg, EvalOptions(progress=False, golden=Path(cfg.golden_conversations), memory_reset=True,
                                  standalone=True))  # fmt: skip


# ------------------------------------------------------------------------------- recovery and its interval


def _clusters(
    rng: np.random.Generator, m: int, recovered: float
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per conversation, the benefit and ceiling differences of 1-3 needs_memory turns (0/1 replays), as the
    coverage benchmark simulates them."""
    spec = importlib.util.spec_from_file_location("bench_recovery", BENCH)
    assert spec is not None and spec.loader is not None
    bench: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    clusters: tuple[list[np.ndarray], list[np.ndarray]] = bench.replicate(rng, m, recovered)
    return clusters


def test_the_recovery_interval_is_where_the_inverted_paired_interval_turns() -> None:
    settings = ClusterSettings(1000, 0)
    benefit, ceiling = _clusters(np.random.default_rng(3), 30, 0.6)
    estimate = float(np.concatenate(benefit).mean() / np.concatenate(ceiling).mean())
    ci, method = ratio_interval(benefit, ceiling, estimate, settings)
    assert method == RECOVERY_METHOD and ci is not None and ci[0] < estimate < ci[1]

    def holds_zero(ratio: float) -> bool:
        scale = 1 + abs(ratio)
        scaled = [(b - ratio * c) / scale for b, c in zip(benefit, ceiling, strict=True)]
        # With the two one-turn anchors: a turn recovered in full and one not recovered (the ceiling is > 0).
        anchors = ((1 - ratio) / scale, -ratio / scale)
        lo, hi = cluster_paired_interval(scaled, settings, anchors).ci or (math.nan, math.nan)
        return lo <= 0.0 <= hi

    # Just inside each bound the paired interval of benefit - R x ceiling holds 0; just outside it does not.
    assert holds_zero(ci[0] + 1e-3) and not holds_zero(ci[0] - 1e-3)
    assert holds_zero(ci[1] - 1e-3) and not holds_zero(ci[1] + 1e-3)


def test_one_unrecovered_turn_in_eighty_does_not_rule_out_a_recovery_of_095() -> None:
    """Near a recovery of 1 the residuals benefit - R x ceiling are many small positives and a few large
    negatives; a sample with one of those few gave the sign flips too little spread, and the interval left out
    recoveries an exact binomial test keeps (issue 41 item 2: coverage 0.88 at 48 conversations, 0.95)."""
    ceiling = [np.ones(2) for _ in range(40)]  # 80 turns, each with all to recover
    benefit = [np.array([1.0, 0.0])] + [np.ones(2) for _ in range(39)]  # memory misses one of them
    # Even as 80 independent turns, one miss or fewer has probability 0.086 when 5% are missed: 0.95 stays.
    p_one_sided = sum(math.comb(80, k) * 0.05**k * 0.95 ** (80 - k) for k in (0, 1))
    assert p_one_sided > 0.025
    ci, method = ratio_interval(benefit, ceiling, 79 / 80, ClusterSettings(1000, 0))
    assert method == RECOVERY_METHOD and ci is not None and ci[0] < 0.95 < 79 / 80 < ci[1]


def test_the_recovery_interval_keeps_95_percent_near_a_recovery_of_1() -> None:
    """A seeded run of the coverage benchmark's cell that under-covered (48 conversations, true recovery 0.95:
    0.88 over 1000 samples before the anchors, 0.98 after; docs/benchmarks.md)."""
    rng, settings, covered, printed = np.random.default_rng(7), ClusterSettings(1000, 0), 0, 0
    for _ in range(100):
        benefit, ceiling = _clusters(rng, 48, 0.95)
        total = float(np.concatenate(ceiling).sum())
        if total == 0.0:
            continue
        ci, _ = ratio_interval(benefit, ceiling, float(np.concatenate(benefit).sum()) / total, settings)
        if ci is not None:
            printed += 1
            covered += ci[0] <= 0.95 <= ci[1]
    assert printed >= 80 and covered / printed >= 0.93  # before: 81 of 92, 0.88


def test_make_bench_writes_the_recovery_coverage_between_its_own_markers() -> None:
    spec = importlib.util.spec_from_file_location("run_all", BENCH.parent / "run_all.py")
    assert spec is not None and spec.loader is not None
    run_all: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_all)
    start, end = run_all.DOC_BLOCKS["bench_recovery.py"]
    page = (BENCH.parents[1] / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert page.count(start) == 1 and page.index(start) < page.index(end)
    assert "bench_recovery.py" in {cmd[0] for _, cmd in run_all.suite(None, quick=False)}


def test_a_ceiling_indistinguishable_from_zero_gives_no_bounded_recovery_interval() -> None:
    rng = np.random.default_rng(0)
    ceiling = [rng.choice([-1.0, 0.0, 1.0], size=2) for _ in range(20)]
    benefit = [c * 0.5 for c in ceiling]
    ci, why = ratio_interval(benefit, ceiling, 0.5, ClusterSettings(1000, 0))
    assert ci is None and why == "unbounded: the standalone ceiling's interval includes 0"


# ------------------------------------------------------------------------------- the stage and its files


def _rows(path: Path) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text(encoding="utf-8"))["entries"])


def _by_hand(
    first: list[dict[str, Any]], second: list[dict[str, Any]], metric: str, needs: bool
) -> tuple[float | None, int]:
    """The mean paired difference first - second over the turns both scored (needs_memory == ``needs``)."""
    other = {r["id"]: r for r in second}
    diffs = [r["scores"][metric] - other[r["id"]]["scores"][metric] for r in first
             if r.get("conversation") and r["needs_memory"] == needs and r["id"] in other
             and r["scores"].get(metric) is not None and other[r["id"]]["scores"].get(metric) is not None]  # fmt: skip
    return (sum(diffs) / len(diffs) if diffs else None), len(diffs)


def test_every_conversation_figure_is_recomputed_from_the_files_the_stage_writes(tmp_path: Path) -> None:
    cfg = project_with(tmp_path, standalone_lines())
    conversations.run(cfg, progress=False)
    out = Path(cfg.paths.eval) / "conversations"
    summary = json.loads((out / "summary.json").read_text())
    block = summary["metrics"]["conversations"]
    files = {name: out / "replays" / f"{name}.json" for name in conversations.REPLAYS}
    assert sorted(p.name for p in (out / "replays").iterdir()) == sorted(p.name for p in files.values())
    memory, reset, warm, alone = (summary["entries"], *(_rows(files[n]) for n in conversations.REPLAYS))
    for metric in names("memory"):
        benefit, n = _by_hand(memory, reset, metric, True)
        ceiling, n_ceiling = _by_hand(alone, reset, metric, True)
        leak, n_leak = _by_hand(memory, warm, metric, False)
        assert (block["memory_benefit"][metric]["benefit"], block["memory_benefit"][metric]["n_turns"]) == (
            benefit,
            n,
        )
        assert (block["standalone_ceiling"][metric]["ceiling"], block["standalone_ceiling"][metric]["n_turns"]) == (
            ceiling, n_ceiling)  # fmt: skip
        assert (block["memory_leak"][metric]["leak"], block["memory_leak"][metric]["n_turns"]) == (
            leak,
            n_leak,
        )
        recovery = block["memory_recovery"][metric]["recovery"]
        assert recovery == (None if not ceiling or benefit is None else benefit / ceiling)
    # Here memory follows "and in 1.10?" as well as the rewrite does: everything recovered.
    assert block["memory_recovery"]["hit_rate"]["recovery"] == 1.0
    assert block["memory_recovery"]["answer_accuracy"]["recovery"] is None  # not judged: not measured
    # The intervals and every other figure, recomputed from the files by the scoring functions.
    settings = ClusterSettings.of_summary(summary)
    recomputed = conversation_metrics(memory, settings)
    assert recomputed is not None
    recomputed |= {
        "memory_benefit": memory_benefit(memory, reset, settings),
        "standalone_ceiling": standalone_ceiling(alone, reset, settings),
        "memory_recovery": memory_recovery(memory, reset, alone, settings),
        "memory_leak": memory_leak(memory, warm, settings),
    }
    assert json.loads(json.dumps(recomputed)) == {k: v for k, v in block.items() if k != "replays"}
    # The replays' records in the summary name the files' runs.
    for name in conversations.REPLAYS:
        assert block["replays"][name]["run_key"] == json.loads(files[name].read_text())["config"]["run_key"]
    flat = json.loads((out / "metrics.json").read_text())
    assert flat == json.loads(json.dumps(conversations.flat_metrics(summary)))
    assert flat["conversations.memory_recovery.hit_rate"] == 1.0
    assert (
        flat["conversations.standalone_ceiling.hit_rate"]
        == block["standalone_ceiling"]["hit_rate"]["ceiling"]
    )


def test_a_set_without_rewrites_measures_no_recovery_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = project_with(tmp_path, standalone_lines({("conv-a", 2): STANDALONES[("conv-a", 2)]}))
    summary = conversations.run(cfg, progress=False)
    block = summary.metrics.conversations
    assert block is not None
    why = block["memory_recovery"]["hit_rate"]["not_measured"]
    assert "1 of 2 needs_memory turns" in why and "conv-b#2" in why
    assert all(row["recovery"] is None for row in block["memory_recovery"].values())
    assert all(row["ceiling"] is None for row in block["standalone_ceiling"].values())
    assert block["memory_benefit"]["hit_rate"]["benefit"] == 1.0  # the rest is measured as before
    assert block["replays"]["standalone"] == {"not_measured": why}
    out = Path(cfg.paths.eval) / "conversations"
    assert json.loads((out / "replays" / "standalone.json").read_text()) == {
        "not_measured": why,
        "entries": [],
    }
    flat = json.loads((out / "metrics.json").read_text())
    assert flat["conversations.memory_recovery.hit_rate"] is None  # null: not measured, never 0
    assert "conversations.memory_recovery.hit_rate_ci_lo" not in flat


@pytest.mark.slow
def test_the_replays_are_logged_with_the_run(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    cfg = project_with(tmp_path, standalone_lines())
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = dataclasses.replace(
        cfg, tracking=dataclasses.replace(cfg.tracking, enabled=True, uri=uri, traces=False)
    )
    summary = conversations.run(cfg, progress=False)
    run_id = conversations.track(cfg, summary)
    assert run_id is not None
    logged = {a.path for a in MlflowClient(uri).list_artifacts(run_id, "replays")}
    assert logged == {f"replays/{name}.json" for name in conversations.REPLAYS}
    metrics = MlflowClient(uri).get_run(run_id).data.metrics
    assert metrics["conversations.memory_recovery.hit_rate"] == 1.0


def test_no_recovery_interval_where_the_paired_interval_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """A paired method that declines an interval (too few differing conversations) leaves recovery without one,
    saying why, never with bounds found by treating "cannot test" as a rejection."""
    import doceval.scoring.conversations as scoring

    benefit, ceiling = _clusters(np.random.default_rng(3), 30, 0.6)
    real = scoring.cluster_paired_interval
    calls: list[int] = []
    declined = scoring.PairedInterval(None, None, "too few differing conversations (n=1)")

    def declines_after_the_ceiling(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs) if len(calls) == 1 else declined

    monkeypatch.setattr(scoring, "cluster_paired_interval", declines_after_the_ceiling)
    ci, why = ratio_interval(benefit, ceiling, 0.6, ClusterSettings(1000, 0))
    assert ci is None and why.startswith("no interval: the paired interval of benefit - recovery x ceiling")
    monkeypatch.setattr(scoring, "cluster_paired_interval", lambda *a, **k: declined)
    ci, why = ratio_interval(benefit, ceiling, 0.6, ClusterSettings(1000, 0))
    assert (
        ci is None
        and why == "no interval: the standalone ceiling has none (too few differing conversations (n=1))"
    )


def test_eval_takes_memory_reset_standalone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = project_with(tmp_path, standalone_lines())
    monkeypatch.chdir(tmp_path)
    argv = ["eval", "--no-track", "--quiet", "--golden", str(cfg.golden_conversations), "--output", "s.json",
            "--memory-reset", "standalone", "retriever=bm25", "floors=zero", "k=1", f"paths.docs={cfg.paths.docs}",
            f"paths.runs={cfg.paths.runs}", f"paths.index={cfg.paths.index}", f"paths.cache={cfg.paths.cache}"]  # fmt: skip
    assert main(argv) == 0
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["config"]["memory"]["reset"] == "standalone"
    assert {r["id"]: r["scores"]["hit_rate"] for r in summary["entries"]}["conv-a#2"] == 1.0
