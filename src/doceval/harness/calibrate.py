"""The calibrate stage: pick per-library floors on the calibration split from the cached candidates."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from doceval.common.provenance import provenance
from doceval.errors import UsageError
from doceval.harness.candidates import CandidateSet
from doceval.harness.floors import (
    CALIBRATED_IDS,
    CALIBRATED_IDS_SHA256,
    LibraryCalibration,
    calibrate_library,
    ids_digest,
)
from doceval.inputs.golden import GoldenEntry
from doceval.scoring.metrics import build_matrix


def _subset(
    entries: list[GoldenEntry], cands: CandidateSet, rows: list[int], threshold: int
) -> tuple[Any, np.ndarray]:
    chosen = [entries[i] for i in rows]
    matrix = build_matrix([cands.ranked[e.id] for e in chosen], [e.grades for e in chosen], threshold)
    return matrix, np.array([e.out_of_scope for e in chosen], dtype=bool)


def calibrate(
    cfg: Mapping[str, Any],
    entries: list[GoldenEntry],
    cands: CandidateSet,
    libraries: list[str],
    golden_md5: str,
    candidates_hash: str | None,
) -> dict[str, Any]:
    """Floors per indexed library (and a global one over all of them) maximising the named objective."""
    cal = cfg["calibration"]
    split = cal["split"]
    k = int(cfg["k"])
    objective = str(cal["objective"])
    threshold = int((cfg.get("relevance") or {}).get("threshold", 2))
    low = float(cands.meta["score_range"][0])
    indexed = [i for i, e in enumerate(entries) if e.library in libraries and not cands.routed.get(e.id)]
    if not indexed:
        raise UsageError(
            f"calibration split {split!r} has no entries of an indexed library; nothing to calibrate"
        )

    def grid_for(rows: list[int]) -> np.ndarray:
        scores = np.array([s for i in rows for _, s in cands.ranked[entries[i].id]])
        if not len(scores):
            return np.array([low])
        lo = max(low, float(scores.min())) if np.isfinite(low) else float(scores.min())
        return np.linspace(lo, float(scores.max()), int(cal.get("grid_points", 101)))

    per_library: dict[str, LibraryCalibration] = {}
    for lib in libraries:
        rows = [i for i in indexed if entries[i].library == lib]
        if not rows:
            continue
        matrix, oos = _subset(entries, cands, rows, threshold)
        per_library[lib] = calibrate_library(lib, matrix, oos, k, objective, low, grid_for(rows))
    matrix, oos = _subset(entries, cands, indexed, threshold)
    overall = calibrate_library("(global)", matrix, oos, k, objective, low, grid_for(indexed))
    # The entries whose scores chose the floors (router refusals never reach a floor): a run reporting on any
    # of them is refused (train-on-test), whatever its golden file or split is called.
    calibrated_ids = sorted({entries[i].id for i in indexed})
    return {
        "global": overall.floor,
        "per_library": {lib: c.floor for lib, c in per_library.items()},
        "provenance": {
            "split": split,
            "objective": objective,
            "k": k,
            "golden_md5": golden_md5,
            "candidates_hash": candidates_hash,
            "retriever": dict(cfg["retriever"]),
            "score_range": list(cands.meta["score_range"]),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "git_commit": provenance()["git_commit"],
            "git_dirty": provenance()["git_dirty"],
            CALIBRATED_IDS_SHA256: ids_digest(calibrated_ids),
            CALIBRATED_IDS: calibrated_ids,
        },
        "libraries": {lib: _describe(c) for lib, c in {**per_library, "(global)": overall}.items()},
    }


def _describe(c: LibraryCalibration) -> dict[str, Any]:
    return {
        "floor": c.floor,
        "objective": c.objective,
        "n_in_scope": c.n_in_scope,
        "n_out_of_scope": c.n_out_of_scope,
        "separable": c.separable,
        "in_scope_top": c.in_scope_top,
        "out_of_scope_top": c.out_of_scope_top,
        "curve": {m: [None if v != v else v for v in vals] for m, vals in c.curve.items()},  # NaN -> null
    }


def overlap_notes(artifact: Mapping[str, Any]) -> list[str]:
    """Human lines for libraries where no floor separates in-scope from out-of-scope top scores."""
    notes = []
    for lib, info in artifact["libraries"].items():
        if info["separable"] or lib == "(global)":
            continue
        ins, oos = info["in_scope_top"], info["out_of_scope_top"]
        notes.append(
            f"{lib}: no floor separates in-scope from out-of-scope: best relevant scores span "
            f"[{ins[0]:.3f}, {ins[2]:.3f}] while out-of-scope top scores reach {oos[2]:.3f}; "
            f"chosen floor {info['floor']:.4f} trades hits for refusals by the objective"
        )
    return notes


def plot_calibration(artifact: Mapping[str, Any], path: Path) -> None:
    """hit_rate and refused_correctly against the floor, one panel per library, the chosen floor marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    libs = list(artifact["libraries"])
    cols = min(3, len(libs))
    rows = (len(libs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, lib in zip(axes.flat, libs, strict=False):
        info = artifact["libraries"][lib]
        curve = info["curve"]
        x = curve["floor"]
        for metric, style in (("hit_rate", "-"), ("refused_correctly", "--")):
            y = [np.nan if v is None else v for v in curve[metric]]
            ax.plot(x, y, style, label=metric)
        ax.axvline(info["floor"], color="black", lw=0.8, ls=":", label=f"chosen {info['floor']:.3f}")
        ax.set_title(f"{lib} ({info['n_in_scope']} in / {info['n_out_of_scope']} out)", fontsize=9)
        ax.set_xlabel("floor")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=7, loc="lower left")
    for ax in list(axes.flat)[len(libs) :]:
        ax.axis("off")
    fig.suptitle(
        f"Floor calibration on split '{artifact['provenance']['split']}' "
        f"({artifact['provenance']['retriever']['name']}, k={artifact['provenance']['k']})"
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_curves(artifact: Mapping[str, Any], folder: Path) -> None:
    """One CSV per library for `dvc plots` (x: floor; y: hit_rate, refused_correctly)."""
    folder.mkdir(parents=True, exist_ok=True)
    for lib, info in artifact["libraries"].items():
        curve = info["curve"]
        name = "global" if lib == "(global)" else lib
        lines = ["floor,hit_rate,refused_correctly,mrr"]
        for i, x in enumerate(curve["floor"]):
            vals = [curve[m][i] for m in ("hit_rate", "refused_correctly", "mrr")]
            lines.append(",".join([f"{x:.6f}", *("" if v is None else f"{v:.6f}" for v in vals)]))
        (folder / f"{name}.csv").write_text("\n".join(lines) + "\n")
