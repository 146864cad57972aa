"""Pipeline commands: `params` (doceval.cli.params), `docs --folder`, the DVC stages' commands (run as `doceval stage NAME`,
doceval.cli.stage; their 0.1.0 names registered here as deprecated aliases), `eval`, `sweep`.

Stage commands read params.yaml, as DVC runs them; `eval` and `sweep` compose conf/ with Hydra overrides given
after their flags. Each command is a thin wrapper over :mod:`doceval.stages` or the harness.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.cli.aliases import DeprecatedFlag, alias_help, deprecated_command, override_help
from doceval.cli.common import (
    PARAMS_DEFAULT,
    add_allow_drafts,
    add_stage,
    print_headline,
    stage_params,
    stale_on_failure,
    with_drafts,
)
from doceval.cli.conversations import register_conversations
from doceval.cli.params import register_params
from doceval.common.io import check_writable, output_folder, write_json_atomic
from doceval.common.journal import journal_note
from doceval.common.naming import is_own_agent
from doceval.common.paths import refuse_overlap
from doceval.errors import RunIncomplete, UsageError
from doceval.inputs.configured import configured_inputs
from doceval.inputs.golden import select_split
from doceval.summary import Incomplete

if TYPE_CHECKING:
    from doceval.config.schema import Config
    from doceval.harness.plan import EvalOptions


def cmd_docs(args: argparse.Namespace) -> int:
    # lazy: start-up (a stage loads its own libraries: numpy, torch, qdrant, mlflow)
    from doceval.stages import docs

    if args.out:
        output_folder(Path(args.out), f"--out {args.out}", "pass --out DIR naming a folder (new or existing)")
    docs.run(
        _docs_config(args),
        progress=not args.quiet,
        folders=args.folders or (),
        only=args.only,
        out=args.out,
        replace=args.replace,
    )
    return 0


def _docs_config(args: argparse.Namespace) -> Config:
    """params.yaml, as every stage reads it; for `docs --folder` outside a project (no params.yaml, no
    --params), the shipped configuration composed (with ./doceval.yaml's overrides when there is one): a docs
    folder becomes a corpus anywhere, as the README presents it."""
    if args.folders and args.params == PARAMS_DEFAULT and not Path(args.params).exists():
        # lazy: start-up (Hydra, ~0.35 s), only for --folder outside a project
        from doceval.config.compose import compose

        return compose()
    return stage_params(args)


class FolderGroupAction(argparse.Action):
    """``--folder DIR [--library L] [--version V]``, repeatable: each --library/--version belongs to the
    --folder before it, so one command builds several folders and versions into one corpus."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        groups: list[tuple[str, str | None, str | None]] = list(getattr(namespace, self.dest, None) or [])
        if option == "--folder":
            groups.append((str(values), None, None))
        elif not groups:
            parser.error(
                f"{option} {values}: give --folder DIR before it (it applies to the --folder before it)"
            )
        else:
            path, library, version = groups[-1]
            if (library if option == "--library" else version) is not None:
                parser.error(f"{option}: given twice for --folder {path}; repeat --folder for another folder")
            groups[-1] = (
                (path, str(values), version) if option == "--library" else (path, library, str(values))
            )
        setattr(namespace, self.dest, groups)


def cmd_index(args: argparse.Namespace) -> int:
    # lazy: start-up (a stage loads its own libraries: numpy, torch, qdrant, mlflow)
    from doceval.stages import index

    index.run(stage_params(args), progress=not args.quiet)
    return 0


def cmd_retrieve(args: argparse.Namespace) -> int:
    # lazy: start-up (a stage loads its own libraries: numpy, torch, qdrant, mlflow)
    from doceval.stages import retrieve

    retrieve.run(stage_params(args), progress=not args.quiet)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    # lazy: start-up (a stage loads its own libraries: numpy, torch, qdrant, mlflow)
    from doceval.stages import calibrate

    params = stage_params(args)
    result = calibrate.run(params, progress=not args.quiet)
    calibrate.track(params, result)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    # lazy: start-up (a stage loads its own libraries: numpy, torch, qdrant, mlflow)
    from doceval.stages import evaluate

    params = stage_params(args)
    summary, plan = evaluate.run(params, progress=not args.quiet)
    # Outputs first, printing last: a closed stdout (| head) loses only lines.
    evaluate.track(params, summary, plan)
    print_headline(summary)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    # lazy: start-up (a stage loads its own libraries: numpy, torch, qdrant, mlflow)
    from doceval.config.drift import params_source
    from doceval.stages import report

    params = stage_params(args)
    path, verdict = report.run(params, gate_source=params_source(Path(args.params), "gate"))
    print(verdict.line)
    print(f"  rules from: {verdict.source}")
    print(f"report: {path}")
    return 0


def eval_run(args: argparse.Namespace) -> tuple[Config, EvalOptions]:
    """`doceval eval`'s configuration (conf/ + doceval.yaml + the overrides) and the options its flags add."""
    # lazy: start-up (the harness loads numpy)
    from doceval.config.compose import compose
    from doceval.harness.evaluate import EvalOptions
    from doceval.harness.floors import check_score_floor, parse_floor_flags

    check_score_floor(args.score_floor)  # before composing: a bad flag costs nothing
    cfg = compose(with_drafts(args.overrides, args))
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit}: must be at least 1 (or omit it for every entry)")
    options = EvalOptions(
        golden=Path(args.golden) if args.golden else None,
        split="__config__" if args.split is None else (None if args.split == "all" else args.split),
        limit=args.limit,
        score_floor=args.score_floor,
        floor_flags=parse_floor_flags(args.floor or []),
        no_judge=args.no_judge,
        warm_memory=args.warm_memory,
        memory_reset=args.memory_reset in ("needs_memory", "standalone"),
        standalone=args.memory_reset == "standalone",
        progress=not args.quiet,
        max_errors=args.max_errors,
        resume=args.resume,
        fresh=args.fresh,
    )
    if args.no_track:
        cfg = dataclasses.replace(cfg, tracking=dataclasses.replace(cfg.tracking, enabled=False))
    return cfg, options


def cmd_eval(args: argparse.Namespace) -> int:
    """User command: the seed harness's flags plus Hydra overrides; writes one summary JSON."""
    # lazy: start-up (doceval.tracking loads mlflow only when a run is logged)
    from doceval import tracking

    cfg, options = eval_run(args)
    if args.repeats < 1:
        raise UsageError(
            f"--repeats {args.repeats}: must be at least 1 (1 = answer and judge each entry once)"
        )
    if args.dry_run:
        return _dry_run(cfg, options, args.repeats)
    # Every output is checked before any work: a bad path or tracking store must not cost a run.
    output = Path(args.output)
    fix = "pass a writable --output PATH (e.g. eval/runs/NAME.json)"
    check_writable(args.output, f"--output {args.output}", fix)
    refuse_overlap([("--output", args.output)], configured_inputs(cfg, options.golden), fix)
    tracking.check_configured(cfg)
    with stale_on_failure(output, "eval"):
        # lazy: start-up (the harness loads numpy and the system's libraries)
        from doceval.harness.repeats import evaluate_repeats

        summary = evaluate_repeats(cfg, options, args.repeats)
        write_json_atomic(output, summary.to_dict())
    # Written and logged before anything is printed: a reader that stops early (| head) loses only lines.
    tracking.log_configured_run(cfg, summary, {}, run_name=output.stem, tags={"stage": "eval"})
    print_headline(summary)
    note = journal_note(summary.settings.usage)
    if note:
        print(note)
    if summary.repeats is not None:
        # lazy: start-up (numpy)
        from doceval.harness.repeats import format_repeats

        print("\n".join(format_repeats(summary.repeats)))
    print(f"summary: {output}")
    if not summary.complete:
        stopped = summary.incomplete or Incomplete("stopped early", len(summary.entries), None)
        raise RunIncomplete(
            f"doceval eval: run incomplete: {stopped.reason}; the summary covers "
            f"{stopped.entries_scored} of {stopped.entries_in_split} entries "
            f"({output}); fix the system or raise the limit named, then rerun (answered entries are not redone)"
        )
    return 0


def _dry_run(cfg: Config, options: EvalOptions, repeats: int) -> int:
    # lazy: start-up (the harness loads numpy)
    from doceval.harness.dry_run import estimate, format_estimate, journaled_entries
    from doceval.harness.plan import limited, load_inputs, needs_corpus, split_of

    external = not is_own_agent(cfg.agent.name)
    # The inputs the run itself reads: a user's assistant or retriever function needs no built corpus.
    corpus, entries, golden_path, _ = load_inputs(cfg, options, needs_corpus(cfg, options))
    split = split_of(cfg, options)
    limit = options.limit if options.limit is not None else cfg.limit
    entries = limited(select_split(entries, split, golden_path), limit, split, options.limit is not None)
    chunks = list(corpus.first_chunks.values()) if corpus is not None else []
    mean_chars = sum(len(c) for c in chunks) / len(chunks) if chunks else 1000.0
    held, consulted = journaled_entries(cfg, options, repeats)
    rows = estimate(
        cfg,
        entries,
        mean_chunk_chars=mean_chars,
        external_agent=external,
        judged=not options.no_judge,
        repeats=repeats,
        journaled=held,
    )
    print("\n".join(format_estimate(rows, len(entries), repeats, consulted)))
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    # lazy: start-up (the sweep app loads hydra and the harness, ~1 s)
    from doceval.app.sweep_run import run_sweep

    overrides = with_drafts(args.overrides, args)
    result = run_sweep(overrides, jobs=args.jobs, track=not args.no_track, progress=not args.quiet)
    print(result["table"])
    print(f"{len(result['points'])} points in {result['seconds']:.1f} s -> {result['dir']}")
    if result["parent"]:
        print(f"mlflow: parent run {result['parent']}")
    return 0


def register(sub: Any) -> None:
    """The pipeline commands, in the order `doceval --help` lists them."""
    register_params(sub)
    _register_stages(sub)
    _register_eval(sub)
    _register_sweep(sub)


def _docs_user_use(args: argparse.Namespace) -> bool:
    """`doceval docs` with a folder, --only or --out is the user's command; bare it is the stage's old name."""
    return bool(args.folders or args.only or args.out or args.replace)


def _register_stages(sub: Any) -> None:
    """`doceval docs` (the user's `--folder` command; bare, the deprecated name of `doceval stage docs`) and the
    other stages' 0.1.0 names, deprecated aliases of `doceval stage NAME` (doceval.cli.stage)."""
    p = add_stage(
        sub,
        "docs",
        deprecated_command(cmd_docs, "doceval docs", "doceval stage docs", user_use=_docs_user_use),
        "build a corpus from a docs folder (--folder) or some configured pins (--only); without them, "
        + alias_help("doceval stage docs"),
    )
    p.add_argument("--only", nargs="+", metavar="LIB@VERSION", help="build only these configured pins")
    p.add_argument(
        "--folder",
        dest="folders",
        metavar="DIR",
        action=FolderGroupAction,
        help="a folder of markdown/rst docs instead of wheels; repeat it (each with its --library/--version) "
        "to build several folders and versions into one corpus",
    )
    p.add_argument(
        "--library",
        dest="folders",
        metavar="NAME",
        action=FolderGroupAction,
        help="library of the --folder before it (default: the library of the --folder before that)",
    )
    p.add_argument(
        "--version",
        dest="folders",
        metavar="V",
        action=FolderGroupAction,
        help="version of the --folder before it; without it, each subfolder DIR/<version>/ is one version",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="where --folder writes its corpus (default: data/folders/LIB@VERSION for one pin, "
        "data/folders/LIB for several versions, data/folders/LIB1+LIB2 for several libraries; never paths.docs)",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="write over a folder that holds another corpus (other pins or sources); without it that is exit 2",
    )
    for name, func in (
        ("index", cmd_index),
        ("retrieve", cmd_retrieve),
        ("calibrate", cmd_calibrate),
        ("evaluate", cmd_evaluate),
    ):
        new = f"doceval stage {name}"
        add_stage(sub, name, deprecated_command(func, f"doceval {name}", new), alias_help(new))
    register_conversations(sub)
    new = "doceval stage report"
    add_stage(sub, "report", deprecated_command(cmd_report, "doceval report", new), alias_help(new))


def _register_eval(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "eval", help="evaluate a configuration on a split (flags + Hydra overrides)"
    )
    p.add_argument(
        "--golden",
        metavar="PATH",
        help="golden set JSONL (default: the `golden` key, data/golden/v2.1.jsonl)",
    )
    # 0.1.0's name for --golden (`golden validate --corpus` is the docs corpus: one word, one meaning)
    p.add_argument("--corpus", dest="golden", metavar="PATH", action=DeprecatedFlag, new="--golden")
    p.add_argument("--output", default="eval/runs/latest.json", metavar="PATH", help="summary JSON to write")
    p.add_argument("--no-judge", action="store_true", help="skip the LLM judge (answer_accuracy: not judged)")
    p.add_argument(
        "--limit", type=int, metavar="N", help="only the first N entries of the split (a conversation is one)"
    )
    p.add_argument(
        "--split", metavar="NAME", help="split to score (calibration, test, all); default from config"
    )
    p.add_argument(
        "--score-floor", type=float, metavar="FLOAT", help="global floor (overrides calibrated floors)"
    )
    p.add_argument("--floor", action="append", metavar="LIB=VALUE", help="per-library floor (repeatable)")
    p.add_argument(
        "--warm-memory",
        action="store_true",
        help="keep the agent's memory across entries (an external assistant gets one session id for the run)",
    )
    p.add_argument(
        "--memory-reset",
        choices=("none", "needs_memory", "standalone"),
        default="none",
        help="needs_memory: ask each needs_memory turn of a conversation without its context (a fresh session, "
        "memory and starting pin, no query rewrite): the replay memory benefit is measured against; standalone: "
        "ask its standalone rewrite instead, at its own pin (the ceiling memory recovery is measured against)",
    )
    p.add_argument(
        "--max-errors",
        type=int,
        metavar="N",
        help="stop cleanly (exit 4, summary marked incomplete) once more than N entries had a system error",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        metavar="N",
        help="answer and judge every entry N times (seed + r per repeat): mean and spread, flaky entries",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the requests, tokens and cost each LLM role would need, then exit 0 without calling any",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="replay a finished run's journals instead of asking the system again (an interrupted run "
        "always resumes)",
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="set this run's journals aside (kept in previous/) and start over",
    )
    p.add_argument("--no-track", action="store_true", help="do not log the run to MLflow")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_allow_drafts(p)
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. retriever=bm25 k=10")
    override_help(p)
    p.set_defaults(func=cmd_eval)


def _register_sweep(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "sweep",
        help="Hydra multirun over the cached candidates (e.g. -m floors.global=0.1,0.2); engine=ray: a Ray task per point",
    )
    p.add_argument(
        "-m", "--multirun", action="store_true", help="accepted for Hydra familiarity; sweeps always multirun"
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="parallel joblib workers (default 2; engine=ray: the cluster's CPUs)",
    )
    p.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_allow_drafts(p)
    p.add_argument("overrides", nargs="+", help="Hydra overrides; comma lists / range() are swept")
    p.set_defaults(func=cmd_sweep)
