"""doceval.llm against a real local OpenAI-compatible HTTP server (the real ``openai`` client, no mocks)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_agent import serving
from openai_server import FakeOpenAI, embed_vector

from doceval.config.compose import llm_settings
from doceval.errors import UsageError
from doceval.llm import (
    BudgetExceeded,
    ChatClient,
    Ledger,
    LLMConfig,
    LLMError,
    PromptTemplate,
    cache_key,
    embed_texts,
    iter_concurrent,
    map_concurrent,
    resolve_api_key,
    usage_scope,
)

MESSAGES = [{"role": "user", "content": "<passages>`model_dump()`</passages> <question>q</question>"}]


@pytest.fixture
def server(openai_server: FakeOpenAI) -> FakeOpenAI:
    return openai_server


def make_cfg(server: FakeOpenAI, tmp_path: Path, **over: Any) -> LLMConfig:
    base: dict[str, Any] = {
        "model": "test-model",
        "base_url": server.base_url,
        "max_retries": 3,
        "retry_base_delay_s": 0.01,
        "retry_max_delay_s": 0.05,
        "timeout_s": 5,
        "cache_path": str(tmp_path / "llm.sqlite"),
    }
    base.update(over)
    return llm_settings("answerer", **base)


def test_chat_roundtrip_counts_tokens_and_cost(server: FakeOpenAI, tmp_path: Path) -> None:
    cfg = make_cfg(server, tmp_path, price_per_1k_prompt=1.0, price_per_1k_completion=2.0)
    client = ChatClient(cfg, "answerer")
    with usage_scope() as scope:
        result = client.complete(MESSAGES)
    assert result.content == "Use model_dump()."
    assert not result.cached
    usage = client.ledger.snapshot()["answerer"]
    assert usage["requests"] == 1 and usage["cache_misses"] == 1
    assert usage["prompt_tokens"] == 2 and usage["completion_tokens"] == 2
    assert usage["cost_usd"] == pytest.approx((2 * 1.0 + 2 * 2.0) / 1000)
    assert scope["answerer"].as_dict() == usage  # the per-entry scope saw the same call
    assert server.bodies[0]["max_tokens"] == 512 and server.bodies[0]["temperature"] == 0.0


def test_retries_succeed_after_transient_429_and_500(server: FakeOpenAI, tmp_path: Path) -> None:
    delays: list[float] = []
    client = ChatClient(
        make_cfg(server, tmp_path, retry_base_delay_s=0.01, retry_max_delay_s=1.0),
        "judge",
        sleep=delays.append,
    )
    server.fail_next(2, 429)
    server.fail_next(1, 500)
    assert client.complete(MESSAGES).content == "Use model_dump()."
    assert server.requests == 4
    usage = client.ledger.snapshot()["judge"]
    assert usage["requests"] == 4 and usage["retries"] == 3 and usage["errors"] == 0
    # exponential backoff with 50-100% jitter
    for attempt, delay in enumerate(delays):
        assert 0.5 * 0.01 * 2**attempt <= delay <= 0.01 * 2**attempt


def test_retries_stop_at_the_limit_and_errors_are_not_cached(server: FakeOpenAI, tmp_path: Path) -> None:
    client = ChatClient(make_cfg(server, tmp_path, max_retries=2), "answerer")
    server.fail_next(3, 500)
    with pytest.raises(LLMError) as err:
        client.complete(MESSAGES)
    assert err.value.kind == "server" and err.value.status == 500 and err.value.attempts == 3
    assert "after 3 attempt(s)" in str(err.value)
    assert server.requests == 3
    assert client.cache is not None and len(client.cache) == 0
    assert client.ledger.snapshot()["answerer"]["errors"] == 1
    # The failure was not cached: the same call now reaches the (recovered) server.
    assert client.complete(MESSAGES).content == "Use model_dump()."
    assert server.requests == 4 and len(client.cache) == 1


def test_rate_limit_exhausted_surfaces_kind(server: FakeOpenAI, tmp_path: Path) -> None:
    client = ChatClient(make_cfg(server, tmp_path, max_retries=1, cache_path=""), "answerer")
    server.fail_next(2, 429)
    with pytest.raises(LLMError) as err:
        client.complete(MESSAGES)
    assert err.value.kind == "rate_limit" and server.requests == 2


def test_malformed_json_body_is_retried(server: FakeOpenAI, tmp_path: Path) -> None:
    client = ChatClient(make_cfg(server, tmp_path, max_retries=2), "answerer")
    server.malformed_next(1)
    assert client.complete(MESSAGES).content == "Use model_dump()."
    assert server.requests == 2
    server.malformed_next(3)
    with pytest.raises(LLMError) as err:
        client.complete([{"role": "user", "content": "another prompt"}])
    assert err.value.kind == "malformed"


def test_timeout_is_retried(server: FakeOpenAI, tmp_path: Path) -> None:
    client = ChatClient(make_cfg(server, tmp_path, timeout_s=0.3), "answerer")
    server.slow_next(1, 1.0)
    assert client.complete(MESSAGES).content == "Use model_dump()."
    assert client.ledger.snapshot()["answerer"]["retries"] == 1


def test_client_error_is_not_retried(server: FakeOpenAI, tmp_path: Path) -> None:
    cfg = make_cfg(server, tmp_path, base_url=server.base_url + "/nope")
    with pytest.raises(LLMError) as err:
        ChatClient(cfg, "answerer").complete(MESSAGES)
    assert err.value.kind == "client" and err.value.status == 404 and err.value.attempts == 1
    assert server.requests == 1


def test_connection_error_is_retried_then_surfaced(tmp_path: Path) -> None:
    with FakeOpenAI() as srv:
        url = srv.base_url
    cfg = llm_settings(
        "answerer", model="m", base_url=url, max_retries=1, retry_base_delay_s=0.01, cache_path=""
    )
    with pytest.raises(LLMError) as err:
        ChatClient(cfg, "answerer").complete(MESSAGES)
    assert err.value.kind == "connection" and err.value.attempts == 2


def test_peak_concurrency_never_exceeds_the_bound(tmp_path: Path) -> None:
    with FakeOpenAI(latency_s=0.1) as srv:
        client = ChatClient(make_cfg(srv, tmp_path, cache_path="", max_concurrency=16), "answerer")
        prompts = [[{"role": "user", "content": f"prompt {i}"}] for i in range(20)]
        out = map_concurrent(client.complete, prompts, max_concurrency=4)
        assert [r.content for r in out] == ["I don't know"] * 20
        assert 1 < srv.peak_inflight <= 4  # really concurrent, never past the bound (the server counted)
        # The client's own bound holds even when more threads call it.
        srv.reset_stats()
        bounded = ChatClient(make_cfg(srv, tmp_path, cache_path="", max_concurrency=3), "answerer")
        map_concurrent(bounded.complete, prompts, max_concurrency=12)
        assert 1 < srv.peak_inflight <= 3


def test_iter_concurrent_stops_submitting_when_closed() -> None:
    started: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            started.append(i)
        time.sleep(0.02)
        return i

    gen = iter_concurrent(work, range(100), 4)
    next(gen)
    gen.close()
    assert len(started) <= 8  # the first wave plus at most one refill, not 100


def test_cache_hits_make_no_request_and_any_changed_parameter_misses(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    client = ChatClient(make_cfg(server, tmp_path), "answerer")
    first = client.complete(MESSAGES, template_id="answer.txt:aaa")
    again = client.complete(MESSAGES, template_id="answer.txt:aaa")
    assert server.chat_requests == 1
    assert again.cached and again.content == first.content and again.cost_usd == 0
    assert client.ledger.cache_stats() == {"hits": 1, "misses": 1}
    client.complete(MESSAGES, template_id="answer.txt:bbb")  # edited template
    assert server.chat_requests == 2
    warmer = ChatClient(make_cfg(server, tmp_path, temperature=0.7), "answerer")
    warmer.complete(MESSAGES, template_id="answer.txt:aaa")
    assert server.chat_requests == 3
    # A fresh client on the same file (another process, later) hits the persisted entry.
    fresh = ChatClient(make_cfg(server, tmp_path), "answerer")
    assert fresh.complete(MESSAGES, template_id="answer.txt:aaa").cached
    assert server.chat_requests == 3


def test_cache_key_covers_every_generation_parameter(server: FakeOpenAI, tmp_path: Path) -> None:
    client = ChatClient(make_cfg(server, tmp_path), "answerer")
    base = client.params(MESSAGES, "t:1")
    assert set(base) == {
        "base_url", "model", "messages", "temperature", "max_tokens", "seed", "response_format", "template",
    }  # fmt: skip
    variants: list[dict[str, Any]] = [
        {"model": "other"}, {"temperature": 0.5}, {"max_tokens": 7}, {"seed": 1},
        {"response_format": {"type": "json_object"}}, {"template": "t:2"}, {"base_url": "http://x/v1"},
        {"messages": [{"role": "user", "content": "x"}]},
    ]  # fmt: skip
    keys = {cache_key(base)} | {cache_key({**base, **v}) for v in variants}
    assert len(keys) == len(variants) + 1
    assert cache_key(dict(reversed(list(base.items())))) == cache_key(base)  # canonical


def test_budget_stops_before_it_would_be_exceeded(server: FakeOpenAI, tmp_path: Path) -> None:
    cfg = make_cfg(
        server, tmp_path, cache_path="", price_per_1k_prompt=1.0, price_per_1k_completion=1.0, max_tokens=10
    )
    ledger = Ledger(budget_usd=0.1)
    client = ChatClient(cfg, "answerer", ledger=ledger)
    calls = 0
    with pytest.raises(BudgetExceeded) as err:
        for i in range(1000):
            client.complete([{"role": "user", "content": f"prompt number {i}"}])
            calls += 1
    assert calls > 3
    assert server.chat_requests == calls  # the refused call was never sent
    assert ledger.spent_usd <= 0.1
    assert "budget" in str(err.value)


def test_embed_texts_normalised_in_order_and_batched(server: FakeOpenAI) -> None:
    texts = [f"text number {i} about pydantic" for i in range(7)]
    vecs = embed_texts("emb", texts, batch_size=3, base_url=server.base_url, dim=16)
    assert vecs.dtype == np.float32 and vecs.shape == (7, 16)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
    want = np.asarray([embed_vector(t) for t in texts], dtype=np.float32)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    assert np.allclose(vecs, want, atol=1e-6)  # server replies in reverse order; we sort by index
    assert server.embedding_requests == 3
    assert embed_texts("emb", [], 3, base_url=server.base_url, dim=16).shape == (0, 16)


def test_embed_texts_retries(server: FakeOpenAI) -> None:
    server.fail_next(1, 500)
    vecs = embed_texts("emb", ["a b c"], batch_size=8, base_url=server.base_url, retry_base_delay_s=0.01)
    assert vecs.shape == (1, 16)
    assert server.requests == 2


def test_api_key_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_KEY", raising=False)
    assert resolve_api_key("http://127.0.0.1:8000/v1", "MY_KEY") == "not-needed"
    with pytest.raises(UsageError, match="MY_KEY is not set"):
        resolve_api_key(None, "MY_KEY")
    with pytest.raises(UsageError, match="MY_KEY"):
        resolve_api_key("https://api.openai.com/v1", "MY_KEY")
    monkeypatch.setenv("MY_KEY", "sk-secret-value-123")
    assert resolve_api_key(None, "MY_KEY") == "sk-secret-value-123"


def test_llm_messages_go_through_the_one_scrubber() -> None:
    from doceval.common.redact import forget_secrets, register_secret, scrub_message

    text = "Incorrect API key provided: sk-abc123XYZ***wxyz. token=hunter2hunter2"
    register_secret("hunter2hunter2")
    out = scrub_message(text)
    forget_secrets()
    assert "abc123" not in out and "hunter2" not in out and "sk-***" in out


def test_config_validation_names_key_and_fix() -> None:
    with pytest.raises(
        UsageError,
        match=r"answerer\.temprature: unknown key; valid keys: name, template, max_passages, model",
    ):
        llm_settings("answerer", model="m", temprature=0.1)
    with pytest.raises(
        UsageError, match=r"judge\.model='': expected a non-empty string \(e\.g\. judge\.model=gpt"
    ):
        llm_settings("judge", model="")
    with pytest.raises(UsageError, match=r"answerer\.max_tokens=lots: expected an integer >= 1"):
        llm_settings("answerer", model="m", max_tokens="lots")
    with pytest.raises(UsageError, match=r"answerer\.max_concurrency=0: expected an integer >= 1"):
        llm_settings("answerer", model="m", max_concurrency=0)
    cfg = llm_settings("answerer", model="m", cache_path=None)
    assert cfg.cache_path is None and cfg.api_key_env == "OPENAI_API_KEY"  # the rest as conf/ ships it


def test_prompt_template_sections_and_id(tmp_path: Path) -> None:
    shipped = PromptTemplate.load("answer.txt")
    msgs = shipped.render(
        library="pydantic", version="2.8.2", passages="P", memory="M", question="Q?", refusal="I don't know"
    )
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert "<question>\nQ?\n</question>" in msgs[1]["content"] and "pydantic 2.8.2" in msgs[0]["content"]
    own = tmp_path / "answer.txt"
    own.write_text(shipped.text + "\nBe nice.\n")
    assert PromptTemplate.load(str(own)).template_id != shipped.template_id
    bad = tmp_path / "bad.txt"
    bad.write_text("hello $nobody")
    with pytest.raises(UsageError, match=r"\$nobody"):
        PromptTemplate.load(str(bad)).render(question="q")
    with pytest.raises(UsageError, match="not a shipped template"):
        PromptTemplate.load("missing.txt")


class _DeepReply(BaseHTTPRequestHandler):
    """An OpenAI-compatible server whose chat reply carries a field nested 100k levels deep."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers["Content-Length"]))
        body = (
            b'{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0, '
            b'"finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}], "extra": '
            + b"[" * 100_000
            + b"]" * 100_000
            + b"}"
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_reply_nested_100k_deep_is_a_failed_call_not_a_crash(tmp_path: Path) -> None:
    """Issue 39 H10, for an LLM server: the client's JSON parser raised RecursionError through every handler;
    it is a malformed reply (retried, then an LLMError the run counts)."""
    with serving(_DeepReply) as srv:
        base = {"model": "m", "base_url": f"http://127.0.0.1:{srv.server_address[1]}/v1", "max_retries": 1,
                "retry_base_delay_s": 0.01, "retry_max_delay_s": 0.02, "timeout_s": 5, "cache_path": None}  # fmt: skip
        client = ChatClient(llm_settings("answerer", **base), "answerer")
        with pytest.raises(LLMError, match="nested too deep"):
            client.complete(MESSAGES)
        assert client.ledger.snapshot()["answerer"]["requests"] == 2
