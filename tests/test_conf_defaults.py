"""Defaults are written once, in conf/ (docs/design.md 6.2): no schema field and no constructor restates a value
conf/ writes. A schema field's only default is None, for a key conf/ leaves out ("unset": the component's own
behaviour); a constructor parameter or dataclass field named like a conf/ key never defaults to a value conf/
gives that key (it would silently disagree with conf/ the day one of them changes)."""

from __future__ import annotations

import ast
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest
import yaml

from doceval.config import schema
from doceval.config.objects import yaml_key

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
SRC = ROOT / "src" / "doceval"

# Constructors a scan finds that configuration does not build: the name is a conf/ key's by coincidence.
NOT_CONFIG = {
    "doceval.common.progress.Progress(enabled=True)": "a progress bar shown or not, not a conf/ `enabled`",
    "doceval.drafting.run.DraftOptions(seed=0)": "`golden draft --seed`, a flag of its own (not conf/'s seed)",
    "doceval.harness.floors.Floors(source='config')": "where resolved floors came from (config|cli|calibrated:…), "
    "a label, not conf/'s floors.source",
}


def _option_files() -> list[tuple[str, Path]]:
    return [(g.name, p) for g in sorted(CONF.iterdir()) if g.is_dir() and g.name != "experiment"
            for p in sorted(g.glob("*.yaml"))]  # fmt: skip


def _read(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    data.pop("defaults", None)
    return data


def _block(hint: Any, data: dict[str, Any]) -> type | None:
    """The schema dataclass ``data`` is a block of (a variant chosen by its first field), else None."""
    options = [a for a in get_args(hint) if a is not type(None)] or [hint]
    classes = [o for o in options if is_dataclass(o)]
    if len(classes) == 1:
        return classes[0]  # type: ignore[return-value]
    for cls in classes:
        first = fields(cls)[0]
        if get_args(get_type_hints(cls)[first.name]) == (data.get(first.name),):
            return cls  # type: ignore[return-value]
    return None


def _restated(cls: type, data: dict[str, Any], where: str) -> list[str]:
    """Every field of ``cls`` (and of the blocks within ``data``) with a default that is not None, or with a
    default for a key conf/ writes."""
    found: list[str] = []
    hints = get_type_hints(cls)
    for f in fields(cls):  # type: ignore[arg-type]
        if f.metadata.get("flat"):
            found += _restated(schema.EXTENDED_BY[cls], data, where)
            continue
        key = yaml_key(f)
        if f.default is not MISSING and (f.default is not None or key in data):
            found.append(f"{where}.{key}: {cls.__name__}.{f.name} defaults to {f.default!r}")
        value = data.get(key)
        inner = _block(hints[f.name], value) if isinstance(value, dict) else None
        if inner is not None:
            found += _restated(inner, value, f"{where}.{key}")  # type: ignore[arg-type]
    return found


def test_no_schema_field_restates_a_conf_value() -> None:
    hints = get_type_hints(schema.Config)
    found = _restated(schema.Config, _read(CONF / "config.yaml"), "conf/config.yaml")
    blocks = 0
    for group, path in _option_files():
        data = _read(path)
        cls = _block(hints[group], data)
        assert cls is not None, f"{path}: no schema block for it"
        found += _restated(cls, data, str(path.relative_to(ROOT)))
        blocks += 1
    assert blocks >= 25 and not found, "\n".join(found)


def test_the_schema_scan_sees_a_restated_default() -> None:
    """Guards the scan: a field that defaults to conf/'s value is found."""
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class Block:
        k1: float = field(default=1.5)

    assert _restated(Block, {"k1": 1.5}, "conf/x.yaml") == ["conf/x.yaml.k1: Block.k1 defaults to 1.5"]
    assert _restated(Block, {}, "conf/x.yaml")  # and any default but None


def _conf_values() -> dict[str, list[Any]]:
    """Every leaf key conf/ writes (its last dotted part) -> the values it gives it."""
    out: dict[str, list[Any]] = {}

    def walk(data: Any) -> None:
        for key, value in data.items():
            if isinstance(value, dict):
                walk(value)
            else:
                out.setdefault(str(key), []).append(value)

    walk(_read(CONF / "config.yaml"))
    for _, path in _option_files():
        walk(_read(path))
    return out


def _constant(node: ast.expr, names: dict[str, Any]) -> Any:
    """The value of a constant expression (``3``, ``4 * 1024 * 1024``, ``-1``, a module constant's name), else
    ``MISSING``."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id, MISSING)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _constant(node.operand, names)
        return -value if isinstance(value, int | float) else MISSING
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Add):
        left, right = _constant(node.left, names), _constant(node.right, names)
        if isinstance(left, int | float) and isinstance(right, int | float):
            return left * right if isinstance(node.op, ast.Mult) else left + right
    return MISSING


def _module_names(trees: dict[str, ast.Module]) -> dict[str, dict[str, Any]]:
    """Per module: the constants its top level assigns (``DEFAULT_X = 120.0``) or imports from another
    module of the package (``from doceval.common.concurrency import DEFAULT_X``)."""
    own: dict[str, dict[str, Any]] = {}
    for module, tree in trees.items():
        own[module] = {}
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
            if isinstance(target, ast.Name):
                value = _constant(node.value, own[module])  # type: ignore[attr-defined]
                if value is not MISSING:
                    own[module][target.id] = value
    names = {module: dict(found) for module, found in own.items()}
    for module, tree in trees.items():
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module in own:
                for alias in node.names:
                    if alias.name in own[node.module]:
                        names[module][alias.asname or alias.name] = own[node.module][alias.name]
    return names


def _defaults(node: ast.ClassDef, names: dict[str, Any] | None = None) -> list[tuple[str, Any]]:
    """(name, constant) of a class's ``__init__`` parameters and class-level fields with a constant default
    (``x: int = 3``, ``x: int = field(default=3)``, ``spec(3)``, ``x: int = DEFAULT_X`` where ``names`` holds
    the module's constants)."""
    out: list[tuple[str, Any]] = []
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            a = item.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True))
            pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
            values = [(arg.arg, _constant(d, names or {})) for arg, d in pairs]
            out += [(arg, value) for arg, value in values if value is not MISSING]
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
            value = item.value
            if isinstance(value, ast.Call):
                given = value.args[:1] + [k.value for k in value.keywords if k.arg == "default"]
                value = given[0] if given else value
            if isinstance(value, ast.Constant):
                out.append((item.target.id, value.value))
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal and of one kind (an int is a number like a float; a bool is not)."""
    number = (int, float)
    if (
        isinstance(a, number)
        and isinstance(b, number)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        return bool(a == b)
    return type(a) is type(b) and a == b


def _restating_constructors(conf: dict[str, list[Any]]) -> set[str]:
    found = set()
    paths = sorted(SRC.rglob("*.py"))
    modules = [".".join(path.relative_to(SRC.parent).with_suffix("").parts) for path in paths]
    trees = {m: ast.parse(path.read_text(encoding="utf-8")) for m, path in zip(modules, paths, strict=True)}
    names = _module_names(trees)
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for name, value in _defaults(node, names[module]):
                same = [v for v in conf.get(name, []) if _same(v, value)]
                if value is not None and same:
                    found.add(f"{module}.{node.name}({name}={value!r})")
    return found


def test_no_constructor_restates_a_conf_value() -> None:
    found = _restating_constructors(_conf_values())
    new = sorted(found - set(NOT_CONFIG))
    assert not new, (
        "constructors restating conf/ (take the value from the composed block instead):\n" + "\n".join(new)
    )
    stale = set(NOT_CONFIG) - found
    assert not stale, f"NOT_CONFIG lists what the scan no longer finds: {sorted(stale)}"
    assert "doceval.common.llm_settings.LLMConfig(max_retries=5)" not in found  # the 11 LLM defaults went
    assert "doceval.system.docchat.answerers.ExtractiveAnswerer(max_passages=3)" not in found


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("class A:\n    def __init__(self, k1: float = 1.5) -> None: ...\n", "A(k1=1.5)"),
        ("class A:\n    k1: float = 1.5\n", "A(k1=1.5)"),
        ("class A:\n    k1: float = field(default=1.5)\n", "A(k1=1.5)"),
        ("class A:\n    def __init__(self, *, k1: float = 1.5) -> None: ...\n", "A(k1=1.5)"),
        ("K1 = 1.5\nclass A:\n    def __init__(self, *, k1: float = K1) -> None: ...\n", "A(k1=1.5)"),
        ("N = 4 * 1024\nclass A:\n    def __init__(self, n: int = N) -> None: ...\n", "A(n=4096)"),
    ],
)
def test_the_constructor_scan_sees_every_form(source: str, expected: str) -> None:
    tree = ast.parse(source)
    node = tree.body[-1]
    assert isinstance(node, ast.ClassDef)
    name, value = _defaults(node, _module_names({"m": tree})["m"])[0]
    assert f"{node.name}({name}={value!r})" == expected
