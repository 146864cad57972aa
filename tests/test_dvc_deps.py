"""Every DVC stage depends on the code it runs: the packages its stage module imports, followed transitively
(imports inside functions included), must be covered by the stage's `deps` in dvc.yaml. Otherwise editing the
code that computes a number would not rerun the stage that reports it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from doceval.common.imports import import_closure

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
STAGES = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
# Holds __version__ and the lazy Python API (loaded by attribute access only, never by a stage); every stage
# imports it, and a version bump must not rerun the pipeline.
EXEMPT = {SRC / "doceval" / "__init__.py"}


def _only_docstring(path: Path) -> bool:
    """A package __init__ with nothing but a docstring cannot change a number."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return path.name == "__init__.py" and all(
        isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body
    )


# Package data read at run time by a package (not imported, so not seen by the import walk).
DATA = {"doceval.llm": [SRC / "doceval" / "prompts"]}


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
