"""`doceval sweep ... engine=ray` (doceval.app.sweep_ray, doceval.engine.sweeps): the same points, runs and
outputs as the local sweep (the driver logs every child run, to a sqlite store too), every point checked before a
task launches, and a point failing at run time. tests/test_engine_hosts.py runs sweeps across hosts.

Sweeps run as `doceval` child processes (a Ray session is per process: the test process stays free of one) on
the tiny project of tests/test_eval_cli.py, against the real two-node cluster of tests/ray_cluster.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ray_cluster import RayCluster, free_port
from test_eval_cli import DOCS, GOLDEN
from tiny_project import make_tiny_project

from doceval.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIXED = ["split=test", "floors=zero", "retriever=bm25"]
DOCEVAL = "import sys; from doceval.cli import main; sys.exit(main(sys.argv[1:]))"
USER_MODULE_NAME = "sweepray_userret"  # a name no other test imports
USER_MODULE = '''
import sys
import time

def make(min_score=1):
    """Fails for a "boom" value inside a Ray task only (ray is initialised there, and not yet in the driver
    when it checks the points), so the sweep's own check passes and the point fails at run time."""
    ray = sys.modules.get("ray")
    if str(min_score).startswith("boom") and ray is not None and ray.is_initialized():
        time.sleep(3)  # the good point usually finishes first, and is kept
        raise RuntimeError(f"index offline for min_score={min_score}")
    def retrieve(question, k):
        return []
    return retrieve
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny project with its candidate cache (bm25, no tracking): what every sweep reads."""
    root = tmp_path_factory.mktemp("sweepray") / "project"
    root.mkdir()
    rows = [{**e, "reference_answer": "ref " + " ".join(e["expected_apis"])} for e in GOLDEN]
    make_tiny_project(root, DOCS, "".join(json.dumps(row) + "\n" for row in rows))
    (root / f"{USER_MODULE_NAME}.py").write_text(USER_MODULE, encoding="utf-8")
    proc = doceval(["params", "retriever=bm25", "tracking.enabled=false"], root)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = doceval(["retrieve", "--quiet"], root)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return root


@pytest.fixture
def project(built: Path, tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(built, root, symlinks=True)
    return root


def doceval(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "DVC_")) and k != "RAY_ADDRESS"
    }
    env.update(MLFLOW_DISABLE_TELEMETRY="true", RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]))  # fmt: skip
    return subprocess.run([sys.executable, "-c", DOCEVAL, *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=600, check=False)  # fmt: skip


def children(uri: str, parent: str) -> dict[str, Any]:
    """The parent's child runs by run name: (params, metrics)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("doceval-test")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")
    return {r.info.run_name: (r.data.params, r.data.metrics) for r in runs}


def _timed_sweep(project: Path, extra: list[str]) -> tuple[subprocess.CompletedProcess[str], float, str]:
    started = time.perf_counter()
    proc = doceval(["sweep", "-m", "floors.global=0.0,0.5,1000", *FIXED, *extra, "--quiet"], project)
    wall = time.perf_counter() - started
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    parent = re.search(r"mlflow: parent run ([0-9a-f]{32})", proc.stdout)
    assert parent, proc.stdout
    return proc, wall, parent.group(1)


def _sweep_dirs(project: Path) -> list[Path]:
    return sorted((project / "eval" / "sweeps").iterdir())


@pytest.mark.slow
def test_a_ray_sweep_logs_the_same_runs_and_points_as_a_local_sweep(
    project: Path, ray_cluster: RayCluster
) -> None:
    uri = f"sqlite:///{project / 'mlruns' / 'mlflow.db'}"
    local, local_s, local_parent = _timed_sweep(project, [])
    time.sleep(1.1)  # sweep folders are named by the second they start
    ray, ray_s, ray_parent = _timed_sweep(project, ["engine=ray", f"engine.address={ray_cluster.address}"])
    print(f"\n3-point sweep wall time: local {local_s:.1f} s, ray {ray_s:.1f} s", file=sys.stderr)
    assert f"engine: ray at {ray_cluster.address}: 2 node(s), 2 CPUs" in ray.stderr
    assert "3 points in" in ray.stdout and ray.stdout.split("\n")[:4] == local.stdout.split("\n")[:4]

    local_dir, ray_dir = _sweep_dirs(project)
    # The same points file for file: job order, names (the engine overrides are not a point's), every metric.
    assert (ray_dir / "points.csv").read_text() == (local_dir / "points.csv").read_text()
    for job in ("0", "1", "2"):
        a = json.loads((local_dir / "points" / f"{job}.json").read_text())
        b = json.loads((ray_dir / "points" / f"{job}.json").read_text())
        assert (a["overrides"], a["metrics"], a["by_library"]) == (
            b["overrides"],
            b["metrics"],
            b["by_library"],
        )
        assert (ray_dir / "points" / job / "summary.json").is_file()
    assert (ray_dir / "sweep.png").stat().st_size > 0 and (ray_dir / "points.txt").is_file()
    # The points differ (a floor of 1000 refuses every question): equal files are not three copies of one.
    metrics = [json.loads(p.read_text())["metrics"] for p in ray_dir.glob("points/*.json")]
    assert len({(m["hit_rate"], m["refused_correctly"]) for m in metrics}) > 1

    local_runs, ray_runs = children(uri, local_parent), children(uri, ray_parent)
    assert len(ray_runs) == 3 and sorted(ray_runs) == sorted(local_runs)
    for name, (params, metrics) in ray_runs.items():
        local_params, local_metrics = local_runs[name]
        timing = {m for m in metrics if "duration" in m or m.endswith("_s")}
        assert {m: v for m, v in metrics.items() if m not in timing} == {
            m: v for m, v in local_metrics.items() if m not in timing
        }
        assert params == local_params
    from mlflow.tracking import MlflowClient

    tags = MlflowClient(uri).get_run(ray_parent).data.tags
    assert tags["engine"] == "ray" and "engine=ray" in tags["sweep"]
    assert {a.path for a in MlflowClient(uri).list_artifacts(ray_parent)} == {"points.csv", "sweep.png"}


@pytest.mark.slow
def test_a_point_failing_validation_stops_the_ray_sweep_before_the_cluster_is_joined(project: Path) -> None:
    # Nothing listens at the address: joining it first would be exit 2 naming the address instead.
    address = f"127.0.0.1:{free_port()}"
    proc = doceval(
        ["sweep", "-m", "k=3,0,2", *FIXED, "engine=ray", f"engine.address={address}", "--quiet"], project
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "sweep point 2 of 3 (k=0): k=0: expected an integer >= 1" in proc.stderr
    assert "nothing was run or written" in proc.stderr and address not in proc.stderr
    assert not (project / "eval" / "sweeps").exists() and not (project / "mlruns").exists()


@pytest.mark.slow
def test_the_engine_cannot_be_swept(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project)
    assert main(["sweep", "-m", "k=1,2", *FIXED, "engine=local,ray", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "sweep: engine cannot be swept: the engine is how the whole sweep runs" in err
    assert not (project / "eval" / "sweeps").exists()


@pytest.mark.slow
def test_a_point_failing_on_ray_marks_the_parent_failed_and_keeps_the_finished_points(
    project: Path, ray_cluster: RayCluster
) -> None:
    uri = f"sqlite:///{project / 'mlruns' / 'mlflow.db'}"
    proc = doceval(["sweep", "-m", "+retriever.kwargs.min_score=1,boom", "retriever=function",
                    f"retriever.target={USER_MODULE_NAME}:make", "split=test", "engine=ray",
                    f"engine.address={ray_cluster.address}", "--quiet"], project)  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert (
        "sweep: point 2 (+retriever.kwargs.min_score=boom) failed: retriever.target=sweepray_userret:make: the "
        "factory called with kwargs min_score raised RuntimeError: index offline"
    ) in proc.stderr
    assert "Traceback" not in proc.stderr
    parent = re.search(r"MLflow parent run ([0-9a-f]{32}) is marked FAILED", proc.stderr)
    assert parent, proc.stderr
    from mlflow.tracking import MlflowClient

    assert MlflowClient(uri).get_run(parent.group(1)).info.status == "FAILED"
    # The good point runs beside the failing one on the two nodes: kept when it finished first, cancelled
    # (and the folder removed, no point having finished) when the failure came first.
    folders = _sweep_dirs(project) if (project / "eval" / "sweeps").exists() else []
    if "1 finished point stays" in proc.stderr:
        (folder,) = folders
        assert "RuntimeError: index offline" in (folder / "FAILED").read_text()
        assert [p.name for p in (folder / "points").glob("*.json")] == ["0.json"]
        assert len(children(uri, parent.group(1))) == 1
    else:
        assert "no point finished" in proc.stderr and folders == []
