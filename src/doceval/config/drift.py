"""params.yaml against the sources it was composed from: the shipped conf/, the project's doceval.yaml and the
command overrides `doceval params` recorded in its header. A stage refuses a stale params.yaml, so the index a
stage built and the `doceval eval` that reads it can never disagree about the embedder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from doceval.common.hints import params_command
from doceval.config.compose import compose, find_conf_dir, flatten
from doceval.config.objects import config_dict
from doceval.config.project import project_file, recorded_overrides
from doceval.errors import UsageError

SHOWN_KEYS = 8


def sources() -> list[str]:
    """The configuration sources every command here composes, in order, as a user would name them."""
    found = [f"{find_conf_dir()}/"]
    project = project_file()
    if project is not None:
        found.append(str(project))
    return found


def differing_keys(params: Any, overrides: list[str]) -> list[str]:
    """The dotted keys where ``params`` (params.yaml's mapping) differs from composing the sources with
    ``overrides``: changed, missing or extra, sorted."""
    composed = flatten(config_dict(compose(overrides)))
    current = flatten(params) if isinstance(params, dict) else {}
    keys = {k for k in composed.keys() | current.keys() if k != "engine" and not k.startswith("engine.")}
    return sorted(k for k in keys if composed.get(k, ...) != current.get(k, ...))


def check_fresh(path: Path) -> None:
    """Refuse (UsageError, exit 2) a params.yaml written by `doceval params` that no longer matches its sources,
    naming the keys that differ. A params file doceval did not write (no header) is read as it is."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return  # load_params reports a missing or unreadable file
    overrides = recorded_overrides(text)
    if overrides is None:
        return
    try:
        params = yaml.safe_load(text)
    except yaml.YAMLError:
        return  # load_params reports it, with the line
    keys = differing_keys(params, overrides)
    if keys:
        more = f" and {len(keys) - SHOWN_KEYS} more" if len(keys) > SHOWN_KEYS else ""
        composed_with = f" with {' '.join(overrides)}" if overrides else ""
        raise UsageError(
            f"{path} is stale: {', '.join(keys[:SHOWN_KEYS])}{more} {'differs' if len(keys) == 1 else 'differ'} from {' + '.join(sources())}"
            f"{composed_with}; run {params_command()} (every command composes the same sources)"
        )
