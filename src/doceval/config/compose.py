"""Configuration: Hydra composition of conf/ (for `doceval ... overrides`) and params.yaml (for DVC stages)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from doceval.errors import UsageError

CONF_DIR = Path("conf")
PARAMS = Path("params.yaml")


def compose(overrides: Sequence[str] = (), conf_dir: Path = CONF_DIR) -> dict[str, Any]:
    """Compose ``conf/config.yaml`` with Hydra overrides into a plain dict.

    Unknown groups, options or keys become a UsageError that lists the valid choices.
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import ConfigCompositionException, MissingConfigException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not (conf_dir / "config.yaml").is_file():
        raise UsageError(f"{conf_dir}/config.yaml not found: run doceval from the project root")
    try:
        with initialize_config_dir(config_dir=str(conf_dir.resolve()), version_base="1.3"):
            cfg = hydra_compose(config_name="config", overrides=list(overrides))
    except MissingConfigException as exc:
        raise UsageError(f"config override: {_first_line(exc)}") from exc
    except (ConfigCompositionException, OmegaConfBaseException) as exc:
        raise UsageError(f"config override: {_first_line(exc)} (see conf/ for the groups and keys)") from exc
    data = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(data, dict)
    return {str(k): v for k, v in data.items()}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    cause = exc.__cause__
    if cause is not None and str(cause).strip():
        text = f"{text} {str(cause).strip()}"
    text = text.split("Config search path")[0]  # Hydra appends its search path; noise for a user
    return " ".join(text.split())


def load_params(path: Path = PARAMS) -> dict[str, Any]:
    """params.yaml, the composed configuration DVC stages read."""
    if not path.is_file():
        raise UsageError(
            f"{path} not found: run from the project root, or `make params` to compose it from conf/"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping at the top level")
    return data


def dump_params(cfg: dict[str, Any]) -> str:
    header = (
        "# Composed from conf/ by `doceval params` (Hydra). Do not edit by hand: edit conf/ and recompose.\n"
    )
    return header + yaml.safe_dump(cfg, sort_keys=False, default_flow_style=None, width=120)


def flatten(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists and empty mappings stay values (MLflow params are flat)."""
    if not isinstance(cfg, Mapping):
        return {prefix: cfg}
    flat: dict[str, Any] = {}
    for key, value in cfg.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        flat.update(flatten(value, name) if isinstance(value, Mapping) and value else {name: value})
    return flat
