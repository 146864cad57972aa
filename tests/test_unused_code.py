"""CONTRIBUTING's rule "code nothing uses is removed", for what a scan can decide: a module-level function or
class of src/doceval whose name appears nowhere else (src, tests, benchmarks, examples, scripts). A builder a
decorator registers is used through its registry. Methods are not scanned (a name such as ``run`` is everywhere).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READ = ("src", "tests", "benchmarks", "examples", "scripts")


def unused_definitions(sources: dict[str, str], scanned: set[str]) -> list[str]:
    """``file:line name`` of each undecorated top-level def or class in ``scanned`` named only once in all."""
    words: dict[str, int] = {}
    for text in sources.values():
        for word in re.findall(r"\w+", text):
            words[word] = words.get(word, 0) + 1
    found = []
    for rel in sorted(scanned):
        for node in ast.parse(sources[rel]).body:
            defined = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            if defined and not node.decorator_list and words.get(node.name, 0) <= 1:
                found.append(f"{rel}:{node.lineno} {node.name}")
    return found


def test_no_function_or_class_nothing_uses() -> None:
    sources = {
        p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
        for top in READ
        if (ROOT / top).is_dir()
        for p in (ROOT / top).rglob("*.py")
    }
    unused = unused_definitions(sources, {rel for rel in sources if rel.startswith("src/doceval/")})
    assert not unused, "defined and never used (remove them, CONTRIBUTING.md):\n" + "\n".join(unused)


def test_the_scan_finds_a_definition_nothing_uses() -> None:
    sources = {
        "src/a.py": "def used():\n    pass\n\n\ndef orphan():\n    pass\n\n\n@register('x')\ndef _built():\n    pass\n",
        "tests/t.py": "from a import used\n",
    }
    assert unused_definitions(sources, {"src/a.py"}) == ["src/a.py:5 orphan"]
