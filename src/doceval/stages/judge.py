"""DVC stage `judge`: the offline judge's agreement with the team's labelled answers on their held-out half
-> eval/judge/reference.json (and the doceval-judge MLflow experiment). The report prints it next to
answer_accuracy, and says whether it clears the bar (doceval.scoring.agreement.trusted)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from doceval.common.io import check_writable, write_json_atomic
from doceval.config.compose import find_conf_dir
from doceval.harness.judging_runs import validate
from doceval.inputs.golden import parse_golden
from doceval.inputs.judge_labels import labels_md5, read_labels, select
from doceval.inputs.qrels import labels_md5 as golden_md5


def run(params: Mapping[str, Any], progress: bool = True) -> dict[str, Any]:
    from doceval import tracking

    out = Path(params["paths"]["eval"]) / "judge" / "reference.json"
    check_writable(out, str(out), "make eval/judge writable, or set paths.eval to a writable folder")
    tracking.check_configured(params)
    spec = params["judge_validation"]
    judge_cfg = yaml.safe_load((find_conf_dir() / "judge" / "reference.yaml").read_text(encoding="utf-8"))
    golden_path, labels_path = Path(params["golden"]), Path(spec["labels"])
    golden = {e.id: e for e in parse_golden(golden_path)}
    split = None if spec["split"] == "all" else str(spec["split"])
    rows = select(read_labels(labels_path, golden), split)
    report = validate(rows, judge_cfg, progress=progress, seed=int(params.get("seed", 0)))
    report = {
        "labels": {"path": str(labels_path), "md5": labels_md5(labels_path), "split": spec["split"],
                   "golden": str(golden_path), "golden_md5": golden_md5(golden_path)},
        **report,
    }  # fmt: skip
    write_json_atomic(out, report)
    tracking.log_configured_judge_validation(params, report)
    return report
