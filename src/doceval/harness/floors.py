"""Floors: decision thresholds on the retriever's own score, applied per library, and their calibration.

A floor is calibrated on the calibration split only and stored as an artifact with its provenance, which lists
the ids of the entries it was calibrated on; a run that reports on any of those entries is refused
(train-on-test guard), whatever the files or splits are called. An older artifact without the ids falls back to
comparing split names.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from doceval.common.hints import rerun, stage_command
from doceval.common.io import read_json
from doceval.config import schema
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.inputs.golden import GoldenEntry


@dataclass
class Floors:
    global_floor: float
    per_library: dict[str, float] = field(default_factory=dict)
    source: str = "config"  # config | cli | calibrated:<path>
    provenance: dict[str, Any] = field(default_factory=dict)

    def of(self, library: str) -> float:
        return self.per_library.get(library, self.global_floor)

    def vector(self, entries: Sequence[GoldenEntry]) -> np.ndarray:
        return np.array([self.of(e.library) for e in entries], dtype=np.float64)

    def as_dict(self) -> dict[str, Any]:
        """The floors as a run records them; the artifact's list of calibrated entry ids is shortened to its
        count (its digest stays), so summaries, report.md and MLflow do not carry hundreds of ids."""
        provenance = dict(self.provenance)
        ids = provenance.pop(CALIBRATED_IDS, None)
        if isinstance(ids, list):
            provenance["n_calibrated_ids"] = len(ids)
        # No floor at all is -inf inside (every score passes), null in JSON with the reason beside it.
        unfloored = math.isinf(self.global_floor) and self.global_floor < 0
        return {
            "global": None if unfloored else self.global_floor,
            **({"global_reason": no_floor_reason(self.source)} if unfloored else {}),
            "per_library": dict(sorted(self.per_library.items())),
            "source": self.source,
            "provenance": provenance,
        }


def no_floor_reason(source: str) -> str:
    """Why a run has no global floor, from its source (``none: the assistant applies its own floors``)."""
    why = source.split(":", 1)[1].strip() if source.startswith("none:") else source
    return f"no floor: {why}"


# The floors artifact's provenance names the entries the floors were calibrated on (sorted ids) and their digest.
CALIBRATED_IDS = "calibrated_ids"
CALIBRATED_IDS_SHA256 = "calibrated_ids_sha256"
EXPLICIT_FLOORS = "choose floors explicitly (floors=zero, --score-floor, --floor LIB=VALUE)"


def ids_digest(ids: Iterable[str]) -> str:
    """sha256 of the sorted, distinct ids, one per line: what ``calibrated_ids_sha256`` holds."""
    return hashlib.sha256("\n".join(sorted(set(ids))).encode("utf-8")).hexdigest()


def parse_floor_flags(values: Sequence[str]) -> dict[str, float]:
    """``--floor LIB=VALUE`` (repeatable) -> {lib: value}; a malformed flag is a UsageError naming it."""
    out: dict[str, float] = {}
    for raw in values:
        lib, sep, num = raw.partition("=")
        if not sep or not lib.strip() or not num.strip():
            raise UsageError(f"--floor {raw!r}: expected LIB=VALUE, e.g. --floor pydantic=0.35")
        try:
            value = float(num)
        except ValueError as exc:
            raise UsageError(
                f"--floor {raw!r}: {num!r} is not a number; expected LIB=VALUE, e.g. pydantic=0.35"
            ) from exc
        if not math.isfinite(value):
            raise UsageError(
                f"--floor {raw!r}: {num.strip()} is not a finite number; a floor is a score the retriever can "
                "return (e.g. --floor pydantic=0.35)"
            )
        out[lib.strip().lower()] = value
    return out


def check_score_floor(value: float | None) -> None:
    """``--score-floor``: a finite number (NaN passes or fails every score at random; +-inf is no floor)."""
    if value is not None and not math.isfinite(value):
        raise UsageError(
            f"--score-floor {value}: not a finite number; a floor is a score the retriever can return "
            "(e.g. --score-floor 0.35)"
        )


def _floor_names(floors: Floors) -> tuple[str, Callable[[str], str], str, str]:
    """How messages name the floors by where they came from (the calibrated artifact, the config, the command
    line): (global floor, a library's floor, the per-library mapping, the fix)."""
    if floors.source.startswith("calibrated:"):
        path = floors.source.split(":", 1)[1]
        fix = f"the artifact does not fit this corpus or retriever: rerun {rerun('calibrate')}, or {EXPLICIT_FLOORS}"
        return f"{path}: global", lambda lib: f"{path}: per_library.{lib}", f"{path}: per_library", fix
    if floors.source == "config":
        return (
            "floors.global",
            lambda lib: f"floors.per_library.{lib}",
            "floors.per_library",
            "pick a floor inside it",
        )
    return "--score-floor / floors.global", lambda lib: f"--floor {lib}", "--floor", "pick a floor inside it"


def check_floors(
    floors: Floors,
    libraries: Sequence[str],
    score_range: Sequence[float],
    retriever: str,
    known_in: str = "the corpus",
) -> None:
    """Every per-library floor names a known library (indexed, or ``known_in`` elsewhere: the golden set of a
    user's retriever) and every floor lies in the retriever's score range. Messages name where the floors came
    from: the calibrated artifact, the config or the command line."""
    global_name, library_name, per_library, fix = _floor_names(floors)
    unknown = sorted(set(floors.per_library) - set(libraries))
    if unknown:
        raise UsageError(
            f"{per_library}: {', '.join(unknown)} not in {known_in}; known libraries: {', '.join(sorted(libraries))}"
            + (f"; {fix}" if floors.source.startswith("calibrated:") else "")
        )
    low, high = float(score_range[0]), float(score_range[1])
    for name, value in [
        (global_name, floors.global_floor),
        *((library_name(lib), v) for lib, v in floors.per_library.items()),
    ]:
        if not (low <= value <= high) or math.isnan(value):
            raise UsageError(
                f"{name}={value}: outside the {retriever} retriever's score range [{low}, {high}]; {fix}"
            )


def _calibrated_ids(path: Path, prov: Mapping[str, Any]) -> frozenset[str] | None:
    """The ids the artifact's floors were calibrated on (None: an older artifact that does not record them)."""
    ids = prov.get(CALIBRATED_IDS)
    if ids is None:
        return None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise UsageError(
            f"{path}: provenance.{CALIBRATED_IDS} is not a list of entry ids; rerun {rerun('calibrate')}"
        )
    digest = prov.get(CALIBRATED_IDS_SHA256)
    if digest is not None and digest != ids_digest(ids):
        raise UsageError(
            f"{path}: provenance.{CALIBRATED_IDS} does not match provenance.{CALIBRATED_IDS_SHA256} (edited by "
            f"hand?); rerun {rerun('calibrate')}"
        )
    return frozenset(ids)


def _refuse_overlap(path: Path, calibrated: frozenset[str], report_ids: Collection[str]) -> None:
    """Train-on-test by entry id: no entry being reported may be one the floors were calibrated on."""
    reported = set(report_ids)
    overlap = sorted(reported & calibrated)
    if overlap:
        shown = ", ".join(overlap[:3]) + (", ..." if len(overlap) > 3 else "")
        raise UsageError(
            f"{path}: floors were calibrated on {len(overlap)} of the {len(reported)} entries being reported "
            f"({shown}): train-on-test (provenance.{CALIBRATED_IDS} lists them, whatever the golden file or "
            "split is called). Calibrate on a split disjoint from the one you report (`doceval golden split`, "
            f"then {rerun('calibrate')}), or {EXPLICIT_FLOORS}."
        )


def _finite(value: Any, key: str) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{key} is {value}, not a finite number")
    return number


def load_calibrated(
    path: Path,
    report_split: str | None,
    retriever: schema.Retriever | None = None,
    report_ids: Collection[str] | None = None,
) -> Floors:
    """Floors from a calibration artifact. Refuses floors calibrated for another retriever (a cosine floor means
    nothing on a BM25 score) and train-on-test: floors calibrated on any entry of ``report_ids`` (the entries
    being reported), whatever the splits are called. An artifact that records no ids (older), or a caller that
    gives none, falls back to comparing split names: refused when the run reports on the split the floors were
    calibrated on, on every split, or the artifact names no split."""
    data = read_json(path, "calibrated floors", rerun=stage_command("calibrate"))
    try:
        prov = data["provenance"]
        if not isinstance(prov, dict):
            raise TypeError(f"provenance is a {type(prov).__name__}, expected an object")
        floors = Floors(
            _finite(data["global"], "global"),
            {k: _finite(v, f"per_library.{k}") for k, v in data["per_library"].items()},
            source=f"calibrated:{path}",
            provenance=prov,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"{path}: not a floors artifact ({exc}); rerun {rerun('calibrate')}") from exc
    calibrated_for = prov.get("retriever")
    # The artifact records the retriever block as a plain mapping: compared with this one as it records it.
    wanted = None if retriever is None else config_dict(retriever)
    if wanted is not None and calibrated_for is not None and dict(calibrated_for) != wanted:
        raise UsageError(
            f"{path}: floors were calibrated for retriever {calibrated_for}, not {wanted}; their scores "
            "are on another scale. Calibrate for this retriever (`dvc exp run -S retriever=NAME` reruns "
            "calibrate), or choose floors explicitly (floors=zero, --score-floor, --floor LIB=VALUE)."
        )
    calibrated = _calibrated_ids(path, prov)
    if calibrated is not None and report_ids is not None:
        _refuse_overlap(path, calibrated, report_ids)
        return floors
    calibrated_on = prov.get("split")
    if report_split is None or calibrated_on is None or calibrated_on == report_split:
        raise UsageError(
            f"{path}: floors were calibrated on split {calibrated_on!r}; refusing to report on split "
            f"{report_split!r} with them (train-on-test). Report on the held-out split (e.g. split=test), "
            f"calibrate on another split, or {EXPLICIT_FLOORS}."
        )
    if calibrated is None:
        print(
            f"note: {path} does not record which entries it was calibrated on (an older artifact): only its "
            f"split name {calibrated_on!r} was checked against the reported split {report_split!r}; rerun "
            f"{rerun('calibrate')} so train-on-test is checked by entry id",
            file=sys.stderr,
        )
    return floors


def resolve_floors(
    floors_cfg: schema.Floors,
    report_split: str | None,
    score_floor: float | None = None,
    floor_flags: Mapping[str, float] | None = None,
    retriever: schema.Retriever | None = None,
    report_ids: Collection[str] | None = None,
) -> Floors:
    """The effective floors: calibrated artifact or config, then CLI flags on top (never written back).
    ``report_ids``: the entries being reported, for the train-on-test guard on a calibrated artifact."""
    if isinstance(floors_cfg, schema.FloorsCalibrated) and score_floor is None and not floor_flags:
        floors = load_calibrated(Path(floors_cfg.path), report_split, retriever, report_ids)
    else:
        floors = Floors(
            float(floors_cfg.global_), {str(k).lower(): float(v) for k, v in floors_cfg.per_library.items()}
        )
        floors.source = "config"
    check_score_floor(score_floor)
    if score_floor is not None:
        floors.global_floor = float(score_floor)
        floors.source = "cli"
    if floor_flags:
        floors.per_library.update(floor_flags)
        floors.source = "cli"
    return floors
