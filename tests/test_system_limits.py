"""Limits on the user's system under test (issue 27): agent.timeout_s as one deadline per HTTP request, a reply
size cap, deadlines for function systems and run.max_abandoned, a user's retriever failing one entry instead of
the run, user code never choosing doceval's exit code, and one rule for the assistant and retriever paths.

Real parts only: HTTP servers on 127.0.0.1 that drip or flood their replies, and user modules written into a
fresh working directory and run through the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tiny_project import run_eval as run

import doceval
from doceval.common.concurrency import CallTimedOut, DeadlineCaller
from doceval.config import schema
from doceval.config.compose import compose
from doceval.errors import UsageError
from doceval.harness.agents import run_external
from doceval.harness.candidates import retrieve_all
from doceval.inputs.golden import GoldenEntry
from doceval.seam import Probe
from doceval.system.external.agents import make_agent
from doceval.system.external.http import HttpAgent

Write = Callable[..., None]  # the project fixture: write(failure, top="") rewrites the user's module
# conf/agent/http.yaml's reply cap (4 MiB): the oversize message below quotes it
REPLY_CAP = compose(["agent=http"]).agent.max_reply_bytes  # type: ignore[union-attr]
PROBE = Probe("p1", "what is a model?", "pydantic", "2.8.2")
REPLY = json.dumps({"answer": "a class", "sources": ["pydantic@2.8.2:a"], "refused": False}).encode()

# ------------------------------------------------------------------------------------------ HTTP servers


class Server:
    """An HTTP server on 127.0.0.1 that answers every POST with ``reply(handler)``; counts the requests."""

    def __init__(self, reply: Callable[[BaseHTTPRequestHandler], None]) -> None:
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers["Content-Length"]))
                server.requests += 1
                with contextlib.suppress(OSError):  # the client hung up at its deadline or its size cap
                    reply(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/ask"


@contextmanager
def serving(reply: Callable[[BaseHTTPRequestHandler], None]) -> Iterator[Server]:
    srv = Server(reply)
    thread = threading.Thread(target=srv.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.httpd.shutdown()
        srv.httpd.server_close()


DRIP_S = 0.25  # one byte per DRIP_S: the whole reply would take len(...) * DRIP_S (>= 10 s) to arrive


def drip(where: str, sent: list[int] | None = None) -> Callable[[BaseHTTPRequestHandler], None]:
    """A reply dripped one byte at a time: its status line and headers, or its body; ``sent`` counts the slow
    bytes written so far."""

    def reply(h: BaseHTTPRequestHandler) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(REPLY)}\r\n\r\n"
        slow, fast = (head.encode(), REPLY) if where == "headers" else (REPLY, head.encode())
        if where == "body":
            h.wfile.write(fast)
            h.wfile.flush()
        for i in range(len(slow)):
            h.wfile.write(slow[i : i + 1])
            h.wfile.flush()
            if sent is not None:
                sent.append(i)
            time.sleep(DRIP_S)
        if where == "headers":
            h.wfile.write(fast)

    return reply


@pytest.mark.parametrize("where", ["headers", "body"])
def test_agent_timeout_is_one_deadline_from_connect_to_the_last_byte(where: str) -> None:
    assert len(REPLY) * DRIP_S > 10  # without a deadline the call would succeed after this long
    sent: list[int] = []
    with serving(drip(where, sent)) as srv:
        agent = HttpAgent(srv.url, timeout_s=1, max_retries=0, max_reply_bytes=REPLY_CAP)
        out = run_external([PROBE], agent, progress=False)
        slow_bytes_sent = len(sent)  # how far the drip had got when the client gave up
    error = out.responses["p1"].error
    assert error == "timeout: no reply within 1s (gave up after 1 attempt(s))"
    # Gave up after about timeout_s of dripping (a byte per DRIP_S), long before the 10 s a whole reply takes.
    assert slow_bytes_sent < 10 / DRIP_S


def test_a_reply_past_the_deadline_is_retried_like_other_timeouts() -> None:
    with serving(drip("body")) as srv:
        agent = HttpAgent(
            srv.url, timeout_s=0.5, max_retries=1, max_reply_bytes=REPLY_CAP, sleep=lambda s: None
        )
        out = run_external([PROBE], agent, progress=False)
        assert srv.requests == 2
    assert out.responses["p1"].error == "timeout: no reply within 0.5s (gave up after 2 attempt(s))"


def test_a_reply_within_the_deadline_still_arrives_whole() -> None:
    def chunked(h: BaseHTTPRequestHandler) -> None:  # no Content-Length: read to the end, in chunks
        h.send_response(200)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for part in (REPLY[:10], REPLY[10:]):
            h.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        h.wfile.write(b"0\r\n\r\n")

    with serving(chunked) as srv:
        out = run_external(
            [PROBE], HttpAgent(srv.url, timeout_s=2, max_retries=0, max_reply_bytes=REPLY_CAP), progress=False
        )
    assert out.responses["p1"].error is None and out.responses["p1"].answer == "a class"


# ------------------------------------------------------------------------------------------ reply size


def body_of(size: int, *, declare: bool) -> Callable[[BaseHTTPRequestHandler], None]:
    """A JSON reply of exactly ``size`` bytes, with or without a Content-Length (then chunked)."""
    base = {"answer": "", "sources": [], "refused": False}
    pad = size - len(json.dumps(base).encode())
    body = json.dumps({**base, "answer": "x" * pad}).encode()
    assert len(body) == size

    def reply(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        if declare:
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
            return
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for i in range(0, len(body), 1000):
            part = body[i : i + 1000]
            h.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        h.wfile.write(b"0\r\n\r\n")

    return reply


@pytest.mark.parametrize("declare", [True, False], ids=["content-length", "chunked"])
@pytest.mark.parametrize(
    ("size", "cap", "ok"), [(5000, 5000, True), (5001, 5000, False), (3_000_000, 5000, False)]
)
def test_a_reply_over_max_reply_bytes_is_a_system_error_not_retried(
    declare: bool, size: int, cap: int, ok: bool
) -> None:
    with serving(body_of(size, declare=declare)) as srv:
        http = compose(["agent=http"]).agent
        assert isinstance(http, schema.AgentHttp)
        agent = make_agent(replace(http, url=srv.url, headers_env={}, timeout_s=5, max_retries=2,
                                   max_reply_bytes=cap))  # fmt: skip
        assert agent is not None
        out = run_external([PROBE], agent, progress=False)
        assert srv.requests == 1  # not retried
    error = out.responses["p1"].error
    if ok:
        assert error is None and len(out.responses["p1"].answer or "") > 4000
        return
    assert error is not None and error.startswith(f"oversize: reply over agent.max_reply_bytes={cap} bytes")
    assert (f"(Content-Length {size})" in error) == declare


def test_a_declared_length_over_the_cap_is_refused_before_reading() -> None:
    def promise(h: BaseHTTPRequestHandler) -> None:  # headers promising 50 MB, then silence
        h.send_response(200)
        h.send_header("Content-Length", str(50_000_000))
        h.end_headers()
        h.wfile.flush()
        time.sleep(5)

    with serving(promise) as srv:  # refused on the header: a read would time out with another message
        out = run_external(
            [PROBE], HttpAgent(srv.url, timeout_s=4, max_retries=0, max_reply_bytes=REPLY_CAP), progress=False
        )
    assert out.responses["p1"].error == (
        "oversize: reply over agent.max_reply_bytes=4194304 bytes (Content-Length 50000000)"
    )


def test_max_reply_bytes_is_checked_as_config() -> None:
    for bad in (0, -1, 1.5, True, "4MB"):
        with pytest.raises(UsageError, match=r"agent.max_reply_bytes=.*expected an integer >= 1"):
            HttpAgent("http://127.0.0.1:9/ask", timeout_s=30, max_retries=0, max_reply_bytes=bad)  # type: ignore[arg-type]
    conf = Path(__file__).resolve().parents[1] / "conf"
    with pytest.raises(UsageError, match=r"agent.max_reply_bytes=0: expected an integer >= 1"):
        compose(["agent=function", "agent.max_reply_bytes=0"], conf_dir=conf)
    with pytest.raises(UsageError, match=r"retriever.timeout_s=0: expected a number > 0"):
        compose(["retriever=function", "retriever.timeout_s=0"], conf_dir=conf)
    with pytest.raises(UsageError, match=r"run.max_abandoned=-1: expected an integer >= 0"):
        compose(["run.max_abandoned=-1"], conf_dir=conf)
    function = compose(["agent=function", "agent.timeout_s=null"], conf_dir=conf).agent
    assert isinstance(function, schema.AgentFunction) and function.timeout_s is None
    with pytest.raises(UsageError, match=r"agent.timeout_s=0: expected a number of seconds > 0, or null"):
        make_agent(replace(function, target="builtins:dict", timeout_s=0))


# ------------------------------------------------------------------------------ user modules, the CLI

MODULE = """
import sys, threading, time
DOCS = {"D1": "late fees are five dollars per day", "D2": "returns are accepted within thirty days",
        "D3": "shipping is free over fifty dollars", "D4": "returns of gift cards are not accepted"}
THREADS = []

def _ids(question, k):
    words = set(question.split())
    hits = sorted(((d, len(words & set(t.split()))) for d, t in DOCS.items()), key=lambda x: (-x[1], x[0]))
    return [(d, float(s)) for d, s in hits if s >= 2][:k]

def retrieve(question, k):
    THREADS.append(threading.current_thread().name)
    if "late fees" in question:
        {failure}
    return _ids(question, k)

def assistant(question, library, version, session_id):
    hits = _ids(question, 3)
    if "late fees" in question:
        {failure}
    return {{"answer": "see " + ", ".join(d for d, _ in hits), "refused": not hits,
             "sources": [{{"id": d, "score": s}} for d, s in hits]}}

RELEASE = threading.Event()  # set by the test once it has looked: the abandoned calls may then return
FINISHED = []

def slow_retrieve(question, k):
    RELEASE.wait(60)
    FINISHED.append(question)
    return []

def slow_assistant(question, library, version, session_id):
    RELEASE.wait(60)
    FINISHED.append(question)
    return {{"answer": None, "refused": True, "sources": []}}

def factory(**kwargs):
    {failure}
    return retrieve
"""
ROWS = [
    ("q1", "how much are late fees per day", ["D1"]),
    ("q2", "are returns accepted after thirty days", ["D2", "D4"]),
    ("q3", "do you sell pizza", []),
    ("q4", "is shipping free", ["D3"]),
]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Write]:
    """A user's folder: golden.jsonl and ``userlim.py`` whose functions fail on q1 with the statement given."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    rows = [{"id": i, "question": q, "out_of_scope": not rel, "relevant_ids": rel, "reference_answer": "x",
             "expected_apis": [], "forbidden_apis": [], "split": None, "kind": "lookup" if rel else "off_topic"}
            for i, q, rel in ROWS]  # fmt: skip
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

    def write(failure: str, top: str = "") -> None:
        source = textwrap.dedent(top) + MODULE.replace("{failure}", failure).replace("{{", "{").replace(
            "}}", "}"
        )
        (tmp_path / "userlim.py").write_text(source, encoding="utf-8")

    write("pass")
    yield write
    sys.modules.pop("userlim", None)


RETRIEVER = ("retriever=function", "retriever.target=userlim:retrieve", "k=2")
AGENT = ("agent=function", "agent.target=userlim:assistant", "k=2")

RETRIEVER_FAILURES = [
    ("raise RuntimeError('index offline')", "exception: RuntimeError: index offline"),
    ("sys.exit(0)", "exception: SystemExit: 0"),
    ("raise SystemExit(3)", "exception: SystemExit: 3"),
    ("return 'D1'", "invalid response: returned a value of type str"),
    ("return [3]", "invalid response: item 0 is of type int"),
    ("return [(3, 1.0)]", "invalid response: item 0 has the id 3 (int)"),
    ("return ['']", 'invalid response: item 0 has an empty id ""; document ids are non-empty strings'),
    ("return [('', 1.0)]", 'invalid response: item 0 has an empty id ""'),
    (
        "return [('D1', float('nan'))]",
        "invalid response: item 0 ('D1') has the score nan; expected a finite number",
    ),
    ("return [('D1', float('inf'))]", "invalid response: item 0 ('D1') has the score inf"),
    ("return [('D1', -float('inf'))]", "invalid response: item 0 ('D1') has the score -inf"),
    ("return [('D1', 10**400)]", "invalid response: item 0 ('D1') has the score 1000000"),
    ("return [('D1', True)]", "invalid response: item 0 ('D1') has the score True"),
    ("return [('D1', None)]", "invalid response: item 0 ('D1') has the score None"),
    ("return [('D1', 1.0), 'D2']", "invalid response: mixes bare ids and (id, score) pairs"),
    ("return ['D1']", "invalid response: returned bare ids, but (id, score) pairs for earlier questions"),
]


@pytest.mark.parametrize(("failure", "message"), RETRIEVER_FAILURES, ids=[f for f, _ in RETRIEVER_FAILURES])
def test_a_retriever_function_failure_is_that_entrys_system_error(
    project: Write, failure: str, message: str
) -> None:
    project(failure)
    # q1 is asked last, so "earlier questions" have fixed the scored form; k=2 everywhere.
    Path("golden.jsonl").write_text("".join(reversed(Path("golden.jsonl").read_text().splitlines(True))))
    rc, s = run(*RETRIEVER)
    assert rc == 0 and s is not None and s["complete"] is True
    assert s["metrics"]["counts"]["system_errors"] == 1
    rows = {e["id"]: e for e in s["entries"]}
    assert rows["q1"]["system_error"].startswith(message), rows["q1"]["system_error"]
    assert all(v is None for v in rows["q1"]["scores"].values()) and rows["q1"]["stage"] == "system_error"
    assert rows["q1"]["answer"] is None and rows["q1"]["refused"] is False and rows["q1"]["retrieved"] == []
    # The other entries are scored as usual: q2 and q4 found (hit_rate 1 over the two scored in-scope).
    assert rows["q2"]["system_error"] is None and rows["q2"]["scores"]["hit_rate"] == 1.0
    assert s["metrics"]["hit_rate"] == 1.0 and s["metrics"]["counts"]["n_hit_rate"] == 2


def test_retriever_errors_count_towards_max_errors(project: Write) -> None:
    project("raise RuntimeError('index offline')")
    rc, s = run(*RETRIEVER, "--max-errors", "0")
    assert rc == 4 and s is not None and s["complete"] is False
    assert s["incomplete"] == {"reason": "stopped after 1 system errors (more than --max-errors)",
                               "entries_scored": 1, "entries_in_split": 4}  # fmt: skip
    assert [e["id"] for e in s["entries"]] == ["q1"]  # stopped at once: q2..q4 never asked
    import userlim

    assert len(userlim.THREADS) == 1


@pytest.mark.parametrize("system", ["retriever", "agent"])
@pytest.mark.parametrize("failure", ["sys.exit(0)", "raise SystemExit(3)", "raise ValueError('boom')"])
def test_user_code_never_chooses_the_exit_code(project: Write, system: str, failure: str) -> None:
    project(failure)
    rc, s = run(*(RETRIEVER if system == "retriever" else AGENT))
    assert rc == 0 and s is not None
    q1 = next(e for e in s["entries"] if e["id"] == "q1")
    code = failure.split("(")[1].rstrip(")").strip("'")
    assert (
        q1["system_error"]
        == f"exception: {'SystemExit' if 'exit' in failure.lower() else 'ValueError'}: {code}"
    )


@pytest.mark.parametrize("system", ["retriever", "agent"])
def test_keyboard_interrupt_is_never_swallowed(
    project: Write, system: str, capsys: pytest.CaptureFixture[str]
) -> None:
    project("raise KeyboardInterrupt")
    rc, s = run(*(RETRIEVER if system == "retriever" else AGENT))
    assert rc == 130 and s is None
    assert "interrupted" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("top", "args", "target"),
    [
        ("import sys\nsys.exit(0)\n", RETRIEVER, "retriever.target=userlim:retrieve"),
        ("raise SystemExit(3)\n", RETRIEVER, "retriever.target=userlim:retrieve"),
        ("import sys\nsys.exit(0)\n", AGENT, "agent.target=userlim:assistant"),
        ("raise SystemExit(3)\n", AGENT, "agent.target=userlim:assistant"),
    ],
)
def test_an_exit_at_import_is_a_usage_error_naming_the_target(
    project: Write, capsys: pytest.CaptureFixture[str], top: str, args: tuple[str, ...],
    target: str,
) -> None:  # fmt: skip
    project("pass", top)
    rc, s = run(*args)
    assert rc == 2 and s is None
    err = capsys.readouterr().err
    assert target in err and "raised SystemExit" in err


@pytest.mark.parametrize("failure", ["sys.exit(0)", "raise SystemExit(3)"])
def test_an_exit_in_the_factory_is_a_usage_error_naming_the_target(
    project: Write, capsys: pytest.CaptureFixture[str], failure: str
) -> None:
    project(failure)
    rc, s = run("retriever=function", "retriever.target=userlim:factory", "+retriever.kwargs.x=1")
    assert rc == 2 and s is None
    err = capsys.readouterr().err
    assert "retriever.target=userlim:factory" in err and "raised SystemExit" in err


def test_an_empty_source_id_has_one_message_for_both_paths(project: Write) -> None:
    project("return ['']")
    _, retr = run(*RETRIEVER)
    project("return {'answer': 'x', 'refused': False, 'sources': ['']}")
    sys.modules.pop("userlim", None)
    _, agent = run(*AGENT)
    assert retr is not None and agent is not None
    shape = 'has an empty id ""; document ids are non-empty strings'
    errors = [next(e["system_error"] for e in s["entries"] if e["id"] == "q1") for s in (retr, agent)]
    assert errors == [f"invalid response: item 0 {shape}", f"invalid response: sources[0] {shape}"]


@pytest.mark.parametrize("score", ["float('nan')", "float('inf')", "10**400"])
def test_an_assistants_score_follows_the_retrievers_rule(project: Write, score: str) -> None:
    project(f"return {{'answer': 'x', 'refused': False, 'sources': [{{'id': 'D1', 'score': {score}}}]}}")
    _, s = run(*AGENT)
    assert s is not None
    q1 = next(e for e in s["entries"] if e["id"] == "q1")
    assert q1["system_error"].startswith("invalid response: sources[0] ('D1') has the score")


# ------------------------------------------------------------------------ deadlines of function systems


@pytest.mark.parametrize(
    "args",
    [
        ("retriever=function", "retriever.target=userlim:slow_retrieve", "retriever.timeout_s=0.2"),
        ("agent=function", "agent.target=userlim:slow_assistant", "agent.timeout_s=0.2"),
    ],
    ids=["retriever", "agent"],
)
def test_a_call_past_timeout_s_is_a_system_error_and_too_many_stop_the_run(
    project: Write, args: tuple[str, ...]
) -> None:
    rc, s = run(*args, "run.max_abandoned=1", "run.max_concurrency=1")
    userlim = sys.modules["userlim"]
    # The run came back while both calls were still blocked: it waited for two deadlines, not for the calls.
    finished_before_release = list(userlim.FINISHED)
    userlim.RELEASE.set()
    assert finished_before_release == []
    assert rc == 4 and s is not None and s["complete"] is False
    # The second abandoned call is one more than run.max_abandoned=1: q1 and q2 asked, q3 and q4 never.
    assert s["incomplete"] == {
        "reason": "stopped after 2 calls abandoned past their deadline (more than run.max_abandoned=1)",
        "entries_scored": 2,
        "entries_in_split": 4,
    }
    assert [e["system_error"] for e in s["entries"]] == [
        "timeout: no reply within 0.2s (the call was abandoned: a thread cannot be stopped)"
    ] * 2
    assert s["config"]["run"]["max_abandoned"] == 1


@pytest.mark.slow
def test_a_call_that_never_returns_does_not_hold_the_process_at_exit(project: Write, tmp_path: Path) -> None:
    project("pass")
    Path("hang.py").write_text(
        "import time\ndef retrieve(question, k):\n    while True:\n        time.sleep(1)\n"
    )
    src = Path(str(doceval.__file__)).resolve().parents[1]
    argv = [
        "eval",
        "--golden",
        "golden.jsonl",
        "--split",
        "all",
        "--no-track",
        "--quiet",
        "--output",
        "out.json",
        "retriever=function",
        "retriever.target=hang:retrieve",
        "retriever.timeout_s=0.2",
        "run.max_abandoned=0",
    ]
    code = f"import sys; from doceval.cli.main import main; sys.exit(main({argv!r}))"
    # A thread that held the process open would make this run into subprocess.run's timeout (an error).
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(src)},
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 4, proc.stderr[-2000:]
    assert "run.max_abandoned=0" in proc.stderr


def test_the_function_agents_reply_over_max_reply_bytes_is_a_system_error(project: Write) -> None:
    project("return {'answer': 'x' * 5000, 'refused': False, 'sources': []}")
    rc, s = run(*AGENT, "agent.max_reply_bytes=1000")
    assert rc == 0 and s is not None
    errors = {e["id"]: e["system_error"] for e in s["entries"]}
    assert errors["q1"] is not None and errors["q1"].startswith(
        "oversize: reply over agent.max_reply_bytes=1000 bytes"
    )
    assert [errors[i] for i in ("q2", "q3", "q4")] == [None, None, None]


def test_timeout_null_calls_in_the_callers_thread(project: Write) -> None:
    rc, _ = run(*RETRIEVER, "retriever.timeout_s=null")
    import userlim

    assert rc == 0 and set(userlim.THREADS) == {threading.main_thread().name}
    sys.modules.pop("userlim", None)
    rc, _ = run(*RETRIEVER)
    import userlim as again

    assert rc == 0 and len(again.THREADS) == 4 and set(again.THREADS) == {"doceval-retriever-1"}  # reused


def test_the_deadline_caller_reuses_its_thread_and_hands_back_errors() -> None:
    caller = DeadlineCaller("t")
    names = {caller.call(lambda: threading.current_thread().name, 5) for _ in range(50)}
    assert names == {"t-1"}
    with pytest.raises(SystemExit):
        caller.call(lambda: sys.exit(3), 5)
    release = threading.Event()
    with pytest.raises(CallTimedOut, match=r"no reply within 0.05s"):
        caller.call(release.wait, 0.05)
    assert caller.abandoned == 1
    assert caller.call(lambda: threading.current_thread().name, 5) == "t-2"  # t-1 is still busy
    release.set()


def test_a_builtin_retrievers_failure_still_propagates() -> None:
    class Broken:
        name = "toy"
        score_range = (0.0, 1.0)

        def retrieve(self, question: str, library: str, version: str, k: int) -> list[tuple[str, float]]:
            raise RuntimeError("doceval's own bug")

    entry = GoldenEntry("e1", "q", "lib", "1", False, ("d",), "", (), (), None, "lookup")
    with pytest.raises(RuntimeError, match="doceval's own bug"):
        retrieve_all([entry], Broken(), None, 3, progress=False)


# ------------------------------------------------------------------------------ one rule for both paths


@pytest.mark.parametrize("agent", ["function", "http"])
def test_an_assistant_with_a_retriever_function_is_refused(
    project: Write, capsys: pytest.CaptureFixture[str], agent: str
) -> None:
    with socket.socket() as sock:  # a port nobody answers: the refusal comes before any call
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/ask"
    extra = "agent.target=userlim:assistant" if agent == "function" else f"agent.url={url}"
    rc, s = run(f"agent={agent}", extra, "retriever=function", "retriever.target=userlim:retrieve")
    assert rc == 2 and s is None
    err = capsys.readouterr().err
    assert f"agent={agent} and retriever=function" in err and "drop retriever=function" in err


def test_a_floor_for_an_unknown_library_is_refused_with_a_retriever_function(
    project: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, s = run(*RETRIEVER, "--floor", "nosuchlib=0.3")
    assert rc == 2 and s is None
    err = capsys.readouterr().err
    assert "--floor: nosuchlib not in the golden set golden.jsonl; known libraries: docs" in err
    assert "userlim" not in sys.modules  # refused before the user's code was even imported
    rc, s = run(*RETRIEVER, "--floor", "docs=0.5")  # the golden set's library (the default pin): applies
    assert rc == 0 and s is not None and s["config"]["floors"]["per_library"] == {"docs": 0.5}
