"""Judges carry their evidence: every validation of a judge against labelled answers is recorded by the judge's
identity under ``<paths.eval>/judge/`` (``doceval judge validate`` writes ``<hash>.<labels md5>.<split>.json``;
the judge stage writes ``reference.json`` and ``reference_held_out.json``), and a run records what those files
say of its judge (``config.judge_evidence``: doceval.scoring.agreement.judge_evidence), so that every surface
printing its answer_accuracy can say whether that judge has cleared the bar (docs/design.md section 4.4)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doceval.common.io import write_json_atomic
from doceval.scoring.agreement import judge_evidence

log = logging.getLogger(__name__)

EVIDENCE_DIR = "judge"  # under paths.eval


def evidence_dir(eval_dir: str | Path) -> Path:
    return Path(eval_dir) / EVIDENCE_DIR


def record_name(report: Mapping[str, Any]) -> str:
    """``<judge hash>.<labels md5, 8 hex>.<split>.json``: one file per judge, label set and split, so validating
    again replaces that validation and keeps the others."""
    labels = report.get("labels") or {}
    return (
        f"{(report.get('judge') or {}).get('hash')}.{str(labels.get('md5'))[:8]}.{labels.get('split')}.json"
    )


def record_validation(report: Mapping[str, Any], eval_dir: str | Path) -> Path:
    """Write a validation report (the JSON ``doceval judge validate --output`` writes) where runs look for it."""
    path = evidence_dir(eval_dir) / record_name(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, report)
    return path


def recorded_validations(eval_dir: str | Path) -> list[dict[str, Any]]:
    """Every validation report under ``<eval_dir>/judge/`` (a file that is not one is skipped, said once)."""
    folder = evidence_dir(eval_dir)
    if not folder.is_dir():
        return []
    reports = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            log.warning("%s: not read as a judge validation (%s)", path, exc)
            continue
        if isinstance(data, dict) and isinstance(data.get("judge"), dict) and "agreement" in data:
            reports.append(data)
    return reports


def evidence_for(judge_id: Mapping[str, Any] | None, eval_dir: str | Path) -> dict[str, Any] | None:
    """What the recorded validations say of the judge ``judge_id`` (None: no judge)."""
    if not judge_id or not judge_id.get("hash"):
        return None
    return judge_evidence(str(judge_id["hash"]), recorded_validations(eval_dir))
