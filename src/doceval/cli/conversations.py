"""`doceval conversations`: with Hydra overrides or --output the user's command (conf/ + doceval.yaml + the
overrides, as `doceval eval` composes them) written to --output; bare, the DVC stage from params.yaml (run as
`doceval stage conversations`; bare `doceval conversations` is its deprecated alias). Either prints its figures."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from doceval.cli.aliases import alias_help, deprecated_command
from doceval.cli.common import add_stage, print_headline, stage_params
from doceval.errors import UsageError

# Where `doceval conversations OVERRIDES` writes unless --output says: never over the DVC stage's output.
CONVERSATION_RUNS = "eval/runs/conversations"


def cmd_conversations(args: argparse.Namespace) -> int:
    """The DVC stage (params.yaml, into paths.eval/conversations), or with Hydra overrides or --output the user's
    command: conf/ + doceval.yaml + the overrides, as `doceval eval` composes them, into --output."""
    # lazy: start-up (a stage loads its own libraries: numpy, torch, qdrant, mlflow)
    from doceval.config.compose import compose
    from doceval.stages import conversations

    composed = _composed(args)
    if composed and args.params != "params.yaml":
        raise UsageError(
            "doceval conversations: --params reads a composed params file (the DVC stage); overrides and --output "
            "compose conf/ + doceval.yaml + the overrides instead: drop one"
        )
    cfg = compose(args.overrides) if composed else stage_params(args)
    if args.no_track:
        cfg = dataclasses.replace(cfg, tracking=dataclasses.replace(cfg.tracking, enabled=False))
    out = Path(args.output or CONVERSATION_RUNS) if composed else None
    summary = conversations.run(cfg, progress=not args.quiet, out=out)
    conversations.track(cfg, summary, out)
    print_headline(summary)
    print(
        f"conversations: {conversations.output_dir(cfg, out) / 'summary.json'} (replays beside it in replays/)"
    )
    return 0


def _composed(args: argparse.Namespace) -> bool:
    """Overrides or --output: the user's command (composed), not the stage reading params.yaml."""
    return bool(args.overrides) or args.output is not None


def register_conversations(sub: Any) -> None:
    """The stage's flags (add_stage), --output, --no-track and the overrides."""
    p = add_stage(
        sub,
        "conversations",
        deprecated_command(
            cmd_conversations, "doceval conversations", "doceval stage conversations", user_use=_composed
        ),
        "replay the conversation set (golden_conversations) of any configuration given as Hydra overrides: "
        "memory benefit, standalone ceiling, memory recovery, leak; without overrides or --output, "
        + alias_help("doceval stage conversations"),
    )
    p.add_argument(
        "--output",
        metavar="DIR",
        help=f"where a composed run writes summary.json, metrics.json and replays/ (default with overrides: "
        f"{CONVERSATION_RUNS}; the DVC stage writes paths.eval/conversations)",
    )
    p.add_argument("--no-track", action="store_true", help="do not log the run to MLflow")
    p.add_argument(
        "overrides",
        nargs="*",
        help="Hydra overrides as for `doceval eval` (agent=http agent.url=..., retriever=function, k=10, "
        "floors=zero, golden_conversations=FILE): composes conf/ + doceval.yaml + these instead of reading "
        "params.yaml",
    )
