"""The typed configuration (issue 28): composition returns the frozen :class:`doceval.config.schema.Config`, the
code reads attributes, and defaults are written once, in conf/.

- every option of every config group (and every experiment) builds, and turns back into exactly the mapping
  Hydra composed, key order included, so recorded configs, params.yaml and cache keys are unchanged;
- the objects are frozen: a run cannot change its own configuration half-way;
- the schema restates no default of conf/: a field is required, or None meaning "unset" (a key conf/ leaves out);
- outside doceval/config no code reads a config mapping: no ``cfg[...]``/``cfg.get(...)`` and no parameter typed
  as a mapping under a config's name (checked on the source with ``ast``).
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from omegaconf import OmegaConf

from doceval.config import schema
from doceval.config.compose import compose, dump_params
from doceval.config.objects import config_dict

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
SRC = ROOT / "src" / "doceval"
CONFIG_NAMES = {"cfg", "config", "conf"}


def group_options() -> list[list[str]]:
    out: list[list[str]] = [[]]
    for group in sorted(p for p in CONF.iterdir() if p.is_dir()):
        out += [[f"{group.name}={option.stem}"] for option in sorted(group.glob("*.yaml"))]
    return out


def hydra_mapping(overrides: list[str]) -> dict[str, Any]:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        data = OmegaConf.to_container(hydra_compose(config_name="config", overrides=overrides), resolve=True)
    assert isinstance(data, dict)
    return {str(k): v for k, v in data.items()}


def key_orders(data: Any, path: str = "") -> dict[str, list[str]]:
    if not isinstance(data, dict):
        return {}
    out = {path: list(data)}
    for key, value in data.items():
        out.update(key_orders(value, f"{path}.{key}"))
    return out


@pytest.mark.parametrize("overrides", group_options(), ids=lambda o: o[0] if o else "defaults")
def test_every_option_builds_and_records_what_was_composed(overrides: list[str]) -> None:
    cfg = compose(overrides)
    assert isinstance(cfg, schema.Config)
    if overrides and not overrides[0].startswith("experiment="):
        group, option = overrides[0].split("=")
        block = getattr(cfg, group)
        chosen = getattr(block, "name", getattr(block, "source", option))
        expected = hydra_mapping(overrides)[group]
        assert chosen == expected.get("name", expected.get("source", option))
    composed = hydra_mapping(overrides)
    assert config_dict(cfg) == composed
    assert key_orders(config_dict(cfg)) == key_orders(composed)


def test_params_yaml_is_the_default_config_dumped() -> None:
    assert dump_params(compose()) == (ROOT / "params.yaml").read_text(encoding="utf-8")


def test_the_config_is_frozen_and_typed() -> None:
    cfg = compose(["answerer=openai", "retriever=bm25"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.k = 3  # type: ignore[misc]
    assert isinstance(cfg.retriever, schema.RetrieverBM25) and cfg.retriever.k1 == 1.5
    assert isinstance(cfg.docs.libraries, tuple) and isinstance(cfg.docs.libraries[0], schema.Library)
    assert isinstance(cfg.answerer, schema.AnswererOpenAI)
    assert cfg.answerer.llm.model == "gpt-4o-mini" and cfg.answerer.template == "answer.txt"
    with pytest.raises(TypeError):
        cfg.floors.per_library["pydantic"] = 0.5  # type: ignore[index]


def schema_classes() -> list[type]:
    return [
        c for c in vars(schema).values() if dataclasses.is_dataclass(c) and c.__module__ == schema.__name__
    ]


def test_the_schema_restates_no_default_of_conf() -> None:
    restated = [
        f"{cls.__name__}.{f.name}={f.default!r}"
        for cls in schema_classes()
        for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING and f.default is not None
    ]
    assert not restated, "defaults belong in conf/: " + ", ".join(restated)


def config_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """Lines where code reads a config as a mapping: a subscript or .get() on a config's name, or a parameter of
    that name typed as a mapping."""
    found: list[tuple[int, str]] = []

    def is_config(node: ast.AST) -> bool:
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        return name in CONFIG_NAMES or name.endswith("_cfg")

    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and is_config(node.value):
            found.append((node.lineno, f"{ast.unparse(node)}"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and is_config(node.func.value)
        ):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.arg) and (node.arg in CONFIG_NAMES or node.arg.endswith("_cfg")):
            annotation = ast.unparse(node.annotation) if node.annotation else ""
            if annotation.startswith(("Mapping", "dict", "Any", "MutableMapping")):
                found.append((node.lineno, f"{node.arg}: {annotation}"))
    return found


def test_no_config_is_read_as_a_mapping_outside_doceval_config() -> None:
    offenders = [
        f"{path.relative_to(SRC.parent)}:{line}: {text}"
        for path in sorted(SRC.rglob("*.py"))
        if SRC / "config" not in path.parents
        for line, text in config_reads(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not offenders, "read the typed config's attributes instead:\n" + "\n".join(offenders)


def test_the_source_check_finds_what_it_looks_for() -> None:
    sample = "def f(cfg: Mapping[str, Any], x_cfg: dict) -> None:\n    cfg['k']; x_cfg.get('a'); cfg.k\n"
    assert [text for _, text in config_reads(ast.parse(sample))] == [
        "cfg: Mapping[str, Any]",
        "x_cfg: dict",
        "cfg['k']",
        "x_cfg.get('a')",
    ]
