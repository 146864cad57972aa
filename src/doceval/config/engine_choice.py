"""Where the work runs is an execution choice, not a parameter: the engine changes no number, so it is never written
into params.yaml (switching engines leaves a committed tree clean) and comes, for every command and stage, from
the composition order: conf/ -> doceval.yaml -> ``$DOCEVAL_ENGINE`` -> the command's own overrides.

``$DOCEVAL_ENGINE`` is the engine's name, then its keys: ``ray``, ``ray actors=4 address=ray://head:10001``
(``$RAY_ADDRESS`` still names the cluster when ``engine.address`` is null). A key of the other engine
(``engine.num_cpus`` under engine=local) is dropped with a one-line note, so one script switches engines by
one word.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from doceval.errors import UsageError

ENGINE_ENV = "DOCEVAL_ENGINE"
ENGINES = ("local", "ray")
EXAMPLE = f"{ENGINE_ENV}='ray actors=4 address=ray://HEAD:10001'"


def engine_overrides() -> list[str]:
    """``$DOCEVAL_ENGINE`` as Hydra overrides (``engine=ray``, ``engine.actors=4``...); [] when unset."""
    text = os.environ.get(ENGINE_ENV, "").strip()
    if not text:
        return []
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"${ENGINE_ENV}: {exc}; e.g. {EXAMPLE}") from None
    name, rest = words[0], words[1:]
    if name not in ENGINES:
        raise UsageError(
            f"${ENGINE_ENV}={text!r}: starts with the engine, one of {', '.join(ENGINES)}; e.g. {EXAMPLE}"
        )
    out = [f"engine={name}"]
    for word in rest:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise UsageError(f"${ENGINE_ENV}={text!r}: {word!r} is not KEY=VALUE; e.g. {EXAMPLE}")
        out.append(f"engine.{key.removeprefix('engine.')}={value}")
    return out


def is_engine_override(override: str) -> bool:
    key = override.split("=", 1)[0].strip().lstrip("+~")
    return key == "engine" or key.startswith("engine.")


def _keys(name: str) -> set[str]:
    # lazy: the schema (~0.3 s) loads with the config that needs it
    from doceval.config import schema

    cls = schema.EngineRay if name == "ray" else schema.EngineLocal
    return {f.name for f in fields(cls)}


def chosen_engine(overrides: Sequence[str], default: str = "local") -> str:
    """The engine the overrides select (the last ``engine=NAME``), else ``default``."""
    name = default
    for override in overrides:
        key, sep, value = override.partition("=")
        if sep and key.strip().lstrip("+") == "engine":
            name = value.strip()
    return name


def drop_other_engine_keys(overrides: Sequence[str], default: str = "local") -> list[str]:
    """``overrides`` less the keys only the other engine has (``engine.num_cpus`` under engine=local), each
    dropped with a one-line note on stderr; an unknown key stays (the schema names it)."""
    name = chosen_engine(overrides, default)
    if name not in ENGINES:
        return list(overrides)
    mine, every = _keys(name), _keys("local") | _keys("ray")
    kept = []
    for override in overrides:
        key = override.split("=", 1)[0].strip().lstrip("+~")
        field = key.removeprefix("engine.")
        if key.startswith("engine.") and field in every and field not in mine:
            other = "ray" if name == "local" else "local"
            print(f"note: {key} applies to engine={other} only: ignored under engine={name}", file=sys.stderr)
            continue
        kept.append(override)
    return kept


def engine_block(conf_dir: Path, overrides: Sequence[str]) -> dict[str, Any]:
    """The ``engine`` block the engine overrides among ``overrides`` compose to over conf/engine/NAME.yaml,
    without Hydra (a stage reads params.yaml, which holds no engine)."""
    chosen = drop_other_engine_keys([o for o in overrides if is_engine_override(o)])
    name = chosen_engine(chosen)
    path = conf_dir / "engine" / f"{name}.yaml"
    if name not in ENGINES or not path.is_file():
        raise UsageError(f"engine={name}: not an engine; use one of {', '.join(ENGINES)} (e.g. {EXAMPLE})")
    block = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for override in chosen:
        key, sep, value = override.partition("=")
        key = key.strip().lstrip("+")
        if sep and key.startswith("engine."):
            block[key.removeprefix("engine.")] = yaml.safe_load(value) if value.strip() else None
    return dict(block)
