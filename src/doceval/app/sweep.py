"""`doceval sweep -m KEY=V1,V2 ...`, what either engine's run (:mod:`doceval.app.sweep_run`,
:mod:`doceval.app.sweep_ray`) shares: the points over the cached candidates, one MLflow parent run with a child
per point, a points table and a plot of every library's hit_rate and refused_correctly.

Every point's configuration is composed and checked (schema, split, candidate cache, floors) before anything is
launched or written, so a bad value exits 2 naming the override and the point. A point that still fails while
running marks the parent run FAILED, leaves a FAILED note in the sweep folder (or removes the folder when no point
finished) and exits 2 with that point's message.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser

from doceval.app.sweep_app import FAILED_SUFFIX
from doceval.common.hints import rerun
from doceval.common.io import write_text_atomic
from doceval.common.naming import is_own_agent
from doceval.common.redact import redact_text
from doceval.common.secret_rule import secret_name
from doceval.common.table import format_table
from doceval.config.compose import check_override_syntax, compose
from doceval.config.schema import Config
from doceval.errors import UsageError
from doceval.harness.candidate_cache import load_candidates
from doceval.harness.candidate_set import META, CandidateSet
from doceval.harness.plan import (
    EvalOptions,
    agent_name,
    load_inputs,
    needs_corpus,
    plan_run,
    uses_function_retriever,
)
from doceval.inputs.golden import select_split
from doceval.scoring.registry import names
from doceval.system.retrievers import make_retriever


def split_overrides(overrides: Sequence[str]) -> tuple[list[str], list[str]]:
    """(fixed, swept) using Hydra's own override grammar."""
    check_override_syntax(overrides)  # names the bad override and the fix, never a secret value
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


def prepare(overrides: Sequence[str]) -> tuple[list[str], Config]:
    """Defaults a floor sweep needs, then every point composed and checked (config, split, candidate cache,
    floors) as it will run; returns the final overrides and the first point's config."""
    final = list(overrides)
    keys = [o.split("=", 1)[0].lstrip("+~") for o in final]
    if any(k.startswith("floors.") for k in keys) and "floors" not in keys:
        final.insert(0, "floors=zero")  # sweeping floor values means floors from config, not the artifact
    if "split" not in keys:
        final.insert(0, "split=calibration")  # sweeps tune on the calibration split unless told otherwise
    _, swept = split_overrides(final)
    if not swept:
        raise UsageError("sweep: no sweep override given; e.g. `doceval sweep -m floors.global=0.1,0.2,0.3`")
    points, swept_keys = sweep_points(final)
    engine_keys = sorted(k for k in swept_keys if k == "engine" or k.startswith("engine."))
    if engine_keys:
        raise UsageError(
            f"sweep: {', '.join(engine_keys)} cannot be swept: the engine is how the whole sweep runs, not a "
            "point's setting; give one value (e.g. engine=ray)"
        )
    return final, validate_points(points, swept_keys)


def sweep_points(overrides: Sequence[str]) -> tuple[list[list[str]], set[str]]:
    """Every point's overrides, in the order Hydra's basic sweeper launches them as jobs 0, 1, ... (the product
    of the swept lists, a later override of a key replacing an earlier one), and the swept keys."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    lists: dict[str, list[str]] = {}
    swept: set[str] = set()
    for raw, ov in zip(overrides, parsed, strict=True):
        key = ov.get_key_element()
        if ov.is_sweep_override():
            if not ov.is_discrete_sweep():
                raise UsageError(f"sweep: {raw}: only lists (a,b,c), range(...) and choice(...) can be swept")
            lists[key] = [f"{key}={value}" for value in ov.sweep_string_iterator()]
            swept.add(key)
        else:
            lists[key] = [f"{key}={ov.get_value_element_as_str()}"]
            swept.discard(key)
    return [list(point) for point in itertools.product(*lists.values())], swept


def shown_points(points: Sequence[Sequence[str]]) -> list[list[str]]:
    """Each point's overrides as runs, rows and messages name them: a value that holds a secret (a key secret by
    the one name rule, a registered value, URL credentials) becomes ``<redacted#n>``, n numbering that key's
    distinct values in this sweep's launch order, so points that differ only in a secret stay apart. Never a
    digest: a hash of a short token can be reversed by trying candidates."""
    ordinals: dict[str, dict[str, int]] = {}
    shown: list[list[str]] = []
    for point in points:
        row = []
        for override in point:
            key, sep, value = override.partition("=")
            if sep and (secret_name(key.lstrip("+~")) or redact_text(value) != value):
                seen = ordinals.setdefault(key, {})
                override = f"{key}=<redacted#{seen.setdefault(value, len(seen) + 1)}>"
            row.append(override)
        shown.append(row)
    return shown


def _label(point: Sequence[str], swept_keys: set[str]) -> str:
    """A point's swept values, e.g. ``k=3 floors.global=0.2``: what tells it from the other points."""
    return " ".join(o for o in point if o.split("=", 1)[0] in swept_keys) or "(base)"


def validate_points(points: Sequence[Sequence[str]], swept_keys: set[str]) -> Config:
    """Compose every point (the schema validates each value) and plan it as the job will, against the cached
    candidates (split, limit, k, floors and the train-on-test guard), before anything is launched. Cheap: no
    retrieval, no model. Returns the first point's config. A bad point is a UsageError naming it."""
    caches: dict[Path, CandidateSet] = {}
    notes: dict[str, None] = {}
    first: Config | None = None
    # Composing a point registers its secret values: the labels below are made once all are known.
    shown = shown_points(points)
    for i, point in enumerate(points):
        captured = io.StringIO()  # plan notes, shown once below rather than once per point
        try:
            with contextlib.redirect_stderr(captured):
                cfg = compose(point)
                _check_point(cfg, caches, first_point=i == 0)
        except UsageError as exc:
            raise UsageError(
                f"sweep point {i + 1} of {len(points)} ({_label(shown[i], swept_keys)}): {exc}\n"
                "fix or drop that value; nothing was run or written"
            ) from None
        finally:
            notes.update(dict.fromkeys(line for line in captured.getvalue().splitlines() if line.strip()))
        first = cfg if first is None else first
    for line in notes:
        print(line, file=sys.stderr)
    assert first is not None
    return first


def _check_point(cfg: Config, caches: dict[Path, CandidateSet], first_point: bool) -> None:
    """What one job will check when it starts, without running anything."""
    options = EvalOptions(progress=False)
    if uses_function_retriever(cfg, options) or not is_own_agent(agent_name(cfg, options)):
        # The user's retriever or assistant runs live at every point: check the inputs, never call it.
        _, entries, golden_path, _ = load_inputs(cfg, options, needs_corpus(cfg, options))
        select_split(entries, cfg.split.name, golden_path)  # a split with no entries fails here, exit 2
        if first_point and uses_function_retriever(cfg, options):
            make_retriever(cfg.retriever, None)  # a target that does not import fails here, exit 2
        return
    runs = Path(cfg.paths.runs)
    if runs not in caches:
        if not (runs / "candidates" / META).is_file():
            raise UsageError(
                f"sweep: no cached candidates; run {rerun('retrieve')} first (sweeps never open the index)"
            )
        caches[runs] = load_candidates(runs)
    plan_run(cfg, EvalOptions(progress=False, candidates=caches[runs]))


def count_points(overrides: Sequence[str]) -> int:
    """How many jobs Hydra will launch: the product of every sweep override's length."""
    total = 1
    for ov in OverridesParser.create().parse_overrides(list(overrides)):
        if ov.is_sweep_override():
            total *= len(list(ov.sweep_iterator()))
    return total


def write_outputs(
    points: Sequence[dict[str, Any]], sweep_dir: Path, parent: str | None, uri: str | None, root: Path
) -> str:
    """A finished sweep's points.txt, points.csv and sweep.png (the latter two on the parent run); returns
    the table."""
    table = format_points(points)
    write_text_atomic(sweep_dir / "points.txt", table + "\n")
    write_points_csv(points, sweep_dir / "points.csv")
    plot = sweep_dir / "sweep.png"
    plot_points(points, plot)
    if parent and uri:
        # lazy: start-up (mlflow, ~2 s), as in run_sweep
        from doceval import tracking

        tracking.log_parent_artifacts(parent, uri=uri, root=root, files=[plot, sweep_dir / "points.csv"])
    return table


def abandon(sweep_dir: Path, parent: str | None, uri: str | None, point: str | None, why: str) -> str:
    """A sweep that did not finish: its parent run is marked FAILED, and its folder is removed when no point
    finished, or keeps the finished points with a FAILED note. Returns what happened to the folder."""
    if parent and uri:
        # lazy: start-up (mlflow, ~2 s), as in run_sweep
        from doceval.tracking.configured import fail_parent

        with contextlib.suppress(Exception):  # the failure being reported matters more than the tag
            fail_parent(parent, uri, point)
    finished = sorted((sweep_dir / "points").glob("*.json"))
    if not finished:
        shutil.rmtree(sweep_dir, ignore_errors=True)
        return f"no point finished, so {sweep_dir} was removed"
    with contextlib.suppress(OSError, UsageError):
        write_text_atomic(sweep_dir / "FAILED", f"{why}\n")
    kept = f"{len(finished)} finished point{'s' if len(finished) != 1 else ''}"
    return f"the {kept} stay{'s' if len(finished) == 1 else ''} in {sweep_dir} (its FAILED file says why)"


def point_failed(
    sweep_dir: Path, parent: str | None, uri: str | None, returncode: int, log: str, swept_keys: set[str]
) -> UsageError:
    """The first failed point's message (written by the job), the parent FAILED, the folder marked or removed."""
    failures = []
    for path in (sweep_dir / "points").glob(f"*{FAILED_SUFFIX}"):
        with contextlib.suppress(OSError, ValueError):
            failures.append(json.loads(path.read_text(encoding="utf-8")))
    failures.sort(key=lambda f: int(f.get("job", 0)))
    if failures:
        first = failures[0]
        label = _label(first.get("overrides") or [], swept_keys)
        what = f"point {int(first.get('job', 0)) + 1} ({label}) failed: {first.get('error')}"
    else:
        label = None
        tail = "\n".join(log.strip().splitlines()[-15:])
        what = f"the sweep jobs failed (exit {returncode}):\n{tail}"
    kept = abandon(sweep_dir, parent, uri, label, f"sweep {what}")
    run = f"; MLflow parent run {parent} is marked FAILED" if parent else ""
    return UsageError(f"sweep: {what}\n{kept}{run}; fix that point and rerun the sweep")


_COLS = names("sweep")


def _varying(points: Sequence[dict[str, Any]]) -> list[str]:
    """Each point's overrides minus those every point shares: what the row is about."""
    common = set.intersection(*(set(p["overrides"]) for p in points)) if points else set()
    return [" ".join(o for o in p["overrides"] if o not in common) or "(base)" for p in points]


def _cell(point: dict[str, Any], metric: str) -> str:
    """``0.800 [0.70,0.88]``: the mean and its 95% interval (the summary's, as in the headline)."""
    value = point["metrics"].get(metric)
    if value is None:
        return "n/a"
    ci = (point.get("ci95") or {}).get(metric)
    return f"{value:.3f}" + (f" [{ci[0]:.2f},{ci[1]:.2f}]" if ci else "")  # as history prints it


def _n(point: dict[str, Any]) -> str:
    counts = point.get("counts") or {}
    return f"{counts.get('n_in_scope', '?')}/{counts.get('n_out_of_scope', '?')}"


def format_points(points: Sequence[dict[str, Any]]) -> str:
    """One row per point (what it overrides beyond the shared ones): its n (in scope / out of scope) and the
    sweep metrics with their 95% intervals, sized to content; then a line saying so."""
    rows = [
        [label, _n(p), *(_cell(p, c) for c in _COLS)]
        for label, p in zip(_varying(points), points, strict=True)
    ]
    table = format_table(("point", "n", *_COLS), rows, gap=2)
    return "\n".join(
        [*table, "n: in-scope/out-of-scope entries; each cell: the mean [95% interval], as in the headline"]
    )


def write_points_csv(points: Sequence[dict[str, Any]], path: Path) -> None:
    """points.csv: per point its n, and per sweep metric its value, 95% interval and n."""
    columns = [f"{c}{part}" for c in _COLS for part in ("", "_ci_lo", "_ci_hi", "_n")]
    lines = ["job,overrides,n_in_scope,n_out_of_scope," + ",".join(columns)]
    for p in points:
        counts, ci95 = p.get("counts") or {}, p.get("ci95") or {}
        vals: list[str] = [str(counts.get("n_in_scope", "")), str(counts.get("n_out_of_scope", ""))]
        for c in _COLS:
            v, ci = p["metrics"].get(c), ci95.get(c)
            vals += [
                "" if v is None else f"{v:.6f}",
                *(["", ""] if not ci else [f"{ci[0]:.6f}", f"{ci[1]:.6f}"]),
                str(counts.get(f"n_{c}", "")),
            ]
        lines.append(",".join([p["job"], '"' + " ".join(p["overrides"]) + '"', *vals]))
    write_text_atomic(path, "\n".join(lines) + "\n")


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
    # lazy: start-up (matplotlib, ~0.5 s; only a finished sweep draws its plot)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy (as above), once the Agg backend is chosen

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
    panels = names("short")
    fig, axes = plt.subplots(1, len(panels), figsize=(11, 4), sharex=True)
    for ax, metric in zip(axes, panels, strict=True):
        for rest, pts in series.items():
            suffix = " ".join(o for o in rest.split() if o not in common)
            for lib in libs:
                _plot_line(ax, metric, lib, sorted(pts, key=lambda t: t[0]), f"{lib} {suffix}".strip())
        ax.set_title(f"{metric} (95% intervals shaded)")
        ax.set_xlabel(key)
        ax.set_ylim(-0.02, 1.02)
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_line(
    ax: Any, metric: str, lib: str, pts: Sequence[tuple[float, dict[str, Any]]], label: str
) -> None:
    """One library's metric across the swept value, its 95% interval shaded and its n in the legend."""
    population = "n_out_of_scope" if metric in names(population="out_of_scope") else "n_in_scope"
    xs, ys, los, his, ns = [], [], [], [], set()
    for x, p in pts:
        group = p["by_library"].get(lib, {})
        if group.get(metric) is None:
            continue
        ci = (group.get("ci95") or {}).get(metric)
        xs.append(x)
        ys.append(group[metric])
        los.append(ci[0] if ci else group[metric])
        his.append(ci[1] if ci else group[metric])
        ns.add(group.get(population))
    if not xs:
        return
    line = ax.plot(xs, ys, marker=".", label=f"{label} (n={'/'.join(str(n) for n in sorted(ns, key=str))})")[
        0
    ]
    ax.fill_between(xs, los, his, color=line.get_color(), alpha=0.15, linewidth=0)
