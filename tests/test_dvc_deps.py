"""Every DVC stage depends on the code it runs: the packages its stage module imports, followed transitively
(imports inside functions included), must be covered by the stage's `deps` in dvc.yaml. Otherwise editing the
code that computes a number would not rerun the stage that reports it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
# Holds only __version__; every stage imports it, and a version bump must not rerun the pipeline.
EXEMPT = {SRC / "doceval" / "__init__.py"}


def _only_docstring(path: Path) -> bool:
    """A package __init__ with nothing but a docstring cannot change a number."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return path.name == "__init__.py" and all(
        isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body
    )


# Package data read at run time by a package (not imported, so not seen by the import walk).
DATA = {"doceval.llm": [SRC / "doceval" / "prompts"]}


def _module_file(name: str) -> Path | None:
    path = SRC / name.replace(".", "/")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def _imports(path: Path, module: str) -> set[str]:
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return {name for name in found if name.split(".")[0] == "doceval"}


def import_closure(module: str) -> dict[str, Path]:
    """Every doceval module ``module`` can import (parents of submodules included), with its file."""
    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if path is None or name in seen:
            continue
        seen[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += sorted(_imports(path, name))
    return seen


def _covered(path: Path, deps: list[Path]) -> bool:
    return any(path == d or d in path.parents for d in deps)


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_stage_deps_cover_the_code_it_imports(stage: str) -> None:
    closure = import_closure(f"doceval.stages.{stage}")
    assert f"doceval.stages.{stage}" in closure, f"no module doceval.stages.{stage} for DVC stage {stage}"
    deps = [ROOT / d for d in STAGES[stage]["deps"]]
    needed = {p for p in closure.values() if p not in EXEMPT and not _only_docstring(p)}
    for name, dirs in DATA.items():
        if name in closure:
            needed |= set(dirs)
    missing = sorted(str(p.relative_to(ROOT)) for p in needed if not _covered(p, deps))
    assert not missing, f"dvc.yaml stage {stage}: add these (or their packages) to deps: {missing}"


def test_the_walk_follows_lazy_imports() -> None:
    """The check above is only as good as the walk: imports inside functions count."""
    closure = import_closure("doceval.stages.evaluate")
    assert "doceval.tracking" in closure  # imported inside run()
    assert "doceval.scoring.metrics" in closure
