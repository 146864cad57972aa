"""Losing a host mid-run, across hosts that share no disk (tests/ray_hosts.py).

When the surviving host can take the lost actors, an eval (R4) and the index (R5) complete and equal engine=local,
every entry counted once. When no node can (the head has no CPU for actors), the run ends with exit 4, its summary
marked incomplete (the index: no manifest, the cache kept) and the command to resume, never exit 1 or a
traceback; the rerun, once a node is back, completes without redoing finished entries, a retriever function's
included (R6). When the head dies, no actor of the command stays alive on the worker (R11).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ray_hosts import Hosts, Installs, hosts_cluster
from test_engine_hosts import N_ENTRIES, SYSTEMS, comparable, eval_args, golden_rows
from test_engine_index import corpus_docs, golden_text
from tiny_project import make_tiny_project

pytestmark = pytest.mark.slow

DELAY_S = "0.4"  # each call of the user's system: slow enough to lose a node with calls in flight


def _cluster(installs: Installs, logs: Path, head_cpus: int) -> Iterator[Hosts]:
    # The calls log is where every host sees it (/var/tmp, beside the installs): node-b has a /tmp of its own.
    env = {"HOSTSUSER_DELAY_S": DELAY_S, "HOSTSUSER_CALLS": str(installs.base / f"calls-{logs.name}.log")}
    with hosts_cluster(installs, logs, head_cpus, env) as found:
        yield found


def calls(hosts: Hosts) -> list[str]:
    """The user's system's calls so far, on every host (the log lives where every host sees it)."""
    path = Path(hosts.env["HOSTSUSER_CALLS"])
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "golden.jsonl").write_text(golden_rows(), encoding="utf-8")
    return tmp_path


def journal_lines(project: Path, name: str) -> int:
    found = list((project / "data" / "runs" / "eval").glob(f"*/{name}"))
    return len(found[0].read_text().splitlines()) if found else 0


def wait_for(
    predicate: Callable[[], bool], proc: subprocess.Popen[str], what: str, timeout: float = 180
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, f"no {what} in {timeout:.0f} s"
        time.sleep(0.1)


def cached_vectors(project: Path) -> int:
    path = project / "data" / "cache" / "embeddings.sqlite"
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
            return int(db.execute("SELECT count(*) FROM emb").fetchone()[0])
    except sqlite3.Error:  # not created yet, or being written this instant
        return 0


def index_project(root: Path) -> Path:
    """The corpus of tests/test_engine_index.py, three times as long (~650 chunks): a node is lost well before
    the last batch."""
    root.mkdir(parents=True, exist_ok=True)
    docs = corpus_docs(per_pin=240)
    make_tiny_project(root, docs, golden_text(docs))
    return root


def chunks(project: Path) -> int:
    return int(json.loads((project / "data" / "docs" / "manifest.json").read_text())["chunks"])


def assert_clean_exit_4(done: tuple[int, str, str], resume: str) -> None:
    rc, out, err = done
    assert rc == 4, err[-3000:]
    assert "Traceback" not in err + out and "\x1b[" not in err + out and "(raylet)" not in out
    assert resume in err + out


class TestTheSurvivingHostTakesOver:
    """The head has a CPU: what the lost host was doing is redone there, and the run completes."""

    @pytest.fixture(scope="class")
    @classmethod
    def hosts(cls, host_installs: Installs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
        yield from _cluster(host_installs, tmp_path_factory.mktemp("survive"), head_cpus=1)

    def test_r4_a_worker_node_lost_mid_eval_completes_as_local(self, hosts: Hosts, project: Path) -> None:
        args = (*SYSTEMS["function_assistant"], "run.max_concurrency=2")
        local = hosts.doceval(eval_args("local.json", *args), project, HOSTSUSER_DELAY_S="0")
        assert local.returncode == 0, local.stderr[-3000:]
        # One CPU an actor: the lost actor cannot come back on the head, whose CPU its other actor holds.
        ray_args = (
            "engine=ray",
            f"engine.address={hosts.address}",
            "engine.actors=2",
            "engine.cpus_per_actor=1",
        )
        proc = hosts.popen(eval_args("ray.json", *args, *ray_args), project)
        # An actor answers on node-b when it dies: its calls in flight must go to the head's.
        wait_for(lambda: journal_lines(project, "journal.jsonl") >= 4 and bool(hosts.ray_pids("node", "SystemActor")),
                 proc, "four journaled replies and an actor on node-b")  # fmt: skip
        hosts.kill_node()
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        ray = json.loads((project / "ray.json").read_text())
        assert comparable(ray) == comparable(json.loads((project / "local.json").read_text()))
        journal = (project / "data" / "runs" / "eval").glob("*/journal.jsonl")
        ids = [json.loads(line)["id"] for line in next(journal).read_text().splitlines()]
        assert sorted(ids) == sorted(e["id"] for e in ray["entries"]) and len(ids) == N_ENTRIES
        hosts.restart_node()

    def test_r5_a_worker_node_lost_mid_index_completes_as_local(self, hosts: Hosts, tmp_path: Path) -> None:
        local, ray = index_project(tmp_path / "local"), index_project(tmp_path / "ray")
        for project in (local, ray):
            done = hosts.doceval(["params", "floors=zero"], project)
            assert done.returncode == 0, done.stderr[-2000:]
        done = hosts.doceval(["index", "--quiet"], local)
        assert done.returncode == 0, done.stderr[-2000:]
        choice = f"ray address={hosts.address} batch_size=4 actors=2"
        proc = hosts.popen(["index", "--quiet"], ray, DOCEVAL_ENGINE=choice)
        total = chunks(ray)
        wait_for(lambda: cached_vectors(ray) >= 8, proc, "a cached batch")
        hosts.kill_node()
        out, err = proc.communicate(timeout=600)
        assert cached_vectors(ray) < total or proc.returncode == 0
        assert proc.returncode == 0, err[-3000:]
        assert "Traceback" not in err and "(raylet)" not in out
        manifests = [json.loads((p / "data" / "index" / "manifest.json").read_text()) for p in (local, ray)]
        assert manifests[0]["content_hash"] == manifests[1]["content_hash"]
        hosts.restart_node()

    def test_r11_no_actor_outlives_a_command_whose_head_died(self, hosts: Hosts, project: Path) -> None:
        """R11 (runs last here: the head stays dead): the system actors on the worker end with the command."""
        (project / "golden.jsonl").write_text(
            golden_rows(160), encoding="utf-8"
        )  # ~16 s of calls: time to kill
        args = eval_args("ray.json", *SYSTEMS["function_assistant"], "engine=ray", f"engine.address={hosts.address}",
                         "engine.actors=2", "run.max_concurrency=2")  # fmt: skip
        proc = hosts.popen(args, project)
        wait_for(lambda: bool(hosts.ray_pids("node", "SystemActor")) and journal_lines(project, "journal.jsonl") >= 2,
                 proc, "an actor on node-b")  # fmt: skip
        hosts.kill_head()
        _, err = proc.communicate(timeout=300)
        assert "Traceback" not in err
        deadline = time.monotonic() + 20
        while hosts.ray_pids("node", "SystemActor") and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not hosts.ray_pids("node", "SystemActor"), (
            "a system actor of the ended command is still running"
        )


class TestNoNodeCanHost:
    """The head has no CPU: with the worker host gone, no node can take an actor."""

    @pytest.fixture(scope="class")
    @classmethod
    def hosts(cls, host_installs: Installs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
        yield from _cluster(host_installs, tmp_path_factory.mktemp("headless"), head_cpus=0)

    def test_r4_r6_exit_4_then_the_rerun_asks_only_the_missing_entries(
        self, hosts: Hosts, project: Path
    ) -> None:
        """R4: exit 4, summary incomplete, the resume command. R6: a retriever function's run is journaled, so
        the rerun calls it only for the entries not finished."""
        args = eval_args("ray.json", *SYSTEMS["retriever_function"], "engine=ray",
                         f"engine.address={hosts.address}", "engine.actors=1")  # fmt: skip
        proc = hosts.popen(args, project)
        wait_for(lambda: len(calls(hosts)) >= 5, proc, "five retriever calls")
        hosts.kill_node()
        out, err = proc.communicate(timeout=300)
        assert_clean_exit_4((proc.returncode, out, err), "rerun")
        summary = json.loads((project / "ray.json").read_text())
        assert summary["complete"] is False and "node" in summary["incomplete"]["reason"]
        before = len(calls(hosts))
        assert 5 <= before < N_ENTRIES
        hosts.restart_node()
        done = hosts.doceval(args, project)
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads((project / "ray.json").read_text())
        assert summary["complete"] is True and len(summary["entries"]) == N_ENTRIES
        asked_again = len(calls(hosts)) - before
        assert asked_again <= N_ENTRIES - 5, f"the rerun called the retriever {asked_again} times"

    def test_r5_exit_4_keeps_the_cache_writes_no_manifest_and_the_rerun_completes(
        self, hosts: Hosts, tmp_path: Path
    ) -> None:
        project = index_project(tmp_path / "ray")
        assert hosts.doceval(["params", "floors=zero"], project).returncode == 0
        choice = f"ray address={hosts.address} batch_size=4 actors=1"
        proc = hosts.popen(["index", "--quiet"], project, DOCEVAL_ENGINE=choice)
        wait_for(lambda: cached_vectors(project) >= 8, proc, "a cached batch")
        hosts.kill_node()
        out, err = proc.communicate(timeout=600)
        assert_clean_exit_4((proc.returncode, out, err), "doceval index")
        kept = cached_vectors(project)
        assert 8 <= kept < chunks(project)
        assert not (project / "data" / "index" / "manifest.json").exists()
        hosts.restart_node()
        done = hosts.doceval(["index", "--quiet"], project, DOCEVAL_ENGINE=choice)
        assert done.returncode == 0, done.stderr[-3000:]
        manifest: dict[str, Any] = json.loads((project / "data" / "index" / "manifest.json").read_text())
        record: dict[str, Any] = json.loads((project / "data" / "index" / "build.json").read_text())
        assert record["embedding_cache"]["hits"] >= kept and manifest["chunks"] == chunks(project)
