"""`doceval` command line. Each subcommand is a thin wrapper over the library; errors map to exit codes.

Stage commands (docs, index, retrieve, calibrate, evaluate, report) read params.yaml, as DVC runs them.
User commands (eval, sweep) compose conf/ with Hydra overrides given after their flags.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from doceval.errors import EXIT_UNEXPECTED, EXIT_USAGE, GateFailed, UsageError


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage already; make the message say how to get help."""

    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _params(args: argparse.Namespace) -> dict[str, Any]:
    from doceval.config import load_params

    return load_params(Path(args.params))


def cmd_params(args: argparse.Namespace) -> int:
    from doceval.config import PARAMS, compose, dump_params

    composed = compose(args.overrides)
    text = dump_params(composed)
    if args.check:
        import yaml

        current = yaml.safe_load(PARAMS.read_text(encoding="utf-8")) if PARAMS.is_file() else None
        if current != composed:
            print("params.yaml differs from conf/: run `doceval params` and commit it", file=sys.stderr)
            return EXIT_USAGE
        print("params.yaml matches conf/")
        return 0
    PARAMS.write_text(text, encoding="utf-8")
    print(f"wrote {PARAMS}")
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    import json

    from doceval.docs import build_corpus, build_folder_corpus, parse_specs

    params = _params(args)
    docs_cfg = params["docs"]
    out = Path(params["paths"]["docs"])
    folder = args.folder or docs_cfg.get("folder")
    if folder:
        library = args.library or docs_cfg.get("folder_library")
        version = args.version or docs_cfg.get("folder_version")
        if not library or not version:
            raise UsageError("docs --folder needs --library NAME and --version VERSION for the document ids")
        manifest = build_folder_corpus(Path(folder), library, version, out, int(docs_cfg["chunk_chars"]))
    else:
        specs = parse_specs(docs_cfg["libraries"])
        if args.only:
            known = {s.pin: s for s in specs}
            unknown = [p for p in args.only if p not in known]
            if unknown:
                raise UsageError(
                    f"docs --only: {', '.join(unknown)} not configured; known: {', '.join(sorted(known))}"
                )
            specs = [known[p] for p in args.only]
        cache = Path(params["paths"]["cache"]) / "wheels"
        manifest = build_corpus(specs, out, cache, int(docs_cfg["chunk_chars"]), progress=not args.quiet)
    print(
        json.dumps(
            {
                "documents": manifest["documents"],
                "chunks": manifest["chunks"],
                "pins": {p: v["chunks"] for p, v in manifest["pins"].items()},
            }
        )
    )
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from doceval.index import run_index_stage

    run_index_stage(_params(args), progress=not args.quiet)
    return 0


def cmd_retrieve(args: argparse.Namespace) -> int:
    from doceval.candidates import run_retrieve_stage

    run_retrieve_stage(_params(args), progress=not args.quiet)
    return 0


def _check_tracking(cfg: dict[str, Any]) -> None:
    """Fail fast (exit 2) on an unreachable tracking server, before any work is done."""
    if cfg.get("tracking", {}).get("enabled", True):
        from doceval import tracking

        tracking.check_reachable(tracking.tracking_uri(cfg["tracking"].get("uri"), Path.cwd()))


def _track(
    cfg: dict[str, Any],
    summary: dict[str, Any],
    artifacts: dict[str, Path],
    run_name: str | None = None,
    tags: dict[str, str] | None = None,
) -> str | None:
    """Log a run to MLflow when tracking is enabled (log_run creates the store once); returns the run id."""
    if not cfg.get("tracking", {}).get("enabled", True):
        return None
    from doceval import tracking

    root = Path.cwd()
    uri = tracking.tracking_uri(cfg["tracking"].get("uri"), root)
    from doceval.config import flatten

    flat = flatten({k: v for k, v in cfg.items() if k not in ("docs", "paths")})
    run_id = tracking.log_run(
        summary,
        uri=uri,
        root=root,
        run_name=run_name,
        artifacts=artifacts,
        extra_tags=tags,
        flat_config=flat,
        golden_path=Path(summary["config"]["golden"]["path"]),
    )
    print(f"mlflow: logged run {run_id} ({uri})")
    return run_id


def cmd_calibrate(args: argparse.Namespace) -> int:
    from doceval.calibrate import run_calibrate_stage

    params = _params(args)
    _check_tracking(params)
    result = run_calibrate_stage(params, progress=not args.quiet)
    out: Path = result["out"]
    _track(
        params,
        result["summary"],
        {"floors.json": out / "floors.json", "floors.png": out / "floors.png"},
        run_name="calibrate",
        tags={"stage": "calibrate"},
    )
    return 0


def _print_headline(summary: dict[str, Any]) -> None:
    from doceval.evaluate import METRIC_KEYS

    m = summary["metrics"]
    cfg = summary["config"]
    print(
        f"split={cfg['split']} k={cfg['k']} retriever={cfg['retriever']['name']} floors={cfg['floors']['source']}"
    )
    print(f"{'metric':<22}{'value':>8}  {'95% CI':<17}{'n':>5}")
    for key in METRIC_KEYS:
        value = m[key]
        n = m["counts"].get(f"n_{key}", "")
        if value is None:
            shown = "not judged" if key == "answer_accuracy" and m.get("not_judged") else "n/a"
            print(f"{key:<22}{shown:>8}  {'':<17}{n:>5}")
            continue
        ci = m["ci95"].get(key)
        ci_text = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
        print(f"{key:<22}{value:>8.4f}  {ci_text:<17}{n:>5}")
    c = m["counts"]
    print(
        f"entries={c['n_entries']} in_scope={c['n_in_scope']} out_of_scope={c['n_out_of_scope']} "
        f"judged={c['n_judged']} judge_errors={c['judge_errors']}"
    )


def _headline_metrics(summary: dict[str, Any]) -> dict[str, Any]:
    """The DVC metrics file: headline values and counts, flat enough for `dvc metrics diff`."""
    from doceval.evaluate import METRIC_KEYS

    m = summary["metrics"]
    return {
        **{k: m[k] for k in METRIC_KEYS},
        **m["counts"],
        "split": summary["config"]["split"],
        "k": summary["config"]["k"],
    }


def cmd_evaluate(args: argparse.Namespace) -> int:
    """DVC stage: the held-out split with the calibrated floors -> eval/summary.json + eval/metrics.json."""
    from doceval.evaluate import EvalOptions, evaluate
    from doceval.io import write_json_atomic

    params = _params(args)
    _check_tracking(params)
    summary = evaluate(params, EvalOptions(progress=not args.quiet))
    out = Path(params["paths"]["eval"])
    write_json_atomic(out / "summary.json", summary)
    write_json_atomic(out / "metrics.json", _headline_metrics(summary))
    _print_headline(summary)
    _track(params, summary, {}, run_name="evaluate", tags={"stage": "evaluate"})
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """User command: the seed harness's flags plus Hydra overrides; writes one summary JSON."""
    from doceval.config import compose
    from doceval.evaluate import EvalOptions, evaluate
    from doceval.floors import parse_floor_flags
    from doceval.io import write_json_atomic

    cfg = compose(args.overrides)
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit}: must be at least 1 (or omit it for every entry)")
    options = EvalOptions(
        golden=Path(args.corpus) if args.corpus else None,
        split="__config__" if args.split is None else (None if args.split == "all" else args.split),
        limit=args.limit,
        score_floor=args.score_floor,
        floor_flags=parse_floor_flags(args.floor or []),
        no_judge=args.no_judge,
        warm_memory=args.warm_memory,
        progress=not args.quiet,
    )
    if args.no_track:
        cfg["tracking"]["enabled"] = False
    _check_tracking(cfg)
    summary = evaluate(cfg, options)
    output = Path(args.output)
    write_json_atomic(output, summary)
    _print_headline(summary)
    print(f"summary: {output}")
    _track(cfg, summary, {}, run_name=output.stem, tags={"stage": "eval"})
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """DVC stage: eval/report.md from the test summary and the calibration artifact, with the gate's verdict.

    The report never fails the pipeline; `doceval gate` is what fails a build.
    """
    from doceval.io import read_json
    from doceval.report import gate, load_summary, render_report

    params = _params(args)
    out = Path(params["paths"]["eval"])
    summary = load_summary(out / "summary.json")
    floors_file = out / "calibration" / "floors.json"
    calibration = read_json(floors_file, "calibrated floors") if floors_file.is_file() else None
    verdict = gate(summary, params["gate"])
    lines = [render_report(summary, calibration).rstrip(), "", "## Gate", "", f"`{verdict.line}`", ""]
    lines += [f"- {f}" for f in verdict.failures]
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(verdict.line)
    print(f"report: {out / 'report.md'}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from doceval.sweep import run_sweep

    result = run_sweep(args.overrides, jobs=args.jobs, track=not args.no_track, progress=not args.quiet)
    print(result["table"])
    print(f"{len(result['points'])} points in {result['seconds']:.1f} s -> {result['dir']}")
    if result["parent"]:
        print(f"mlflow: parent run {result['parent']}")
    return 0


def cmd_golden_validate(args: argparse.Namespace) -> int:
    from doceval.corpus import load_corpus
    from doceval.golden import format_statistics, parse_golden, statistics

    corpus_ids = None if args.no_corpus else load_corpus(Path(args.corpus)).doc_ids()
    entries = parse_golden(Path(args.path), corpus_ids=corpus_ids)
    print(
        f"{args.path}: {len(entries)} entries, valid"
        + ("" if corpus_ids is not None else " (corpus not checked)")
    )
    print(format_statistics(statistics(entries)))
    return 0


def cmd_golden_split(args: argparse.Namespace) -> int:
    from doceval.golden import write_splits

    counts = write_splits(Path(args.path), seed=args.seed)
    print(f"{args.path}: split tags written with seed {args.seed}: {counts}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="doceval", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def stage(
        name: str, func: Callable[[argparse.Namespace], int], help_text: str
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument(
            "--params", default="params.yaml", help="composed configuration (default: params.yaml)"
        )
        p.add_argument("--quiet", action="store_true", help="no progress bars")
        p.set_defaults(func=func)
        return p

    p: argparse.ArgumentParser = sub.add_parser("params", help="compose conf/ into params.yaml (Hydra)")
    p.add_argument("--check", action="store_true", help="exit 2 if params.yaml differs from conf/")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. retriever=bm25")
    p.set_defaults(func=cmd_params)

    p = stage("docs", cmd_docs, "build the documentation corpus from pinned wheels (or a docs folder)")
    p.add_argument("--only", nargs="+", metavar="LIB@VERSION", help="build only these configured pins")
    p.add_argument("--folder", help="a folder of markdown/rst docs instead of wheels")
    p.add_argument("--library", help="library name for --folder")
    p.add_argument("--version", help="version for --folder")

    stage("index", cmd_index, "embed the corpus and write the Qdrant index")

    golden = sub.add_parser("golden", help="golden set tools").add_subparsers(
        dest="golden_command", required=True, parser_class=_Parser
    )
    p = golden.add_parser(
        "validate", help="check a golden set against the design's rules and the built corpus"
    )
    p.add_argument("path")
    p.add_argument("--corpus", default="data/docs", help="built corpus directory (default: data/docs)")
    p.add_argument("--no-corpus", action="store_true", help="skip the check that relevant ids exist")
    p.set_defaults(func=cmd_golden_validate)
    p = golden.add_parser(
        "split", help="(re)assign calibration/test tags, stratified by library@version and kind"
    )
    p.add_argument("path")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_golden_split)

    stage("retrieve", cmd_retrieve, "cache the top-K candidates of every golden entry (no floor)")
    stage("calibrate", cmd_calibrate, "pick per-library floors on the calibration split")
    stage("evaluate", cmd_evaluate, "score the held-out split with the calibrated floors (DVC stage)")
    stage("report", cmd_report, "write eval/report.md with the gate's verdict (DVC stage)")

    p = sub.add_parser("eval", help="evaluate a configuration on a split (flags + Hydra overrides)")
    p.add_argument(
        "--corpus",
        "--golden",
        dest="corpus",
        metavar="PATH",
        help="golden set JSONL (default: the `golden` key, data/golden/v1.jsonl)",
    )
    p.add_argument("--output", default="eval/runs/latest.json", metavar="PATH", help="summary JSON to write")
    p.add_argument("--no-judge", action="store_true", help="skip the LLM judge (answer_accuracy: not judged)")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N entries of the split")
    p.add_argument(
        "--split", metavar="NAME", help="split to score (calibration, test, all); default from config"
    )
    p.add_argument(
        "--score-floor", type=float, metavar="FLOAT", help="global floor (overrides calibrated floors)"
    )
    p.add_argument("--floor", action="append", metavar="LIB=VALUE", help="per-library floor (repeatable)")
    p.add_argument("--warm-memory", action="store_true", help="keep the agent's memory across entries")
    p.add_argument("--no-track", action="store_true", help="do not log the run to MLflow")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. retriever=bm25 k=10")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser(
        "sweep", help="Hydra multirun over the cached candidates (e.g. -m floors.global=0.1,0.2)"
    )
    p.add_argument(
        "-m", "--multirun", action="store_true", help="accepted for Hydra familiarity; sweeps always multirun"
    )
    p.add_argument("--jobs", type=int, default=2, help="parallel joblib workers (default 2)")
    p.add_argument("--no-track", action="store_true", help="do not log to MLflow")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("overrides", nargs="+", help="Hydra overrides; comma lists / range() are swept")
    p.set_defaults(func=cmd_sweep)

    for register in _EXTRA:
        register(sub, stage)
    return parser


# Later modules add their subcommands here (keeps this file a list of thin wrappers).
_EXTRA: list[Callable[[Any, Callable[..., argparse.ArgumentParser]], None]] = []


def _register_extras() -> None:
    from doceval import cli_beir, cli_report

    _EXTRA.extend([cli_report.register, cli_beir.register])


_register_extras()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"doceval {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except GateFailed as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"doceval {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - last resort: exit 1 with the traceback for a bug report
        import traceback

        traceback.print_exc()
        print(f"doceval {args.command}: unexpected error: {exc}", file=sys.stderr)
        return EXIT_UNEXPECTED


if __name__ == "__main__":
    sys.exit(main())
