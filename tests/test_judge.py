"""The LLM judge: verdict parsing, rubric prompt, judge errors (never scored right or wrong), and judging a
run's recorded answers afterwards (doceval.scoring.judging): refusals never judged, bounded concurrency, the
shared budget, and the verdict journal (resume, SIGKILL)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from openai_server import FakeOpenAI
from sigkill import kill_once_journaled

from doceval.config import schema
from doceval.config.compose import compose, llm_settings
from doceval.errors import UsageError
from doceval.llm import Ledger
from doceval.scoring.judge import OpenAIJudge, make_judge, parse_verdict
from doceval.scoring.judging import judge_answers, load_verdicts
from doceval.seam import Reply
from doceval.system.docchat.answerers import make_answerer
from doceval.system.docchat.runner import run_agent
from doceval.system.docchat.types import Passage, Probe, SearchResult

PROBE = Probe("j1", "How do I dump a model?", "pydantic", "2.8.2")
REF = "Call `model_dump()` on the instance."
# The shipped openai blocks (their templates); each test brings its own client settings.
ANSWERER = compose(["answerer=openai"]).answerer
JUDGE = compose(["judge=openai"]).judge
EXTRACTIVE = compose(["answerer=extractive"]).answerer
assert isinstance(ANSWERER, schema.AnswererOpenAI) and isinstance(JUDGE, schema.JudgeOpenAI)


@pytest.fixture
def server(openai_server: FakeOpenAI) -> FakeOpenAI:
    return openai_server


def judge_for(server: FakeOpenAI, tmp_path: Path, **over: Any) -> OpenAIJudge:
    cfg: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "judge-model",
        "max_retries": 1,
        "retry_base_delay_s": 0.01,
        "cache_path": str(tmp_path / "llm.sqlite"),
    }
    cfg.update(over)
    judge = make_judge(dataclasses.replace(JUDGE, llm=llm_settings("judge", **cfg)))
    assert isinstance(judge, OpenAIJudge)
    return judge


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ('{"verdict": "correct", "reason": "same API"}', True),
        ('```json\n{"verdict": "Incorrect", "reason": "uses .dict()"}\n```', False),
        ('Here is my grade: {"verdict": "correct", "reason": "ok"} Thanks.', True),
    ],
)
def test_parse_verdict_accepts_json_in_common_wrappers(reply: str, verdict: bool) -> None:
    assert parse_verdict(reply)[0] is verdict


@pytest.mark.parametrize(
    "reply",
    [
        "correct",
        '{"verdict": "mostly correct"}',
        '{"verdict": "correct"',
        "[1, 2]",
        '{"reason": "no verdict"}',
    ],
)
def test_parse_verdict_rejects_malformed(reply: str) -> None:
    with pytest.raises(ValueError):
        parse_verdict(reply)


def test_judge_rubric_verdicts(server: FakeOpenAI, tmp_path: Path) -> None:
    judge = judge_for(server, tmp_path)
    assert judge.judge(PROBE, "Use `model_dump()`.", REF) == (True, "all reference APIs present", None)
    verdict, reason, error = judge.judge(PROBE, "Use `.dict()`.", REF)
    assert verdict is False and reason == "missing model_dump()" and error is None
    prompt = "\n".join(m["content"] for m in server.bodies[0]["messages"])
    assert (
        "pydantic 2.8.2" in prompt
        and "<reference>\nCall `model_dump()` on the instance.\n</reference>" in prompt
    )
    assert '"verdict"' in prompt and server.bodies[0]["model"] == "judge-model"
    assert judge.client.ledger.snapshot()["judge"]["requests"] == 2


def test_malformed_judge_output_is_a_judge_error_and_not_cached(server: FakeOpenAI, tmp_path: Path) -> None:
    judge = judge_for(server, tmp_path)
    server.judge_mode = "malformed"
    verdict, reason, error = judge.judge(PROBE, "Use `model_dump()`.", REF)
    assert verdict is None and reason is None
    assert error is not None and error.startswith("malformed judge output: no JSON object")
    judge.judge(PROBE, "Use `model_dump()`.", REF)
    assert server.chat_requests == 2  # asked again: the unparsable reply was not cached
    server.judge_mode = "rule"
    assert judge.judge(PROBE, "Use `model_dump()`.", REF)[0] is True
    assert judge.judge(PROBE, "Use `model_dump()`.", REF)[0] is True
    assert server.chat_requests == 3  # the good verdict was cached


def test_exhausted_retries_are_a_judge_error(server: FakeOpenAI, tmp_path: Path) -> None:
    judge = judge_for(server, tmp_path)
    server.fail_next(2, 500)
    verdict, reason, error = judge.judge(PROBE, "Use `model_dump()`.", REF)
    assert verdict is None and reason is None
    assert error is not None and error.startswith("judge call failed:") and "HTTP 500" in error


def test_judge_errors_are_recorded_with_verdict_none(server: FakeOpenAI, tmp_path: Path) -> None:
    judge = judge_for(server, tmp_path)
    server.judge_mode = "malformed"
    passage = Passage("pydantic@2.8.2:pydantic.main.BaseModel.model_dump", 0.9, "def model_dump()\n\nDumps.")
    out = run_agent(
        [PROBE], lambda p: SearchResult([passage], False, None), make_answerer(EXTRACTIVE), progress=False
    )
    assert not out.records["j1"].refused
    judged = judge_answers(
        [PROBE], out.records, {"j1": REF}, judge, journal_path=tmp_path / "j.jsonl", progress=False
    )
    rec = judged.verdicts["j1"]
    assert rec.verdict is None and rec.verdict_reason is None
    assert rec.judge_error is not None and rec.judge_error.startswith("malformed judge output")
    assert rec.usage["judge"]["requests"] == 1
    # A judge error is a result like any verdict: journaled, so a rerun does not ask again.
    again = judge_answers(
        [PROBE], out.records, {"j1": REF}, judge, journal_path=tmp_path / "j.jsonl", progress=False
    )
    assert again.resumed == 1 and again.verdicts["j1"].judge_error == rec.judge_error
    assert server.chat_requests == 1


def test_make_judge() -> None:
    assert make_judge(compose(["judge=none"]).judge) is None
    # An unknown judge, or an openai judge without a model, never reaches make_judge: composing refuses it.
    with pytest.raises(UsageError, match="judge/gpt4.*none openai reference"):
        compose(["judge=gpt4"])
    with pytest.raises(UsageError, match=r"judge\.model: missing; expected a non-empty string"):
        compose(["judge=openai", "judge.base_url=http://127.0.0.1:1/v1", "~judge.model"])


# ------------------------------------------------------------------------------------------- judging a run


def answered(i: int, *, refused: bool = False, answer: str | None = "Use `model_dump()`.") -> Reply:
    if refused:
        return Reply(f"a{i}", None, True, "router", "router: not indexed")
    return Reply(f"a{i}", answer)


def probes_and_refs(n: int) -> tuple[list[Probe], dict[str, str]]:
    probes = [dataclasses.replace(PROBE, id=f"a{i}", question=f"How do I dump model {i}?") for i in range(n)]
    return probes, {p.id: REF for p in probes}


class CountingJudge:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def judge(self, probe: Probe, answer: str, reference: str) -> tuple[bool | None, str | None, str | None]:
        self.calls.append(probe.id)
        return True, "ok", None


def test_refused_entries_and_missing_answers_are_never_judged() -> None:
    probes, refs = probes_and_refs(5)
    # a1 refused, a2 has no answer text, a3 has no answer recorded at all.
    answers = {
        "a0": answered(0),
        "a1": answered(1, refused=True),
        "a2": answered(2, answer=None),
        "a4": answered(4),
    }
    judge = CountingJudge()
    out = judge_answers(probes, answers, refs, judge, progress=False)
    assert judge.calls == ["a0", "a4"] and list(out.verdicts) == ["a0", "a4"]
    assert out.todo == 2 and out.resumed == 0 and out.stopped_reason is None


def test_judging_resumes_from_its_journal_without_reasking(server: FakeOpenAI, tmp_path: Path) -> None:
    probes, refs = probes_and_refs(6)
    answers = {p.id: answered(i) for i, p in enumerate(probes)}
    journal = tmp_path / "run" / "judge.jsonl"
    first = judge_answers(probes[:4], answers, refs, judge_for(server, tmp_path, cache_path=""),
                          journal_path=journal, progress=False)  # fmt: skip
    assert len(first.verdicts) == 4 and server.chat_requests == 4
    with journal.open("a") as fh:
        fh.write('{"id": "a4", "input_sha": "ha')  # killed mid-write: that verdict is redone
    server.reset_stats()
    # No LLM cache: only the journal can spare the judge the four entries it already graded.
    judge = judge_for(server, tmp_path, cache_path="")
    again = judge_answers(
        probes, answers, refs, judge, journal_path=journal, max_concurrency=3, progress=False
    )
    assert again.resumed == 4 and list(again.verdicts) == [p.id for p in probes]
    assert server.chat_requests == 2  # a4 and a5 only
    ids = [json.loads(x)["id"] for x in journal.read_text().splitlines()]
    assert ids[:4] == ["a0", "a1", "a2", "a3"] and sorted(ids[4:]) == ["a4", "a5"]  # each entry once
    assert again.total_usage()["judge"]["requests"] == 6  # resumed verdicts' usage included
    # A changed answer is judged again: a journaled verdict covers only the answer it graded.
    answers["a0"] = answered(0, answer="Use `.dict()`.")
    server.reset_stats()
    third = judge_answers(probes, answers, refs, judge, journal_path=journal, progress=False)
    assert third.resumed == 5 and server.chat_requests == 1 and third.verdicts["a0"].verdict is False
    assert load_verdicts(journal)["a0"].verdict is False  # last line wins
    journal.write_text('{"id": "a0"}\n' + journal.read_text())
    with pytest.raises(UsageError, match=r"judge.jsonl:1: not a judge journal record"):
        load_verdicts(journal)


def test_judging_concurrency_is_bounded(tmp_path: Path) -> None:
    probes, refs = probes_and_refs(12)
    answers = {p.id: answered(i) for i, p in enumerate(probes)}
    with FakeOpenAI(latency_s=0.05) as srv:
        judge = judge_for(srv, tmp_path, max_concurrency=8)
        out = judge_answers(probes, answers, refs, judge, max_concurrency=3, progress=False)
        assert len(out.verdicts) == 12 and 1 < srv.peak_inflight <= 3


def test_one_budget_covers_answering_and_judging(server: FakeOpenAI, tmp_path: Path) -> None:
    priced: dict[str, Any] = {"price_per_1k_prompt": 1.0, "price_per_1k_completion": 1.0, "cache_path": ""}
    passage = Passage("pydantic@2.8.2:m.model_dump", 0.9, "def m.model_dump()\n\nUse `model_dump()`.")
    probes, refs = probes_and_refs(6)
    llm = llm_settings(
        "answerer", base_url=server.base_url, model="m", max_tokens=20, max_retries=0, **priced
    )
    answerer = make_answerer(dataclasses.replace(ANSWERER, llm=llm))
    judge = judge_for(server, tmp_path, max_tokens=20, **priced)

    def search(probe: Probe) -> SearchResult:
        return SearchResult([passage], False, None)

    # Price one run of the answers and one verdict, then budget for the answers and about three verdicts.
    measure = Ledger()
    priced_run = run_agent(probes, search, answerer, ledger=measure, progress=False)
    judge_answers(probes[:1], priced_run.records, refs, judge, ledger=measure, progress=False)
    verdict_cost = measure.snapshot()["judge"]["cost_usd"]
    budget = measure.snapshot()["answerer"]["cost_usd"] + 3 * verdict_cost
    server.reset_stats()
    ledger = Ledger(budget_usd=budget)
    out = run_agent(probes, search, answerer, ledger=ledger, progress=False)
    assert out.stopped_reason is None and len(out.records) == 6
    answer_cost = sum(r.cost_usd for r in out.records.values())
    journal = tmp_path / "judge.jsonl"
    judged = judge_answers(
        probes, out.records, refs, judge, ledger=ledger, journal_path=journal, progress=False
    )
    assert judged.stopped_reason == "budget" and 0 < len(judged.verdicts) < 6
    assert answer_cost + sum(v.cost_usd for v in judged.verdicts.values()) <= budget
    assert len(journal.read_text().splitlines()) == len(judged.verdicts)  # finished verdicts were kept
    assert server.chat_requests == 6 + len(judged.verdicts)  # the call that would exceed was never sent
    # Resumed with a larger budget: only the rest is judged.
    done = len(judged.verdicts)
    final = judge_answers(probes, out.records, refs, judge, ledger=Ledger(budget_usd=5.0), journal_path=journal,
                          progress=False)  # fmt: skip
    assert final.stopped_reason is None and final.resumed == done and len(final.verdicts) == 6
    assert server.chat_requests == 6 + 6
    with pytest.raises(ValueError, match="budget"):
        run_agent(
            probes, lambda p: SearchResult([], True, "x", "floor"), answerer, ledger=ledger, budget_usd=1.0
        )


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from doceval.config import schema
    from doceval.config.compose import llm_settings
    from doceval.scoring.judge import make_judge
    from doceval.scoring.judging import judge_answers
    from doceval.seam import Probe, Reply

    base_url, journal, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    probes = [Probe(f"q{i}", f"What does api_{i} do?", "pydantic", "2.8.2") for i in range(n)]
    answers = {p.id: Reply(p.id, f"Use `api_{p.id[1:]}()`.") for p in probes}
    refs = {p.id: f"Call `api_{p.id[1:]}()`." for p in probes}
    # No LLM cache: only the journal can spare the judge what it already graded.
    llm = llm_settings("judge", base_url=base_url, model="j", cache_path="", max_retries=1, retry_base_delay_s=0.01)
    judge = make_judge(schema.JudgeOpenAI(name="openai", template="judge.txt", llm=llm))
    out = judge_answers(probes, answers, refs, judge, journal_path=Path(journal), max_concurrency=2, progress=False)
    print("resumed", out.resumed, "verdicts", len(out.verdicts), "correct", sum(v.verdict is True for v in out.verdicts.values()))
    """
)


@pytest.mark.slow
def test_judging_killed_with_sigkill_resumes_without_reasking(tmp_path: Path) -> None:
    n = 24
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    journal = tmp_path / "judge.jsonl"
    with FakeOpenAI(latency_s=0.1) as srv:
        args = [sys.executable, str(script), srv.base_url, str(journal), str(n)]
        first_ids = kill_once_journaled(args, journal)
        assert 4 <= len(first_ids) < n
        deadline = time.monotonic() + 5
        while srv.inflight and time.monotonic() < deadline:  # the killed child's requests still get counted
            time.sleep(0.01)
        requests_before = srv.chat_requests
        srv.reset_stats()
        rerun = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert rerun.returncode == 0, rerun.stderr
        assert f"resumed {len(first_ids)} verdicts {n} correct {n}" in rerun.stdout
        ids = [json.loads(x)["id"] for x in journal.read_text().splitlines()]
        assert sorted(ids) == sorted(f"q{i}" for i in range(n))  # every entry judged exactly once
        assert srv.chat_requests == n - len(first_ids)  # journaled verdicts were not asked again
        # At most the two requests in flight at the kill are asked twice.
        assert requests_before + srv.chat_requests <= n + 2


def test_the_reference_judge_gets_its_encoder_through_the_seam_and_builds_it_only_to_score() -> None:
    """scoring never imports the index (issue 44 M2): the harness passes the embedder; a verdict the version
    strings decide never builds it (loading the model takes seconds), and judge=reference without one is a bug."""
    import numpy as np

    from doceval.scoring.reference_judge import VersionStrings

    built: list[int] = []

    class Unit:
        """Every text as the same unit vector: cosine 1.0 between any two."""

        def encode(self, texts: Any) -> np.ndarray:
            return np.ones((len(texts), 4)) / 2.0

    def encoder() -> Unit:
        built.append(1)
        return Unit()

    cfg = schema.JudgeReference(name="reference", threshold=0.9, facts_threshold=0.0)
    judge = make_judge(cfg, {PROBE.id: VersionStrings(("model_dump",))}, encoder)
    assert judge is not None
    verdict, reason, _ = judge.judge(PROBE, "Use `.dict()`.", "Call `model_dump()`.")
    assert verdict is False and "misses 'model_dump'" in str(reason) and built == []
    verdict, reason, _ = judge.judge(PROBE, "Use `model_dump()`.", "Call `model_dump()`.")
    assert verdict is True and "similarity to the reference 1.000" in str(reason) and built == [1]
    judge.judge(PROBE, "Use `model_dump()` again.", "Call `model_dump()`.")
    assert built == [1]  # built once, then reused
    with pytest.raises(ValueError, match="encoder"):
        make_judge(cfg, {})
