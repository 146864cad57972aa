"""DVC stage `report`: eval/report.md from the test summary and the calibration artifact, with the gate's verdict.

The report never fails the pipeline; `doceval gate` is what fails a build. report.md is checked writable before
anything is read and written atomically (a temporary sibling renamed over it): readers never see half a report.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doceval.common.io import read_json, write_text_atomic
from doceval.errors import UsageError
from doceval.results.gating import GateResult, gate
from doceval.results.markdown import render_report
from doceval.results.summaries import load_summary


def check_writable(path: Path) -> None:
    """Refuse, before any work, a report path that cannot be written (a directory, a read-only folder)."""
    fix = (
        f"make {path.parent} writable, or set paths.eval to a writable folder (conf/, then `doceval params`)"
    )
    if path.is_dir():
        raise UsageError(f"{path}: is a directory, not a report file; remove or rename it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".probe"):
            pass
    except OSError as exc:
        raise UsageError(f"{path}: cannot write in {path.parent} ({exc.strerror or exc}); {fix}") from None


def run(params: Mapping[str, Any]) -> tuple[Path, GateResult]:
    out = Path(params["paths"]["eval"])
    report = out / "report.md"
    check_writable(report)
    summary = load_summary(out / "summary.json")
    floors_file = out / "calibration" / "floors.json"
    calibration = read_json(floors_file, "calibrated floors") if floors_file.is_file() else None
    verdict = gate(summary, params["gate"])
    lines = [render_report(summary, calibration).rstrip(), "", "## Gate", "", f"`{verdict.line}`", ""]
    lines += [f"- {f}" for f in verdict.failures]
    write_text_atomic(report, "\n".join(lines) + "\n")
    return report, verdict
