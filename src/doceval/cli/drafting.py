"""`doceval golden draft | review | accept`: draft a golden set from a built corpus, write the review
worksheet, fold the verdicts back (the work is ``doceval.drafting``'s; docs/design.md section 3.5)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from doceval.common.io import check_writable, write_jsonl_atomic
from doceval.errors import UsageError
from doceval.inputs.golden import parse_golden
from doceval.inputs.qrels import qrels_path

DEFAULT_CORPUS = "data/docs"
DEFAULT_LLM = "answerer/openai.yaml"  # under conf/: the LLM client settings block --llm reads by default


def _outputs_free(out: Path, inputs: list[Path], replace: bool, flag: str) -> None:
    """Refuse an output that is one of the inputs, or that exists (unless ``replace``)."""
    for given in inputs:
        if out.resolve() == given.resolve():
            raise UsageError(f"{flag} {out}: is an input of this command; name another file")
    if out.exists() and not replace:
        raise UsageError(f"{flag} {out}: exists; pass --replace to write over it, or name another file")
    check_writable(out, f"{flag} {out}", f"pass a writable {flag} FILE")


def cmd_golden_draft(args: argparse.Namespace) -> int:
    # lazy: start-up (the drafter loads the corpus and the scope checks only when it runs)
    from doceval.drafting.run import DraftOptions, differences_path, draft_golden, summary_counts

    out = Path(args.out)
    if out.suffix != ".jsonl":
        raise UsageError(f"--out {out}: name a .jsonl file (its qrels and differences are written beside it)")
    corpus = Path(args.corpus or DEFAULT_CORPUS)
    for path, flag in ((out, "--out"), (qrels_path(out), "--out"), (differences_path(out), "--out")):
        _outputs_free(path, [corpus / "corpus.jsonl", corpus / "manifest.json"], args.replace, flag)
    if args.max is not None and args.max < 1:
        raise UsageError(f"--max {args.max}: must be at least 1 (drafts of each kind per library)")
    pins = tuple(p for group in args.pins or [] for p in group.split(",") if p)
    opts = DraftOptions(corpus, out, tuple(args.library or ()), pins, args.seed, args.max, _llm(args.llm))
    result = draft_golden(opts)
    counts = summary_counts(result)
    print(f"{len(result.differences)} differences between versions (every one in {differences_path(out)}):")
    for key, n in sorted(counts["differences"].items()):
        print(f"  {key:32s} {n:5d}")
    print(
        f"{len(result.drafts)} drafts written to {out} (+ {qrels_path(out).name}), each passing "
        "`doceval golden validate --strict`:"
    )
    for key, n in sorted(counts["drafts"].items()):
        print(f"  {key:32s} {n:5d}")
    if counts["dropped"]:
        print(
            "dropped by the validator's rules: "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts["dropped"].items()))
        )
    if result.phrasing:
        print(
            f"phrasing: {result.phrasing['rephrased']} questions rephrased by the LLM, {result.phrasing['kept']} kept"
        )
    print(f"drafted in {result.seconds:.1f} s; review them: doceval golden review {out} --out REVIEW.jsonl")
    return 0


def _llm(value: str | None) -> Any:
    """The LLM client settings ``--llm`` names: a YAML file of answerer keys over conf/answerer/openai.yaml (bare:
    that file alone), validated by the schema as an openai answerer block is."""
    if value is None:
        return None
    # lazy: start-up (yaml, the config tree and the LLM settings load only for --llm)
    from doceval.config import schema
    from doceval.config.compose import find_conf_dir
    from doceval.config.validate import validate_block

    shipped = find_conf_dir() / DEFAULT_LLM
    path = Path(value) if value != "default" else shipped
    block = {**_yaml_mapping(shipped, f"--llm: {shipped}"), **_yaml_mapping(path, f"--llm {value}")}
    return validate_block(schema.AnswererOpenAI, block, f"--llm {path}", path="answerer").llm


def _yaml_mapping(path: Path, where: str) -> dict[str, Any]:
    """A YAML file holding one mapping (the LLM settings), or a UsageError naming ``where``."""
    import yaml  # lazy: start-up, as above

    if not path.is_file():
        raise UsageError(
            f"{where}: not a file; name a YAML file with the LLM settings (model, base_url, "
            "api_key_env, ...), or pass --llm alone for conf/answerer/openai.yaml"
        )
    try:
        block = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"{where}: not readable YAML ({exc})") from exc
    if not isinstance(block, dict):
        raise UsageError(f"{where}: expected a mapping of LLM settings (model, base_url, ...)")
    return block


def cmd_golden_review(args: argparse.Namespace) -> int:
    # lazy: start-up
    from doceval.drafting.review import review_rows

    path, out = Path(args.path), Path(args.out)
    _outputs_free(out, [path, qrels_path(path)], args.replace, "--out")
    rows = review_rows(parse_golden(path, allow_drafts=True), args.sample, args.seed)
    write_jsonl_atomic(out, rows)
    print(
        f"{out}: {len(rows)} drafts to review (seed {args.seed}); fill in verdict (OK, MINOR, WRONG), reason "
        f"and reviewer, then: doceval golden accept {path} --verdicts {out} --out NAME.jsonl"
    )
    return 0


def cmd_golden_accept(args: argparse.Namespace) -> int:
    # lazy: start-up
    from doceval.drafting.review import accept, write_accepted

    path, verdicts, out = Path(args.path), Path(args.verdicts), Path(args.out)
    inputs = [path, qrels_path(path), verdicts]
    for target in (out, qrels_path(out)):
        _outputs_free(target, inputs, args.replace, "--out")
    accepted = accept(path, verdicts)
    written = write_accepted(accepted, out)
    c = accepted.counts
    print(
        f"{written[0]}: {c['accepted']} accepted, {c['wrong']} dropped as WRONG, {c['unreviewed']} left out "
        f"(no verdict yet){' + ' + written[1].name if len(written) > 1 else ''}; check it: doceval golden "
        f"validate {out} --strict"
    )
    return 0


def register(golden: Any) -> None:
    """The drafting commands under `doceval golden`."""
    p = golden.add_parser(
        "draft",
        help="draft golden entries from a built corpus: version traps from the API differences between pins "
        "(marked draft: review and accept them before scoring)",
    )
    p.add_argument("--corpus", help=f"built corpus directory (default: {DEFAULT_CORPUS})")
    p.add_argument(
        "--out",
        required=True,
        metavar="NAME.jsonl",
        help="drafts to write (NAME.qrels.jsonl and NAME.differences.jsonl beside it)",
    )
    p.add_argument("--library", action="append", metavar="LIB", help="only this library (repeatable)")
    p.add_argument(
        "--pins", action="append", metavar="LIB@VER[,LIB@VER]", help="only these pins (repeatable)"
    )
    p.add_argument("--seed", type=int, default=0, help="which differences --max keeps, and the split tags")
    p.add_argument(
        "--max", type=int, metavar="N", help="at most N differences of each kind per library drafted"
    )
    p.add_argument(
        "--llm",
        nargs="?",
        const="default",
        metavar="FILE",
        help="rephrase questions with an LLM (settings: FILE, or conf/answerer/openai.yaml); labels "
        "are never the model's",
    )
    p.add_argument("--replace", action="store_true", help="write over existing output files")
    p.set_defaults(func=cmd_golden_draft)
    p = golden.add_parser(
        "review", help="the drafts as a `golden audit` worksheet to fill in (verdict, reason, reviewer)"
    )
    p.add_argument("path")
    p.add_argument("--out", required=True, metavar="FILE", help="the worksheet to write (JSONL)")
    p.add_argument(
        "--sample", type=int, metavar="N", help="a seeded stratified sample of N drafts (default: all)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--replace", action="store_true", help="write over an existing worksheet")
    p.set_defaults(func=cmd_golden_review)
    p = golden.add_parser(
        "accept",
        help="fold a filled review worksheet back: accepted drafts become a golden "
        "set with its qrels, provenance kept",
    )
    p.add_argument("path", help="the drafted golden set")
    p.add_argument("--verdicts", required=True, metavar="FILE", help="the filled worksheet")
    p.add_argument(
        "--out", required=True, metavar="NAME.jsonl", help="the accepted golden set (qrels beside it)"
    )
    p.add_argument("--replace", action="store_true", help="write over existing output files")
    p.set_defaults(func=cmd_golden_accept)
