"""The import graph of src/doceval, read from the source (imports inside functions and under TYPE_CHECKING
included, relative imports resolved): what the dependency-rule and DVC-deps tests walk."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_file(name: str) -> Path | None:
    path = SRC / name.replace(".", "/")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def imported_modules(source: str, module: str, is_package: bool) -> set[str]:
    """Absolute names of everything ``source`` imports: ``import a.b`` -> a.b; ``from a import b`` -> a and
    a.b (b may be a submodule); relative imports resolved against ``module``."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def imports_of(path: Path) -> set[str]:
    return imported_modules(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def import_closure(module: str) -> dict[str, Path]:
    """Every doceval module ``module`` can import (parents of submodules included), with its file."""
    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        path = module_file(name)
        if path is None or name in seen:
            continue
        seen[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += sorted(n for n in imports_of(path) if n.split(".")[0] == "doceval")
    return seen
