"""`doceval stage NAME`: the eight DVC stage commands under one namespace, each named as its stage in dvc.yaml
(``dvc repro NAME`` runs ``doceval stage NAME``), each reading params.yaml (``--params``) with ``--quiet``.

The user's own commands stay at the top (`doceval docs --folder`, `doceval conversations` with overrides,
`eval`, ...); the stages' 0.1.0 spellings are deprecated aliases (doceval.cli.aliases), registered beside the
user commands they share a name with."""

from __future__ import annotations

import argparse
from typing import Any

from doceval.cli.common import Command, add_stage
from doceval.cli.conversations import cmd_conversations
from doceval.cli.judge import cmd_agreement
from doceval.cli.pipeline import cmd_calibrate, cmd_docs, cmd_evaluate, cmd_index, cmd_report, cmd_retrieve


def cmd_stage_docs(args: argparse.Namespace) -> int:
    """The configured corpus (paths.docs), every pin: `doceval docs` without a folder, --only or --out."""
    return cmd_docs(argparse.Namespace(**vars(args), folders=None, only=None, out=None, replace=False))


def cmd_stage_conversations(args: argparse.Namespace) -> int:
    """The stage from params.yaml: never composed (no overrides, no --output), unlike `doceval conversations`."""
    return cmd_conversations(argparse.Namespace(**vars(args), overrides=[], output=None))


# dvc.yaml's stage names, in pipeline order -> (command, its --help line).
STAGES: dict[str, tuple[Command, str]] = {
    "docs": (cmd_stage_docs, "build the configured documentation corpus (paths.docs) from the pinned wheels"),
    "index": (cmd_index, "embed the corpus and write the Qdrant index"),
    "retrieve": (cmd_retrieve, "cache the top-K candidates of every golden entry (no floor)"),
    "calibrate": (cmd_calibrate, "pick per-library floors on the calibration split"),
    "evaluate": (cmd_evaluate, "score the held-out split with the calibrated floors"),
    "conversations": (
        cmd_stage_conversations,
        "replay the conversation set (golden_conversations): memory benefit, standalone ceiling, memory recovery, "
        "leak",
    ),
    "judge": (cmd_agreement, "the offline judge's agreement on the held-out labels (eval/judge/)"),
    "report": (cmd_report, "write eval/report.md with the gate's verdict"),
}


def register(sub: Any) -> None:
    text = "the DVC stages, each reading params.yaml: `dvc repro NAME` runs `doceval stage NAME`"
    stages = sub.add_parser("stage", help=text, description=text).add_subparsers(
        dest="stage_command", required=True, metavar="NAME"
    )
    for name, (func, help_text) in STAGES.items():
        p = add_stage(stages, name, func, help_text)
        p.set_defaults(
            command=f"stage {name}"
        )  # what an error message names: `doceval stage index: error: ...`
        if name == "conversations":
            p.add_argument("--no-track", action="store_true", help="do not log the run to MLflow")
