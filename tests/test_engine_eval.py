"""engine=ray's evaluation fan-out (doceval.engine.fanout) against engine=local: a user's retriever function,
function assistant, HTTP assistant (real HTTP on 127.0.0.1) and doceval's own agent (single questions and
conversations, on a tiny bm25 corpus) give the same summary either way; a Ray worker killed mid-run loses and
doubles nothing; a killed driver resumes from its journal; the user's module found only through the driver's
import path is refused on a cluster with nodes on other hosts. Every run is `doceval eval` in a child process
(a Ray session is per process; this one never holds one) on the real two-node cluster."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_agent import FakeAgent, running_agent
from ray_cluster import RayCluster
from test_byo_cli import SCORING_MODULE
from test_conversation_pipeline import DOCS as CONVERSATION_DOCS
from test_conversation_pipeline import conversation_lines
from test_eval_cli import DOCS, GOLDEN
from tiny_project import make_tiny_project

from doceval.common.journal import Journal
from doceval.config.compose import compose
from doceval.harness.agents import _ExternalRun, load_journal
from doceval.harness.remote import check_user_code
from doceval.seam import Reply
from doceval.system.external.agents import FunctionAgent, function_agent, make_agent
from doceval.system.external.http import HttpAgent
from doceval.tracking.configured import effective_params

SRC = Path(__file__).resolve().parents[1] / "src"
FUNCTION_AGENT = compose(["agent=function"]).agent  # the deadline and reply cap conf/ gives a callable
REPLY_CAP = FUNCTION_AGENT.max_reply_bytes  # type: ignore[union-attr]

MODULE = (
    SCORING_MODULE
    + """
def assistant(question, library, version, session_id):
    hits = _scored(question, 3)
    if "pizza" in question:
        raise RuntimeError("model offline")
    return {"answer": " ".join(DOCS[d] for d, _ in hits) or None, "refused": not hits,
            "sources": [{"id": d, "score": s} for d, s in hits]}
"""
)
QUESTIONS = [
    ("how much are late fees per day", ["D1"]),
    ("are returns accepted after thirty days", ["D2", "D4"]),
    ("do you sell pizza", []),
    ("is shipping free", ["D3"]),
    ("are gift cards accepted for returns", ["D4"]),
    ("what is the weather", []),
]
N_ENTRIES = 24  # each question four times (distinct ids): enough calls in flight to spread over the actors


def golden_entries(n: int = N_ENTRIES) -> list[dict[str, Any]]:
    """``n`` golden entries cycling through QUESTIONS (a later round's question ends in ``?`` marks)."""
    rows = []
    for i in range(n):
        question, relevant = QUESTIONS[i % len(QUESTIONS)]
        rows.append({"id": f"q{i:02d}", "question": f"{question} {'?' * (i // len(QUESTIONS))}".strip(),
                     "out_of_scope": not relevant, "relevant_ids": relevant,
                     "reference_answer": "see the handbook" if relevant else "", "expected_apis": [],
                     "forbidden_apis": [], "split": None, "kind": "lookup" if relevant else "off_topic"})  # fmt: skip
    return rows


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "userret.py").write_text(MODULE, encoding="utf-8")
    (tmp_path / "golden.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in golden_entries()), encoding="utf-8"
    )
    return tmp_path


def _env() -> dict[str, str]:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SRC), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    )
    return env


def _command(out: str, *args: str) -> list[str]:
    code = "import sys; from doceval.cli import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", code, "eval", "--golden", "golden.jsonl", "--split", "all", "--no-track",
            "--quiet", "--output", out, *args]  # fmt: skip


def run_eval(project: Path, out: str, *args: str) -> dict[str, Any]:
    return run_eval_logged(project, out, *args)[0]


def run_eval_logged(project: Path, out: str, *args: str) -> tuple[dict[str, Any], str]:
    """The summary and the run's stderr (its notes and the engine's line)."""
    done = subprocess.run(_command(out, *args), cwd=project, env=_env(), capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads((project / out).read_text())
    return summary, done.stderr


def on_ray(cluster: RayCluster, *args: str) -> tuple[str, ...]:
    return ("engine=ray", f"engine.address={cluster.address}", "engine.actors=2", *args)


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary less what may differ between two runs of the same system: timings, the run's session tag,
    the engine block, provenance and this invocation's journal bookkeeping."""
    config = {k: v for k, v in summary["config"].items() if k not in ("engine", "provenance", "usage")}
    entries = []
    for entry in summary["entries"]:
        row = {k: v for k, v in entry.items() if k != "timing"}
        if row.get("session_id"):  # doceval-<run tag>-<entry id>: the tag is new in every invocation
            row["session_id"] = row["session_id"].rsplit("-", 1)[-1]
        entries.append(row)
    return {
        "metrics": summary["metrics"],
        "config": config,
        "entries": entries,
        "complete": summary["complete"],
    }


def journal_of(project: Path, summary: dict[str, Any]) -> list[dict[str, Any]]:
    path = project / "data" / "runs" / "eval" / summary["config"]["run_key"] / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def agent() -> Iterator[FakeAgent]:
    with running_agent() as srv:
        yield srv


SYSTEMS = {
    "function_retriever": ("retriever=function", "retriever.target=userret:scored", "k=2"),
    "function_assistant": ("agent=function", "agent.target=userret:assistant", "k=2"),
}


@pytest.mark.slow
@pytest.mark.parametrize("system", [*SYSTEMS, "http_assistant"])
def test_local_and_ray_give_the_same_summary(
    ray_cluster: RayCluster, project: Path, agent: FakeAgent, system: str
) -> None:
    args = SYSTEMS.get(system) or ("agent=http", f"agent.url={agent.url}", "k=2")
    local = run_eval(project, "local.json", *args, "engine=local", "run.max_concurrency=4")
    ray = run_eval(project, "ray.json", *on_ray(ray_cluster, *args, "run.max_concurrency=4"))
    assert comparable(ray) == comparable(local)
    assert len(ray["entries"]) == N_ENTRIES and ray["complete"] is True
    assert local["config"]["engine"] == {"name": "local"}
    assert ray["config"]["engine"]["name"] == "ray" and ray["config"]["engine"]["actors"] == 2
    if system == "function_assistant":  # a system error is recorded as locally: the same text, never scored
        errored = [e for e in ray["entries"] if e["system_error"]]
        assert len(errored) == 4 and all("model offline" in e["system_error"] for e in errored)
    if system == "http_assistant":
        asked = [r["question"] for r in agent.requests]
        assert len(asked) == 2 * (N_ENTRIES + 1)  # each run: a reachability probe, then every entry once


def _pids_running_the_system(cluster: RayCluster) -> list[int]:
    """The cluster's system actors: Ray retitles an actor's process ``ray::SystemActor`` (its command line no
    longer names the cluster), so it is known by its parent, a raylet of this cluster."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            if not (entry / "cmdline").read_bytes().startswith(b"ray::SystemActor"):
                continue
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if str(cluster.temp_dir).encode() in Path(f"/proc/{ppid}/cmdline").read_bytes():
                pids.append(int(entry.name))
    return pids


@pytest.mark.slow
def test_a_killed_ray_worker_loses_and_doubles_no_entry(
    ray_cluster: RayCluster, project: Path, agent: FakeAgent
) -> None:
    args = ("agent=http", f"agent.url={agent.url}", "k=2", "run.max_concurrency=2")
    local = run_eval(project, "local.json", *args)
    agent.requests.clear()
    agent.delay_s = 0.4  # slow enough that the kill lands mid-run, with calls in flight
    proc = subprocess.Popen(_command("ray.json", *on_ray(ray_cluster, *args)), cwd=project, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while len(agent.requests) < 6 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    victims = _pids_running_the_system(ray_cluster)
    assert victims, "no actor process of the run was found"
    os.kill(victims[0], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    ray = json.loads((project / "ray.json").read_text())
    assert comparable(ray) == comparable(local)
    lines = journal_of(project, ray)
    assert sorted(r["id"] for r in lines) == sorted(e["id"] for e in ray["entries"])  # one reply per entry
    # The killed actor's calls in flight were retried on its restarted process: asked again, counted once.
    assert len(agent.requests) > N_ENTRIES + 1


PROBE = "doceval connectivity check: please ignore"  # the HTTP agent's reachability probe, asked once per run


def _wait_until_quiet(agent: FakeAgent, quiet_s: float = 2.0, within_s: float = 60.0) -> None:
    """Until the agent has received no request for ``quiet_s`` (Ray stops a dead driver's actors, not at once)."""
    deadline = time.monotonic() + within_s
    seen, since = len(agent.requests), time.monotonic()
    while time.monotonic() - since < quiet_s:
        assert time.monotonic() < deadline, f"the agent was still being asked {within_s} s after the kill"
        time.sleep(0.1)
        if len(agent.requests) != seen:
            seen, since = len(agent.requests), time.monotonic()


@pytest.mark.slow
def test_a_killed_driver_resumes_and_asks_only_the_missing_entries(
    ray_cluster: RayCluster, project: Path, agent: FakeAgent
) -> None:
    args = on_ray(ray_cluster, "agent=http", f"agent.url={agent.url}", "k=2", "run.max_concurrency=2")
    agent.delay_s = 0.3
    proc = subprocess.Popen(_command("ray.json", *args), cwd=project, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    journals = project / "data" / "runs" / "eval"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        found = list(journals.glob("*/journal.jsonl"))
        if found and len(found[0].read_text().splitlines()) >= 6:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    journal = next(journals.glob("*/journal.jsonl"))
    before = {json.loads(line)["id"] for line in journal.read_text().splitlines() if line.strip()}
    assert 6 <= len(before) < N_ENTRIES
    _wait_until_quiet(agent)  # the killed driver's actors may still be answering a call in flight
    agent.requests.clear()
    agent.delay_s = 0.0
    resumed = run_eval(project, "ray.json", *args)
    asked = [r["question"] for r in agent.requests if r["question"] != PROBE]
    assert len(asked) == N_ENTRIES - len(before)  # only the missing entries
    assert resumed["config"]["usage"]["resumed"] == len(before)
    lines = journal_of(project, resumed)
    assert sorted(r["id"] for r in lines) == sorted(e["id"] for e in resumed["entries"])
    local = run_eval(project, "local.json", "agent=http", f"agent.url={agent.url}", "k=2", "--fresh")
    assert comparable(resumed)["metrics"] == comparable(local)["metrics"]


@pytest.mark.slow
def test_max_errors_stops_a_ray_run_and_the_calls_in_flight_are_journaled(
    ray_cluster: RayCluster, project: Path
) -> None:
    args = on_ray(ray_cluster, "agent=function", "agent.target=userret:assistant", "run.max_concurrency=1",
                  "--max-errors", "0")  # fmt: skip
    done = subprocess.run(_command("ray.json", *args), cwd=project, env=_env(), capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 4, done.stderr[-3000:]
    summary = json.loads((project / "ray.json").read_text())
    assert summary["complete"] is False and "system errors" in summary["incomplete"]["reason"]
    assert len(summary["entries"]) < N_ENTRIES  # no new call started after the stop
    lines = [r["id"] for r in journal_of(project, summary)]
    assert sorted(lines) == sorted(
        e["id"] for e in summary["entries"]
    )  # every reply counted is journaled, once


def test_the_driver_keeps_the_first_reply_per_entry(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    agent = function_agent(
        lambda **kw: {"answer": "a", "sources": [], "refused": False}, FUNCTION_AGENT, "fn"
    )
    run = _ExternalRun(agent, Journal(path), {}, lambda probe: "s")
    first, retried = Reply("q1", "first", session_id="s"), Reply("q1", "again", session_id="s")
    assert run.record(first) is True and run.record(retried) is False
    run.journal.close()
    assert [r.answer for r in load_journal(path).values()] == ["first"]
    assert path.read_text().count("\n") == 1 and run.results["q1"].answer == "first"


def test_the_adapters_travel_to_actors_with_their_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCEVAL_TEST_TOKEN", "tok-123456789")
    token = "+agent.headers_env.Authorization=DOCEVAL_TEST_TOKEN"
    block = compose(["agent=http", "agent.url=http://127.0.0.1:9/ask", "agent.timeout_s=3", token]).agent
    http = make_agent(block)
    assert isinstance(http, HttpAgent)
    monkeypatch.delenv("DOCEVAL_TEST_TOKEN")  # a worker elsewhere has not got the driver's environment
    copy = pickle.loads(pickle.dumps(http))
    assert copy._headers == {"Authorization": "tok-123456789"} and copy.timeout_s == 3.0
    assert copy._lock is not http._lock and copy.describe() == http.describe()
    fn = FunctionAgent(json.loads, "json:loads", timeout_s=5, max_reply_bytes=REPLY_CAP)
    twin = pickle.loads(pickle.dumps(fn))
    assert twin._fn is json.loads and twin.timeout_s == 5.0 and twin.abandoned == 0


def test_the_engine_is_recorded_in_the_mlflow_params() -> None:
    cfg = compose(["engine=ray", "engine.actors=3"])
    params = effective_params(cfg, {"engine": {"name": "ray", "actors": 3}})
    assert params["engine.name"] == "ray" and params["engine.actors"] == 3
    assert effective_params(compose([]), {})["engine.name"] == "local"


# ------------------------------------------------------------------------------ doceval's agent on Ray actors

DOCCHAT = ("retriever=bm25", "floors=zero", "k=2", "bootstrap=200")


@pytest.fixture
def docchat_project(tmp_path: Path) -> Path:
    """The eval CLI's tiny corpus (and pydantic 1.10.17 for the conversations' version switch), its single
    questions and two conversations in one golden set: what doceval's agent answers from the bm25 candidates."""
    singles = [{**e, "reference_answer": "ref " + " ".join(e["expected_apis"])} for e in GOLDEN]
    text = "".join(json.dumps(row) + "\n" for row in singles) + conversation_lines()
    docs = {**DOCS, "pydantic@1.10.17": CONVERSATION_DOCS["pydantic@1.10.17"]}
    make_tiny_project(tmp_path, docs, text)
    (tmp_path / "golden.jsonl").write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["isolated", "memory_reset_judged", "warm"])
def test_doceval_agent_gives_the_same_summary_on_ray_actors(
    ray_cluster: RayCluster, docchat_project: Path, variant: str
) -> None:
    extra = {"isolated": (), "memory_reset_judged": ("judge=reference", "--memory-reset", "needs_memory"),
             "warm": ("--warm-memory",)}[variant]  # fmt: skip
    local = run_eval(docchat_project, "local.json", *DOCCHAT, *extra)
    ray, log = run_eval_logged(docchat_project, "ray.json", *on_ray(ray_cluster, *DOCCHAT, *extra))
    assert comparable(ray) == comparable(local)
    assert len(ray["entries"]) == len(GOLDEN) + 5 and ray["complete"] is True
    assert ray["config"]["engine"]["name"] == "ray"
    if variant == "warm":  # one memory in probe order: answered on the driver, no Ray session opened
        assert "doceval's agent answers here, on the driver: warm memory" in log
        assert "engine: ray at" not in log
        return
    # bm25 and the floors ran here; the only Ray session is the agent's fan-out to the actors.
    assert f"engine: ray at {ray_cluster.address}" in log
    rows = {e["id"]: e for e in ray["entries"]}
    # A conversation's memory crossed its turns on the actor, and no other conversation's or entry's did.
    assert rows["conv-b#3"]["memory_used"] and not any(
        rows[i]["memory_used"] for i in ("a1", "a2", "conv-a#1")
    )
    # "and in 1.10?" is followed to 1.10.17 with its conversation; reset, it is asked alone at 2.8.2, where
    # nothing clears the floor: the shipped search results are the reset run's.
    assert rows["conv-a#2"]["refused"] is (variant == "memory_reset_judged")
    if variant == "memory_reset_judged":  # the driver alone journaled, one reply per entry
        lines = journal_of(docchat_project, ray)
        assert sorted(r["id"] for r in lines) == sorted(rows)  # one reply per entry, none twice
        assert ray["metrics"]["answer_accuracy"] is not None


# ------------------------------------------------------------- the user's code only the driver's machine has


def _session_on(node_addresses: list[str], cwd: Path) -> Any:
    """A RaySession whose live nodes are these addresses: engine.cluster's own rule, without a cluster."""
    from doceval.engine.cluster import RaySession

    class Fixed(RaySession):
        @property
        def nodes(self) -> list[dict[str, Any]]:
            return [{"Alive": True, "NodeManagerAddress": a} for a in node_addresses]

    return Fixed(address="10.9.0.1:6379", started_here=False, driver_cwd=str(cwd))


def test_installed_code_is_accepted_without_asking_the_nodes(tmp_path: Path) -> None:
    """Code of this interpreter's installation (site-packages, the standard library) is on every node that has
    the same environment: no probe. A module of the driver's own folder is probed on every node (exit 2 naming
    the node that lacks it): tests/test_engine_hosts.py runs that across hosts."""
    import yaml

    remote = _session_on(["127.0.0.1", "10.9.0.2"], tmp_path)
    http = make_agent(compose(["agent=http", "agent.url=http://127.0.0.1:9/ask"]).agent)
    assert http is not None
    check_user_code(remote, http, "agent.url")  # no module to import: fine
    for fn, target in ((json.loads, "json:loads"), (yaml.safe_load, "yaml:safe_load")):
        agent = FunctionAgent(fn, target, timeout_s=FUNCTION_AGENT.timeout_s, max_reply_bytes=REPLY_CAP)
        check_user_code(remote, agent, "agent.target")


ACCEPTED = """
import sys
from pathlib import Path
from doceval.config.compose import compose
from doceval.engine import engine_session
from doceval.harness.remote import check_user_code
from doceval.system.external.agents import make_agent

cfg = compose(["agent=function", "agent.target=userret:assistant", "engine=ray", "engine.address=" + sys.argv[1]],
              conf_dir=sys.argv[2])
agent = make_agent(cfg.agent)
with engine_session(cfg.engine) as session:
    check_user_code(session, agent, "agent.target")
    print("all_local", session.all_local(), "nodes", len(session.nodes), agent.describe()["source_file"])
"""


@pytest.mark.slow
def test_the_all_local_cluster_accepts_a_module_of_the_driver_cwd(
    ray_cluster: RayCluster, project: Path
) -> None:
    conf = Path(__file__).resolve().parents[1] / "conf"
    done = subprocess.run([sys.executable, "-c", ACCEPTED, ray_cluster.address, str(conf)], cwd=project,
                          env=_env(), capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["all_local", "True", "nodes", "2", "userret.py"]
