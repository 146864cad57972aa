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
    """The offline judge on the held-out halves of ``judge_validation.labels`` (eval/judge/reference.json) and
    on every row of the files held out as a whole, ``judge_validation.held_out`` (reference_held_out.json);
    both are validations of its identity that runs read as its evidence (doceval.harness.judge_evidence)."""
    spec = cfg.judge_validation
    outs = {"labels": report_path(cfg, False), "held_out": report_path(cfg, True)}
    for out in outs.values():
        check_writable(out, str(out), "make eval/judge writable, or set paths.eval to a writable folder")
    labels: list[Named] = [("the judge labels (judge_validation.labels)", p) for p in spec.labels]
    labels += [("the held-out judge labels (judge_validation.held_out)", p) for p in spec.held_out]
    refuse_overlap(
        [("the judge stage's reports (paths.eval)", out) for out in outs.values()],
        [("the golden set", cfg.golden), *labels],
    )
    tracking.check_configured(cfg)
    golden_path = Path(cfg.golden)
    golden = {e.id: e for e in parse_golden(golden_path, allow_drafts=cfg.allow_drafts)}
    judge = reference_judge()
    report = _validated(cfg, golden, golden_path, judge, list(spec.labels), spec.split, progress)
    write_json_atomic(outs["labels"], report)
    if spec.held_out:
        held = _validated(cfg, golden, golden_path, judge, list(spec.held_out), "all", progress, True)
        report["held_out"] = held
    else:  # the stage's output exists either way (DVC); no validation in it, so no run reads it as evidence
        held = {
            "labels": {"paths": [], "held_out": True},
            "note": "judge_validation.held_out names no label file",
        }
    write_json_atomic(outs["held_out"], held)
    return report


def report_path(cfg: Config, held_out: bool) -> Path:
    """eval/judge/reference.json (the held-out halves) or eval/judge/reference_held_out.json."""
    return Path(cfg.paths.eval) / "judge" / ("reference_held_out.json" if held_out else "reference.json")


def _validated(
    cfg: Config,
    golden: dict[str, Any],
    golden_path: Path,
    judge: schema.JudgeReference,
    paths: list[str],
    split: str,
    progress: bool,
    held_out: bool = False,
) -> dict[str, Any]:
    """One validation report of the offline judge on ``paths`` (their ``split`` rows), logged to MLflow."""
    found = read_label_files([Path(p) for p in paths], golden, split)
    report = validate(found.rows, judge, progress=progress, seed=cfg.seed, files=found.files)
    info = {**found.info, "golden": str(golden_path), "golden_md5": golden_md5(golden_path)}
    report = {"labels": {**info, "held_out": True} if held_out else info, **report}
    tracking.log_configured_judge_validation(cfg, report)
    return report
