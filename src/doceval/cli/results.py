"""`doceval compare`, `doceval gate` and `doceval show`: thin wrappers over :mod:`doceval.results`.

Registered by :mod:`doceval.cli.main`. An MLflow run id is resolved through :mod:`doceval.tracking`, imported
only when an argument is a run id.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.common.io import check_writable, write_text_atomic
from doceval.common.paths import Named, refuse_overlap
from doceval.errors import GateFailed, UsageError
from doceval.summary import settings_of

if TYPE_CHECKING:
    from doceval.config.schema import Gate

DEFAULT_SUMMARY = "eval/summary.json"  # the evaluate stage's, and the conversations stage's below
DEFAULT_CONVERSATIONS = "eval/conversations/summary.json"
GATE_HELP = "without it: the gate composed from conf/gate + doceval.yaml + gate overrides, as every command"


def _mlflow_loader(uri_flag: str | None) -> Callable[[str], Mapping[str, Any]]:
    """Run ids through the API's loader (doceval.tracking, imported only when an argument is a run id)."""
    # lazy: start-up (doceval.api imports the harness and numpy; `doceval --help` needs neither)
    from doceval.api import mlflow_summary_loader

    return mlflow_summary_loader(uri_flag)


def gate_rules(path: str | None, flag: str, overrides: list[str], command: str) -> tuple[Gate, str]:
    """The gate a command applies and where it came from: ``path`` (an explicit gate file, checked by the rules
    of the composed block), else the ``gate`` block composed from conf/ + doceval.yaml + the command's gate
    overrides, as every other command composes it (docs/design.md 8.3)."""
    # lazy: start-up (doceval.results loads numpy, doceval.config.compose yaml and the schema: ~0.4 s)
    from doceval.config.compose import compose
    from doceval.config.drift import group_source
    from doceval.config.project import override_key
    from doceval.results import load_gate_config

    if path is not None:
        if overrides:
            raise UsageError(
                f"doceval {command}: {flag} {path} and overrides ({' '.join(overrides)}): pass "
                f"one; overrides change the composed gate (conf/gate + doceval.yaml)"
            )
        if not Path(path).is_file():
            raise UsageError(
                f"{flag} {path}: gate config not found; pass an existing gate YAML file, or leave "
                f"{flag} out to use the composed gate (conf/gate + doceval.yaml)"
            )
        return load_gate_config(path), path
    other = [o for o in overrides if not (override_key(o) == "gate" or override_key(o).startswith("gate."))]
    if other:
        raise UsageError(
            f"doceval {command}: {other[0]}: only gate overrides apply here (e.g. "
            "gate.thresholds.hit_rate=0.7, gate=NAME for conf/gate/NAME.yaml)"
        )
    return compose(overrides).gate, group_source("gate", overrides, f"doceval {command}")


def _fail(result: Any, command: str) -> GateFailed:
    n = len(result.failures)
    return GateFailed(f"doceval {command}: gate FAIL ({n} condition{'s' if n != 1 else ''} failed)")


def cmd_compare(args: argparse.Namespace) -> int:
    # lazy: start-up (doceval.results loads numpy, ~0.2 s)
    from doceval.results import compare, format_compare, gate, load_summary, plot_compare

    if args.bootstrap < 1:
        raise UsageError(f"--bootstrap {args.bootstrap}: must be at least 1")
    if args.no_gate and (args.gate or args.words):
        raise UsageError("doceval compare: --no-gate with --gate or gate overrides: pass one")
    gate_cfg, source = (None, "") if args.no_gate else gate_rules(args.gate, "--gate", args.words, "compare")
    if args.plot:
        fix = "pass a writable --plot PATH (a .png file)"
        check_writable(args.plot, f"--plot {args.plot}", fix)
        read: list[Named] = [("OLD", args.base), ("NEW", args.new), ("the --gate file", args.gate)]
        refuse_overlap([("--plot", args.plot)], read, fix)
    loader = _mlflow_loader(args.tracking_uri)
    base = load_summary(args.base, loader)
    new = load_summary(args.new, loader)
    result = compare(
        base,
        new,
        allow_different_golden=args.allow_different_golden,
        allow_different_k=args.allow_different_k,
        allow_different_corpus=args.allow_different_corpus,
        allow_different_judge=args.allow_different_judge,
        n_boot=args.bootstrap,
        seed=args.seed,
        base_label=args.base,
        new_label=args.new,
    )
    verdict = (
        None
        if gate_cfg is None
        else gate(
            new,
            gate_cfg,
            baseline=base,
            allow_different_k=args.allow_different_k,
            source=source,
            allow_different_judge=args.allow_different_judge,
        )
    )
    print(format_compare(result, None if verdict is None else verdict.line))
    if verdict is not None:
        print(f"  rules from: {source}")
        for f in verdict.failures:
            print(f"  - {f}")
        for note in verdict.notes:
            print(f"  note: {note}")
    if args.plot:
        print(f"wrote {plot_compare(result, args.plot)}")
    if verdict is not None and not verdict.passed:
        raise _fail(verdict, "compare")
    return 0


def cmd_gate(args: argparse.Namespace) -> int:
    # lazy: start-up (doceval.results loads numpy, ~0.2 s)
    from doceval.results import gate, load_summary

    gate_cfg, source = gate_rules(args.config, "--config", args.words, "gate")
    if args.junit:
        fix = "pass a writable --junit PATH"
        check_writable(args.junit, f"--junit {args.junit}", fix)
        read: list[Named] = [("the summary", args.summary), ("--baseline", args.baseline)]
        refuse_overlap([("--junit", args.junit)], [*read, ("the --config file", args.config)], fix)
    loader = _mlflow_loader(args.tracking_uri)
    summary = load_summary(args.summary, loader)
    baseline = None if args.baseline is None else load_summary(args.baseline, loader)
    history = _drift_history(gate_cfg, summary, args.tracking_uri) if gate_cfg.drift.enabled else None
    verdict = gate(
        summary,
        gate_cfg,
        baseline=baseline,
        allow_different_k=args.allow_different_k,
        history=history,
        source=source,
        allow_different_judge=args.allow_different_judge,
    )
    if args.junit:
        # lazy: start-up (as above)
        from doceval.results.junit import junit_xml

        write_text_atomic(Path(args.junit), junit_xml(verdict, summary, baseline=baseline))
    print(verdict.line)
    print(f"  rules from: {source}")
    for f in verdict.failures:
        print(f"  - {f}")
    for note in verdict.notes:
        print(f"  note: {note}")
    if baseline is not None and not gate_cfg.non_regression.enabled:
        print(f"  note: --baseline given but non_regression is disabled in {source}: baseline not used")
    if not verdict.passed:
        raise _fail(verdict, "gate")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """The headline table of a summary (as `doceval eval` prints it), then a conversation replay's line."""
    # lazy: start-up (doceval.results loads numpy)
    from doceval.cli.common import conversation_line, print_headline
    from doceval.results import load_summary

    loader = _mlflow_loader(args.tracking_uri)
    print_headline(load_summary(args.summary, loader), conversations=False)
    conversations = args.conversations
    if conversations is None and Path(DEFAULT_CONVERSATIONS).is_file() and args.summary == DEFAULT_SUMMARY:
        conversations = DEFAULT_CONVERSATIONS
    if conversations is not None:
        print(conversation_line(load_summary(conversations, loader)))
    return 0


def _drift_history(gate_cfg: Gate, summary: Mapping[str, Any], uri_flag: str | None) -> list[dict[str, Any]]:
    """The tracked runs of the summary's family for the drift rule, without reruns of this very state (same
    commit and run key)."""
    tracking = importlib.import_module("doceval.tracking")
    # lazy: start-up (doceval.tracking.history loads mlflow, ~2 s)
    from doceval.results.history import family_of
    from doceval.results.judges import judge_key
    from doceval.tracking.history import load_history

    root = Path.cwd()
    family = family_of(summary)
    split = None if family["split"] == "all" else family["split"]
    # answer_accuracy drifts only against runs of the same judge (another judge is another scale)
    rows: list[dict[str, Any]] = load_history(
        tracking.tracking_uri(uri_flag, root),
        split=split,
        metrics=[*dict.fromkeys([*gate_cfg.drift.metrics, *gate_cfg.for_assistants.values()])],
        family=family,
        root=root,
        judge_hash=judge_key(summary) or "",
    )
    commit = settings_of(summary).git_commit
    return [r for r in rows if not (commit and r["commit"] == commit)]


def _allow_k_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-different-k",
        action="store_true",
        help="compare runs cut at different k (refused by default: hit_rate@3 and hit_rate@10 differ in kind)",
    )
    p.add_argument(
        "--allow-different-judge",
        action="store_true",
        help="set answer_accuracy from two different "
        "judges side by side (refused by default: another judge is another scale)",
    )


def _overrides(p: argparse.ArgumentParser) -> None:
    # `words`: cli.main appends overrides given after an option (`gate S.json --junit J gate.k=...`) here too.
    p.add_argument(
        "words",
        nargs="*",
        metavar="OVERRIDE",
        help="gate overrides of the composed gate, after doceval.yaml's (gate.thresholds.hit_rate=0.7, gate=NAME)",
    )


def _tracking_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="MLflow store for run-id arguments (default: MLFLOW_TRACKING_URI, else ./mlruns/mlflow.db)",
    )


def register(sub: Any) -> None:
    """Add `compare`, `gate` and `show` to the `doceval` subparsers (none reads params.yaml)."""
    text = (
        "compare two runs (summary JSON files or MLflow run ids) metric by metric, then apply the gate to NEW"
    )
    p = sub.add_parser("compare", help=text, description=text)
    p.add_argument(
        "base", metavar="BASE", help="baseline: summary JSON (doceval eval --output) or MLflow run id"
    )
    p.add_argument("new", metavar="NEW", help="new run: summary JSON or MLflow run id")
    _overrides(p)
    p.add_argument(
        "--gate",
        metavar="PATH",
        help=f"a gate file applied to NEW, BASE as non-regression baseline ({GATE_HELP})",
    )
    p.add_argument("--no-gate", action="store_true", help="only compare; print no gate line, always exit 0")
    p.add_argument(
        "--allow-different-golden",
        action="store_true",
        help="compare runs over different golden sets or entry ids (pairs the shared entries)",
    )
    _allow_k_flag(p)
    p.add_argument(
        "--allow-different-corpus",
        action="store_true",
        help="compare runs whose corpora index different pins (refused by default: their out-of-scope "
        "questions are not the same set)",
    )
    p.add_argument("--plot", metavar="PATH", help="also write a PNG of the changes with their intervals")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=1000,
        metavar="N",
        help="sign flips behind the paired intervals of graded metrics (recall, mrr, ndcg; default: 1000)",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the bootstrap and permutation draws (default: 0)"
    )
    _tracking_flag(p)
    p.set_defaults(func=cmd_compare)

    text = "apply a gate config to a run summary: exit 0 on PASS, 3 on FAIL"
    p = sub.add_parser("gate", help=text, description=text)
    p.add_argument("summary", metavar="SUMMARY", help="summary JSON (doceval eval --output) or MLflow run id")
    _overrides(p)
    p.add_argument("--config", metavar="PATH", help=f"a gate file ({GATE_HELP})")
    p.add_argument("--baseline", metavar="SUMMARY", help="baseline summary for the non-regression check")
    p.add_argument(
        "--junit",
        metavar="FILE",
        help="also write the verdict as JUnit XML (one test case per "
        "condition and per entry behind a failed threshold)",
    )
    _allow_k_flag(p)
    _tracking_flag(p)
    p.set_defaults(func=cmd_gate)

    text = "print a run's headline table (and a conversation replay's line): what `make repro` ends with"
    p = sub.add_parser("show", help=text, description=text)
    p.add_argument(
        "summary",
        metavar="SUMMARY",
        nargs="?",
        default=DEFAULT_SUMMARY,
        help=f"summary JSON or MLflow run id (default: {DEFAULT_SUMMARY})",
    )
    p.add_argument(
        "--conversations",
        metavar="SUMMARY",
        help="a conversation replay's summary to add as one line "
        f"(default: {DEFAULT_CONVERSATIONS} with the default SUMMARY, when it exists)",
    )
    _tracking_flag(p)
    p.set_defaults(func=cmd_show)
