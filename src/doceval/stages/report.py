"""DVC stage `report`: eval/report.md from the test summary and the calibration artifact, with the gate's verdict.

The report never fails the pipeline; `doceval gate` is what fails a build. report.md is checked writable before
anything is read and written atomically (a temporary sibling renamed over it): readers never see half a report.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.common.hints import stage_command
from doceval.common.io import check_writable, read_json, write_text_atomic
from doceval.common.text import md_code, md_text
from doceval.results.ann_md import ann_lines
from doceval.results.conversations_md import conversations_section
from doceval.results.gating import GateResult, gate
from doceval.results.markdown import render_report
from doceval.results.summaries import load_summary, shown_metrics
from doceval.results.tradeoff_md import tradeoff_lines
from doceval.scoring.agreement import MIN_KAPPA, trusted
from doceval.summary import Summary, as_summary, settings_of

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
    alone = "; ".join(
        f"{name.replace('_', ' ')} alone {c['kappa']:.3f}"
        for name, c in parts.items()
        if c.get("kappa") is not None
    )
    beats = report.get("beats_strings") or {}
    paired = ""
    if beats.get("ci95") and beats.get("difference") is not None:
        lo, hi = beats["ci95"]
        paired = (
            f" Judge minus version strings (paired bootstrap): {beats['difference']:+.3f} "
            f"[{lo:+.3f}, {hi:+.3f}]."
        )
    held_out = bool(labels.get("held_out"))
    where = (
        f"every row of `{labels.get('path')}`"
        if held_out
        else f"the {labels.get('split')} half of `{labels.get('path')}`"
    )
    return [
        "",
        "## Judge agreement (reference judge" + (", held-out labels)" if held_out else ")"),
        "",
        f"On {where} ({a['n']} labelled answers, md5 "
        f"`{labels.get('md5')}`): Cohen's kappa {a['kappa']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}], accuracy "
        f"{a['accuracy']:.3f}; version strings alone: kappa {base:.3f}"
        + (f" ({alone})" if alone else "")
        + f".{paired} Judge hash `{report['judge']['hash']}`.",
        "",
        (
            f"It clears the bar ({why}): its answer_accuracy can be reported."
            if ok
            else f"answer_accuracy stays **not judged** by it: {why} (the bar: kappa >= {MIN_KAPPA} and the paired "
            "interval of kappa minus version strings above 0). The answer figure reported is **version strings** "
            "(version_correctness), not the judge."
        ),
    ]


def produced_by(summary: Summary | Mapping[str, Any], source: str) -> str:
    """One line saying which run a section's figures come from, read from that run's settings: the system under
    test, the floors, the golden set (path and md5), split and k, and the file read."""
    settings = settings_of(summary)
    golden = settings.golden
    return (
        f"From `{md_text(source)}`: system under test `{md_text(settings.system_label)}`, floors "
        f"`{md_text(settings.floors.label)}`, golden set `{md_text(golden.path)}` "
        f"(md5 `{md_text(golden.md5)}`), split `{md_text(settings.split or 'all')}`, k = {md_text(settings.k)}."
    )


def _with_source(section: list[str], line: str) -> list[str]:
    """A section (["", "## Title", "", ...]) with ``line`` right under its title."""
    return [*section[:3], line, "", *section[3:]] if section else []


def conversation_lines(summary: Summary | Mapping[str, Any], source: Path) -> list[str]:
    """The conversations stage's section, saying which run produced it (its own system, floors, golden set and
    split: another system than the headline's when the conversations were replayed with other overrides)."""
    typed = as_summary(summary)
    section = conversations_section(typed.metrics.recorded, shown_metrics(typed))
    return _with_source(section, produced_by(summary, str(source)))


def report_inputs(out: Path) -> dict[str, Path]:
    """Every file the report reads, by what it is (paths under ``paths.eval``): the report stage depends on each
    (dvc.yaml, and the stage ``doceval init`` writes, where the project produces it)."""
    return {
        "summary": out / "summary.json",
        "floors": out / "calibration" / "floors.json",
        "tradeoff": out / "tradeoff" / "tradeoff.json",
        "ann": out / "ann_vs_exact.json",
        "conversations": out / "conversations" / "summary.json",
        "judge": out / "judge" / "reference.json",
        "judge_held_out": out / "judge" / "reference_held_out.json",
    }


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
    files = report_inputs(out)
    summary = load_summary(files["summary"])
    floors_file = files["floors"]
    calibration = read_json(floors_file, "calibrated floors") if floors_file.is_file() else None
    verdict = gate(summary, cfg.gate, source=gate_source)
    lines = [render_report(summary, calibration).rstrip()]
    # The evaluate stage writes the trade-off and "ANN vs exact" from the headline's own run.
    headline = produced_by(summary, f"{files['summary']} (the evaluate stage's run)")
    trade = files["tradeoff"]
    if trade.is_file():
        lines += _with_source(
            tradeoff_lines(
                read_json(trade, "refusal trade-off", rerun=stage_command("evaluate")), calibration, summary
            ),
            headline,
        )
    ann = files["ann"]
    if ann.is_file():
        lines += _with_source(
            ann_lines(read_json(ann, "ANN vs exact", rerun=stage_command("evaluate"))), headline
        )
    conversations = files["conversations"]
    if conversations.is_file():
        lines += conversation_lines(load_summary(conversations), conversations)
    for key in ("judge", "judge_held_out"):
        found = files[key].is_file()
        validation = read_json(files[key], "judge validation", rerun=stage_command("judge")) if found else {}
        if "agreement" in validation:  # a held-out report without label files holds no validation
            lines += judge_agreement_lines(validation)
    lines += ["", "## Gate", "", f"`{verdict.line}`", "", f"Rules from {md_code(verdict.source)}.", ""]
    lines += [f"- {f}" for f in verdict.failures]
    write_text_atomic(report, "\n".join(lines) + "\n")
    return report, verdict
