"""DVC stage `report`: eval/report.md from the test summary and the calibration artifact, with the gate's verdict.

The report never fails the pipeline; `doceval gate` is what fails a build.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doceval.common.io import read_json
from doceval.results.gating import GateResult, gate
from doceval.results.markdown import render_report
from doceval.results.summaries import load_summary


def run(params: Mapping[str, Any]) -> tuple[Path, GateResult]:
    out = Path(params["paths"]["eval"])
    summary = load_summary(out / "summary.json")
    floors_file = out / "calibration" / "floors.json"
    calibration = read_json(floors_file, "calibrated floors") if floors_file.is_file() else None
    verdict = gate(summary, params["gate"])
    lines = [render_report(summary, calibration).rstrip(), "", "## Gate", "", f"`{verdict.line}`", ""]
    lines += [f"- {f}" for f in verdict.failures]
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out / "report.md", verdict
