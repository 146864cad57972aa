"""The limits issue 28 sets on src/: no function or method over 80 lines, no module over 500 lines, and no
import inside a function without a comment saying why (start-up time), so real dependencies show at
the top of a module.

Read with ``ast``: a function's length runs from its first decorator (or its ``def``) to its last line, so a
long docstring counts too. A nested function counts as part of its parent and on its own. An offender is named
with its file, line, qualified name and length, so the failure says what to split.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 500

# (path under src/, qualified function name, or None for the module's own length) -> why it is allowed.
KNOWN_EXCEPTIONS: dict[tuple[str, str | None], str] = {}

FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def function_lengths(source: str) -> list[tuple[str, int, int]]:
    """``(qualified name, line of the def, length in lines)`` of every function and method in ``source``,
    nested ones included (``Outer.method``, ``outer.inner``)."""
    found: list[tuple[str, int, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, FunctionNode):
                name = f"{prefix}{child.name}"
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                end = child.end_lineno or child.lineno
                found.append((name, child.lineno, end - start + 1))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def offenders(root: Path) -> list[tuple[str, str | None, str]]:
    """``(path, function or None, message)`` for every module and function under ``root`` over its limit."""
    out: list[tuple[str, str | None, str]] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        source = path.read_text(encoding="utf-8")
        n_lines = len(source.splitlines())
        if n_lines > MAX_MODULE_LINES:
            out.append((rel, None, f"{rel}: module of {n_lines} lines (limit {MAX_MODULE_LINES})"))
        for name, line, length in function_lengths(source):
            if length > MAX_FUNCTION_LINES:
                out.append((rel, name, f"{rel}:{line} {name}: {length} lines (limit {MAX_FUNCTION_LINES})"))
    return out


def test_no_function_or_module_under_src_is_over_its_limit() -> None:
    found = [msg for rel, name, msg in offenders(SRC) if (rel, name) not in KNOWN_EXCEPTIONS]
    assert not found, "split these along their responsibilities:\n" + "\n".join(found)


def test_every_known_exception_is_still_over_its_limit() -> None:
    # An exception left behind after its split would let the code grow back unnoticed: remove it.
    over = {(rel, name) for rel, name, _ in offenders(SRC)}
    stale = [f"{rel} {name or '(module)'}" for rel, name in KNOWN_EXCEPTIONS if (rel, name) not in over]
    assert not stale, "no longer over the limit; remove from KNOWN_EXCEPTIONS:\n" + "\n".join(stale)


def test_lengths_count_decorators_nested_functions_and_methods() -> None:
    source = textwrap.dedent(
        """\
        import functools


        @functools.cache
        def outer():
            x = 1

            def inner():
                return x

            return inner


        class Box:
            def method(self):
                return 1

            async def later(self):
                return 2
        """
    )
    assert function_lengths(source) == [
        ("outer", 5, 8),  # from the decorator on line 4 to line 11
        ("outer.inner", 8, 2),
        ("Box.method", 15, 2),
        ("Box.later", 18, 2),
    ]


def test_an_offender_is_named_with_its_file_line_and_length(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))  # def + 80 lines: 81
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text(f"def too_long():\n{body}\n\n\ndef short():\n    return 1\n")
    (tmp_path / "pkg" / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    (tmp_path / "pkg" / "fine.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    assert [msg for _, _, msg in offenders(tmp_path)] == [
        f"pkg/big.py: module of {MAX_MODULE_LINES + 1} lines (limit {MAX_MODULE_LINES})",
        f"pkg/long.py:1 too_long: {MAX_FUNCTION_LINES + 1} lines (limit {MAX_FUNCTION_LINES})",
    ]


def unexplained_local_imports(source: str) -> list[tuple[int, str]]:
    """``(line, statement)`` of each import inside a function with no comment saying why: on its own line, or on
    the line above the contiguous group of imports it belongs to."""
    lines = source.splitlines()
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, FunctionNode):
            continue
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Import | ast.ImportFrom):
                continue
            first = sub.lineno - 1  # walk up over the imports (and their continuation lines) just above
            while first > 0 and lines[first - 1].strip().startswith(("import ", "from ", ")")):
                first -= 1
            group = lines[first : (sub.end_lineno or sub.lineno)]
            above = lines[first - 1].strip() if first > 0 else ""
            if not above.startswith("#") and not any("#" in line for line in group):
                found.append((sub.lineno, ast.unparse(sub)))
    return sorted(set(found))


def test_every_import_inside_a_function_says_why() -> None:
    found = [
        f"{path.relative_to(SRC).as_posix()}:{line}: {statement}"
        for path in sorted(SRC.rglob("*.py"))
        for line, statement in unexplained_local_imports(path.read_text(encoding="utf-8"))
    ]
    assert not found, (
        "move these imports to the module's top, or say why they are local (start-up time) in a "
        "comment above:\n" + "\n".join(found)
    )


def test_the_local_import_check_reads_comments_above_a_group() -> None:
    source = textwrap.dedent(
        """\
        import os


        def explained():
            # lazy: start-up (torch)
            import torch
            from x import (
                y,
            )
            return torch, y


        def inline():
            import numpy  # lazy: start-up
            return numpy


        def bare():
            x = 1
            import json
            return json, x
        """
    )
    assert unexplained_local_imports(source) == [(20, "import json")]
