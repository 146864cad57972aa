"""`doceval sweep ... engine=ray`: every point a Ray task, the sweep's outputs written by the driver.

The driver validates every point first (as the local sweep does), joins or starts the cluster, opens the MLflow
parent run, then submits one task per point. A task composes its point with ``engine=local`` (a point never
opens a Ray fan-out of its own: on a small cluster the nested tasks would wait for CPUs its own points hold),
evaluates it from the cached candidates and logs its child run to the tracking URI the driver resolved. The
driver collects the points as they finish and writes the same points table, CSV and plot as a local sweep.

Data locality: a point reads the project's candidate cache and golden set, and writes its summary, at the
project's path on its node (the driver's folder on an all-local cluster, a shared folder otherwise); a sqlite
tracking store is a file on the driver's disk, so it is refused when the cluster has nodes on other hosts.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.app.sweep import abandon, count_points, point_failed, shown_points, sweep_points, write_outputs
from doceval.app.sweep_app import FAILED_SUFFIX, run_point
from doceval.common.io import check_writable, write_json_atomic
from doceval.common.progress import Progress
from doceval.config.compose import compose, find_conf_dir
from doceval.config.project import project_file
from doceval.config.schema import Config, EngineRay
from doceval.errors import UsageError

if TYPE_CHECKING:
    from doceval.engine.cluster import RaySession
    from doceval.engine.sweeps import TaskLost

TRACKING_FIX = (
    "log to a tracking server every node can reach instead: tracking.uri=http://HOST:5000 (`mlflow server "
    "--backend-store-uri sqlite:///mlflow.db --host 0.0.0.0`), or run the sweep with --no-track"
)


@dataclass(frozen=True)
class PointSpec:
    """What one task needs: the point's overrides (``engine=local`` last), the name its run and row get (its
    overrides as a local sweep names them), and where the project, its conf/ and the sweep folder are."""

    job: str
    overrides: list[str]
    name: list[str]
    root: str
    conf_dir: str
    project: str | None
    sweep_dir: str
    tracked: tuple[str, str] | None  # (parent run id, tracking URI)


def check_tracking_locality(session: RaySession, uri: str | None) -> None:
    """Exit 2 when the points would log to a sqlite file on this machine from nodes on other hosts."""
    if uri is None:
        return
    # lazy: start-up (mlflow, ~2 s): only a tracked sweep resolves its store
    from doceval.tracking import local_store

    path = local_store(uri)
    if path is None:
        return
    # lazy: ray (~1 s) loads only for engine=ray
    from doceval.engine.cluster import driver_local_path

    driver_local_path(session, path, f"the MLflow store tracking.uri={uri}", TRACKING_FIX)


def _is_engine_key(override: str) -> bool:
    key = override.split("=", 1)[0].lstrip("+~")
    return key == "engine" or key.startswith("engine.")


def point_specs(
    final: Sequence[str], root: Path, sweep_dir: Path, tracked: tuple[str, str] | None
) -> list[PointSpec]:
    """One spec per point, in the local sweep's job order; a point's ``engine`` overrides give way to
    ``engine=local``, and are not part of its name (its run is named as in a local sweep)."""
    points, _ = sweep_points(final)
    shown = shown_points(points)  # a secret value as <redacted#n>: points that differ only in it stay apart
    project = project_file()
    specs = []
    for job, point in enumerate(points):
        name = [o for o in shown[job] if not _is_engine_key(o)]
        own = [o for o in point if not _is_engine_key(o)]
        specs.append(PointSpec(str(job), [*own, "engine=local"], name, str(root),
                               str(find_conf_dir().resolve()), str(project.resolve()) if project else None,
                               str(sweep_dir), tracked))  # fmt: skip
    return specs


@contextlib.contextmanager
def _in_folder(folder: Path) -> Iterator[None]:
    """The project root as working directory for the block (config paths are relative to it); a worker
    process runs many tasks, so the one it had is restored after."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def run_point_task(spec: PointSpec) -> dict[str, Any]:
    """The Ray task: one point evaluated with engine=local; returns ``{"point": ...}`` or ``{"failed": ...}``
    (the ``points/<job>.failed`` record), never raises."""
    root = Path(spec.root)
    try:
        if not root.is_dir():
            raise UsageError(
                f"sweep point {int(spec.job) + 1} ran on node {socket.gethostname()}, which has no project "
                f"folder {root}: engine=ray sweep points read the candidate cache and golden set at the "
                "driver's path, so run the sweep on nodes that share that folder, or with engine=local"
            )
        with _in_folder(root):
            cfg = compose(spec.overrides, conf_dir=spec.conf_dir, project=spec.project)
            out_dir = Path(spec.sweep_dir) / "points" / spec.job
            return {"point": run_point(cfg, spec.job, spec.name, root, out_dir, spec.tracked)}
    except Exception as exc:  # the sweep reports the point's error; a raised one would read as a lost task
        error = str(exc) if isinstance(exc, UsageError) else f"{type(exc).__name__}: {exc}"
        error += "".join(f" ({note})" for note in getattr(exc, "__notes__", []))
        failed = {"job": spec.job, "overrides": spec.name, "error": error,
                  "usage_error": isinstance(exc, UsageError)}  # fmt: skip
        return {"failed": failed}


def _open_parent(cfg: Config, final: list[str], overrides: Sequence[str], root: Path,
                 uri: str | None) -> str | None:  # fmt: skip
    if uri is None:
        return None
    # lazy: start-up (mlflow, ~2 s), as in run_sweep
    from doceval import tracking

    # start_parent creates the sqlite store on the driver before any point writes to it (MLflow 3.17's first
    # creation races between concurrent writers).
    return tracking.start_parent(f"sweep {' '.join(overrides)}", uri=uri, root=root, split=cfg.split.name,
                                 tags={"sweep": " ".join(final), "retriever": cfg.retriever.name,
                                       "engine": "ray"})  # fmt: skip


def _collect(engine: EngineRay, specs: list[PointSpec], sweep_dir: Path, progress: bool) -> bool:
    """Run the points, writing ``points/<job>.json`` (or ``.failed``) as each finishes; False when one
    failed (the points not started are cancelled)."""
    # lazy: ray (~1 s) loads only for engine=ray
    from doceval.engine.sweeps import TaskLost, run_tasks

    ok = True

    def done(i: int, result: dict[str, Any] | TaskLost) -> bool:
        nonlocal ok
        spec = specs[i]
        if isinstance(result, TaskLost):
            result = {"failed": {"job": spec.job, "overrides": spec.name, "usage_error": False,
                                 "error": f"the Ray task was lost: {result.message}"}}  # fmt: skip
        if "point" in result:
            write_json_atomic(sweep_dir / "points" / f"{spec.job}.json", result["point"])
            bar.update(1)
            return ok
        write_json_atomic(sweep_dir / "points" / f"{spec.job}{FAILED_SUFFIX}", result["failed"])
        ok = False
        return False

    with Progress(len(specs), "sweep", "point", enabled=progress) as bar:
        run_tasks(engine, run_point_task, specs, done)
    return ok


def run_sweep_ray(
    final: list[str], cfg: Config, overrides: Sequence[str], root: Path, track: bool, progress: bool
) -> dict[str, Any]:
    """The Ray sweep of validated points (``prepare`` ran): same outputs and runs as ``run_sweep``."""
    assert isinstance(cfg.engine, EngineRay)
    _, swept_keys = sweep_points(final)
    sweep_dir = root / "eval" / "sweeps" / time.strftime("%Y%m%d-%H%M%S")
    uri = None
    if track and cfg.tracking.enabled:
        # lazy: start-up (mlflow, ~2 s): an untracked sweep never loads it
        from doceval import tracking

        uri = tracking.tracking_uri(cfg.tracking.uri, root)
        tracking.check_reachable(uri, write=True)  # before any folder, session or run is made
    else:
        final = [*final, "tracking.enabled=false"]
    check_writable(sweep_dir, str(sweep_dir), f"make {sweep_dir.parent} writable (sweeps write there)")
    # lazy: ray (~1 s) loads only for engine=ray
    from doceval.engine import engine_session

    with engine_session(cfg.engine) as session:
        assert session is not None
        check_tracking_locality(session, uri)
        parent = _open_parent(cfg, final, overrides, root, uri)
        specs = point_specs(final, root, sweep_dir, (parent, uri) if parent and uri else None)
        assert len(specs) == count_points(final)
        (sweep_dir / "points").mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        try:
            ok = _collect(cfg.engine, specs, sweep_dir, progress)
        except (
            BaseException
        ):  # interrupted: the parent must not stay FINISHED over a sweep that did not finish
            abandon(sweep_dir, parent, uri, None, "the sweep was interrupted")
            raise
        elapsed = time.perf_counter() - started
    if not ok:
        raise point_failed(sweep_dir, parent, uri, 1, "", swept_keys)
    points = [
        json.loads(p.read_text())
        for p in sorted((sweep_dir / "points").glob("*.json"), key=lambda p: int(p.stem))
    ]
    table = write_outputs(points, sweep_dir, parent, uri, root)
    return {"dir": sweep_dir, "points": points, "table": table, "parent": parent, "seconds": elapsed}
