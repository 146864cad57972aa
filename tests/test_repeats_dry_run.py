"""`doceval eval --repeats N` (seed + r per repeat, separate journals and cache entries, mean and spread,
flaky entries) and `--dry-run` (requests, tokens and cost per role before any call), against the local
OpenAI-compatible server with the shipped answerer and judge configs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from openai_server import FakeOpenAI
from test_eval_cli import eval_args, overrides
from test_judge_validate import project as project  # noqa: F401 - the tiny project with API-naming references

from doceval.cli.main import main
from doceval.results.markdown import render_report


def _llm(server: FakeOpenAI) -> list[str]:
    url = server.base_url
    return [*overrides(), "answerer=openai", "judge=openai", f"answerer.base_url={url}", f"judge.base_url={url}",
            "answerer.model=m", "judge.model=j", "answerer.max_retries=0", "judge.max_retries=0"]  # fmt: skip


def test_repeats_answer_and_judge_each_entry_n_times_with_distinct_seeds(
    project: Path, openai_server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    openai_server.judge_mode = "seeded"
    try:
        assert main(eval_args("--split", "test", "--repeats", "3", *_llm(openai_server))) == 0
    finally:
        openai_server.judge_mode = "rule"
    summary = json.loads((project / "out.json").read_text())
    rep = summary["repeats"]
    answered = [e for e in summary["entries"] if not e["refused"]]
    judged = [e for e in answered if not e["out_of_scope"]]  # out-of-scope answers are never judged
    # every repeat asked the answerer and the judge again, with its own seed (so no cache hit between repeats);
    # repeat 0 sends the single run's request: no seed where the configuration sets none
    texts = [(b.get("seed"), "\n".join(m["content"] for m in b["messages"])) for b in openai_server.bodies]
    seeds = sorted({(seed, '"verdict"' in text) for seed, text in texts}, key=repr)
    assert seeds == sorted(
        [(None, False), (None, True), (1, False), (1, True), (2, False), (2, True)], key=repr
    )
    assert openai_server.chat_requests == 3 * (len(answered) + len(judged))
    assert rep["n"] == 3 and len(set(rep["run_keys"])) == 3 and rep["repeat0"] == "the single run's request"
    acc = rep["metrics"]["answer_accuracy"]
    assert len(acc["values"]) == 3 and acc["mean"] == pytest.approx(sum(acc["values"]) / 3)
    assert acc["min"] <= acc["mean"] <= acc["max"]
    # the unstable judge flips verdicts between repeats: those entries are listed as flaky, as verdict flips
    # on the same answer (the answerer is deterministic), not answer changes
    assert rep["flaky"] and all("verdict" in f["changed"] for f in rep["flaky"])
    assert all(f["what"] == "verdict only" and not f["answer_changed"] for f in rep["flaky"])
    # the headline is each entry's mean over the repeats (issue 42 A4), and the metrics their mean
    scores = [e["scores"]["answer_accuracy"] for e in summary["entries"]]
    measured = [v for v in scores if v is not None]
    assert summary["metrics"]["answer_accuracy"] == pytest.approx(sum(measured) / len(measured))
    out = capsys.readouterr().out
    assert "repeats 3" in out and "flaky entries" in out
    md = render_report(summary)
    assert "## Repeats (3)" in md and f"{len(rep['flaky'])} flaky entries" in md
    assert "| answerer | system under test |" in md and "| judge | judge |" in md
    # a rerun resumes every repeat from its own journals: nothing is asked again
    before = openai_server.chat_requests
    assert main(eval_args("--split", "test", "--repeats", "3", *_llm(openai_server))) == 0
    assert openai_server.chat_requests == before


def test_repeats_of_an_offline_run_say_nothing_is_sampled(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(eval_args("--split", "test", "--repeats", "2", *overrides())) == 0
    assert "nothing in this run is sampled" in capsys.readouterr().err
    assert json.loads((project / "out.json").read_text())["repeats"]["flaky"] == []


def test_dry_run_prints_requests_tokens_and_cost_per_role_and_calls_nothing(
    project: Path, openai_server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(eval_args("--split", "test", *overrides())) == 0  # offline: how many entries the split has
    n_test = len(json.loads((project / "out.json").read_text())["entries"])
    (project / "out.json").unlink()
    args = eval_args("--split", "test", "--dry-run", "--repeats", "2", *_llm(openai_server),
                     "answerer.price_per_1k_prompt=1.0", "judge.price_per_1k_completion=2.0")  # fmt: skip
    openai_server.reset_stats()
    assert main(args) == 0
    out = capsys.readouterr().out
    assert openai_server.requests == 0 and not (project / "out.json").exists()
    lines = {
        line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("answerer", "judge"))
    }
    n_in_scope = 2  # a1, a2: out-of-scope answers are never judged
    assert lines["answerer"][2] == str(2 * n_test) and lines["judge"][2] == str(2 * n_in_scope)
    assert lines["answerer"][3] == "0" and lines["judge"][3] == "0"  # no journal of this configuration yet
    answerer_prompt = int(lines["answerer"][4].replace(",", ""))
    assert float(lines["answerer"][6]) == pytest.approx(answerer_prompt / 1000, abs=1e-4)
    judge_completion = 2 * n_in_scope * 256  # the shipped judge's max_tokens: no cached reply to observe
    assert int(lines["judge"][5].replace(",", "")) == judge_completion
    assert float(lines["judge"][6]) == pytest.approx(judge_completion * 2.0 / 1000, abs=1e-4)
    assert "estimated cost" in out and "nothing was sent" in out
    assert "judge tokens per request: prompts: characters / 4; completions: max_tokens" in out


@pytest.mark.parametrize("system", [["agent=function", "agent.target=my_assistant:answer"],
                                    ["agent=http", "agent.url=http://127.0.0.1:9/ask"],
                                    ["retriever=function", "retriever.target=my_assistant:retrieve"]])  # fmt: skip
def test_dry_run_of_a_users_system_needs_no_built_corpus(
    project: Path, capsys: pytest.CaptureFixture[str], system: list[str]
) -> None:
    """Issue 39 H15: the dry run demanded data/docs (a built corpus) that the real run of a user's assistant or
    retriever function does not need; it reads what that run reads. Nothing is called (the URL is dead)."""
    shutil.rmtree(project / "data" / "docs")
    (project / "my_assistant.py").write_text("def answer(**_):\n    raise AssertionError('called')\n"
                                             "def retrieve(question, k):\n    raise AssertionError('called')\n")  # fmt: skip
    assert main(["eval", "--dry-run", "--split", "test", "--no-judge", *system]) == 0
    out = capsys.readouterr().out
    assert "estimated cost" in out


@pytest.mark.parametrize("repeats", ["0", "-1"])
def test_repeats_below_one_exit_2(project: Path, capsys: pytest.CaptureFixture[str], repeats: str) -> None:
    assert main(eval_args("--repeats", repeats, *overrides())) == 2
    assert f"--repeats {repeats}: must be at least 1" in capsys.readouterr().err
