"""DVC stage `judge`: the offline judge's agreement with the team's labelled answers on their held-out half
-> eval/judge/reference.json (and the doceval-judge MLflow experiment). The report prints it next to
answer_accuracy, and says whether it clears the bar (doceval.scoring.agreement.trusted)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from doceval import tracking
from doceval.common.io import check_writable, write_json_atomic
from doceval.common.paths import Named, refuse_overlap
from doceval.config import schema
from doceval.config.compose import check_config, find_conf_dir
from doceval.config.objects import build_block
from doceval.harness.judging_runs import validate
from doceval.inputs.golden import parse_golden
from doceval.inputs.judge_labels import read_label_files
from doceval.inputs.qrels import labels_md5 as golden_md5

if TYPE_CHECKING:
    from doceval.config.schema import Config


def reference_judge() -> schema.JudgeReference:
    """The offline judge as conf/judge/reference.yaml configures it (whatever judge the run is configured with),
    checked against the schema like any judge block."""
    path = find_conf_dir() / "judge" / "reference.yaml"
    block = yaml.safe_load(path.read_text(encoding="utf-8"))
    check_config({"judge": block}, str(path), complete=False)
    return build_block(schema.JudgeReference, block, "judge")


def run(cfg: Config, progress: bool = True) -> dict[str, Any]:
    out = Path(cfg.paths.eval) / "judge" / "reference.json"
    check_writable(out, str(out), "make eval/judge writable, or set paths.eval to a writable folder")
    spec = cfg.judge_validation
    labels: list[Named] = [("the judge labels (judge_validation.labels)", p) for p in spec.labels]
    refuse_overlap(
        [("the judge stage's report (paths.eval)", out)], [("the golden set", cfg.golden), *labels]
    )
    tracking.check_configured(cfg)
    golden_path = Path(cfg.golden)
    golden = {e.id: e for e in parse_golden(golden_path, allow_drafts=cfg.allow_drafts)}
    found = read_label_files([Path(p) for p in spec.labels], golden, spec.split)
    report = validate(found.rows, reference_judge(), progress=progress, seed=cfg.seed, files=found.files)
    report = {
        "labels": {**found.info, "golden": str(golden_path), "golden_md5": golden_md5(golden_path)},
        **report,
    }
    write_json_atomic(out, report)
    tracking.log_configured_judge_validation(cfg, report)
    return report
