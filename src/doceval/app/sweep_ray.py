"""`doceval sweep ... engine=ray`: every point a Ray task, the sweep's outputs written by the driver.

The driver validates every point first (as the local sweep does), joins or starts the cluster, opens the MLflow
parent run, composes each point with ``engine=local`` (a point never opens a Ray fan-out of its own: on a small
cluster the nested tasks would wait for CPUs its own points hold) and submits one task per point.

No node needs the driver's disk (:mod:`doceval.app.sweep_inputs`): a task gets its point's configuration and a
snapshot of the project files points read (golden set, qrels, corpus, candidate cache, index manifest, floors)
through Ray's object store, evaluates in a scratch folder of its node, and returns its summary and the files it
wrote. The driver alone writes them into the sweep folder and logs each point's child run (a sqlite tracking
store on this machine works). Paths a point needs that are not shipped (outside the project folder, or handed to
the user's code) and the user's module are checked on every node before the first task: exit 2 naming the node
and the path.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.app.sweep import abandon, count_points, point_failed, shown_points, sweep_points, write_outputs
from doceval.app.sweep_app import FAILED_SUFFIX, evaluate_point, log_point
from doceval.app.sweep_inputs import collect, digest, external_paths, in_folder, materialize, snapshot
from doceval.common.io import check_writable, write_bytes_atomic, write_json_atomic
from doceval.common.naming import is_function_retriever
from doceval.common.progress import Progress
from doceval.common.redact import register_config, register_overrides
from doceval.config.compose import compose, validate_config
from doceval.config.objects import config_dict
from doceval.config.schema import Config, EngineRay, RetrieverFunction
from doceval.errors import UsageError
from doceval.harness.summary import ran_on

if TYPE_CHECKING:
    from doceval.engine.cluster import RaySession
    from doceval.engine.sweeps import TaskLost


@dataclass(frozen=True)
class PointSpec:
    """What one task needs: the point's job number, its name (its overrides as a local sweep names them, the
    overrides it was composed with, engine=local last), its composed configuration, and where its outputs go
    relative to the project folder (``points/<job>`` of the sweep)."""

    job: str
    overrides: list[str]
    name: list[str]
    config: dict[str, Any]
    out: str
    tracking: bool  # the point's tracking.enabled: its child run is logged


def _is_engine_key(override: str) -> bool:
    key = override.split("=", 1)[0].lstrip("+~")
    return key == "engine" or key.startswith("engine.")


def point_specs(final: Sequence[str], root: Path, sweep_dir: Path) -> tuple[list[PointSpec], list[Config]]:
    """One spec per point, in the local sweep's job order (and its config); a point's ``engine`` overrides give
    way to ``engine=local``, and are not part of its name (its run is named as in a local sweep)."""
    points, _ = sweep_points(final)
    shown = shown_points(points)  # a secret value as <redacted#n>: points that differ only in it stay apart
    specs, configs = [], []
    for job, point in enumerate(points):
        name = [o for o in shown[job] if not _is_engine_key(o)]
        own = [o for o in point if not _is_engine_key(o)]
        cfg = compose([*own, "engine=local"])
        out = str((sweep_dir / "points" / str(job)).relative_to(root))
        specs.append(
            PointSpec(str(job), [*own, "engine=local"], name, config_dict(cfg), out, cfg.tracking.enabled)
        )
        configs.append(cfg)
    return specs, configs


def run_point_task(spec: PointSpec, files: dict[str, bytes], key: str) -> dict[str, Any]:
    """The Ray task: one point evaluated with engine=local in a scratch copy of the project's inputs; returns
    ``{"point", "summary", "files", "node"}`` or ``{"failed": ...}`` (the ``points/<job>.failed`` record), never
    raises."""
    node = socket.gethostname()
    try:
        register_overrides(spec.overrides)  # this worker's writers scrub the point's secrets too
        register_config(spec.config)
        folder = materialize(files, key)
        with in_folder(folder):
            cfg = validate_config(spec.config)
            out_dir = folder / spec.out
            summary, point = evaluate_point(cfg, spec.job, spec.name, folder, out_dir)
            written = collect(out_dir)
        # The summary travels as its JSON: the driver maps the scratch folder's paths to the project's in it.
        return {
            "point": point,
            "summary": summary.to_dict(),
            "files": written,
            "node": node,
            "scratch": str(folder),
        }
    except Exception as exc:  # the sweep reports the point's error; a raised one would read as a lost task
        error = str(exc) if isinstance(exc, UsageError) else f"{type(exc).__name__}: {exc}"
        error += "".join(f" ({note})" for note in getattr(exc, "__notes__", []))
        error += f" (on node {node})"
        failed = {
            "job": spec.job,
            "overrides": spec.name,
            "error": error,
            "usage_error": isinstance(exc, UsageError),
        }
        return {"failed": failed}


def _open_parent(
    cfg: Config, final: list[str], overrides: Sequence[str], root: Path, uri: str | None
) -> str | None:
    if uri is None:
        return None
    # lazy: start-up (mlflow, ~2 s), as in run_sweep
    from doceval import tracking

    # start_parent creates the sqlite store before any point is logged to it.
    return tracking.start_parent(
        f"sweep {' '.join(overrides)}",
        uri=uri,
        root=root,
        split=cfg.split.name,
        tags={"sweep": " ".join(final), "retriever": cfg.retriever.name, "engine": "ray"},
    )


def _keep(result: dict[str, Any], spec: PointSpec, root: Path, tracked: tuple[str, str] | None) -> None:
    """A finished point's files written where a local sweep writes them, its summary read as if it had run in
    the project folder (paths, and the driver's provenance with the node that ran it), its child run logged."""
    text = json.dumps(result["summary"]).replace(
        json.dumps(result["scratch"])[1:-1], json.dumps(str(root))[1:-1]
    )
    summary = ran_on(json.loads(text), result["node"])
    out_dir = root / spec.out
    for rel, data in result["files"].items():
        write_bytes_atomic(out_dir / rel, data)
    write_json_atomic(out_dir / "summary.json", summary.to_dict())
    point = result["point"]
    if tracked is not None and spec.tracking:
        point["run_id"] = log_point(summary, spec.job, spec.name, root, tracked)
    write_json_atomic(out_dir.parent / f"{spec.job}.json", point)


def _collect(
    engine: EngineRay,
    specs: list[PointSpec],
    payload: tuple[Any, str],
    root: Path,
    tracked: tuple[str, str] | None,
    progress: bool,
) -> bool:
    """Run the points, writing ``points/<job>.json`` (or ``.failed``) as each finishes; False when one
    failed (the points not started are cancelled)."""
    # lazy: ray (~1 s) loads only for engine=ray
    from doceval.engine.sweeps import TaskLost, run_tasks

    ok = True

    def done(i: int, result: dict[str, Any] | TaskLost) -> bool:
        nonlocal ok
        spec = specs[i]
        if isinstance(result, TaskLost):
            result = {
                "failed": {
                    "job": spec.job,
                    "overrides": spec.name,
                    "usage_error": False,
                    "error": f"the Ray task was lost: {result.message}",
                }
            }
        if "point" in result:
            _keep(result, spec, root, tracked)
            bar.update(1)
            return ok
        write_json_atomic((root / spec.out).parent / f"{spec.job}{FAILED_SUFFIX}", result["failed"])
        ok = False
        return False

    with Progress(len(specs), "sweep", "point", enabled=progress) as bar:
        run_tasks(engine, run_point_task, specs, done, shared=payload)
    return ok


def _check_nodes(
    session: RaySession, specs: list[PointSpec], configs: list[Config], root: Path, outside: list[str]
) -> None:
    """Before the first task: the user's module, and every path a point needs that is not shipped, on every
    node (exit 2 naming the node and the path)."""
    if session.all_local():
        return
    # lazy: ray (~1 s) loads only for engine=ray
    from doceval.engine.probes import missing_paths
    from doceval.harness.remote import check_user_code
    from doceval.system.retrievers.function import FunctionRetriever

    if is_function_retriever(configs[0].retriever.name):
        assert isinstance(configs[0].retriever, RetrieverFunction)
        retriever = FunctionRetriever.from_config(configs[0].retriever)
        check_user_code(session, retriever, "retriever.target")
    needed = external_paths([s.config for s in specs], root, outside)
    for node, lacking in missing_paths(needed) if needed else []:
        raise UsageError(
            f"engine=ray: sweep points need {lacking[0]} (outside the project folder, or handed to your code), "
            f"which node {node} does not have; put it at the same path on every node (a shared mount), move "
            "it into the project folder, or run the sweep with engine=local"
        )


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
    specs, configs = point_specs(final, root, sweep_dir)
    assert len(specs) == count_points(final)
    files, outside = snapshot(configs, root)
    # lazy: ray (~1 s) loads only for engine=ray
    from doceval.engine import engine_session

    with engine_session(cfg.engine) as session:
        assert session is not None
        _check_nodes(session, specs, configs, root, outside)
        parent = _open_parent(cfg, final, overrides, root, uri)
        (sweep_dir / "points").mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        try:
            ok = _collect(
                cfg.engine,
                specs,
                (files, digest(files)),
                root,
                (parent, uri) if parent and uri else None,
                progress,
            )
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
