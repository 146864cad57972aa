"""Commands that error messages name, as they exist where the user is: `dvc repro STAGE` only in a DVC project
whose dvc.yaml has that stage, `make params` only beside a Makefile with that target; otherwise the `doceval`
command that does the same. Read when a message is built (the working directory can change), never cached."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

DVC_FILE = Path("dvc.yaml")
MAKEFILE = Path("Makefile")


def _dvc_stages() -> set[str]:
    try:
        data = yaml.safe_load(DVC_FILE.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return set()
    stages = data.get("stages") if isinstance(data, dict) else None
    return {str(name) for name in stages} if isinstance(stages, dict) else set()


def stage_command(stage: str) -> str:
    """The command that reruns a pipeline stage here: ``dvc repro index`` in a DVC project with that stage,
    else ``doceval stage index``."""
    if stage in _dvc_stages():
        return f"dvc repro {stage}"
    return f"doceval stage {stage}"  # what dvc.yaml's cmd runs: every stage is `doceval stage NAME`


def rerun(stage: str) -> str:
    """:func:`stage_command` in backticks, as messages quote a command."""
    return f"`{stage_command(stage)}`"


def params_command() -> str:
    """How to recompose params.yaml here: `make params` beside a Makefile with that target, else
    `doceval params`."""
    try:
        text = MAKEFILE.read_text(encoding="utf-8")
    except OSError:
        return "`doceval params`"
    return "`make params`" if re.search(r"^params\s*:", text, re.MULTILINE) else "`doceval params`"
