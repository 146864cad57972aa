"""The floors a run applies (docs/design.md section 5): explicit, calibrated or none, and why none; checked
against the golden set's libraries when a user's retriever has no corpus to name them."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from doceval.common.naming import USER_FUNCTION
from doceval.config import schema
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.harness.floors import Floors, check_floors, resolve_floors
from doceval.inputs.golden import GoldenEntry

if TYPE_CHECKING:
    from doceval.config.schema import Config


@dataclass(frozen=True)
class FloorOptions:
    """The run's floor settings (from EvalOptions), and whether the retriever is the user's function."""

    floors: Floors | None
    score_floor: float | None
    floor_flags: dict[str, float] = field(default_factory=dict)
    function_retriever: bool = False


NO_FLOORS = "none: the retriever returns ids without scores, so no floor can apply"


def _not_calibrated_for(path: Path, retriever: schema.Retriever) -> str | None:
    """Why the floors artifact cannot be this retriever's (missing, or calibrated for another retriever), or
    None when it names this one; a damaged artifact is left to the loader, which says so."""
    if not path.is_file():
        return f"{path} does not exist"
    try:
        calibrated_for = json.loads(path.read_text(encoding="utf-8"))["provenance"]["retriever"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    # The artifact records the retriever block as a plain mapping: compare it with the block as recorded.
    if isinstance(calibrated_for, Mapping) and dict(calibrated_for) != config_dict(retriever):
        return f"{path}: calibrated for {dict(calibrated_for)}"
    return None


def run_floors(
    cfg: Config,
    options: FloorOptions,
    split: str | None,
    external: bool,
    scored: bool,
    report_ids: Collection[str] | None = None,
) -> Floors:
    """The effective floors. An external assistant applies its own (none here); a user's retriever that
    returns bare ids has no scores to threshold; floors calibrated for another retriever never apply to a
    user's function (it runs without floors until its own are calibrated, and the summary says so).
    ``report_ids``: the entries being reported, checked against the entries calibrated floors were fit on."""
    if options.floors is not None:
        return options.floors
    explicit = options.score_floor is not None or bool(options.floor_flags)
    if external:
        if explicit:
            raise UsageError("--score-floor/--floor: an external assistant applies its own floors; drop them")
        return Floors(float("-inf"), {}, source="none: the assistant applies its own floors")
    if not scored:
        if explicit:
            raise UsageError(
                "--score-floor/--floor: the retriever returns ids without scores, so floors cannot apply; "
                "return (id, score) pairs, or tune its own evidence bar with +retriever.kwargs.NAME=VALUE"
            )
        return Floors(float("-inf"), {}, source=NO_FLOORS)
    if options.function_retriever and isinstance(cfg.floors, schema.FloorsCalibrated) and not explicit:
        why = _not_calibrated_for(Path(cfg.floors.path), cfg.retriever)
        if why is not None:
            return Floors(float("-inf"), {}, source=f"none: no floors calibrated for this retriever ({why})")
        # Floors calibrated for this very function: every guard (train-on-test, damage) applies as usual.
    return resolve_floors(
        cfg.floors,
        split,
        options.score_floor,
        options.floor_flags,
        retriever=cfg.retriever,
        report_ids=report_ids,
    )


def check_golden_libraries(floors: Floors, entries: Sequence[GoldenEntry], golden_path: Path) -> None:
    """A user's retriever has no corpus to name the libraries: per-library floors must name one of the golden
    set's, as they must name an indexed one with a built-in retriever."""
    libraries = sorted({e.library for e in entries})
    unbounded = (float("-inf"), float("inf"))
    check_floors(floors, libraries, unbounded, USER_FUNCTION, known_in=f"the golden set {golden_path}")
