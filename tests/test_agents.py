"""External agents as systems under test (doceval.system.external, run by doceval.harness.agents): the user's assistant behind HTTP (a real
server on 127.0.0.1, started here, with programmable faults) or a Python callable; sessions, retries, per-entry
errors, the journal, max_errors, secrets, and the agent config block."""

from __future__ import annotations

import hashlib
import json
import socket
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent, running_agent

from doceval.common.retry import RetriesExhausted, RetryPolicy, call_with_retries
from doceval.config import schema
from doceval.config.compose import compose
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.harness.agents import load_journal, run_external
from doceval.seam import Probe, Reply, Source
from doceval.system.external.agents import function_agent, make_agent
from doceval.system.external.http import HttpAgent, redact_url

CONF = Path(__file__).resolve().parents[1] / "conf"
SECRET = "s3cr3t-agent-token-value"
PROBES = [Probe(f"e{i}", f"question {i}", "pydantic", "2.8.2") for i in range(6)]
# The shipped agent blocks (conf/agent/*.yaml: url and target null); each test sets what it needs.
HTTP = compose(["agent=http"], conf_dir=CONF).agent
FUNCTION = compose(["agent=function"], conf_dir=CONF).agent
assert isinstance(HTTP, schema.AgentHttp) and isinstance(FUNCTION, schema.AgentFunction)


@pytest.fixture
def server() -> Iterator[FakeAgent]:
    with running_agent() as srv:
        yield srv


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("AGENT_TOKEN", SECRET)
    return "AGENT_TOKEN"


def http_cfg(url: str, **extra: Any) -> schema.AgentHttp:
    return replace(HTTP, **{"url": url, "headers_env": {}, "timeout_s": 5, "max_retries": 2, **extra})


def assert_no_secret(*things: Any) -> None:
    for thing in things:
        text = thing if isinstance(thing, str) else json.dumps(thing, default=repr)
        assert SECRET not in text


# ------------------------------------------------------------------------------------------- agent=http


def test_http_agent_one_session_per_probe_and_the_header_stays_secret(
    server: FakeAgent, token: str, tmp_path: Path
) -> None:
    agent = make_agent(http_cfg(server.url, headers_env={"Authorization": token}))
    assert agent is not None and agent.name == "http"
    journal = tmp_path / "journal.jsonl"
    out = run_external(PROBES, agent, journal_path=journal, max_concurrency=3, progress=False)
    assert (out.n_errors, out.stopped, out.resumed) == (0, False, 0)
    assert list(out.responses) == [p.id for p in PROBES]
    first = out.responses["e0"]
    assert first.answer == "answer to question 0" and first.refused is False and first.error is None
    assert first.sources == [Source("pydantic@2.8.2:a", None), Source("pydantic@2.8.2:b", 0.5)]
    assert first.usage == {"total_tokens": 7} and first.extra == {"trace_id": "t-question 0"}
    # A fresh session per probe, recorded, and the one the server saw.
    sessions = [r.session_id for r in out.responses.values()]
    assert len(set(sessions)) == len(PROBES)
    assert sorted(r["session_id"] for r in server.requests) == sorted(sessions)
    assert set(server.requests[0]) == {"question", "library", "version", "session_id"}
    # The value of the header's variable reaches the server and nothing else.
    assert server.auth == [SECRET] * len(PROBES)
    describe = agent.describe()
    assert describe["url"] == server.url and describe["headers_env"] == {"Authorization": "AGENT_TOKEN"}
    assert_no_secret([r.to_json() for r in out.responses.values()], journal.read_text(), describe)
    assert load_journal(journal) == out.responses


def test_warm_memory_uses_one_session_in_probe_order(server: FakeAgent) -> None:
    server.delay_s = 0.02
    agent = make_agent(http_cfg(server.url))
    assert agent is not None
    out = run_external(PROBES, agent, warm_memory=True, max_concurrency=8, progress=False)
    assert len({r.session_id for r in out.responses.values()}) == 1
    assert [r["question"] for r in server.requests] == [p.question for p in PROBES]
    assert server.peak == 1


def test_concurrency_is_bounded(server: FakeAgent) -> None:
    server.delay_s = 0.05
    agent = make_agent(http_cfg(server.url))
    assert agent is not None
    probes = [Probe(f"c{i}", f"q{i}", "pydantic", "2.8.2") for i in range(9)]
    out = run_external(probes, agent, max_concurrency=3, progress=False)
    assert out.n_errors == 0 and 2 <= server.peak <= 3


def test_faults_become_per_entry_errors_and_transient_ones_are_retried(
    server: FakeAgent, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    delays: list[float] = []
    agent = HttpAgent(server.url, headers_env={"Authorization": token}, timeout_s=0.3, max_retries=1, max_reply_bytes=HTTP.max_reply_bytes,
                      retry_base_delay_s=0.01, sleep=delays.append)  # fmt: skip
    server.faults = {"then_ok_500": ["500"], "then_ok_429": ["429"]}
    server.always = {"down": "500", "slow": "slow", "bad_json": "bad_json", "no_refused": "no_refused",
                     "bad_sources": "bad_sources", "missing": "404"}  # fmt: skip
    probes = [Probe(q, q, "pydantic", "2.8.2") for q in ["ok", "then_ok_500", "then_ok_429", *server.always]]
    out = run_external(probes, agent, max_concurrency=4, progress=False)

    ok = {i for i, r in out.responses.items() if r.error is None}
    assert ok == {"ok", "then_ok_500", "then_ok_429"}
    assert max(delays) >= 7  # the 429's Retry-After was honoured (cap 30s)
    errors = {i: r.error for i, r in out.responses.items() if r.error is not None}
    assert errors["down"] == "server: HTTP 500 Internal Server Error (gave up after 2 attempt(s))"
    assert errors["slow"] == "timeout: no reply within 0.3s (gave up after 2 attempt(s))"
    assert errors["bad_json"].startswith("malformed: the reply is not JSON")
    assert errors["no_refused"].startswith("invalid response: missing 'refused'")
    assert errors["bad_sources"] == "invalid response: 'sources' must be a list, got str"
    assert errors["missing"].startswith("http: HTTP 404 Not Found")
    assert out.n_errors == len(errors) == 6 and not out.stopped
    # An errored entry is never a refusal.
    assert all(not out.responses[i].refused and out.responses[i].answer is None for i in errors)
    # Transient faults are retried (one retry each, max_retries=1); the rest are tried once.
    assert agent.stats() == {"requests": 13, "retries": 4}
    assert [server.count(q) for q in ("down", "slow", "bad_json", "no_refused", "missing")] == [2, 2, 1, 1, 1]
    assert_no_secret(errors, caplog.text)


def test_a_reply_nested_100k_deep_is_a_counted_system_error(server: FakeAgent, tmp_path: Path) -> None:
    """Issue 39 H10: 100k-deep JSON in the probe reply was a RecursionError (exit 1); in any reply, or from a
    user's function, it is one entry's system error, the run goes on."""
    server.always = {"deep": "deep", "doceval connectivity check: please ignore": "deep"}
    agent = HttpAgent(server.url, timeout_s=5, max_retries=0, max_reply_bytes=HTTP.max_reply_bytes)
    agent.check()  # the probe's reply is malformed: a warning, never a crash
    out = run_external([Probe("d", "deep", "pydantic", "2.8.2"), Probe("ok", "ok", "pydantic", "2.8.2")], agent,
                       journal_path=tmp_path / "journal.jsonl", progress=False)  # fmt: skip
    error = out.responses["d"].error or ""
    assert error.startswith("malformed:") and "nested deeper than 100 levels" in error
    assert out.responses["ok"].error is None and out.n_errors == 1
    deep: dict[str, Any] = {}
    for _ in range(100_000):
        deep = {"a": deep}
    reply = {"answer": "x", "sources": [], "refused": False, "debug": deep}
    own = function_agent(lambda **_: reply if _["question"] == "deep" else {**reply, "debug": 1}, FUNCTION)
    out = run_external([Probe("d", "deep", "pydantic", "2.8.2"), Probe("ok", "ok", "pydantic", "2.8.2")], own,
                       progress=False)  # fmt: skip
    assert (out.responses["d"].error or "").startswith("malformed: the reply nests deeper than 100 levels")
    assert out.responses["ok"].error is None


def test_the_journal_resumes_ok_entries_and_retries_errored_ones(server: FakeAgent, tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    agent = make_agent(http_cfg(server.url, max_retries=0))
    assert agent is not None
    server.always = {"question 2": "500", "question 4": "bad_json"}
    first = run_external(PROBES, agent, journal_path=journal, progress=False)
    assert first.n_errors == 2 and first.responses["e2"].error and first.responses["e4"].error

    server.always = {}
    calls_before = {p.question: server.count(p.question) for p in PROBES}
    second = run_external(PROBES, agent, journal_path=journal, progress=False)
    assert (second.n_errors, second.resumed) == (0, 4)
    called = [p.id for p in PROBES if server.count(p.question) > calls_before[p.question]]
    assert called == ["e2", "e4"]
    assert all(r.error is None for r in load_journal(journal).values())  # the last record wins
    assert len(journal.read_text().splitlines()) == len(PROBES) + 2


def test_a_resumed_warm_run_keeps_its_session(server: FakeAgent, tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    agent = make_agent(http_cfg(server.url, max_retries=0))
    assert agent is not None
    server.always = {"question 3": "500"}
    first = run_external(PROBES, agent, warm_memory=True, journal_path=journal, progress=False)
    assert first.n_errors == 1
    server.always = {}
    second = run_external(PROBES, agent, warm_memory=True, journal_path=journal, progress=False)
    assert second.n_errors == 0 and second.resumed == len(PROBES) - 1
    assert len({r.session_id for r in second.responses.values()}) == 1


def test_max_errors_stops_starting_new_calls(server: FakeAgent, tmp_path: Path) -> None:
    agent = make_agent(http_cfg(server.url))
    assert agent is not None
    server.always = {p.question: "bad_json" for p in PROBES}
    out = run_external(PROBES, agent, max_errors=2, max_concurrency=1, progress=False,
                       journal_path=tmp_path / "j.jsonl")  # fmt: skip
    assert out.stopped and out.n_errors == 3
    assert list(out.responses) == ["e0", "e1", "e2"] and len(server.requests) == 3
    # Under concurrency the calls already in flight finish and are kept.
    server.requests.clear()
    out = run_external(PROBES, agent, max_errors=0, max_concurrency=3, progress=False)
    assert out.stopped and len(out.responses) == len(server.requests) < len(PROBES)


def test_check_fails_on_a_closed_port_and_a_wrong_path(server: FakeAgent) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    closed = make_agent(http_cfg(f"http://127.0.0.1:{port}/ask"))
    assert closed is not None
    with pytest.raises(UsageError, match=rf"agent.url=http://127.0.0.1:{port}/ask does not answer"):
        closed.check()
    live = make_agent(http_cfg(server.url))
    assert live is not None
    live.check()
    assert len(server.requests) == 1  # one probe request
    server.always[server.requests[0]["question"]] = "404"
    with pytest.raises(UsageError, match="HTTP 404.*check the path in agent.url"):
        live.check()


def test_http_config_errors_name_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_AGENT_VAR", raising=False)
    with pytest.raises(UsageError, match="agent.headers_env.X-Key: environment variable NO_SUCH_AGENT_VAR"):
        make_agent(http_cfg("http://127.0.0.1:9/ask", headers_env={"X-Key": "NO_SUCH_AGENT_VAR"}))
    with pytest.raises(UsageError, match=r"agent=http needs agent.url=URL"):
        make_agent(http_cfg(None))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="expected an http:// or https:// URL"):
        make_agent(http_cfg("ftp://host/x"))


def test_url_credentials_are_sent_as_basic_auth_and_redacted(server: FakeAgent) -> None:
    url = server.url.replace("http://", "http://me:pw-secret@") + "?api_key=k-secret&mode=1"
    assert redact_url(url) == server.url.replace("http://", "http://***@") + "?api_key=***&mode=1"
    agent = make_agent(http_cfg(url))
    assert agent is not None
    out = run_external(PROBES[:1], agent, progress=False)
    assert out.n_errors == 0 and (server.auth[0] or "").startswith("Basic ")
    assert "secret" not in json.dumps(agent.describe())


# --------------------------------------------------------------------------------------- agent=function


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module ``my_agent_<hex>.py`` in the (temporary) working directory, as a user would write it."""
    name = f"my_agent_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        "SEEN = []\n"
        "NOT_CALLABLE = 3\n"
        "def answer(question, library, version, session_id):\n"
        "    SEEN.append(session_id)\n"
        "    if question == 'boom':\n"
        "        raise ValueError('boom')\n"
        "    if question == 'list':\n"
        "        return ['not', 'a', 'mapping']\n"
        "    return {'answer': None, 'sources': [], 'refused': True, 'reason': 'not in my docs',\n"
        "            'usage': {'prompt_tokens': 3}, 'trace': {'steps': 2}}\n"
        "def wrong(question):\n"
        "    return {}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # resolve_target puts the cwd first; undo it after
    yield name
    sys.modules.pop(name, None)


def test_function_agent_from_the_working_directory(user_module: str, tmp_path: Path) -> None:
    agent = make_agent(replace(FUNCTION, target=f"{user_module}:answer"))
    assert agent is not None and agent.name == "function"
    agent.check()
    probes = [*PROBES[:2], Probe("x", "boom", "flask", "3.0"), Probe("y", "list", "flask", "3.0")]
    out = run_external(probes, agent, progress=False)
    first = out.responses["e0"]
    assert first.refused and first.refusal_reason == "not in my docs" and first.sources == []
    assert first.refusal_cause == "system"
    assert first.usage == {"prompt_tokens": 3} and first.extra == {"trace": {"steps": 2}}
    assert out.responses["x"].error == "exception: ValueError: boom"
    assert out.responses["y"].error == "invalid response: expected a JSON object/mapping, got list"
    assert sorted(r.session_id for r in out.responses.values()) == sorted(sys.modules[user_module].SEEN)
    described = agent.describe()
    assert described["target"] == f"{user_module}:answer"
    assert (
        described["source_sha256"]
        == hashlib.sha256((tmp_path / f"{user_module}.py").read_bytes()).hexdigest()
    )


@pytest.mark.parametrize(
    "attr,needle",
    [
        (None, "agent=function needs agent.target=MODULE:ATTR"),
        ("nope_module_xyz:answer", "no module named 'nope_module_xyz'"),
        ("{mod}:missing", "has no attribute 'missing'"),
        ("{mod}:NOT_CALLABLE", "'NOT_CALLABLE' is a int, not callable"),
        ("{mod}:wrong", "cannot be called as f(question=..., library=..., version=..., session_id=...)"),
        ("not a target", "expected MODULE:ATTR"),
    ],
)
def test_bad_function_targets_are_usage_errors(user_module: str, tmp_path: Path, attr: str | None,
                                               needle: str) -> None:  # fmt: skip
    target = attr.format(mod=user_module) if attr else None
    with pytest.raises(UsageError) as err:
        make_agent(replace(FUNCTION, target=target))
    assert needle in str(err.value)
    if attr and attr.startswith("nope"):
        assert str(tmp_path) in str(err.value) and "agent.target=" in str(err.value)  # the sys.path searched


def test_function_agent_for_the_python_api() -> None:
    def answer(**kw: Any) -> dict[str, Any]:
        return {"answer": kw["question"].upper(), "sources": ["a", {"id": "b"}], "refused": False}

    agent = function_agent(answer, FUNCTION, name="notebook")
    out = run_external(PROBES[:2], agent, progress=False)
    assert out.responses["e0"].answer == "QUESTION 0"
    assert out.responses["e0"].sources == [Source("a", None), Source("b", None)]
    assert agent.describe()["target"] == "notebook"
    with pytest.raises(UsageError, match=r"function_agent\(bad\): the signature"):
        function_agent(lambda question: {}, FUNCTION, name="bad")


def test_duplicate_probe_ids_are_refused() -> None:
    agent = function_agent(lambda **kw: {}, FUNCTION, name="x")
    with pytest.raises(UsageError, match="unique"):
        run_external([PROBES[0], PROBES[0]], agent, progress=False)


# --------------------------------------------------------------------------------------------- the seam


def test_a_reply_round_trips_and_bad_lines_are_refused() -> None:
    resp = Reply("e1", "a", sources=[Source("d", 0.5), Source("e", None)], usage={"t": 1}, extra={"k": [1]},
                 session_id="s-1")  # fmt: skip
    refusal = Reply("e2", None, True, "system", "not in my docs", session_id="s-1")
    for reply in (resp, refusal):
        assert Reply.from_json(json.loads(json.dumps(reply.to_json()))) == reply
    with pytest.raises(TypeError):
        Reply.from_json({**resp.to_json(), "refused": "no"})
    with pytest.raises(KeyError, match="session_id"):
        Reply.from_json({k: v for k, v in resp.to_json().items() if k != "session_id"})
    with pytest.raises(ValueError, match="one of router, floor, retriever, answerer, system"):
        Reply.from_json({**refusal.to_json(), "refusal_cause": "tired"})
    with pytest.raises(ValueError, match="only on a refusal"):
        Reply("e3", "a", False, "system")


def test_journal_lines_from_before_one_reply_type_still_load(tmp_path: Path) -> None:
    """An external agent's journal as doceval wrote it before: resumed, a refusal's cause is "system"."""
    journal = tmp_path / "journal.jsonl"
    old = [{"id": "e0", "answer": None, "sources": [], "refused": True, "reason": "not in my docs",
            "usage": {"prompt_tokens": 3}, "extra": {}, "session_id": "s-0", "error": None},
           {"id": "e1", "answer": "use load()", "sources": [{"id": "d", "score": 0.5}], "refused": False,
            "reason": None, "usage": {}, "extra": {"trace": 1}, "session_id": "s-1", "error": None}]  # fmt: skip
    journal.write_text("".join(json.dumps(line) + "\n" for line in old))
    calls: list[str] = []

    def answer(**kw: Any) -> dict[str, Any]:
        calls.append(kw["question"])
        return {"answer": "x", "sources": [], "refused": False}

    out = run_external(PROBES[:3], function_agent(answer, FUNCTION), journal_path=journal, progress=False)
    assert out.resumed == 2 and calls == ["question 2"]
    refused, answered = out.responses["e0"], out.responses["e1"]
    assert (refused.refused, refused.refusal_cause, refused.refusal_reason) == (
        True,
        "system",
        "not in my docs",
    )
    assert answered.refusal_cause is None and answered.sources == [Source("d", 0.5)]
    assert answered.extra == {"trace": 1} and answered.session_id == "s-1"
    assert json.loads(journal.read_text().splitlines()[-1])["refusal_cause"] is None  # new lines: one shape


# ------------------------------------------------------------------------------------------ common.retry


def test_the_generic_retry_loop() -> None:
    slept: list[float] = []
    failures = iter([ConnectionError("a"), ConnectionError("b")])

    def call() -> str:
        nxt = next(failures, None)
        if nxt is not None:
            raise nxt
        return "done"

    def down() -> str:
        raise ConnectionError("x")

    def bug() -> str:
        raise KeyError("k")

    def classify(exc: BaseException) -> tuple[str, int | None] | None:
        return ("connection", None) if isinstance(exc, ConnectionError) else None

    policy = RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=5.0)
    assert (
        call_with_retries(call, policy, classify=classify, retry_after=lambda e: 3.0, sleep=slept.append)
        == "done"
    )
    assert len(slept) == 2 and all(3.0 <= d <= 5.0 for d in slept)  # at least Retry-After, capped

    with pytest.raises(RetriesExhausted) as err:
        call_with_retries(down, RetryPolicy(1, 0.0, 0.0), classify=classify, what="ping", sleep=slept.append)
    assert err.value.attempts == 2 and err.value.kind == "connection"
    assert str(err.value).startswith("ping failed after 2 attempt(s): ConnectionError: x")
    with pytest.raises(KeyError):  # not transient: re-raised unchanged, no retry
        call_with_retries(bug, policy, classify=classify, sleep=slept.append)


# ------------------------------------------------------------------------------------------ config block


def test_the_agent_block_composes_and_validates() -> None:
    assert config_dict(compose([], conf_dir=CONF).agent) == {"name": "docchat"}
    cfg = compose(["agent=http", "agent.url=http://127.0.0.1:9"], conf_dir=CONF)
    assert config_dict(cfg.agent) == {"name": "http", "url": "http://127.0.0.1:9", "headers_env": {}, "params": {},
                                      "timeout_s": 30, "max_retries": 3, "max_reply_bytes": 4194304}  # fmt: skip
    cfg = compose(["agent=http", "agent.url=http://127.0.0.1:9", "+agent.headers_env.Authorization=TOKEN"],
                  conf_dir=CONF)  # fmt: skip
    assert isinstance(cfg.agent, schema.AgentHttp)
    assert cfg.agent.headers_env == {"Authorization": "TOKEN"}
    with pytest.raises(UsageError, match=r"agent\.nope: unknown key"):
        compose(["agent=http", "agent.url=http://127.0.0.1:9", "+agent.nope=1"], conf_dir=CONF)
    with pytest.raises(UsageError, match=r"agent\.url=ftp://x: expected an http:// or https:// URL"):
        compose(["agent=http", "agent.url=ftp://x"], conf_dir=CONF)
    # The shipped options compose with null target/url; building the agent says what to set.
    with pytest.raises(UsageError, match=r"agent=function needs agent\.target=MODULE:ATTR"):
        make_agent(compose(["agent=function"], conf_dir=CONF).agent)
    with pytest.raises(UsageError, match=r"agent=http needs agent\.url=URL"):
        make_agent(compose(["agent=http"], conf_dir=CONF).agent)
    assert make_agent(compose([], conf_dir=CONF).agent) is None
