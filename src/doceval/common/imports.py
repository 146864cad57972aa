"""The import graph of doceval, read from its source: every import statement of every module (imports inside
functions and under TYPE_CHECKING included, relative imports resolved to absolute names). Cache keys hash the
files it reaches (:func:`doceval.common.provenance.code_hash`); the dependency-rule, import-circle and DVC-deps
tests walk it. Standard library only; ``src`` is the folder holding the ``doceval`` package (this installation's
unless given).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2]


def module_name(path: Path, src: Path = SRC) -> str:
    """``src/doceval/a/b.py`` -> ``doceval.a.b``; a package's ``__init__.py`` -> the package's name."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_file(name: str, src: Path = SRC) -> Path | None:
    """The file of module ``name`` under ``src`` (a package's ``__init__.py``), or None: not a module."""
    path = src / name.replace(".", "/")
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
    for node in _statements(ast.parse(source).body):
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


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement at any depth (function, class, if/try/with/match bodies): an import is a statement,
    so the expressions, most of a module's nodes, are never visited (a cache key reads dozens of modules)."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, field, ()):
                yield from _statements(
                    child.body if isinstance(child, ast.ExceptHandler | ast.match_case) else [child]
                )


def imports_of(path: Path, src: Path = SRC) -> set[str]:
    """Every name the module in ``path`` imports (see :func:`imported_modules`)."""
    return imported_modules(
        path.read_text(encoding="utf-8"), module_name(path, src), path.name == "__init__.py"
    )


def within(name: str, prefix: str) -> bool:
    """``name`` is module ``prefix`` or one of its submodules (or a name inside one)."""
    return name == prefix or name.startswith(prefix + ".")


def import_closure(*modules: str, src: Path = SRC) -> dict[str, Path]:
    """Every doceval module ``modules`` can import (parents of submodules included), with its file."""
    seen: dict[str, Path] = {}
    todo = list(modules)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = module_file(name, src)
        if path is None:
            continue
        seen[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]
        todo += sorted(n for n in imports_of(path, src) if n.split(".")[0] == "doceval")
    return seen


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Each doceval module -> the other doceval modules it names in an import, each name read as the longest
    module it starts with (``from doceval.a import b, f`` names ``doceval.a`` and, if b is a submodule,
    ``doceval.a.b``). What the import-circle test walks."""
    files = {module_name(p, src): p for p in sorted((src / "doceval").rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets: set[str] = set()
        for imported in imports_of(path, src):
            parts = imported.split(".")
            prefixes = (".".join(parts[:i]) for i in range(len(parts), 0, -1))
            target = next((p for p in prefixes if p in files), None)
            if target is not None and target != name:
                targets.add(target)
        graph[name] = targets
    return graph
