"""Issue 27, part 3: journals resume only what was interrupted. A finished run is asked again (a service
redeployed at the same URL is never scored from its old replies), `--resume` replays it, `--fresh` starts
over, and the console and the summary say how many entries came from a journal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from fake_agent import JsonHandler, send_json, serving
from tiny_project import make_tiny_project

from doceval.cli.main import main

DOCS = {
    "pydantic@2.8.2": [("pydantic.main.BaseModel.model_dump", "def model_dump(self)\n\nA dict of the model.")]
}
RELEVANT = "pydantic@2.8.2:pydantic.main.BaseModel.model_dump"
GOLDEN = [{"id": f"q{i}", "question": f"question {i}", "library": "pydantic", "version": "2.8.2",
           "out_of_scope": False, "relevant_ids": [RELEVANT], "expected_apis": ["model_dump"],
           "forbidden_apis": [], "split": "test", "kind": "lookup", "reference_answer": "model_dump"}
          for i in range(4)]  # fmt: skip


class Service:
    """An assistant on 127.0.0.1 that can be 'redeployed': ``release`` decides what it answers."""

    def __init__(self) -> None:
        self.release = "v1"  # v1 cites the relevant page; v2 cites another
        self.requests: list[str] = []
        self.fail: set[str] = set()
        self.url = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(JsonHandler):
            def reply(self, body: dict[str, Any]) -> None:
                service.requests.append(body["question"])
                source = RELEVANT if service.release == "v1" else "pydantic@2.8.2:elsewhere"
                status = 500 if body["question"] in service.fail else 200
                send_json(self, status, {"answer": "model_dump", "sources": [source], "refused": False})

        return Handler


@pytest.fixture
def service() -> Iterator[Service]:
    srv = Service()
    with serving(srv.handler()) as server:
        srv.url = f"http://127.0.0.1:{server.server_address[1]}/ask"
        yield srv


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_tiny_project(tmp_path, DOCS, "".join(json.dumps(e) + "\n" for e in GOLDEN))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(service: Service, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, dict[str, Any], str]:
    argv = ["eval", "--quiet", "--no-track", "--output", "out.json", *flags, "agent=http",
            f"agent.url={service.url}", "agent.max_retries=0"]  # fmt: skip
    code = main(argv)
    captured = capsys.readouterr()
    out = captured.out + captured.err
    summary = json.loads(Path("out.json").read_text()) if Path("out.json").is_file() else {}
    return code, summary, out


def asked(service: Service) -> int:
    return sum(q != "doceval connectivity check: please ignore" for q in service.requests)


def test_a_redeployed_service_is_asked_again_not_scored_from_its_old_replies(
    project: Path, service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    code, first, _ = run(service, capsys)
    assert code == 0 and first["metrics"]["hit_rate"] == 1.0 and asked(service) == 4
    service.release = "v2"  # redeployed at the same URL: it now cites the wrong page
    code, second, out = run(service, capsys)
    assert code == 0 and asked(service) == 8
    assert second["metrics"]["hit_rate"] == 0.0  # today's numbers, not the journal's
    usage = second["config"]["usage"]
    assert usage["resumed"] == 0 and usage["journal"]["mode"] == "rerun"
    assert "journal: the earlier run of this configuration had finished; asked the system again" in out
    run_dir = Path(usage["journal"]["dir"])
    assert (run_dir / "previous" / "journal.jsonl").is_file() and (run_dir / "finished.json").is_file()


def test_resume_replays_a_finished_run_and_fresh_starts_over(
    project: Path, service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(service, capsys)[0] == 0
    service.release = "v2"
    code, replayed, out = run(service, capsys, "--resume")
    assert code == 0 and asked(service) == 4  # nothing asked: every entry from the journal
    assert replayed["metrics"]["hit_rate"] == 1.0 and replayed["config"]["usage"]["resumed"] == 4
    assert replayed["config"]["usage"]["journal"]["mode"] == "resume-finished"
    assert "journal: 4 entries and 0 verdicts replayed from" in out and "(a finished run, --resume)" in out
    code, fresh, out = run(service, capsys, "--fresh")
    assert code == 0 and asked(service) == 8 and fresh["metrics"]["hit_rate"] == 0.0
    assert fresh["config"]["usage"]["journal"]["mode"] == "fresh" and "journal: --fresh" in out
    assert (
        main(
            ["eval", "--resume", "--fresh", "--no-track", "--quiet", "agent=http", f"agent.url={service.url}"]
        )
        == 2
    )
    assert "--resume and --fresh contradict each other" in capsys.readouterr().err


def test_an_interrupted_run_resumes_without_asking_again(
    project: Path, service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    service.fail = {"question 1", "question 2"}
    code, stopped, _ = run(service, capsys, "--max-errors", "0")
    assert code == 4 and stopped["complete"] is False
    done_before = asked(service)
    service.fail = set()
    code, resumed, out = run(service, capsys)
    assert code == 0 and resumed["complete"] is True
    ok_first = sum(1 for e in stopped["entries"] if e["system_error"] is None)
    assert resumed["config"]["usage"]["resumed"] == ok_first and ok_first >= 1
    assert asked(service) == done_before + 4 - ok_first  # only what the stop left, nothing answered twice
    assert resumed["config"]["usage"]["journal"]["mode"] == "resume" and "(an interrupted run)" in out
