"""`doceval history`: a metric across commits for one configuration family, from the tracked MLflow runs
(doceval.tracking.history, doceval.results.history)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from doceval.common.io import output_target
from doceval.errors import UsageError
from doceval.inputs.qrels import labels_md5


class _MetricAction(argparse._AppendAction):
    """--metric, whose help names the registry's default metrics only when help is printed: the registry
    imports numpy, which a command's start-up does not pay for."""

    @property
    def help(self) -> str:
        # lazy: start-up (the registry loads numpy; only --help reads this)
        from doceval.scoring.registry import names

        return f"repeatable (default: {', '.join(names('history'))})"

    @help.setter
    def help(self, _: str | None) -> None:
        pass


def _since(text: str) -> float:
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%d")) - time.timezone
    except ValueError:
        raise UsageError(f"--since {text}: expected a date as YYYY-MM-DD") from None


def _no_family(args: argparse.Namespace) -> str:
    """No run matched --system/--run-name: say which names exist, so the next try can pick one."""
    picked = " ".join(
        f"{flag} {value}"
        for flag, value in (("--system", args.system), ("--run-name", args.run_name))
        if value
    )
    return (
        f"{picked}: no tracked run with a git commit matches in the {args.split} experiment; the system is the "
        "name the headline prints after system= (the configured name=, else e.g. bm25, function:my_module:retrieve, "
        "http:URL, without the port of a loopback URL); a run's "
        "name is shown in the MLflow UI (`doceval eval` names it after its --output file)"
    )


def cmd_history(args: argparse.Namespace) -> int:
    # lazy: start-up (mlflow, ~2 s, and numpy; matplotlib only for the plot)
    from doceval import tracking
    from doceval.results.history import format_history, plot_history
    from doceval.scoring.conversation_names import conversation_metric_names, naming_help
    from doceval.scoring.registry import METRIC_NAMES, names
    from doceval.tracking.history import load_history, uncommitted_runs

    metrics = args.metric or list(names("history"))
    if args.plot:
        # Refused before the store is read; no folder is made until there is a plot to write.
        output_target(args.plot, f"--plot {args.plot}", "pass a writable --plot PATH (a .png file)")
    unknown = [m for m in metrics if m not in METRIC_NAMES and m not in conversation_metric_names()]
    if unknown:
        raise UsageError(
            f"--metric {', '.join(unknown)}: unknown; valid metrics: {', '.join(METRIC_NAMES)}; "
            f"{naming_help()} (logged by runs over conversations)"
        )
    if args.last is not None and args.last < 1:
        raise UsageError(f"--last {args.last}: must be at least 1")
    family: dict[str, str] = {}
    if args.system:
        family["system"] = args.system
    if args.golden_md5:
        family["golden_md5"] = args.golden_md5
    elif args.same_golden:
        # lazy: start-up (Hydra and the config schema, ~0.5 s)
        from doceval.config.compose import compose

        golden = Path(compose([]).golden)
        try:
            family["golden_md5"] = labels_md5(golden)
        except OSError as exc:
            raise UsageError(
                f"--same-golden: the configured golden set {golden} (the `golden` key) cannot be read "
                f"({exc.strerror or exc}); run history where it is (the project root), set golden=PATH in "
                "doceval.yaml, or pass --golden-md5 MD5 (a run's golden_md5 tag)"
            ) from None
    root = Path.cwd()
    uri = tracking.tracking_uri(args.tracking_uri, root)
    split = None if args.split == "all" else args.split
    rows = load_history(
        uri, split=split, metrics=metrics, family=family or None, root=root, run_name=args.run_name
    )
    if not rows:
        uncommitted = uncommitted_runs(uri, split)
        if uncommitted:
            raise UsageError(
                f"{uncommitted} tracked runs in the {args.split} experiment record no git commit, and history "
                "orders runs by commit: evaluate in a git repository with the code committed (`git init && "
                "git add -A && git commit -m baseline`), then log the runs again (`doceval eval`, `dvc repro`)"
            )
        if args.system or args.run_name:
            raise UsageError(_no_family(args))
    if args.exclude_dirty:
        rows = [r for r in rows if not r["dirty"]]
    if args.since:
        start = _since(args.since)
        rows = [r for r in rows if r["time"] >= start]
    if args.last:
        rows = rows[-args.last :]
    print("\n".join(format_history(rows, metrics)))
    if rows and args.plot:
        # lazy: start-up (Hydra for the composed gate, ~0.35 s; only a plot draws thresholds)
        from doceval.cli.results import gate_rules

        rules, source = gate_rules(args.gate, "--gate", [], "history")
        print(f"plot: {plot_history(rows, metrics, dict(rules.thresholds), Path(args.plot))}")
        print(f"  thresholds drawn from: {source}")
    return 0


def register(sub: Any) -> None:
    text = "a metric across commits: the tracked runs of one golden set and configuration family"
    p = sub.add_parser("history", help=text, description=text)
    p.add_argument(
        "--metric",
        action=_MetricAction,
        metavar="NAME",
    )
    p.add_argument(
        "--split", default="test", help="experiment to read: calibration, test, all (default: test)"
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--golden-md5", metavar="MD5", help="only runs scored on this golden set")
    g.add_argument("--same-golden", action="store_true", help="only runs scored on the configured golden set")
    w = p.add_mutually_exclusive_group()
    w.add_argument("--since", metavar="YYYY-MM-DD", help="runs whose commit is this recent")
    w.add_argument("--last", type=int, metavar="N", help="the last N runs")
    p.add_argument("--exclude-dirty", action="store_true", help="leave out runs from uncommitted trees")
    p.add_argument("--system", metavar="NAME", help="the family of this system (as the headline's system=)")
    p.add_argument(
        "--run-name", metavar="NAME", help="the family of the newest run with this MLflow run name"
    )
    p.add_argument(
        "--plot", default="eval/history.png", metavar="PATH", help="PNG (default: eval/history.png)"
    )
    p.add_argument(
        "--gate",
        metavar="PATH",
        help="a gate file whose thresholds the plot draws (default: the gate composed from conf/gate + doceval.yaml)",
    )
    p.add_argument(
        "--tracking-uri", metavar="URI", help="MLflow store (default: MLFLOW_TRACKING_URI, else ./mlruns)"
    )
    p.set_defaults(func=cmd_history)
