"""`doceval sweep -m KEY=V1,V2 ...`: a Hydra multirun over the cached candidates, one MLflow parent run with a
child per point, a points table and a plot of every library's hit_rate and refused_correctly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from doceval.config.compose import find_conf_dir
from doceval.errors import UsageError
from doceval.harness.sweep_app import ENV_DIR, ENV_PARENT, ENV_ROOT


def split_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """(fixed, swept) using Hydra's own override grammar."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception as exc:  # hydra raises OverrideParseException with a caret diagram
        raise UsageError(
            f"sweep: cannot parse overrides {list(overrides)}: {' '.join(str(exc).split())}"
        ) from exc
    fixed: list[str] = []
    swept: list[str] = []
    for raw, ov in zip(overrides, parsed, strict=True):
        (swept if ov.is_sweep_override() else fixed).append(raw)
    return fixed, swept


def prepare(overrides: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """Defaults a floor sweep needs, then a dry composition that validates config, split and candidate cache."""
    from doceval.config.compose import compose
    from doceval.harness.candidates import META, check_candidates, load_candidates
    from doceval.harness.plan import EvalOptions, load_inputs, needs_corpus, uses_function_retriever
    from doceval.inputs.golden import select_split

    final = list(overrides)
    keys = [o.split("=", 1)[0].lstrip("+~") for o in final]
    if any(k.startswith("floors.") for k in keys) and "floors" not in keys:
        final.insert(0, "floors=zero")  # sweeping floor values means floors from config, not the artifact
    if "split" not in keys:
        final.insert(0, "split=calibration")  # sweeps tune on the calibration split unless told otherwise
    fixed, swept = split_overrides(final)
    if not swept:
        raise UsageError("sweep: no sweep override given; e.g. `doceval sweep -m floors.global=0.1,0.2,0.3`")
    first = [o.split("=", 1)[0] + "=" + _first_value(o) for o in swept]
    cfg = compose([*fixed, *first])
    options = EvalOptions(progress=False)
    _, entries, golden_path, golden_md5 = load_inputs(cfg, options, needs_corpus(cfg, options))
    select_split(entries, cfg["split"]["name"], golden_path)  # a split with no entries fails here, exit 2
    if uses_function_retriever(cfg, options):
        # A user's retriever runs live at every point: a kwargs sweep changes the retriever itself.
        from doceval.system.retrievers import make_retriever

        make_retriever(cfg["retriever"], None)  # a target that does not import fails here, exit 2
        return final, cfg
    runs = Path(cfg["paths"]["runs"])
    if not (runs / "candidates" / META).is_file():
        raise UsageError(
            "sweep: no cached candidates; run `dvc repro retrieve` first (sweeps never open the index)"
        )
    check_candidates(load_candidates(runs), entries, golden_md5, cfg["retriever"], int(cfg["k"]))
    return final, cfg


def _first_value(override: str) -> str:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    ov = OverridesParser.create().parse_overrides([override])[0]
    values = list(ov.sweep_iterator())
    return str(values[0])


def count_points(overrides: Sequence[str]) -> int:
    """How many jobs Hydra will launch: the product of every sweep override's length."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    total = 1
    for ov in OverridesParser.create().parse_overrides(list(overrides)):
        if ov.is_sweep_override():
            total *= len(list(ov.sweep_iterator()))
    return total


def _run_with_progress(
    cmd: list[str], root: Path, env: dict[str, str], points: Path, total: int, progress: bool
) -> tuple[int, str]:
    """Run the multirun, ticking a progress bar as job result files appear; returns (exit code, output)."""
    import tempfile

    from tqdm import tqdm

    def done() -> int:
        return len(list(points.glob("*.json"))) if points.is_dir() else 0

    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, cwd=root, env=env, text=True, stdout=log, stderr=subprocess.STDOUT)
        with tqdm(total=total, desc="sweep", unit="point", disable=not progress) as bar:
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
    final, cfg = prepare(overrides)
    sweep_dir = root / "eval" / "sweeps" / time.strftime("%Y%m%d-%H%M%S")
    sweep_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, ENV_DIR: str(sweep_dir), ENV_ROOT: str(root)}
    parent = uri = None
    if track and cfg.get("tracking", {}).get("enabled", True):
        from doceval import tracking

        uri = tracking.tracking_uri(cfg["tracking"].get("uri"), root)
        # start_parent creates the store (reachability checked) before any parallel writer starts:
        # first-time sqlite creation races.
        parent = tracking.start_parent(f"sweep {' '.join(overrides)}", uri=uri, root=root, split=cfg["split"]["name"],
                                       tags={"sweep": " ".join(final), "retriever": cfg["retriever"]["name"]})  # fmt: skip
        env[ENV_PARENT] = parent
    else:
        final.append("tracking.enabled=false")
    cmd = [
        sys.executable, "-m", "doceval.harness.sweep_app", "-m", "--config-dir", str(find_conf_dir().resolve()), *final,
        "hydra/launcher=joblib", f"hydra.launcher.n_jobs={jobs}", f"hydra.sweep.dir={sweep_dir}",
        "hydra.sweep.subdir=${hydra.job.num}", "hydra/job_logging=disabled", "hydra/hydra_logging=disabled",
    ]  # fmt: skip
    started = time.perf_counter()
    returncode, log = _run_with_progress(
        cmd, root, env, sweep_dir / "points", total=count_points(final), progress=progress
    )
    elapsed = time.perf_counter() - started
    if returncode != 0:
        tail = "\n".join(log.strip().splitlines()[-15:])
        raise RuntimeError(f"sweep jobs failed (exit {returncode}):\n{tail}")
    points = [
        json.loads(p.read_text())
        for p in sorted((sweep_dir / "points").glob("*.json"), key=lambda p: int(p.stem))
    ]
    table = format_points(points)
    (sweep_dir / "points.txt").write_text(table + "\n")
    write_points_csv(points, sweep_dir / "points.csv")
    plot = sweep_dir / "sweep.png"
    plot_points(points, plot)
    if parent and uri:
        from doceval import tracking

        tracking.log_parent_artifacts(parent, uri=uri, root=root, files=[plot, sweep_dir / "points.csv"])
    return {"dir": sweep_dir, "points": points, "table": table, "parent": parent, "seconds": elapsed}


_COLS = ("hit_rate", "recall", "mrr", "refused_correctly", "version_correctness", "overrefusal_rate")


def _varying(points: Sequence[dict[str, Any]]) -> list[str]:
    """Each point's overrides minus those every point shares: what the row is about."""
    common = set.intersection(*(set(p["overrides"]) for p in points)) if points else set()
    return [" ".join(o for o in p["overrides"] if o not in common) or "(base)" for p in points]


def format_points(points: Sequence[dict[str, Any]]) -> str:
    labels = _varying(points)
    width = min(max([len(label) for label in labels] + [9]), 40)
    head = f"{'point':<{width}} " + " ".join(f"{c[:10]:>10}" for c in _COLS)
    lines = [head, "-" * len(head)]
    for label, p in zip(labels, points, strict=True):
        vals = " ".join(
            f"{'n/a':>10}" if p["metrics"].get(c) is None else f"{p['metrics'][c]:>10.4f}" for c in _COLS
        )
        lines.append(f"{label[:width]:<{width}} {vals}")
    return "\n".join(lines)


def write_points_csv(points: Sequence[dict[str, Any]], path: Path) -> None:
    lines = ["job,overrides," + ",".join(_COLS)]
    for p in points:
        vals = ["" if p["metrics"].get(c) is None else f"{p['metrics'][c]:.6f}" for c in _COLS]
        lines.append(",".join([p["job"], '"' + " ".join(p["overrides"]) + '"', *vals]))
    path.write_text("\n".join(lines) + "\n")


def _axis(points: Sequence[dict[str, Any]]) -> str | None:
    """The first numeric override key whose value differs across points: the plot's x axis."""
    values: dict[str, set[float]] = {}
    for p in points:
        for ov in p["overrides"]:
            key, _, raw = ov.partition("=")
            try:
                values.setdefault(key, set()).add(float(raw))
            except ValueError:
                values.setdefault(key, set()).add(float("nan"))
    return next((k for k, v in values.items() if len(v) > 1 and all(x == x for x in v)), None)


def plot_points(points: Sequence[dict[str, Any]], path: Path) -> None:
    """Per library, hit_rate and refused_correctly against the swept value; other swept keys split the lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key = _axis(points)
    if key is None:
        return
    series: dict[str, list[tuple[float, dict[str, Any]]]] = {}
    for p in points:
        x = next(float(o.partition("=")[2]) for o in p["overrides"] if o.partition("=")[0] == key)
        rest = " ".join(o for o in p["overrides"] if o.partition("=")[0] != key)
        series.setdefault(rest, []).append((x, p))
    common = set.intersection(*(set(r.split()) for r in series)) if series else set()
    # Libraries with in-scope entries (the indexed ones); unindexed ones are refused by the router at any floor.
    libs = sorted({lib for p in points for lib, m in p["by_library"].items() if m.get("n_in_scope")})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True)
    for ax, metric in zip(axes, ("hit_rate", "refused_correctly"), strict=True):
        for rest, pts in series.items():
            suffix = " ".join(o for o in rest.split() if o not in common)
            for lib in libs:
                xy = [
                    (x, p["by_library"].get(lib, {}).get(metric)) for x, p in sorted(pts, key=lambda t: t[0])
                ]
                xy = [(x, y) for x, y in xy if y is not None]
                if xy:
                    ax.plot(*zip(*xy, strict=True), marker=".", label=f"{lib} {suffix}".strip())
        ax.set_title(metric)
        ax.set_xlabel(key)
        ax.set_ylim(-0.02, 1.02)
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
