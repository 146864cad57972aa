"""`doceval sweep -m KEY=V1,V2 ...` run: engine=local as a Hydra multirun of :mod:`doceval.app.sweep_app` jobs,
engine=ray handed to :mod:`doceval.app.sweep_ray`. What both share (the points validated before anything is
launched, a failed point, the table, CSV and plot) is :mod:`doceval.app.sweep`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from doceval.app.sweep import (
    abandon,
    count_points,
    point_failed,
    prepare,
    shown_points,
    sweep_points,
    write_outputs,
)
from doceval.app.sweep_app import ENV_DIR, ENV_PARENT, ENV_ROOT, ENV_SHARED, ENV_SHOWN
from doceval.common.io import check_writable, write_text_atomic
from doceval.common.progress import Progress
from doceval.config.compose import find_conf_dir
from doceval.config.engine_choice import drop_other_engine_keys
from doceval.config.project import with_project
from doceval.engine import uses_ray


def _run_with_progress(
    cmd: list[str], root: Path, env: dict[str, str], points: Path, total: int, progress: bool
) -> tuple[int, str]:
    """Run the multirun, ticking a progress bar as job result files appear; returns (exit code, output)."""

    def done() -> int:
        return len(list(points.glob("*.json"))) if points.is_dir() else 0

    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, cwd=root, env=env, text=True, stdout=log, stderr=subprocess.STDOUT)
        with Progress(total, "sweep", "point", enabled=progress) as bar:
            while proc.poll() is None:
                time.sleep(0.2)
                bar.update(done() - bar.n)
            bar.update(done() - bar.n)
        log.seek(0)
        return proc.returncode, log.read()


def run_sweep(
    overrides: Sequence[str],
    jobs: int = 2,
    root: Path | None = None,
    track: bool = True,
    progress: bool = True,
) -> dict[str, Any]:
    root = (root or Path.cwd()).resolve()
    final, cfg = prepare(overrides)  # every point validated: nothing below runs for a bad value
    if uses_ray(cfg.engine):
        # lazy: the Ray sweep's module loads the engine (ray, ~1 s) only for engine=ray
        from doceval.app.sweep_ray import run_sweep_ray

        return run_sweep_ray(final, cfg, overrides, root, track, progress)
    planned, swept_keys = sweep_points(final)
    sweep_dir = root / "eval" / "sweeps" / time.strftime("%Y%m%d-%H%M%S")
    tracked = track and cfg.tracking.enabled
    uri = None
    if tracked:
        # lazy: start-up (mlflow, ~2 s): an untracked sweep never loads it
        from doceval import tracking

        uri = tracking.tracking_uri(cfg.tracking.uri, root)
        tracking.check_reachable(uri, write=True)  # before any folder or run is made
    check_writable(sweep_dir, str(sweep_dir), f"make {sweep_dir.parent} writable (sweeps write there)")
    env = {
        **os.environ,
        ENV_DIR: str(sweep_dir),
        ENV_ROOT: str(root),
        ENV_SHOWN: json.dumps(shown_points(planned)),
    }
    parent = None
    if tracked and uri is not None:
        # start_parent creates the store before any parallel writer starts: first-time sqlite creation races.
        parent = tracking.start_parent(
            f"sweep {' '.join(overrides)}",
            uri=uri,
            root=root,
            split=cfg.split.name,
            tags={"sweep": " ".join(final), "retriever": cfg.retriever.name},
        )
        env[ENV_PARENT] = parent
    else:
        final.append("tracking.enabled=false")
    sweep_dir.mkdir(parents=True, exist_ok=True)
    # the project's overrides, first in each point's
    env[ENV_SHARED] = str(len(with_project(final)) - len(final))
    cmd = _hydra_command(final, jobs, sweep_dir)
    started = time.perf_counter()
    try:
        returncode, log = _run_with_progress(
            cmd, root, env, sweep_dir / "points", total=count_points(final), progress=progress
        )
    except BaseException:  # interrupted: the parent must not stay FINISHED over a sweep that did not finish
        abandon(sweep_dir, parent, uri, None, "the sweep was interrupted")
        raise
    finally:
        _scrub_multirun_yaml(sweep_dir)
    elapsed = time.perf_counter() - started
    if returncode != 0:
        raise point_failed(sweep_dir, parent, uri, returncode, log, swept_keys)
    points = [
        json.loads(p.read_text())
        for p in sorted((sweep_dir / "points").glob("*.json"), key=lambda p: int(p.stem))
    ]
    table = write_outputs(points, sweep_dir, parent, uri, root)
    return {"dir": sweep_dir, "points": points, "table": table, "parent": parent, "seconds": elapsed}


def _hydra_command(final: list[str], jobs: int, sweep_dir: Path) -> list[str]:
    """The Hydra multirun that runs the points, ``jobs`` at a time (joblib), each into ``sweep_dir``."""
    return [
        # The Hydra app composes conf/ itself: the project's doceval.yaml goes in first, as compose() applies it.
        sys.executable,
        "-m",
        "doceval.app.sweep_app",
        "-m",
        "--config-dir",
        str(find_conf_dir().resolve()),
        *drop_other_engine_keys(with_project(final)),
        "hydra/launcher=joblib",
        f"hydra.launcher.n_jobs={jobs}",
        f"hydra.sweep.dir={sweep_dir}",
        "hydra.sweep.subdir=${hydra.job.num}",
        "hydra/job_logging=disabled",
        "hydra/hydra_logging=disabled",
        # No .hydra/ folders: they would hold every override as typed, a secret-named kwarg's value included.
        "hydra.output_subdir=null",
    ]


def _scrub_multirun_yaml(sweep_dir: Path) -> None:
    """Hydra's sweeper always saves the whole config, overrides as typed, in multirun.yaml: rewritten
    through the scrubber (a secret-named kwarg's value becomes <redacted>), as every file doceval keeps."""
    saved = sweep_dir / "multirun.yaml"
    if saved.is_file():
        write_text_atomic(saved, saved.read_text(encoding="utf-8"))
