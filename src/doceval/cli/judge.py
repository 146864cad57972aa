"""`doceval judge validate | calibrate | rescore`: how far a judge can be trusted, the offline judge's threshold,
and re-judging a recorded run without calling the system under test again (over doceval.harness.judging_runs).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.cli.aliases import alias_help, deprecated_command
from doceval.cli.common import add_allow_drafts, add_stage, stage_params, stale_on_failure, with_drafts
from doceval.common.io import check_writable, read_json, write_json_atomic
from doceval.common.paths import Named, refuse_overlap
from doceval.errors import GateFailed, RunIncomplete, UsageError
from doceval.inputs.golden import DEFAULT_PIN, parse_golden
from doceval.inputs.judge_labels import read_label_files
from doceval.inputs.qrels import labels_md5
from doceval.summary import as_summary

if TYPE_CHECKING:
    from doceval.config.schema import Config

DEFAULT_LABELS = "data/judge/v1.jsonl"


def _golden(cfg: Config, path: str | None, own_ids: bool = False) -> tuple[dict[str, Any], Path, str]:
    """The golden set by entry id; ``own_ids``: entries may leave out library/version, as `doceval eval` reads a
    user's own golden set (a rescore of their assistant's run)."""
    golden_path = Path(path or cfg.golden)
    if own_ids:
        entries = parse_golden(golden_path, default_pin=DEFAULT_PIN, allow_drafts=cfg.allow_drafts)
    else:
        entries = parse_golden(golden_path, allow_drafts=cfg.allow_drafts)
    return {e.id: e for e in entries}, golden_path, labels_md5(golden_path)


def _split_positionals(args: argparse.Namespace) -> None:
    """``[LABELS...] [OVERRIDES...]``: the leading words without "=" (or naming a file) are label files."""
    words = list(args.words)
    labels: list[str] = []
    while words and ("=" not in words[0] or Path(words[0]).exists()):
        labels.append(words.pop(0))
    args.labels = labels or [DEFAULT_LABELS]
    args.overrides = words


def _labels(args: argparse.Namespace, cfg: Config) -> tuple[list[Any], dict[str, list[int]], dict[str, Any]]:
    golden, golden_path, golden_md5 = _golden(cfg, args.golden)
    found = read_label_files([Path(p) for p in args.labels], golden, args.split)
    return found.rows, found.files, {**found.info, "golden": str(golden_path), "golden_md5": golden_md5}


def _repeats(value: int) -> int:
    if value < 1:
        raise UsageError(f"--repeats {value}: must be at least 1 (1 = judge each row once)")
    return value


def _kappa(block: dict[str, Any]) -> str:
    k, ci = block.get("kappa"), block.get("kappa_ci95")
    return ("n/a" if k is None else f"{k:.3f}") + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _paired(beats: dict[str, Any]) -> str:
    diff, ci = beats.get("difference"), beats.get("ci95")
    text = "n/a" if diff is None else f"{diff:+.3f}"
    return (
        text
        + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")
        + f"  beats strings: {str(beats['beats']).lower()}"
    )


def _figure_lines(block: dict[str, Any]) -> list[str]:
    """Kappa of the judge, of version strings alone and of each component, and the paired difference."""
    lines = [f"  {'judge':16s} kappa {_kappa(block['agreement'])}"]
    lines += [f"  {name:16s} kappa {_kappa(c)}  (alone)" for name, c in block["components"].items()]
    lines.append(f"  judge - strings  {_paired(block['beats_strings'])}  (paired bootstrap, 95%)")
    return lines


def _format(report: dict[str, Any]) -> list[str]:
    a = report["agreement"]
    ident = report["judge"]["identity"] or {}
    name = ident.get("name")
    what = (
        f"{name} {ident.get('model') or ''}".strip()
        if name == "openai"
        else f"{name} (key facts >= {ident.get('facts_threshold')}, similarity >= {ident.get('threshold')})"
    )
    acc = "n/a" if a["accuracy"] is None else f"{a['accuracy']:.3f}"
    lines = [
        f"judge {what}  hash {report['judge']['hash']}  labels {report['labels']['path']} ({report['labels']['split']})",
        f"rows {report['n_rows']}: scored {a['n']}, judge errors {a['judge_errors']} (left out of every figure)",
        f"accuracy {acc}   Cohen's kappa {_kappa(a)} (95%, bootstrap)",
        "version strings alone on the same rows: kappa " + _kappa(report["version_strings_alone"]),
        *_figure_lines(report),
    ]
    for path, block in (report.get("by_file") or {}).items():
        lines += [f"{path} ({block['n_rows']} rows):", *_figure_lines(block)]
    c = a["confusion"]
    lines += [
        "confusion (rows: human, columns: judge)   correct  incorrect",
        f"  correct                                {c['correct']['correct']:7d}  {c['correct']['incorrect']:9d}",
        f"  incorrect                              {c['incorrect']['correct']:7d}  {c['incorrect']['incorrect']:9d}",
        "agreement per answer category:",
    ]
    for cat, b in a["by_category"].items():
        share = "n/a" if b["agreement"] is None else f"{b['agreement']:.2f}"
        lines.append(
            f"  {cat:16s} {share:>5s}  (n={b['n']}, human correct {b['human_correct']}, judge correct "
            f"{b['judge_correct']}, judge errors {b['judge_errors']})"
        )
    rep = report.get("repeats")
    if rep:
        lines.append(
            f"repeats {rep['repeats']}: flip rate {rep['flip_rate']:.3f} ({rep['flipped']} rows), kappa "
            f"{rep['kappa_min']:.3f} to {rep['kappa_max']:.3f} (sd {rep['kappa_sd']:.3f})"
        )
    cache = report["usage"]["cache"]
    lines.append(f"requests: cache hits {cache['hits']}, misses {cache['misses']}")
    return lines


def cmd_validate(args: argparse.Namespace) -> int:
    # lazy: start-up (the config schema, the harness and the judges load yaml, numpy and maybe openai)
    from doceval import tracking
    from doceval.config.compose import compose
    from doceval.harness.judge_evidence import evidence_dir, record_name, record_validation
    from doceval.harness.judging_runs import validate
    from doceval.scoring.agreement import trusted
    from doceval.scoring.judge import judge_id

    _split_positionals(args)
    cfg = compose(with_drafts(args.overrides, args))
    repeats = _repeats(args.repeats)
    if args.no_track:
        cfg = dataclasses.replace(cfg, tracking=dataclasses.replace(cfg.tracking, enabled=False))
    if args.output:
        check_writable(args.output, f"--output {args.output}", "pass a writable --output PATH")
        read: list[Named] = [("the labels", p) for p in args.labels]
        golden = ("the golden set", args.golden or cfg.golden)
        refuse_overlap([("--output", args.output)], [*read, golden], "name another --output")
    tracking.check_configured(cfg)
    rows, files, info = _labels(args, cfg)
    # Recorded by the judge's identity, where a run with this judge reads it as its evidence (design 4.4).
    record = evidence_dir(cfg.paths.eval) / record_name({"judge": judge_id(cfg.judge), "labels": info})
    check_writable(record, str(record), "make paths.eval writable (judge validations are recorded there)")
    refuse_overlap(
        [("the recorded validation", record)],
        [*[("the labels", p) for p in args.labels]],
        "set paths.eval to another folder",
    )
    report = validate(
        rows,
        cfg.judge,
        repeats=repeats,
        max_concurrency=cfg.run.max_concurrency,
        progress=not args.quiet,
        seed=cfg.seed,
        files=files,
    )
    held_out = set(cfg.judge_validation.held_out)
    report = {"labels": {**info, **({"held_out": True} if set(args.labels) <= held_out else {})}, **report}
    if args.output:
        write_json_atomic(Path(args.output), report)
    recorded = record_validation(report, cfg.paths.eval)
    tracking.log_configured_judge_validation(cfg, report)
    print("\n".join(_format(report)))
    print(f"bar: {_verdict_line(report)}")
    print(f"recorded: {recorded} (runs with judge {report['judge']['hash']} read it)")
    if args.output:
        print(f"report: {args.output}")
    if args.strict and not trusted(report)[0]:
        raise GateFailed(f"doceval judge validate --strict: judge {report['judge']['hash']} is below the bar")
    return 0


def _verdict_line(report: dict[str, Any]) -> str:
    """The verdict of the project's bar (doceval.scoring.agreement.trusted) on one validation report."""
    # lazy: start-up (the agreement figures load numpy; `doceval --help` must not)
    from doceval.scoring.agreement import BAR, trusted

    ok, why = trusted(report)
    return f"{'CLEARED' if ok else 'BELOW THE BAR'} ({BAR}): {why}"


def cmd_calibrate(args: argparse.Namespace) -> int:
    # lazy: start-up (the config schema, the harness and the judges load yaml, numpy and maybe openai)
    from doceval.config.compose import compose
    from doceval.harness.reference_calibration import calibrate_thresholds

    _split_positionals(args)
    cfg = compose(with_drafts(args.overrides, args))
    rows, _, info = _labels(args, cfg)
    result = calibrate_thresholds(rows)
    print(
        f"reference judge on {info['path']} ({args.split}, {result['n']} rows): facts_threshold "
        f"{result['facts_threshold']} threshold {result['threshold']} (kappa {result['kappa']:.3f} there)"
    )
    print(
        f"set `facts_threshold: {result['facts_threshold']}` and `threshold: {result['threshold']}` in "
        "conf/judge/reference.yaml, then validate on the other split"
    )
    return 0


def cmd_rescore(args: argparse.Namespace) -> int:
    # lazy: start-up (the config schema, the harness and the judges load yaml, numpy and maybe openai)
    from doceval import tracking
    from doceval.config.compose import compose
    from doceval.harness.judging_runs import rescore

    if not args.words or "=" in args.words[0] and not Path(args.words[0]).exists():
        raise UsageError("judge rescore: name the SUMMARY to re-judge first, then any overrides")
    summary_arg, overrides = args.words[0], args.words[1:]
    cfg = compose(with_drafts(overrides, args))
    if args.no_track:
        cfg = dataclasses.replace(cfg, tracking=dataclasses.replace(cfg.tracking, enabled=False))
    output = Path(args.output)
    check_writable(args.output, f"--output {output}", "pass a writable --output PATH")
    golden_named: Named = ("the golden set (--golden)", args.golden)
    refuse_overlap(
        [("--output", output)], [("the summary", summary_arg), golden_named], "name another --output"
    )
    tracking.check_configured(cfg)
    with stale_on_failure(output, "judge rescore"):
        summary_path = Path(summary_arg)
        summary = read_json(summary_path, "run summary", rerun="doceval eval")
        if not isinstance(summary, dict) or "config" not in summary:
            raise UsageError(f"{summary_path}: not a doceval summary (no config block)")
        answered = as_summary(summary)  # the answering run, its recorded settings typed
        golden_path = args.golden or answered.settings.golden.path or cfg.golden
        golden, _, golden_md5 = _golden(cfg, golden_path, own_ids=True)
        new = rescore(summary, summary_path, golden, golden_md5, cfg.judge, cfg=cfg, progress=not args.quiet)
        write_json_atomic(output, new.to_dict())
    tracking.log_configured_run(cfg, new, {}, run_name=output.stem, tags={"stage": "rescore"})
    acc, counts = new.metrics.value("answer_accuracy"), new.metrics.counts
    old = answered.metrics.value("answer_accuracy")
    print(
        f"answer_accuracy {('n/a' if acc is None else f'{acc:.3f}')} (was "
        f"{'not judged' if old is None else f'{old:.3f}'}), judged {counts['n_judged']}, "
        f"judge errors {counts['judge_errors']}; judge {new.settings.judge_hash}"
    )
    print(f"summary: {output}")
    if not new.complete:
        why = new.incomplete.reason if new.incomplete is not None else "stopped early"
        raise RunIncomplete(f"doceval judge rescore: incomplete: {why} ({output})")
    return 0


def cmd_agreement(args: argparse.Namespace) -> int:
    # lazy: start-up (the judge stage and the agreement figures load numpy)
    from doceval.scoring.agreement import reported_figure
    from doceval.stages import judge as stage

    report = stage.run(stage_params(args), progress=not args.quiet)
    for block in (report, report.get("held_out")):
        if block:
            print(
                f"reference judge on {block['labels']['path']} ({block['labels']['split']}): "
                f"{_verdict_line(block)}; the answer figure reported: {reported_figure(block)}"
            )
    return 0


def register(sub: Any) -> None:
    judge = sub.add_parser("judge", help="validate, calibrate and rerun judges").add_subparsers(
        dest="judge_command", required=True, metavar="COMMAND"
    )

    def common(p: argparse.ArgumentParser, default_split: str) -> None:
        p.add_argument(
            "words",
            nargs="*",
            metavar="[LABELS...] [OVERRIDES]",
            help=f"one or more label files (default: {DEFAULT_LABELS}), then Hydra overrides, e.g. "
            "judge=openai judge.model=m",
        )
        p.add_argument(
            "--split",
            default=default_split,
            choices=("calibration", "test", "all"),
            help=f"rows of the label file to use (default: {default_split})",
        )
        p.add_argument(
            "--golden", metavar="PATH", help="golden set the labels' entry ids name (default: `golden`)"
        )
        p.add_argument("--quiet", action="store_true", help="no progress bars")
        add_allow_drafts(p)

    text = "the configured judge's agreement with labelled answers (kappa, confusion, per category, flips)"
    p = judge.add_parser("validate", help=text, description=text)
    p.add_argument("--repeats", type=int, default=1, metavar="N", help="judge each row N times (flip rate)")
    p.add_argument("--output", metavar="PATH", help="also write the report as JSON")
    p.add_argument("--no-track", action="store_true", help="do not log to MLflow (experiment doceval-judge)")
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 3 when the judge is below the project's bar (kappa and beating version strings, "
        "doceval.scoring.agreement.trusted)",
    )
    common(p, "test")
    p.set_defaults(func=cmd_validate)

    text = "the reference judge's key-facts and similarity thresholds that best agree with the labels"
    p = judge.add_parser("calibrate", help=text, description=text)
    common(p, "calibration")
    p.set_defaults(func=cmd_calibrate)

    new = "doceval stage judge"
    add_stage(
        judge, "agreement", deprecated_command(cmd_agreement, "doceval judge agreement", new), alias_help(new)
    )

    text = "re-judge a recorded run's answers with another judge (the system under test is not called)"
    p = judge.add_parser("rescore", help=text, description=text)
    p.add_argument(
        "words",
        nargs="*",
        metavar="SUMMARY [OVERRIDES]",
        help="summary JSON of the answering run, then Hydra overrides for the judge, e.g. judge=reference",
    )
    p.add_argument("--output", required=True, metavar="PATH", help="the new summary")
    p.add_argument("--golden", metavar="PATH", help="golden set (default: the one the summary names)")
    p.add_argument("--no-track", action="store_true", help="do not log the new run to MLflow")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_allow_drafts(p)
    p.set_defaults(func=cmd_rescore)
