"""report.md's floors and calibration sections: the floors a run used (source, global and per-library floors,
provenance) and, from the calibration record, how each floor was chosen and what it does on the calibration
split. Values from data go through ``md_text``/``md_code`` (doceval.common.text), as in doceval.results.markdown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doceval.common.text import md_code, md_table, md_text
from doceval.results.comparison import _num


def _triple(values: Any) -> str:
    if not values:
        return "-"
    return " / ".join(f"{float(v):.4f}" for v in values)


def floors_section(floors: Mapping[str, Any]) -> list[str]:
    """The floors this run used: source, global floor (or why none), per-library floors, provenance."""
    out = ["", "## Floors", ""]
    if not floors:
        return [*out, "Not recorded in this summary."]
    # No floor at all: the summary says why beside the null (an older summary: n/a).
    reason = floors.get("global_reason") if floors.get("global") is None else None
    shown = md_text(reason) if reason else _num(floors.get("global"))
    out.append(f"Source: {md_code(floors.get('source', '?'))}. Global floor: {shown}.")
    per = floors.get("per_library") or {}
    if per:
        out += [""] + md_table(
            ["library", "floor"], [[md_text(k), f"{float(v):.4f}"] for k, v in per.items()]
        )
    else:
        out += ["", "No per-library floors: every library uses the global floor."]
    prov = floors.get("provenance") or {}
    if prov:
        out += [
            "",
            "Floors provenance: " + ", ".join(f"{md_text(k)} {md_code(v)}" for k, v in prov.items()) + ".",
        ]
    return out


def calibration_section(calibration: Mapping[str, Any], floors: Mapping[str, Any]) -> list[str]:
    """The calibration per library (floor, objective, separability, score spreads) and the libraries whose
    calibrated floor this run did not use."""
    out = ["", "## Calibration", ""]
    # Either {"per_library": {lib: {...}}, "objective", "split"} or the floors artifact itself
    # ({"per_library": {lib: floor}, "libraries": {lib: {...}}, "provenance": {"objective", "split"}}).
    cal_prov = calibration.get("provenance") or {}
    objective_name = calibration.get("objective") or cal_prov.get("objective")
    out.append(
        f"Objective {md_code(objective_name)}, maximised per library on split "
        f"{md_code(calibration.get('split') or cal_prov.get('split'))}."
    )
    per_lib = calibration.get("libraries") or calibration.get("per_library") or {}
    rows, unsep = [], []
    for lib, c in per_lib.items():
        c = c if isinstance(c, Mapping) else {"floor": c}
        sep = c.get("separable")
        sep_text = "yes" if sep is True else "**no**" if sep is False else "?"
        objective = c.get("objective")
        rows.append(
            [
                md_text(lib),
                _num(None if c.get("floor") is None else float(c["floor"])),
                _num(None if objective is None else float(objective)),
                sep_text,
                _triple(c.get("in_scope_top")),
                _triple(c.get("out_of_scope_top")),
            ]
        )
        if sep is False:
            unsep.append(md_text(lib))
    out.append("")
    out += (
        md_table(
            [
                "library",
                "floor",
                "objective",
                "separable",
                "in-scope relevant score (min / median / max)",
                "out-of-scope top score (min / median / max)",
            ],
            rows,
            ["l", "r", "r", "l", "l", "l"],
        )
        if rows
        else ["(no libraries)"]
    )
    out.append("")
    if unsep:
        out.append(
            f"No floor separates in-scope from out-of-scope scores for: {', '.join(unsep)}. "
            "The chosen floor trades hits for correct refusals there."
        )
    elif rows:
        out.append("For every library some floor separates in-scope from out-of-scope scores.")
    differ = _floors_not_used(per_lib, floors) if floors else []
    if differ:
        out += ["", f"**Note**: this run did not use the calibrated floors for: {', '.join(differ)}."]
    return out


def _floors_not_used(per_lib: Mapping[str, Any], floors: Mapping[str, Any]) -> list[str]:
    """``lib (calibrated F, used G)`` for each library whose floor in this run differs from its calibrated one."""
    differ = []
    for lib, c in per_lib.items():
        want = c.get("floor") if isinstance(c, Mapping) else c
        got = (floors.get("per_library") or {}).get(lib, floors.get("global", 0.0))
        if want is not None and (got is None or abs(float(got) - float(want)) > 1e-12):
            used = "no floor" if got is None else f"{float(got):.4f}"
            differ.append(f"{md_text(lib)} (calibrated {float(want):.4f}, used {used})")
    return differ
