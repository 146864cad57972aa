"""The sources a configuration was composed from (the shipped conf/, the project's doceval.yaml, a command's
overrides), named as a user would name them; and params.yaml against them: `doceval params` records its command
overrides in params.yaml's header, and a stage refuses a stale params.yaml, so the index a stage built and the
`doceval eval` that reads it can never disagree about the embedder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from doceval.common.hints import params_command
from doceval.config.compose import SOURCE_CONF, compose, find_conf_dir, flatten
from doceval.config.objects import config_dict
from doceval.config.project import override_key, project_file, read_project_overrides, recorded_overrides
from doceval.errors import UsageError

SHOWN_KEYS = 8


def sources() -> list[str]:
    """The configuration sources every command here composes, in order, as a user would name them."""
    found = [f"{find_conf_dir()}/"]
    project = project_file()
    if project is not None:
        found.append(str(project))
    return found


def group_source(group: str, command: Sequence[str] = (), command_name: str = "the command") -> str:
    """Where the composed ``group`` block (e.g. ``gate``) came from: its conf/ file, then the project file's and
    the command's overrides of it, e.g. ``conf/gate/default.yaml + doceval.yaml (gate.thresholds.hit_rate=0.95)``."""
    conf_dir = find_conf_dir()
    project = project_file()
    mine = [] if project is None else read_project_overrides(project)

    def touching(overrides: Sequence[str]) -> list[str]:
        return [o for o in overrides if override_key(o) == group or override_key(o).startswith(group + ".")]

    option = _default_option(conf_dir, group)
    for o in touching([*mine, *command]):
        if override_key(o) == group and "=" in o:
            option = o.split("=", 1)[1].strip()
    packaged = conf_dir == SOURCE_CONF  # the fallback itself, not ./conf (a link to it in a checkout)
    parts = [
        f"the packaged conf/{group}/{option}.yaml"
        if packaged
        else (conf_dir / group / f"{option}.yaml").as_posix()
    ]
    for where, found in ((str(project), touching(mine)), (command_name, touching(command))):
        if found:
            parts.append(f"{where} ({' '.join(found)})")
    return " + ".join(parts)


def params_source(path: Path, group: str) -> str:
    """Where ``group`` of a params file came from: the sources `doceval params` composed it from (recorded in
    its header), or the file itself when doceval did not write it."""
    try:
        recorded = recorded_overrides(path.read_text(encoding="utf-8"))
    except OSError:
        recorded = None
    if recorded is None:
        return str(path)
    return f"{path}, composed from {group_source(group, recorded, 'doceval params')}"


def _default_option(conf_dir: Path, group: str) -> str:
    """The option of ``group`` in conf/config.yaml's defaults list (``- gate: default``)."""
    try:
        data = yaml.safe_load((conf_dir / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return "default"
    for item in (data or {}).get("defaults") or []:
        if isinstance(item, dict) and group in item:
            return str(item[group])
    return "default"


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
            f"{composed_with}; run {params_command()} (every command composes the same sources){_experiment_hint()}"
        )


def _experiment_hint() -> str:
    """In a project with a doceval.yaml: how to run a DVC experiment there. `dvc exp run -S KEY=VALUE` writes
    params.yaml itself (DVC's Hydra integration composes conf/ alone, never doceval.yaml), which is what makes
    such a params.yaml stale."""
    if project_file() is None:
        return ""
    return (
        "; for a DVC experiment here, record the override in params.yaml with `doceval params KEY=VALUE`, then "
        "`dvc exp run` (`dvc exp run -S` cannot apply doceval.yaml); `doceval params` alone restores it"
    )
