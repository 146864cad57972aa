"""The agent runner: refusals, memory isolation vs warm memory, journal/resume (SIGKILL), budget, secrets.

The agent only answers; its answers are judged afterwards by doceval.scoring.judging (tests/test_judge.py)."""

from __future__ import annotations

import dataclasses
import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai_server import FakeOpenAI
from sigkill import kill_once_journaled

from doceval.config import schema
from doceval.config.compose import compose, llm_settings
from doceval.errors import UsageError
from doceval.llm import LLMConfig
from doceval.scoring.judge import OpenAIJudge, make_judge
from doceval.scoring.judging import judge_answers
from doceval.scoring.metrics import contains_apis
from doceval.seam import Reply, Source
from doceval.system.docchat.answerers import ExtractiveAnswerer, OpenAIAnswerer, is_refusal, make_answerer
from doceval.system.docchat.memory import Memory
from doceval.system.docchat.runner import load_journal, run_agent
from doceval.system.docchat.types import MemoryItem, Passage, Probe, SearchResult

V1_DICT = Passage(
    "pydantic@1.10.17:pydantic.main.BaseModel.dict",
    0.8,
    "def pydantic.main.BaseModel.dict(self, *, include=None)\n\nUse `.dict()` to convert a model to a dictionary.",
)
V2_DUMP = Passage(
    "pydantic@2.8.2:pydantic.main.BaseModel.model_dump",
    0.8,
    "def pydantic.main.BaseModel.model_dump(self, *, mode='python')\n\n"
    "Use `model_dump()` to convert a model instance to a dictionary. Fields can be excluded.",
)
P1 = Probe("p1", "How do I convert a model to a dict?", "pydantic", "1.10.17")
P2 = Probe("p2", "How do I convert a model instance to a dict?", "pydantic", "2.8.2")
FLASK = Probe("f1", "How do I declare a route?", "flask", "3.0.0")
# Reference answers are labels: the judge gets them, the agent never sees them.
REFS = {
    "p1": "Call `.dict()` on the model.",
    "p2": "Call `model_dump()` on it.",
    "p3": "Call `model_dump()`.",
    "f1": "",
}
EXPECTED, FORBIDDEN = ["model_dump"], [".dict()"]


def search(probe: Probe) -> SearchResult:
    if probe.library != "pydantic":
        return SearchResult([], True, f"router: library '{probe.library}' is not indexed", "router")
    return SearchResult([V1_DICT if probe.version.startswith("1.") else V2_DUMP], False, None)


class CountingAnswerer(ExtractiveAnswerer):
    def __init__(self) -> None:
        super().__init__(EXTRACTIVE.max_passages)  # as conf/answerer/extractive.yaml sets it
        self.calls: list[str] = []

    def answer(self, probe: Probe, passages: list[Passage], memory: list[MemoryItem]) -> Any:
        self.calls.append(probe.id)
        return super().answer(probe, passages, memory)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as srv:
        yield srv


# The shipped openai blocks (conf/answerer/openai.yaml, conf/judge/openai.yaml): their templates, with the
# client settings of each test (llm_cfg) in place of conf's.
ANSWERER = compose(["answerer=openai"]).answerer
JUDGE = compose(["judge=openai"]).judge
EXTRACTIVE = compose(["answerer=extractive"]).answerer
assert isinstance(ANSWERER, schema.AnswererOpenAI) and isinstance(JUDGE, schema.JudgeOpenAI)


def llm_cfg(server: FakeOpenAI, tmp_path: Path, **over: Any) -> LLMConfig:
    cfg: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "test-model",
        "max_retries": 2,
        "retry_base_delay_s": 0.01,
        "retry_max_delay_s": 0.02,
        "timeout_s": 10.0,
        "cache_path": str(tmp_path / "cache" / "llm.sqlite"),
    }
    cfg.update(over)
    return llm_settings("answerer", **cfg)


def openai_answerer(llm: LLMConfig) -> schema.AnswererOpenAI:
    return dataclasses.replace(ANSWERER, llm=llm)


def openai_judge(llm: LLMConfig) -> schema.JudgeOpenAI:
    return dataclasses.replace(JUDGE, llm=llm)


# ------------------------------------------------------------------------------------------- answerers


def test_extractive_answer_and_refusal() -> None:
    ans = make_answerer(EXTRACTIVE)
    text, refused, reason = ans.answer(P2, [V2_DUMP], [])
    assert not refused and reason is None and text is not None
    assert text.startswith("According to the pydantic 2.8.2 docs: def pydantic.main.BaseModel.model_dump(")
    assert "Use `model_dump()` to convert" in text
    assert ans.answer(P2, [], []) == (None, True, "no passages to answer from")
    item = MemoryItem("q", "earlier " * 100, "pydantic", "1.10.17")
    text, _, _ = ans.answer(P2, [V2_DUMP] * 10, [item])
    assert text is not None and len(text) < 700 + 300 and "\nRelated earlier answer: earlier" in text


def test_model_refusal_is_recorded_as_refused(server: FakeOpenAI, tmp_path: Path) -> None:
    answerer = make_answerer(openai_answerer(llm_cfg(server, tmp_path)))
    nothing = Passage("pydantic@2.8.2:pydantic.x", 0.5, "A passage with no API in it.")
    assert answerer.answer(P2, [nothing], []) == (None, True, "model refused")
    assert is_refusal("I don\u2019t know.") and not is_refusal("Use model_dump().")


def test_make_answerer_validates() -> None:
    assert isinstance(make_answerer(compose(["answerer=extractive"]).answerer), ExtractiveAnswerer)
    # An unknown answerer or option never reaches make_answerer: the composed config is refused, naming it.
    with pytest.raises(UsageError, match="answerer/gpt.*extractive openai"):
        compose(["answerer=gpt"])
    with pytest.raises(UsageError, match=r"answerer\.max_chrs: unknown key"):
        compose(["answerer=extractive", "+answerer.max_chrs=10"])


# ------------------------------------------------------------------------------------------- memory


def test_memory_recall_same_library_by_jaccard_deterministic() -> None:
    mem = Memory()
    mem.record(MemoryItem("How do I convert a model to a dict?", "a1", "pydantic", "1.10.17"))
    mem.record(MemoryItem("How do I validate an email field?", "a2", "pydantic", "1.10.17"))
    mem.record(MemoryItem("How do I convert a model to a dict?", "a3", "marshmallow", "3.21.3"))
    mem.record(MemoryItem("Unrelated words entirely", "a4", "pydantic", "2.8.2"))
    got = mem.recall("How can I convert a model to a dict in v2?", "pydantic", "2.8.2", n=2)
    assert [m.answer for m in got] == ["a1", "a2"]
    assert mem.recall("zzz", "pydantic", "2.8.2") == []
    mem.reset()
    assert len(mem) == 0


# ------------------------------------------------------------------------------------------- runner


def test_refused_search_skips_answerer_and_judge(server: FakeOpenAI, tmp_path: Path) -> None:
    answerer = CountingAnswerer()
    judge = make_judge(openai_judge(llm_cfg(server, tmp_path)))
    assert judge is not None
    out = run_agent([FLASK, P2], search, answerer, progress=False)
    rec = out.records["f1"]
    assert (
        rec.refused and rec.answer is None and rec.refusal_reason == "router: library 'flask' is not indexed"
    )
    assert rec.usage == {} and not hasattr(rec, "verdict")  # the agent never grades itself
    assert answerer.calls == ["p2"] and server.chat_requests == 0 and out.usage == {}
    judged = judge_answers([FLASK, P2], out.records, REFS, judge, progress=False)
    assert list(judged.verdicts) == ["p2"]  # the refused entry was never judged
    assert judged.verdicts["p2"].verdict is True and server.chat_requests == 1  # judged once, the answer only
    assert judged.total_usage()["judge"]["requests"] == 1 and "answerer" not in judged.total_usage()


@pytest.mark.parametrize("kind", ["extractive", "openai"])
def test_warm_memory_leaks_an_old_api_isolation_prevents_it(
    kind: str, server: FakeOpenAI, tmp_path: Path
) -> None:
    def make() -> Any:
        if kind == "extractive":
            return make_answerer(EXTRACTIVE)
        return make_answerer(openai_answerer(llm_cfg(server, tmp_path)))

    isolated = run_agent([P1, P2], search, make(), progress=False)
    warm = run_agent([P1, P2], search, make(), warm_memory=True, progress=False)
    assert isolated.records["p2"].memory_used == []
    assert warm.records["p2"].memory_used == [P1.question]
    assert contains_apis(isolated.records["p2"].answer, EXPECTED, FORBIDDEN)
    assert not contains_apis(warm.records["p2"].answer, EXPECTED, FORBIDDEN)  # .dict() leaked in
    # Isolation is per probe even with concurrency.
    many = [
        dataclasses.replace(P1, id=f"a{i}") if i % 2 else dataclasses.replace(P2, id=f"a{i}")
        for i in range(8)
    ]
    out = run_agent(many, search, make(), max_concurrency=4, progress=False)
    assert all(r.memory_used == [] for r in out.records.values())


def test_resume_skips_journaled_entries_and_replays_warm_memory(tmp_path: Path) -> None:
    journal = tmp_path / "run" / "journal.jsonl"
    first = CountingAnswerer()
    run_agent([P1], search, first, warm_memory=True, journal_path=journal, progress=False)
    second = CountingAnswerer()
    out = run_agent([P1, P2], search, second, warm_memory=True, journal_path=journal, progress=False)
    assert out.resumed == 1 and second.calls == ["p2"]
    # p1 came from the journal but still reached p2 through memory, as in an uninterrupted warm run.
    assert out.records["p2"].memory_used == [P1.question]
    lines = journal.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["p1", "p2"]


def test_torn_last_journal_line_is_redone_and_bad_lines_are_reported(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    run_agent([P1], search, make_answerer(EXTRACTIVE), journal_path=journal, progress=False)
    with journal.open("a") as fh:
        fh.write('{"id": "p2", "answer": "half')  # killed mid-write
    answerer = CountingAnswerer()
    out = run_agent([P1, P2], search, answerer, journal_path=journal, progress=False)
    assert answerer.calls == ["p2"] and out.resumed == 1
    assert [json.loads(x)["id"] for x in journal.read_text().splitlines()] == ["p1", "p2"]
    journal.write_text('{"id": "p1"}\n' + journal.read_text())
    with pytest.raises(UsageError, match=r"journal.jsonl:1: not an agent journal record"):
        load_journal(journal)


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from doceval.config import schema
    from doceval.config.compose import llm_settings
    from doceval.system.docchat.answerers import make_answerer
    from doceval.system.docchat.runner import run_agent
    from doceval.system.docchat.types import Passage, Probe, SearchResult

    base_url, journal, cache, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    probes = [Probe(f"q{i}", f"What does api_{i} do?", "pydantic", "2.8.2") for i in range(n)]

    def search(p):
        i = p.id[1:]
        return SearchResult([Passage(f"pydantic@2.8.2:m.api_{i}", 0.9, f"def m.api_{i}()\\n\\nDoes {i}.")], False, None)

    llm = llm_settings("answerer", base_url=base_url, model="m", cache_path=cache, max_retries=1, retry_base_delay_s=0.01)
    answerer = make_answerer(schema.AnswererOpenAI(name="openai", template="answer.txt", llm=llm))
    out = run_agent(probes, search, answerer, journal_path=Path(journal), max_concurrency=2, progress=False)
    print("resumed", out.resumed, "records", len(out.records))
    """
)


@pytest.mark.slow
def test_run_killed_with_sigkill_and_resumed_answers_each_entry_once(tmp_path: Path) -> None:
    n = 24
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    journal, cache = tmp_path / "journal.jsonl", tmp_path / "llm.sqlite"
    with FakeOpenAI(latency_s=0.1) as srv:
        args = [sys.executable, str(script), srv.base_url, str(journal), str(cache), str(n)]
        first_ids = kill_once_journaled(args, journal)
        assert 4 <= len(first_ids) < n
        first_questions = {f"What does api_{i[1:]} do?" for i in first_ids}

        requests_before = srv.chat_requests
        srv.reset_stats()
        rerun = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert rerun.returncode == 0, rerun.stderr
        assert f"resumed {len(first_ids)} records {n}" in rerun.stdout
        ids = [json.loads(x)["id"] for x in journal.read_text().splitlines()]
        assert sorted(ids) == sorted(f"q{i}" for i in range(n))  # every entry exactly once
        asked_again = srv.questions_requested()
        assert not first_questions & set(asked_again)  # journaled entries were not redone
        # At most the two requests in flight at the kill are asked twice.
        assert requests_before + srv.chat_requests <= n + 2


def test_budget_stop_keeps_finished_records_and_resume_completes(server: FakeOpenAI, tmp_path: Path) -> None:
    cfg = openai_answerer(
        llm_cfg(server, tmp_path, price_per_1k_prompt=1.0, price_per_1k_completion=1.0, max_tokens=20)
    )
    probes = [dataclasses.replace(P2, id=f"b{i}", question=f"{P2.question} ({i})") for i in range(10)]
    journal = tmp_path / "journal.jsonl"
    out = run_agent(probes, search, make_answerer(cfg), journal_path=journal, budget_usd=1.5, progress=False)
    assert out.stopped_reason == "budget"
    done = len(out.records)
    assert 0 < done < 10
    assert sum(r.usage["answerer"]["cost_usd"] for r in out.records.values()) <= 1.5
    assert len(journal.read_text().splitlines()) == done
    assert server.chat_requests == done  # the call that would exceed was never sent
    # The same budget covers the whole run (resumed cost counts): it stops again straight away.
    again = run_agent(
        probes, search, make_answerer(cfg), journal_path=journal, budget_usd=1.5, progress=False
    )
    assert again.stopped_reason == "budget" and again.resumed == done and len(again.records) == done
    final = run_agent(probes, search, make_answerer(cfg), journal_path=journal, budget_usd=10, progress=False)
    assert final.stopped_reason is None and len(final.records) == 10 and final.resumed == done
    assert sorted(json.loads(x)["id"] for x in journal.read_text().splitlines()) == sorted(
        p.id for p in probes
    )
    assert server.chat_requests == 10


def test_answerer_failures_are_not_journaled_and_stop_the_run(server: FakeOpenAI, tmp_path: Path) -> None:
    cfg = openai_answerer(llm_cfg(server, tmp_path, max_retries=0))
    probes = [dataclasses.replace(P2, id=f"e{i}", question=f"q {i}") for i in range(8)]
    server.fail_next(100, 500)
    journal = tmp_path / "journal.jsonl"
    out = run_agent(probes, search, make_answerer(cfg), journal_path=journal, progress=False)
    assert out.stopped_reason == "errors" and len(out.errors) == 5 and out.records == {}
    assert "HTTP 500" in next(iter(out.errors.values()))
    assert not journal.exists() or journal.read_text() == ""
    warm = run_agent(probes, search, make_answerer(cfg), warm_memory=True, progress=False)
    assert warm.stopped_reason == "errors" and list(warm.errors) == ["e0"]  # order matters: stop at once


def test_secret_key_never_leaks(server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    sentinel = "sk-SENTINEL-7f3a9c1e5b-do-not-leak"
    monkeypatch.setenv("OPENAI_API_KEY", sentinel)
    caplog.set_level(logging.DEBUG)
    answerer = make_answerer(openai_answerer(llm_cfg(server, tmp_path)))
    judge = make_judge(openai_judge(llm_cfg(server, tmp_path)))
    assert isinstance(answerer, OpenAIAnswerer) and isinstance(judge, OpenAIJudge)
    journal, verdicts = tmp_path / "journal.jsonl", tmp_path / "judge.jsonl"
    server.fail_next(2, 429)  # retries log warnings
    out = run_agent([P1, P2, FLASK], search, answerer, journal_path=journal, progress=False)
    judged = judge_answers([P1, P2, FLASK], out.records, REFS, judge, journal_path=verdicts, progress=False)
    server.judge_mode = "malformed"
    p3 = dataclasses.replace(P2, id="p3", question="other")
    out2 = run_agent([p3], search, answerer, progress=False)
    judged2 = judge_answers([p3], out2.records, REFS, judge, progress=False)
    assert judged2.verdicts["p3"].judge_error
    bad = make_answerer(
        openai_answerer(llm_cfg(server, tmp_path, base_url=server.base_url + "/missing", cache_path=""))
    )
    out3 = run_agent([P2], search, bad, progress=False)
    assert "HTTP 404" in out3.errors["p2"]
    assert judged.verdicts["p2"].verdict is True and judged.verdicts["p1"].verdict is True

    blobs = [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]
    # Both journals and the sqlite cache (and its WAL) were scanned.
    assert any(b"p2" in b for b in blobs) and len(blobs) >= 3 and verdicts.is_file()
    for blob in blobs:
        assert sentinel.encode() not in blob
    returned = json.dumps([dataclasses.asdict(o) for o in (out, out2, out3, judged, judged2)])
    assert sentinel not in returned
    assert all(sentinel not in repr(x) for x in (answerer, judge, answerer.client, answerer.cfg))
    assert sentinel not in json.dumps([answerer.cfg.public_dict(), judge.cfg.public_dict()])
    assert sentinel not in caplog.text and "retry" in caplog.text
    assert server.status_counts[429] == 2
    assert f"Bearer {sentinel}" in server.auth_headers  # the key was really in use


def test_records_roundtrip_through_json() -> None:
    out = run_agent([P2], search, make_answerer(EXTRACTIVE), progress=False)
    rec = out.records["p2"]
    assert Reply.from_json(json.loads(json.dumps(rec.to_json()))) == rec


def test_journals_from_when_the_runner_also_judged_still_load(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    old = {"id": "p1", "answer": "Use `.dict()`.", "refused": False, "refusal_reason": None, "verdict": True,
           "verdict_reason": "ok", "judge_error": None, "memory_used": [], "usage": {"judge": {"requests": 1}}}  # fmt: skip
    journal.write_text(json.dumps(old) + "\n")
    answerer = CountingAnswerer()
    out = run_agent([P1, P2], search, answerer, journal_path=journal, progress=False)
    assert out.resumed == 1 and answerer.calls == ["p2"]
    assert out.records["p1"].answer == "Use `.dict()`." and out.records["p1"].usage == old["usage"]


def test_every_refusal_carries_its_cause_and_the_passages_read_are_its_sources(server: FakeOpenAI,
                                                                                tmp_path: Path) -> None:  # fmt: skip
    from doceval.system.docchat.search import PrecomputedSearch

    nothing = Passage("pydantic@2.8.2:pydantic.x", 0.5, "A passage with no API in it.")
    search_ = PrecomputedSearch({"f1": "router: library 'flask' is not indexed"},
                                {"p1": [], "p2": [(nothing.doc_id, 0.5)], "p3": [(V2_DUMP.doc_id, 0.8)]},
                                {nothing.doc_id: nothing.text, V2_DUMP.doc_id: V2_DUMP.text}, lambda lib: 0.42)  # fmt: skip
    p3 = dataclasses.replace(P2, id="p3")
    answerer = make_answerer(openai_answerer(llm_cfg(server, tmp_path)))
    out = run_agent([FLASK, P1, P2, p3], search_, answerer, progress=False)
    causes = {i: (r.refusal_cause, r.refusal_reason) for i, r in out.records.items()}
    assert causes == {"f1": ("router", "router: library 'flask' is not indexed"),
                      "p1": ("floor", "search: no passage cleared the floor 0.42"),
                      "p2": ("answerer", "model refused"), "p3": (None, None)}  # fmt: skip
    assert out.records["p3"].sources == [Source(V2_DUMP.doc_id, 0.8)] and out.records["f1"].sources == []


def test_refusals_journaled_before_causes_get_them_from_the_search(tmp_path: Path) -> None:
    """A journal as doceval wrote it before one reply type (no cause): resumed, never asked again, and the
    cause comes from the search (router) or else the answerer, never from the reason's text."""
    journal = tmp_path / "journal.jsonl"
    old = [{"id": "f1", "answer": None, "refused": True, "refusal_reason": "no prefix here", "usage": {},
            "memory_used": []},
           {"id": "p2", "answer": None, "refused": True, "refusal_reason": "router: looks like one", "usage": {},
            "memory_used": []}]  # fmt: skip
    journal.write_text("".join(json.dumps(line) + "\n" for line in old))
    answerer = CountingAnswerer()
    out = run_agent([FLASK, P1, P2], search, answerer, journal_path=journal, progress=False)
    assert out.resumed == 2 and answerer.calls == ["p1"]
    assert [out.records[i].refusal_cause for i in ("f1", "p1", "p2")] == ["router", None, "answerer"]
    assert out.records["f1"].refusal_reason == "no prefix here"  # the text is kept as journaled
    line = json.loads(journal.read_text().splitlines()[-1])
    assert line["id"] == "p1" and line["refusal_cause"] is None and line["sources"][0]["id"] == V1_DICT.doc_id
    assert set(line) == set(Reply("x", None).to_json())  # new lines: the one reply shape


def test_duplicate_probe_ids_are_rejected() -> None:
    with pytest.raises(UsageError, match="duplicated: p1"):
        run_agent([P1, P1], search, make_answerer(EXTRACTIVE), progress=False)


def test_progress_bar_runs(capsys: pytest.CaptureFixture[str]) -> None:
    run_agent([P1, P2], search, make_answerer(EXTRACTIVE), progress=True)
    assert "2/2" in capsys.readouterr().err


def test_runner_concurrency_is_bounded_end_to_end(tmp_path: Path) -> None:
    probes = [dataclasses.replace(P2, id=f"c{i}", question=f"{P2.question} #{i}") for i in range(20)]
    with FakeOpenAI(latency_s=0.05) as srv:
        answerer = make_answerer(openai_answerer(llm_cfg(srv, tmp_path, max_concurrency=4)))
        out = run_agent(probes, search, answerer, max_concurrency=16, progress=False)
        assert len(out.records) == 20 and out.usage["answerer"]["requests"] == 20
        assert 1 < srv.peak_inflight <= 4  # the client's bound holds under a wider runner pool
