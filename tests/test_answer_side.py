"""The answer side a CI user trusts (issue 42, A1-A14): refusals that mean refusals for a user's assistant, judges
compared only with themselves, JUnit that names what got worse, repeats that count, a Python API with no silent
traps, judges that carry their evidence, exits and spans that tell the truth, repeats for user assistants, and a
dry run that consults the cache. Each test names the finding it covers; the judge is the local
OpenAI-compatible test server (tests/openai_server.py), assistants are callables or a real HTTP server."""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from answer_side import N_IN_SCOPE, N_OUT_OF_SCOPE, good_assistant, judge_overrides, own_golden
from fake_agent import running_agent
from openai_server import FakeOpenAI
from test_eval_cli import eval_args, llm_overrides, overrides
from test_judge_validate import _labels_file
from test_judge_validate import project as project  # noqa: F401 - the tiny project, references naming their API

import doceval
from doceval.cli.main import main
from doceval.errors import UsageError

# ------------------------------------------------------------------------------------------------- helpers


@pytest.fixture
def own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's own project folder (no conf/, no corpus) with ``golden.json``."""
    monkeypatch.chdir(tmp_path)
    return own_golden(tmp_path)


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _with_scores(summary: dict[str, Any], metric: str, values: dict[str, float]) -> dict[str, Any]:
    """A copy of ``summary`` whose entries score ``values`` on ``metric``, its mean updated to match."""
    out = copy.deepcopy(summary)
    for e in out["entries"]:
        if e["id"] in values:
            e["scores"][metric] = values[e["id"]]
    scored = [e["scores"][metric] for e in out["entries"] if e["scores"][metric] is not None]
    out["metrics"][metric] = sum(scored) / len(scored)
    return out


# ------------------------------------------------------------------------------- A1 the refusal gate


def test_a1_the_default_gate_asks_an_assistant_its_own_refusal(
    own: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An assistant that cites the right sources in scope, none out of scope, and never refuses: the default
    gate FAILs it on refusal_rate; refused_correctly keeps its definition (1.0: no sources), so no figure of the
    repository headline moves, and every table calls it what it measures there."""
    summary = doceval.evaluate(own, agent=good_assistant, split="all")
    m = summary.metrics
    assert m["refused_correctly"] == 1.0 and m["refusal_rate"] == 0.0 and m["hit_rate"] == 1.0
    assert all(e["stage"] == "hallucinated_out_of_scope" for e in summary.entries if e["out_of_scope"])
    verdict = doceval.gate(summary)  # the composed default gate
    assert not verdict.passed
    assert "refusal_rate >= 1.00" in verdict.line and "refused_correctly" not in verdict.line
    assert any("refusal_rate" in f.reason for f in verdict.failures)
    assert any("is asked of refusal_rate for an assistant" in n for n in verdict.notes)
    # a gate file that names refused_correctly for an assistant: applied as written, with a note on its meaning
    written = doceval.gate(summary, {"hit_rate": 0.6, "refused_correctly": 1.0})
    assert written.passed and any('measures "no sources on out-of-scope entries"' in n for n in written.notes)
    from doceval.cli.common import print_headline

    print_headline(summary)
    out = capsys.readouterr().out
    assert "refused_correctly (no sources on out-of-scope entries)" in out
    assert "its own refusal is refusal_rate" in out
    assert "refused_correctly (no sources on out-of-scope entries)" in doceval.results.render_report(summary)


def test_a1_doceval_s_agent_and_retrievers_keep_today_s_gate(own: Path) -> None:
    def retrieve(question: str, k: int) -> list[str]:
        return [f"doc-{question.rsplit(' ', 1)[1]}"] if question.startswith("how do I use") else []

    summary = doceval.evaluate(own, retriever=retrieve, split="all")
    verdict = doceval.gate(summary)
    assert verdict.passed and "refused_correctly >= 1.00" in verdict.line and verdict.notes == []


# ------------------------------------------------------------------ A6, A7 the Python API has no traps


def _retriever(broken: set[int]) -> Any:
    def retrieve(question: str, k: int) -> list[str]:
        if not question.startswith("how do I use"):
            return []
        i = int(question.rsplit(" ", 1)[1])
        return [] if i in broken else [f"doc-{i}"]

    return retrieve


def test_a6_gate_with_a_baseline_applies_non_regression(own: Path) -> None:
    base = doceval.evaluate(own, retriever=_retriever(set()), split="all")
    new = doceval.evaluate(own, retriever=_retriever(set(range(N_IN_SCOPE))), split="all")
    verdict = doceval.gate(new, {"hit_rate": 0.0}, baseline=base)
    assert any(c.startswith("no regression") for c in verdict.conditions)
    assert not verdict.passed and any(
        f.metric == "hit_rate" and "dropped" in f.reason for f in verdict.failures
    )
    assert any("non_regression of the composed gate applied" in n for n in verdict.notes)
    assert doceval.gate(base, {"hit_rate": 0.0}, baseline=base).passed  # an unchanged rerun passes
    off = {"thresholds": {"hit_rate": 0.0}, "non_regression": {"enabled": False}}
    with pytest.raises(UsageError, match="non_regression is disabled, so the baseline would be ignored"):
        doceval.gate(new, config=off, baseline=base)


def test_a7_a_judge_override_runs_the_judge_or_raises(own: Path, openai_server: FakeOpenAI) -> None:
    judged = doceval.evaluate(
        own, agent=good_assistant, split="all", overrides=judge_overrides(openai_server.base_url)
    )
    assert judged.metrics["answer_accuracy"] == 1.0 and judged.metrics["not_judged"] is False
    with pytest.raises(UsageError, match="the overrides choose a judge but judge=False runs none"):
        doceval.evaluate(
            own, agent=good_assistant, judge=False, overrides=judge_overrides(openai_server.base_url)
        )
    assert doceval.evaluate(own, agent=good_assistant, split="all").metrics["not_judged"] is True


def test_a6_the_api_returns_the_notes_the_cli_prints(own: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = doceval.evaluate(own, retriever=_retriever(set()), split="all")
    err = capsys.readouterr().err
    assert summary.notes and all(f"note: {n}" in err for n in summary.notes)
    assert any("not measured" in n for n in summary.notes)  # doceval cannot read a user's own ids' text
    assert "notes" not in summary  # not a key of the summary file


# ------------------------------------------------------------------------------- A3 JUnit: what got worse


def test_a3_junit_of_a_failed_non_regression_lists_the_entries_that_got_worse(project: Path) -> None:
    assert main(eval_args("--split", "all", *overrides())) == 0
    run = json.loads((project / "out.json").read_text())
    base = _with_scores(run, "mrr", {"a1": 1.0, "a2": 0.5, "a3": 0.5})
    new = _with_scores(
        run, "mrr", {"a1": 0.5, "a2": 0.5, "a3": 0.5}
    )  # a1 got worse; a2, a3 below 1 as before
    _write(project / "base.json", base)
    _write(project / "new.json", new)
    (project / "gate.yaml").write_text("thresholds: {hit_rate: 0.0}\nnon_regression: {enabled: true, metrics: [mrr], "
                                       "tolerance: 0.0, mode: point}\n")  # fmt: skip
    args = ["gate", "new.json", "--config", "gate.yaml", "--baseline", "base.json", "--junit", "j.xml"]
    assert main(args) == 3
    root = ET.fromstring((project / "j.xml").read_text())
    cases = root.findall(".//testcase")
    entry_cases = [c for c in cases if c.get("classname", "").startswith("doceval.")
                   and c.get("classname") != "doceval.gate"]  # fmt: skip
    assert [(c.get("classname"), c.get("name")) for c in entry_cases] == [("doceval.regressions.mrr", "a1")]
    failure = entry_cases[0].find("failure")
    assert failure is not None and failure.get("message") == "mrr 1 -> 0.5"
    assert root.find("testsuite").get("failures") == "2"  # the condition and the one entry


# ----------------------------------------------------------------------------- A10 each Holm family named


def test_a10_compare_labels_the_holm_family_of_every_adjusted_p(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(eval_args("--split", "all", *overrides())) == 0
    run = json.loads((project / "out.json").read_text())
    _write(project / "base.json", _with_scores(run, "mrr", {"a1": 1.0, "a2": 1.0, "a3": 1.0}))
    _write(project / "new.json", _with_scores(run, "mrr", {"a1": 0.5, "a2": 0.5, "a3": 0.5}))
    args = [
        "compare",
        "base.json",
        "new.json",
        "gate.non_regression.enabled=true",
        "gate.non_regression.metrics=[mrr,hit_rate]",
    ]
    main(args)
    out = capsys.readouterr().out
    assert re.search(r"p_holm: Holm-adjusted over the \d+ metrics of this table \(its family", out)
    # the gate line's adjusted p names its own family (a note here: three entries cannot reach significance)
    assert (
        "Holm-adjusted p = " in out and "Holm over the gate's 2 non-regression metrics: mrr, hit_rate" in out
    )


# ------------------------------------------------------------------- A2 a judge is compared only with itself


def _judged(args: list[str], output: str) -> dict[str, Any]:
    assert main(["eval", "--no-track", "--quiet", "--split", "all", "--output", output, *args]) == 0
    return dict(json.loads(Path(output).read_text()))


def test_a2_compare_and_non_regression_refuse_answer_accuracy_from_two_judges(
    project: Path, openai_server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    main_run = _judged([*overrides(), *judge_overrides(openai_server.base_url, "j1")], "main.json")
    rescore = ["judge", "rescore", "main.json", "--output", "stricter.json", "--no-track", "--quiet",
               *judge_overrides(openai_server.base_url, "j2")]  # fmt: skip
    assert main(rescore) == 0  # the same recorded answers, re-judged by another judge
    stricter = json.loads((project / "stricter.json").read_text())
    one, two = main_run["config"]["judge_id"]["hash"], stricter["config"]["judge_id"]["hash"]
    assert one != two
    capsys.readouterr()
    assert main(["compare", "main.json", "stricter.json", "--no-gate"]) == 2
    err = capsys.readouterr().err
    assert f"main.json: judge {one}, stricter.json: judge {two}" in err and "--allow-different-judge" in err
    assert main(["compare", "main.json", "stricter.json", "--no-gate", "--allow-different-judge"]) == 0
    assert "compared because --allow-different-judge was given" in capsys.readouterr().out
    gate = ["gate", "stricter.json", "--baseline", "main.json", "gate.thresholds.refused_correctly=0.0",
            "gate.non_regression.enabled=true", "gate.non_regression.metrics=[answer_accuracy]"]  # fmt: skip
    assert main(gate) == 2 and "answer_accuracy comes from different judges" in capsys.readouterr().err
    assert main([*gate, "--allow-different-judge"]) == 0
    # metrics that do not depend on the judge are compared as before
    assert main(["gate", "stricter.json", "--baseline", "main.json", "gate.thresholds.refused_correctly=0.0",
                 "gate.non_regression.enabled=true", "gate.non_regression.metrics=[hit_rate,version_correctness]"]) == 0  # fmt: skip


def test_a2_repeat_0_sends_the_single_run_s_request(project: Path, openai_server: FakeOpenAI) -> None:
    single = _judged([*overrides(), *judge_overrides(openai_server.base_url)], "single.json")
    openai_server.bodies.clear()
    repeated = _judged(["--repeats", "2", *overrides(), *judge_overrides(openai_server.base_url)], "rep.json")
    assert repeated["config"]["judge_id"] == single["config"]["judge_id"]  # one identity: comparable
    # repeat 0's verdicts came from the single run's cache entries: the server saw repeat 1's requests only
    seeds = [b.get("seed") for b in openai_server.bodies]
    assert seeds and set(seeds) == {1}


# -------------------------------------------------------------------------- A4, A5 repeats that count

FLAKY = '''
import hashlib, pathlib

def answer(question, library, version, session_id):
    """Right on the first call of a question, wrong on every later one (a flaky assistant)."""
    if not question.startswith("how do I use"):
        return {"answer": None, "sources": [], "refused": True}
    i = question.rsplit(" ", 1)[1]
    counter = pathlib.Path("calls") / hashlib.md5(question.encode()).hexdigest()
    counter.parent.mkdir(exist_ok=True)
    n = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(n + 1))
    return {"answer": f"Use `api_{i}()`." if n == 0 else "Use `wrong()`.", "sources": [f"doc-{i}"], "refused": False}
'''


def _flaky_run(root: Path, server: FakeOpenAI, module: str) -> dict[str, Any]:
    (root / f"{module}.py").write_text(FLAKY, encoding="utf-8")
    args = ["--golden", "golden.json", "--repeats", "3", "agent=function", f"agent.target={module}:answer",
            *judge_overrides(server.base_url)]  # fmt: skip
    return _judged(args, "flaky.json")


def test_a4_repeats_count_in_the_headline_and_the_gate(
    own: Path, openai_server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = _flaky_run(own.parent, openai_server, "flaky_a4")
    m, rep = summary["metrics"], summary["repeats"]
    assert rep["metrics"]["answer_accuracy"]["values"] == [1.0, 0.0, 0.0]
    # each entry scores its mean over the repeats; the metrics are the mean of the entries
    in_scope = [e for e in summary["entries"] if not e["out_of_scope"]]
    assert all(e["scores"]["answer_accuracy"] == pytest.approx(1 / 3) for e in in_scope)
    assert m["answer_accuracy"] == pytest.approx(1 / 3) and m["counts"]["n_answer_accuracy"] == N_IN_SCOPE
    lo, hi = m["ci95"]["answer_accuracy"]
    assert lo < 1 / 3 < hi < 1.0  # the interval over the entry means, not repeat 0's 12 of 12
    assert m["counts"]["n_judged"] == 3 * N_IN_SCOPE  # every repeat's verdicts
    # every flip is the assistant's: its answer changed, not only the verdict
    assert len(rep["flaky"]) == N_IN_SCOPE and all(f["what"] == "answer" for f in rep["flaky"])
    assert all(len({a["answer"] for a in rep["answers"][e["id"]]}) == 2 for e in in_scope)
    capsys.readouterr()
    assert main(["gate", "flaky.json", "+gate.thresholds.answer_accuracy=0.5"]) == 3
    assert "answer_accuracy >= 0.50: answer_accuracy = 0.3333" in capsys.readouterr().out


def test_a4_the_spread_of_repeats_reaches_mlflow() -> None:
    from doceval.tracking.shaping import build_metrics

    block = {"n": 3, "metrics": {"hit_rate": {"values": [1.0, 0.5, 0.0], "mean": 0.5, "sd": 0.5, "min": 0.0,
                                              "max": 1.0}},
             "flaky": [{"id": "a", "answer_changed": True}, {"id": "b", "answer_changed": False}]}  # fmt: skip
    got = build_metrics({"hit_rate": 0.5}, None, block)
    assert got["repeats.n"] == 3 and got["repeats.hit_rate.sd"] == 0.5 and got["repeats.hit_rate.min"] == 0.0
    assert got["repeats.flaky"] == 2 and got["repeats.flaky_answer"] == 1


def test_a5_rescore_of_a_repeats_run_rejudges_every_repeat(own: Path, openai_server: FakeOpenAI) -> None:
    _flaky_run(own.parent, openai_server, "flaky_a5")
    openai_server.bodies.clear()
    args = ["judge", "rescore", "flaky.json", "--golden", "golden.json", "--output", "rescored.json",
            "--no-track", "--quiet", *judge_overrides(openai_server.base_url, "j2")]  # fmt: skip
    assert main(args) == 0
    judged = ["\n".join(m["content"] for m in b["messages"]) for b in openai_server.bodies]
    assert sum("Use `wrong()`." in t for t in judged) == 2 * N_IN_SCOPE  # repeats 1 and 2 were re-judged
    new = json.loads(Path("rescored.json").read_text())
    rep = new["repeats"]
    assert rep["metrics"]["answer_accuracy"]["values"] == [1.0, 0.0, 0.0]
    assert new["metrics"]["answer_accuracy"] == pytest.approx(1 / 3)
    assert new["config"]["judge_id"]["identity"]["model"] == "j2"
    assert all(a["verdict"] is not None for e in rep["answers"].values() for a in e if a and not a["refused"])
    assert len(rep["flaky"]) == N_IN_SCOPE and all(f["what"] == "answer" for f in rep["flaky"])


# ------------------------------------------------------------------------------ A9 a budget stop is exit 4


def test_a9_a_budget_stop_exits_4_and_counts_what_was_judged(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from doceval.llm.chat import estimate_prompt_tokens
    from doceval.llm.prompts import PromptTemplate

    assert main(eval_args("--split", "test", *overrides())) == 0  # the answers the judge will be sent
    answers = [e for e in json.loads((project / "out.json").read_text())["entries"] if not e["refused"]
               and not e["out_of_scope"]]  # fmt: skip
    template = PromptTemplate.load("judge.txt")
    golden = {
        g["id"]: g for g in map(json.loads, (project / "data/golden/v2.1.jsonl").read_text().splitlines())
    }
    estimates = sorted(
        estimate_prompt_tokens(template.render(library=e["library"], version=e["version"], question=e["question"],
                                               reference=golden[e["id"]]["reference_answer"], answer=e["answer"]))
        for e in answers
    )  # fmt: skip
    assert len(estimates) == 2
    budget = (estimates[1] + estimates[0] / 2) / 1000  # one judge call's reservation fits, two do not
    with FakeOpenAI(latency_s=0.5) as slow:
        args = ["eval", "--no-track", "--split", "test", "--output", "out.json", *overrides(),
                *judge_overrides(slow.base_url), "judge.price_per_1k_prompt=1.0", f"++run.budget_usd={budget}"]  # fmt: skip
        assert main(args) == 4
        judged = sum('"verdict"' in "\n".join(m["content"] for m in b["messages"]) for b in slow.bodies)
    err = capsys.readouterr().err
    summary = json.loads((project / "out.json").read_text())
    assert summary["complete"] is False and f"{judged} of 2 answers judged" in summary["incomplete"]["reason"]
    assert judged >= 1 and f"judge: {judged}/2 entry" in err  # the progress line counts what was judged
    assert "run incomplete" in err


# --------------------------------------------------------------------- A8 judges carry their evidence


def test_a8_validate_gives_the_bar_s_verdict_records_it_and_runs_carry_it(
    project: Path, openai_server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """The test server's judge agrees with every label, but so do version strings alone: it does not beat
    them, so it is below the bar. `--strict` exits 3; the verdict is recorded by the judge's identity, and a run
    with that judge labels its answer_accuracy "heuristic"; a judge with no recorded validation, "unvalidated"."""
    labels = _labels_file(project)
    judge = judge_overrides(openai_server.base_url)
    args = ["judge", "validate", str(labels), *judge, "--quiet", "--no-track"]
    assert main([*args, "--strict"]) == 3
    out = capsys.readouterr().out
    assert "bar: BELOW THE BAR (kappa >= 0.6 and beating version strings alone" in out
    assert "does not beat version strings alone" in out
    assert main(args) == 0  # without --strict the verdict is printed, the exit is 0
    records = list((project / "eval" / "judge").glob("*.json"))
    assert len(records) == 1 and json.loads(records[0].read_text())["agreement"]["kappa"] == 1.0
    run = _judged([*overrides(), *judge], "run.json")
    evidence = run["config"]["judge_evidence"]
    assert evidence["status"] == "below_bar" and evidence["validations"][0]["labels"] == str(labels)
    assert run["config"]["judge_id"]["hash"] in records[0].name
    capsys.readouterr()
    assert main(["show", "run.json"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # notes wrap at 120 columns
    assert "answer_accuracy (heuristic)" in out and f"kappa 1.000 [1.000, 1.000] on {labels}" in out
    other = _judged([*overrides(), *judge_overrides(openai_server.base_url, "never-validated")], "other.json")
    assert other["config"]["judge_evidence"]["status"] == "unvalidated"
    main(["show", "other.json"])
    assert "answer_accuracy (unvalidated)" in capsys.readouterr().out


# ------------------------------------------------------------------ A11 out-of-scope answers not judged


def test_a11_out_of_scope_answers_are_not_sent_to_the_judge(project: Path, openai_server: FakeOpenAI) -> None:
    run = _judged(llm_overrides(openai_server), "llm.json")
    oos = [e for e in run["entries"] if e["out_of_scope"] and not e["refused"]]
    assert oos and all(e["stage"] == "hallucinated_out_of_scope" for e in oos)  # answered anyway
    assert all(e["verdict"] is None and e["judge_error"] is None for e in oos)
    prompts = ["\n".join(m["content"] for m in b["messages"]) for b in openai_server.bodies]
    judged = [p for p in prompts if '"verdict"' in p]
    assert judged and not any(e["question"] in p for e in oos for p in judged)
    in_scope = [e for e in run["entries"] if not e["out_of_scope"] and not e["refused"]]
    assert len(judged) == len(in_scope) == run["metrics"]["counts"]["n_judged"]


# ------------------------------------------------------------ A13 repeats reach the user's assistant


def test_a13_an_http_assistant_gets_the_repeat_and_seed_and_one_probe(own: Path) -> None:
    with running_agent() as server:
        args = ["--golden", "golden.json", "agent=http", f"agent.url={server.url}", "seed=7"]
        _judged([*args, "--repeats", "2"], "rep.json")
        probes = [r for r in server.requests if r["question"].startswith("doceval connectivity check")]
        asked = [r for r in server.requests if r not in probes]
        assert len(probes) == 1  # once per command, not per repeat
        assert sorted((r["repeat"], r["seed"]) for r in asked) == sorted(
            [(0, 7)] * (N_IN_SCOPE + N_OUT_OF_SCOPE) + [(1, 8)] * (N_IN_SCOPE + N_OUT_OF_SCOPE)
        )
        server.requests.clear()
        _judged(args, "one.json")  # a single run's request is the body it always was
        assert not any("repeat" in r or "seed" in r for r in server.requests)


def test_a13_a_function_assistant_that_accepts_them_gets_repeat_and_seed(own: Path) -> None:
    seen: list[tuple[int, int]] = []

    def assistant(question: str, library: Any, version: Any, session_id: str, repeat: int = -1,
                  seed: int = -1) -> dict[str, Any]:  # fmt: skip
        seen.append((repeat, seed))
        return good_assistant(question, library, version, session_id)

    summary = doceval.evaluate(own, agent=assistant, split="all", repeats=2)
    assert sorted(set(seen)) == [(0, 0), (1, 1)] and len(seen) == 2 * len(summary.entries)
    assert summary["repeats"]["n"] == 2
    doceval.evaluate(own, agent=good_assistant, split="all", repeats=2)  # one that takes neither still runs


# --------------------------------------------------------------------- A14 a dry run that consults


def test_a14_the_dry_run_consults_journals_and_cache_and_takes_per_million_prices(
    own: Path, openai_server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    (own.parent / "assistant_a14.py").write_text("from answer_side import good_assistant as answer\n")
    system = ["--golden", "golden.json", "agent=function", "agent.target=assistant_a14:answer",
              *judge_overrides(openai_server.base_url), "judge.price_per_1m_completion=2.0"]  # fmt: skip

    def dry(*extra: str) -> dict[str, list[str]]:
        capsys.readouterr()
        assert main(["eval", "--split", "all", "--dry-run", *system, *extra]) == 0
        out = capsys.readouterr().out
        rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("judge ")}
        return {**rows, "out": [out]}

    before = dry()
    assert before["judge"][2] == str(N_IN_SCOPE) and before["judge"][3] == "0"  # nothing journaled yet
    assert int(before["judge"][5].replace(",", "")) == N_IN_SCOPE * 256  # max_tokens: nothing observed
    assert float(before["judge"][6]) == pytest.approx(N_IN_SCOPE * 256 * 2.0 / 1e6, abs=1e-4)
    run = _judged(system, "run.json")
    actual = run["config"]["usage"]["by_role"]["judge"]
    assert actual["requests"] == N_IN_SCOPE
    after = dry()
    assert after["judge"][3] == str(N_IN_SCOPE) and after["judge"][4] == "0"  # a rerun pays for nothing
    prompt, completion = (actual[k] / N_IN_SCOPE for k in ("prompt_tokens", "completion_tokens"))
    rule = (
        f"observed means over {N_IN_SCOPE} cached replies: prompt {prompt:.1f}, completion {completion:.1f}"
    )
    assert rule in after["out"][0]
    # another configuration (its own journals) is estimated from the observed means, not max_tokens
    fresh = dry("judge.max_tokens=300")
    assert fresh["judge"][3] == "0"
    assert int(fresh["judge"][5].replace(",", "")) == round(N_IN_SCOPE * completion)
    assert int(fresh["judge"][4].replace(",", "")) == round(N_IN_SCOPE * prompt)
    assert main(["eval", "--dry-run", *system, "judge.price_per_1k_completion=2.0"]) == 2
    assert (
        "set one (a provider's price per million tokens goes in price_per_1m_completion"
        in capsys.readouterr().err
    )


@pytest.mark.slow
def test_a2_history_and_drift_split_the_family_by_judge(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tracked runs judged by judge A, then a run judged by judge B with a lower answer_accuracy: drift does not
    set B's figure against A's, and history shows A's runs as another judge's (n/a)."""
    from test_history import _git

    from doceval.tracking import log_run

    assert main(eval_args("--split", "test", *overrides())) == 0
    base = json.loads((project / "out.json").read_text())
    uri = f"sqlite:///{project / 'mlruns.db'}"
    _git(project, "init", "-q")

    def judged(accuracy: float, judge: str, commit: str) -> dict[str, Any]:
        s = copy.deepcopy(base)
        s["metrics"]["answer_accuracy"], s["metrics"]["not_judged"] = accuracy, False
        s["config"]["judge_id"] = {"hash": judge * 16, "identity": {"name": "openai", "model": judge}}
        s["config"]["provenance"] = {**s["config"]["provenance"], "git_commit": commit, "git_dirty": False}
        return dict(s)

    for i in range(3):
        _git(project, "commit", "-q", "--allow-empty", "-m", f"c{i}", date=f"2026-11-{i + 1:02d}T12:00:00")
        log_run(judged(0.9, "a", _git(project, "rev-parse", "HEAD")), uri=uri, root=project, run_name=f"a{i}")
    now = judged(0.5, "b", "f" * 40)
    _write(project / "now.json", now)
    (project / "gate.yaml").write_text("thresholds: {hit_rate: 0.0}\ndrift: {enabled: true, metrics: "
                                       "[answer_accuracy], tolerance: 0.02, window: 10}\n")  # fmt: skip
    capsys.readouterr()
    assert main(["gate", "now.json", "--config", "gate.yaml", "--tracking-uri", uri]) == 0
    assert "answer_accuracy drifted" not in capsys.readouterr().out
    _git(project, "commit", "-q", "--allow-empty", "-m", "c3", date="2026-11-04T12:00:00")
    log_run(judged(0.5, "b", _git(project, "rev-parse", "HEAD")), uri=uri, root=project, run_name="b0")
    assert main(["history", "--tracking-uri", uri, "--metric", "answer_accuracy", "--plot", "h.png"]) == 0
    out = capsys.readouterr().out
    assert f"answer_accuracy: n/a for 3 run(s) judged by another judge ({'a' * 16})" in out


def test_a2_summaries_recorded_before_repeat_0_changed_are_matched_by_the_stated_rule() -> None:
    from doceval.common.naming import judge_hash
    from doceval.results.judges import judge_key

    identity = {"name": "openai", "model": "m", "seed": None, "temperature": 0.0}
    single = {"config": {"judge_id": {"hash": judge_hash(identity), "identity": identity}}}
    old_identity = {**identity, "seed": 0}  # repeat 0 asked with seed 0 before the change
    old = {"config": {"judge_id": {"hash": judge_hash(old_identity), "identity": old_identity}},
           "repeats": {"n": 3}}  # fmt: skip
    assert judge_key(old) == judge_key(single)
    # a summary with the marker, or a single run that set seed 0, is read as recorded
    assert judge_key({**old, "repeats": {"n": 3, "repeat0": "the single run's request"}}) != judge_key(single)
    assert judge_key({"config": old["config"]}) != judge_key(single)
