"""`doceval params`: compose conf/ + doceval.yaml (+ overrides) into params.yaml, or check that it still matches
(`--check`), refusing any credential the file would hold."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from doceval.common.io import write_bytes_atomic
from doceval.common.redact import secret_locations
from doceval.errors import EXIT_USAGE, UsageError


def register_params(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "params", help="compose conf/ + doceval.yaml into params.yaml (Hydra)"
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="exit 2 naming the keys where params.yaml differs from conf/ + doceval.yaml (+ overrides)",
    )
    p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. retriever=bm25")
    p.set_defaults(func=cmd_params)


def cmd_params(args: argparse.Namespace) -> int:
    # lazy: start-up (yaml and the config schema, ~0.2 s)
    from doceval.config.compose import PARAMS, compose, dump_params
    from doceval.config.drift import sources
    from doceval.config.engine_choice import ENGINE_ENV, is_engine_override
    from doceval.config.objects import config_dict

    engine = [o for o in args.overrides if is_engine_override(o)]
    if engine:
        raise UsageError(
            f"doceval params {engine[0]}: the engine is an execution choice, not a parameter (it changes no "
            f"number), and params.yaml never holds it; choose it where the work runs: {ENGINE_ENV}='ray' (its "
            f"keys after the name, e.g. {ENGINE_ENV}='ray actors=4 address=ray://HEAD:10001') before `dvc repro` "
            "or a stage, or engine=ray on `doceval eval` and `doceval sweep`"
        )
    read = " + ".join(sources()) + (f" + {' '.join(args.overrides)}" if args.overrides else "")
    if args.check:
        return _check_params(PARAMS, args.overrides, read)
    cfg = compose(args.overrides)
    # params.yaml is committed with the project: a credential there is a leak, and scrubbing it breaks it
    held = secret_locations(config_dict(cfg))
    if held:
        raise UsageError(
            f"doceval params: {', '.join(held)} would write a credential into {PARAMS}, which is committed with "
            "the project; pass credentials through environment variables instead (agent.headers_env, "
            "answerer.api_key_env, judge.api_key_env, store.api_key_env) and keep URLs without user:password@"
        )
    write_bytes_atomic(
        PARAMS, dump_params(cfg, args.overrides).encode("utf-8")
    )  # checked above, not scrubbed
    print(f"wrote {PARAMS} (from {read})")
    return 0


def _check_params(params: Path, given: list[str], read: str) -> int:
    """`doceval params --check`: params.yaml against its sources, composed once (drift.differing_keys)."""
    # lazy: start-up (as in cmd_params: yaml and the config schema, ~0.2 s)
    import yaml

    # lazy: start-up (composing for the drift check loads Hydra, ~0.35 s; only --check needs it)
    from doceval.config.drift import differing_keys
    from doceval.config.project import recorded_overrides

    text = params.read_text(encoding="utf-8") if params.is_file() else ""
    current = yaml.safe_load(text) if text else None
    if current is None:
        print(f"{params} not found: run `doceval params` (sources: {read})", file=sys.stderr)
        return EXIT_USAGE
    # Without overrides here, the ones `doceval params` recorded in the file (what the stages recompose).
    overrides = list(given) or recorded_overrides(text) or []
    if overrides and not given:
        read += f" + {' '.join(overrides)}"
    keys = differing_keys(current, overrides)
    if keys:
        print(
            f"{params} differs from {read} at {', '.join(keys)}: run `doceval params`"
            f"{' ' + ' '.join(overrides) if overrides else ''} and commit it",
            file=sys.stderr,
        )
        return EXIT_USAGE
    print(f"{params} matches {read}")
    return 0
