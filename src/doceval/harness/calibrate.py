"""The calibrate stage: pick per-library floors on the calibration split from the cached candidates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from doceval.common.io import write_text_atomic
from doceval.common.plotting import panel_grid
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.harness.candidate_set import CandidateSet
from doceval.harness.candidates import score_range_of, score_range_record
from doceval.harness.floor_search import (
    LibraryCalibration,
    Objective,
    calibrate_library,
    describe_operating_point,
    make_objective,
)
from doceval.harness.floors import CALIBRATED_IDS, CALIBRATED_IDS_SHA256, ids_digest
from doceval.harness.tradeoff import entry_signal
from doceval.inputs.corpus import Corpus
from doceval.inputs.golden import GoldenEntry
from doceval.scoring.metrics import build_matrix
from doceval.scoring.registry import names

if TYPE_CHECKING:
    from doceval.config.schema import Config


def _subset(
    entries: list[GoldenEntry], cands: CandidateSet, rows: list[int], threshold: int
) -> tuple[Any, np.ndarray]:
    chosen = [entries[i] for i in rows]
    matrix = build_matrix([cands.ranked[e.id] for e in chosen], [e.grades for e in chosen], threshold)
    return matrix, np.array([e.out_of_scope for e in chosen], dtype=bool)


@dataclass(frozen=True)
class _FloorSearch:
    """Where floors are searched for a set of calibration rows (indices into ``entries``): on the retrieval
    score (the default) or on another per-entry signal (``floors.signal``; doceval.harness.tradeoff)."""

    entries: list[GoldenEntry]
    cands: CandidateSet
    signal_name: str
    signal_of: dict[int, float]  # row -> its signal value; empty for the score
    low: float  # the retriever's lowest possible score
    grid_points: int

    def signal(self, rows: list[int]) -> np.ndarray | None:
        return None if self.signal_name == "score" else np.array([self.signal_of[i] for i in rows])

    def grid(self, rows: list[int]) -> np.ndarray:
        if self.signal_name != "score":
            sig = np.array([self.signal_of[i] for i in rows])
            sig = sig[np.isfinite(sig)]
            lo_s, hi_s = (float(sig.min()), float(sig.max())) if len(sig) else (0.0, 1.0)
            return np.linspace(lo_s, hi_s, self.grid_points)
        scores = np.array([s for i in rows for _, s in self.cands.ranked[self.entries[i].id]])
        if not len(scores):
            return np.array([self.low])
        lo = max(self.low, float(scores.min())) if np.isfinite(self.low) else float(scores.min())
        return np.linspace(lo, float(scores.max()), self.grid_points)


def _per_library(
    cfg: Config,
    search: _FloorSearch,
    indexed: list[int],
    libraries: list[str],
    overall: LibraryCalibration,
    fn: Objective,
) -> tuple[dict[str, LibraryCalibration], dict[str, str]]:
    """Each indexed library's own floor, and why a library with too few entries of a side uses the global
    (``overall``) floor instead."""
    k, objective, threshold = cfg.k, cfg.calibration.objective, cfg.relevance.threshold
    min_entries = cfg.calibration.min_entries
    per_library: dict[str, LibraryCalibration] = {}
    fallback: dict[str, str] = {}
    for lib in libraries:
        rows = [i for i in indexed if search.entries[i].library == lib]
        if not rows:
            continue
        matrix, oos = _subset(search.entries, search.cands, rows, threshold)
        per_library[lib] = calibrate_library(
            lib, matrix, oos, k, objective, search.low, search.grid(rows), fn, search.signal(rows)
        )
        n_in, n_out = int((~oos).sum()), int(oos.sum())
        if min(n_in, n_out) < min_entries:
            # Too few entries to choose a floor of its own: the pooled (global) floor, with the reason.
            side = "in-scope" if n_in < min_entries else "out-of-scope"
            fallback[lib] = (
                f"{min(n_in, n_out)} {side} calibration entries < calibration.min_entries="
                f"{min_entries}: uses the global floor {overall.floor:.4f} (its own would be "
                f"{per_library[lib].floor:.4f})"
            )
    return per_library, fallback


def calibrate(
    cfg: Config,
    entries: list[GoldenEntry],
    cands: CandidateSet,
    libraries: list[str],
    golden_md5: str,
    candidates_hash: str | None,
    corpus: Corpus | None = None,
) -> dict[str, Any]:
    """Floors per indexed library (and a global one over all of them) maximising the named objective."""
    cal = cfg.calibration
    split = cal.split
    k = cfg.k
    objective = cal.objective
    targets = {
        "max_overrefusal": float(cal.max_overrefusal),
        "min_refused_correctly": float(cal.min_refused_correctly),
    }
    fn = make_objective(objective, **targets)
    min_entries = cal.min_entries
    threshold = cfg.relevance.threshold
    low = score_range_of(cands.meta)[0]
    indexed = [i for i, e in enumerate(entries) if e.library in libraries and not cands.routed.get(e.id)]
    if not indexed:
        raise UsageError(
            f"calibration split {split!r} has no entries of an indexed library; nothing to calibrate"
        )

    signal_name = cfg.floors.signal
    signal_of: dict[int, float] = {}
    if signal_name != "score":
        values = entry_signal(signal_name, [entries[i] for i in indexed], cands, corpus)
        signal_of = dict(zip(indexed, (float(v) for v in values), strict=True))
    search = _FloorSearch(entries, cands, signal_name, signal_of, low, cal.grid_points)

    matrix, oos = _subset(entries, cands, indexed, threshold)
    if not oos.any():
        raise UsageError(
            f"calibration split {split!r} has no out-of-scope entries of an indexed library: refusal cannot be "
            "calibrated. Add out-of-scope entries (nonexistent_api or off_topic questions about the indexed "
            "libraries) to that split, or choose floors explicitly (floors=zero, --score-floor)"
        )
    overall = calibrate_library(
        "(global)", matrix, oos, k, objective, low, search.grid(indexed), fn, search.signal(indexed)
    )
    per_library, fallback = _per_library(cfg, search, indexed, libraries, overall, fn)
    # The entries whose scores chose the floors (router refusals never reach a floor): a run reporting on any
    # of them is refused (train-on-test), whatever its golden file or split is called.
    calibrated_ids = sorted({entries[i].id for i in indexed})
    record = {
        "min_entries": min_entries,
        "signal": signal_name,
        "k": k,
        "golden_md5": golden_md5,
        "candidates_hash": candidates_hash,
    }
    return {
        "global": overall.floor,
        "per_library": {lib: overall.floor if lib in fallback else c.floor for lib, c in per_library.items()},
        "operating_point": describe_operating_point(objective, **targets),
        "fallback": fallback,
        "provenance": _provenance(cfg, objective, targets, record, cands, calibrated_ids),
        "libraries": {lib: _describe(c) for lib, c in {**per_library, "(global)": overall}.items()},
    }


def _provenance(
    cfg: Config,
    objective: str,
    targets: Mapping[str, float],
    record: Mapping[str, Any],
    cands: CandidateSet,
    calibrated_ids: list[str],
) -> dict[str, Any]:
    """What the floors were chosen from: split, objective and its target, ``record`` (min_entries, signal, k,
    golden md5, candidates hash), retriever and its score range, and the ids used: the inputs only, so a
    fresh clone reproduces floors.json byte for byte (when and at which commit: the calibrate MLflow run)."""
    return {
        "split": cfg.calibration.split,
        "objective": objective,
        **(
            {"max_overrefusal": targets["max_overrefusal"]}
            if objective == "max_refusal_at_overrefusal"
            else {}
        ),
        **(
            {"min_refused_correctly": targets["min_refused_correctly"]}
            if objective == "min_overrefusal_at_refusal"
            else {}
        ),
        **record,
        "retriever": config_dict(cfg.retriever),
        **score_range_record(score_range_of(cands.meta)),
        CALIBRATED_IDS_SHA256: ids_digest(calibrated_ids),
        CALIBRATED_IDS: calibrated_ids,
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
    notes += [f"{lib}: {why}" for lib, why in (artifact.get("fallback") or {}).items()]
    return notes


def plot_calibration(artifact: Mapping[str, Any], path: Path) -> None:
    """hit_rate and refused_correctly against the floor, one panel per library, the chosen floor marked."""
    libs = list(artifact["libraries"])
    prov = artifact["provenance"]
    title = f"Floor calibration on split '{prov['split']}' ({prov['retriever']['name']}, k={prov['k']})"
    with panel_grid(len(libs), path, title) as axes:
        for ax, lib in zip(axes, libs, strict=True):
            info = artifact["libraries"][lib]
            curve = info["curve"]
            for metric, style in (("hit_rate", "-"), ("refused_correctly", "--")):
                ax.plot(
                    curve["floor"], [np.nan if v is None else v for v in curve[metric]], style, label=metric
                )
            ax.axvline(info["floor"], color="black", lw=0.8, ls=":", label=f"chosen {info['floor']:.3f}")
            ax.set_title(f"{lib} ({info['n_in_scope']} in / {info['n_out_of_scope']} out)", fontsize=9)
            ax.set_xlabel("floor")
            ax.set_ylim(-0.02, 1.02)
            ax.legend(fontsize=7, loc="lower left")


CURVE_CSV = names("curve_csv")  # the columns after floor in curves/*.csv, for `dvc plots`


def write_curves(artifact: Mapping[str, Any], folder: Path) -> None:
    """One CSV per library for `dvc plots` (x: floor; y: hit_rate, refused_correctly)."""
    folder.mkdir(parents=True, exist_ok=True)
    for lib, info in artifact["libraries"].items():
        curve = info["curve"]
        name = "global" if lib == "(global)" else lib
        lines = [",".join(["floor", *CURVE_CSV])]
        for i, x in enumerate(curve["floor"]):
            vals = [curve[m][i] for m in CURVE_CSV]
            lines.append(",".join([f"{x:.6f}", *("" if v is None else f"{v:.6f}" for v in vals)]))
        write_text_atomic(folder / f"{name}.csv", "\n".join(lines) + "\n")
