"""DVC stage `report`: eval/report.md from the test summary and the calibration artifact, with the gate's verdict.

The report never fails the pipeline; `doceval gate` is what fails a build. report.md is checked writable before
anything is read and written atomically (a temporary sibling renamed over it): readers never see half a report.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doceval.common.io import check_writable, read_json, write_text_atomic
from doceval.results.gating import GateResult, gate
from doceval.results.markdown import render_report
from doceval.results.summaries import load_summary


def run(params: Mapping[str, Any]) -> tuple[Path, GateResult]:
    out = Path(params["paths"]["eval"])
    report = out / "report.md"
    check_writable(
        report,
        str(report),
        f"make {report.parent} writable, or set paths.eval to a writable folder (conf/, then `doceval params`)",
    )
    summary = load_summary(out / "summary.json")
    floors_file = out / "calibration" / "floors.json"
    calibration = read_json(floors_file, "calibrated floors") if floors_file.is_file() else None
    verdict = gate(summary, params["gate"])
    lines = [render_report(summary, calibration).rstrip(), "", "## Gate", "", f"`{verdict.line}`", ""]
    lines += [f"- {f}" for f in verdict.failures]
    write_text_atomic(report, "\n".join(lines) + "\n")
    return report, verdict
