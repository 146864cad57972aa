"""DVC stage `report`: eval/report.md from the test summary and the calibration artifact, with the gate's verdict.

The report never fails the pipeline; `doceval gate` is what fails a build. report.md is checked writable before
anything is read and written atomically (a temporary sibling renamed over it): readers never see half a report.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.common.hints import stage_command
from doceval.common.io import check_writable, read_json, write_text_atomic
from doceval.common.text import md_code
from doceval.results.ann_md import ann_lines
from doceval.results.conversations_md import conversations_section
from doceval.results.gating import GateResult, gate
from doceval.results.markdown import render_report
from doceval.results.summaries import load_summary, shown_metrics
from doceval.results.tradeoff_md import tradeoff_lines
from doceval.scoring.agreement import MIN_KAPPA, trusted

if TYPE_CHECKING:
    from doceval.config.schema import Config


def judge_agreement_lines(report: dict[str, Any]) -> list[str]:
    """The offline judge's measured agreement, whether it clears the bar for answer_accuracy and, when it does
    not, the figure that stands for answer correctness instead (version strings: version_correctness)."""
    a = report["agreement"]
    ci = a.get("kappa_ci95") or [None, None]
    ok, why = trusted(report)
    labels = report.get("labels") or {}
    base = (report.get("version_strings_alone") or {}).get("kappa")
    parts = report.get("components") or {}
    alone = "; ".join(f"{name.replace('_', ' ')} alone {c['kappa']:.3f}" for name, c in parts.items()
                      if c.get("kappa") is not None)  # fmt: skip
    beats = report.get("beats_strings") or {}
    paired = ""
    if beats.get("ci95") and beats.get("difference") is not None:
        lo, hi = beats["ci95"]
        paired = (f" Judge minus version strings (paired bootstrap): {beats['difference']:+.3f} "
                  f"[{lo:+.3f}, {hi:+.3f}].")  # fmt: skip
    return [
        "",
        "## Judge agreement (reference judge)",
        "",
        f"On the {labels.get('split')} half of `{labels.get('path')}` ({a['n']} labelled answers, md5 "
        f"`{labels.get('md5')}`): Cohen's kappa {a['kappa']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}], accuracy "
        f"{a['accuracy']:.3f}; version strings alone: kappa {base:.3f}"
        + (f" ({alone})" if alone else "") + f".{paired} Judge hash `{report['judge']['hash']}`.",
        "",
        (f"It clears the bar ({why}): its answer_accuracy can be reported." if ok else
         f"answer_accuracy stays **not judged** by it: {why} (the bar: kappa >= {MIN_KAPPA} and the paired "
         "interval of kappa minus version strings above 0). The answer figure reported is **version strings** "
         "(version_correctness), not the judge."),
    ]  # fmt: skip


def conversation_lines(summary: dict[str, Any]) -> list[str]:
    """The conversations stage's section: its split and golden set, then the conversation figures."""
    section = conversations_section(summary["metrics"], shown_metrics(summary))
    if not section:
        return []
    recorded = summary["config"]
    where = (
        f"`{recorded['golden']['path']}`, split `{recorded['split'] or 'all'}`, k = {recorded['k']}, replayed by the "
        "conversations stage with the calibrated floors (`eval/conversations/`)."
    )
    return [*section[:3], where, "", *section[3:]]


def run(cfg: Config, gate_source: str = "params.yaml") -> tuple[Path, GateResult]:
    """report.md from the stage outputs under ``paths.eval``, with the verdict of ``cfg.gate`` (its rules from
    ``gate_source``, as the report prints it)."""
    out = Path(cfg.paths.eval)
    report = out / "report.md"
    check_writable(
        report,
        str(report),
        f"make {report.parent} writable, or set paths.eval to a writable folder (conf/, then `doceval params`)",
    )
    summary = load_summary(out / "summary.json")
    floors_file = out / "calibration" / "floors.json"
    calibration = read_json(floors_file, "calibrated floors") if floors_file.is_file() else None
    verdict = gate(summary, cfg.gate, source=gate_source)
    lines = [render_report(summary, calibration).rstrip()]
    trade = out / "tradeoff" / "tradeoff.json"
    if trade.is_file():
        lines += tradeoff_lines(
            read_json(trade, "refusal trade-off", rerun=stage_command("evaluate")), calibration, summary
        )
    ann = out / "ann_vs_exact.json"
    if ann.is_file():
        lines += ann_lines(read_json(ann, "ANN vs exact", rerun=stage_command("evaluate")))
    conversations = out / "conversations" / "summary.json"
    if conversations.is_file():
        # The conversations stage's test split (doceval's agent with memory; memory benefit and leak).
        lines += conversation_lines(load_summary(conversations))
    validation = out / "judge" / "reference.json"
    if validation.is_file():
        lines += judge_agreement_lines(
            read_json(validation, "judge validation", rerun=stage_command("judge"))
        )
    lines += ["", "## Gate", "", f"`{verdict.line}`", "", f"Rules from {md_code(verdict.source)}.", ""]
    lines += [f"- {f}" for f in verdict.failures]
    write_text_atomic(report, "\n".join(lines) + "\n")
    return report, verdict
