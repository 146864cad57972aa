"""engine=ray's cluster session (doceval.engine.cluster) against a real two-process cluster on 127.0.0.1, a Ray
started for the run, and an address where nothing listens."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ray_cluster import RayCluster, free_port

from doceval.config import schema
from doceval.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]


def ray_engine(**changes: object) -> schema.EngineRay:
    base = schema.EngineRay(name="ray", address=None, actors=2, cpus_per_actor=1, gpus_per_actor=0,
                            batch_size=64, max_restarts=3, max_task_retries=3, num_cpus=1)  # fmt: skip
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_an_address_where_nothing_listens_is_exit_2_naming_it() -> None:
    # lazy: ray (~1 s) loads only for the tests that use it
    from doceval.engine.cluster import ray_session

    address = f"127.0.0.1:{free_port()}"
    with (
        pytest.raises(UsageError, match=f"engine.address={address}: no Ray cluster answers there"),
        ray_session(ray_engine(address=address)),
    ):
        pass


def test_a_malformed_address_is_exit_2_with_the_forms_that_work() -> None:
    # lazy: ray (~1 s) loads only for the tests that use it
    from doceval.engine.cluster import ray_session

    with (
        pytest.raises(UsageError, match="expected auto, local, HOST:PORT or ray://HOST:PORT"),
        ray_session(ray_engine(address="my-cluster")),
    ):
        pass


def test_ray_address_from_the_environment_when_the_config_names_none(monkeypatch: pytest.MonkeyPatch) -> None:
    # lazy: ray (~1 s) loads only for the tests that use it
    from doceval.engine.cluster import resolve_address

    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    assert resolve_address(ray_engine()) == "10.1.2.3:6379"
    assert resolve_address(ray_engine(address="local")) is None
    assert resolve_address(ray_engine(address="127.0.0.1:7000")) == "127.0.0.1:7000"
    monkeypatch.delenv("RAY_ADDRESS")
    assert resolve_address(ray_engine()) is None


@pytest.mark.slow
def test_a_session_joins_the_two_node_cluster_and_leaves_it_running(ray_cluster: RayCluster) -> None:
    # In a child process: a Ray session is per process, and the test process must stay free of one.
    code = f"""
import dataclasses, ray
from doceval.config import schema
from doceval.engine.cluster import ray_session
engine = schema.EngineRay(name="ray", address={ray_cluster.address!r}, actors=2, cpus_per_actor=1,
    gpus_per_actor=0, batch_size=64, max_restarts=3, max_task_retries=3, num_cpus=None)
with ray_session(engine) as session:
    assert not session.started_here and session.all_local()
    @ray.remote(num_cpus=1)
    def where():
        import os
        return os.getpid()
    pids = set(ray.get([where.remote() for _ in range(8)]))
    print(len(session.nodes), len(pids) >= 1)
print(ray.is_initialized())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                         env=dict(os.environ, RAY_USAGE_STATS_ENABLED="0"), check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["2", "True", "False"]
    assert ray_cluster.alive_nodes() == 2  # leaving the session stops nothing of the cluster


@pytest.mark.slow
def test_no_address_starts_a_ray_for_the_run_and_stops_it(tmp_path: Path) -> None:
    code = """
import ray
from doceval.config import schema
from doceval.engine.cluster import ray_session
engine = schema.EngineRay(name="ray", address=None, actors=1, cpus_per_actor=1, gpus_per_actor=0,
    batch_size=64, max_restarts=0, max_task_retries=0, num_cpus=1)
with ray_session(engine) as session:
    assert session.started_here and session.all_local()
    print(ray.cluster_resources()["CPU"])
print(ray.is_initialized())
"""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                         env=dict(env, RAY_USAGE_STATS_ENABLED="0"), cwd=tmp_path, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1.0", "False"]
    assert "engine: ray started for this run: 1 node(s), 1 CPUs" in out.stderr
