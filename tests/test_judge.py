"""The LLM judge: verdict parsing, rubric prompt, and judge errors (never scored right or wrong)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from openai_server import FakeOpenAI

from doceval.errors import UsageError
from doceval.scoring.judge import OpenAIJudge, make_judge, parse_verdict
from doceval.system.docchat.answerers import ExtractiveAnswerer
from doceval.system.docchat.runner import run_agent
from doceval.system.docchat.types import Passage, Probe, SearchResult

PROBE = Probe("j1", "How do I dump a model?", "pydantic", "2.8.2", "Call `model_dump()` on the instance.")


@pytest.fixture
def server(openai_server: FakeOpenAI) -> FakeOpenAI:
    return openai_server


def judge_for(server: FakeOpenAI, tmp_path: Path, **over: Any) -> OpenAIJudge:
    cfg: dict[str, Any] = {
        "name": "openai",
        "base_url": server.base_url,
        "model": "judge-model",
        "max_retries": 1,
        "retry_base_delay_s": 0.01,
        "cache_path": str(tmp_path / "llm.sqlite"),
    }
    cfg.update(over)
    judge = make_judge(cfg)
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
    assert judge.judge(PROBE, "Use `model_dump()`.") == (True, "all reference APIs present", None)
    verdict, reason, error = judge.judge(PROBE, "Use `.dict()`.")
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
    verdict, reason, error = judge.judge(PROBE, "Use `model_dump()`.")
    assert verdict is None and reason is None
    assert error is not None and error.startswith("malformed judge output: no JSON object")
    judge.judge(PROBE, "Use `model_dump()`.")
    assert server.chat_requests == 2  # asked again: the unparsable reply was not cached
    server.judge_mode = "rule"
    assert judge.judge(PROBE, "Use `model_dump()`.")[0] is True
    assert judge.judge(PROBE, "Use `model_dump()`.")[0] is True
    assert server.chat_requests == 3  # the good verdict was cached


def test_exhausted_retries_are_a_judge_error(server: FakeOpenAI, tmp_path: Path) -> None:
    judge = judge_for(server, tmp_path)
    server.fail_next(2, 500)
    verdict, reason, error = judge.judge(PROBE, "Use `model_dump()`.")
    assert verdict is None and reason is None
    assert error is not None and error.startswith("judge call failed:") and "HTTP 500" in error


def test_runner_records_judge_errors_with_verdict_none(server: FakeOpenAI, tmp_path: Path) -> None:
    judge = judge_for(server, tmp_path)
    server.judge_mode = "malformed"
    passage = Passage("pydantic@2.8.2:pydantic.main.BaseModel.model_dump", 0.9, "def model_dump()\n\nDumps.")
    out = run_agent(
        [PROBE], lambda p: SearchResult([passage], False, None), ExtractiveAnswerer(), judge, progress=False
    )
    rec = out.records["j1"]
    assert not rec.refused and rec.verdict is None and rec.verdict_reason is None
    assert rec.judge_error is not None and rec.judge_error.startswith("malformed judge output")
    assert rec.usage["judge"]["requests"] == 1


def test_make_judge() -> None:
    assert make_judge({"name": "none"}) is None
    with pytest.raises(UsageError, match="judge.name"):
        make_judge({"name": "gpt4"})
    with pytest.raises(UsageError, match=r"judge\.model: required"):
        make_judge({"name": "openai", "base_url": "http://127.0.0.1:1/v1"})
