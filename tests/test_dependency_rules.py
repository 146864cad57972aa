"""The package's dependency rules, checked on the source: every import statement of every module (imports
inside functions and under TYPE_CHECKING included), resolved to absolute module names.

- scoring never imports the system under test (a scorer must not depend on what it grades);
- the system never imports the harness or the scorers (a system never grades itself);
- library code never imports the CLI;
- drafting never imports the harness, the system under test or the scorers (labels come from the docs alone);
- config never imports the LLM client, the scorers or the harness (it sits below them: metric names come from
  doceval.common.metric_names, the LLM client settings from doceval.common.llm_settings), and the LLM client
  never imports config; the configuration's import closure loads no numpy;
- one module owns each heavy third-party client: mlflow (doceval/tracking), qdrant_client and qdrant_edge
  (the doceval/index/store package), openai (doceval/llm), ray (doceval/engine);
- no upward import: inputs never imports scoring, config never imports the harness (CONTRIBUTING.md), scoring
  never imports the index (the reference judge gets its embedder through a seam), common imports nothing of
  doceval but doceval.errors (everything may import common);
- the typed run summary (doceval.summary) imports nothing of doceval but common and errors: the harness builds
  it and scoring, results, tracking, stages, the CLI and the API read it, so it sits below them all;
- no import circle: no module reaches itself through the imports it names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from doceval.common.imports import (
    SRC,
    import_closure,
    import_graph,
    imported_modules,
    imports_of,
    module_name,
    within,
)

PKG = SRC / "doceval"


MODULES = sorted(PKG.rglob("*.py"))


def modules_under(*rel: str) -> list[Path]:
    return [p for p in MODULES if any(p == PKG / r or (PKG / r) in p.parents for r in rel)]


def violations(paths: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{p.relative_to(SRC)} imports {name}"
        for p in paths
        for name in imports_of(p)
        if any(within(name, f) for f in forbidden)
    )


# Every top-level module and package of doceval but common and errors: what common must not import.
ABOVE_COMMON = tuple(
    sorted(
        {".".join(module_name(p).split(".")[:2]) for p in MODULES}
        - {"doceval", "doceval.common", "doceval.errors"}
    )
)

# (description, modules that must not import, forbidden module prefixes)
RULES = [
    ("inputs never imports scoring", modules_under("inputs"), ("doceval.scoring",)),
    ("config never imports the harness", modules_under("config"), ("doceval.harness",)),
    (
        "scoring never imports the index (the judge's embedder comes through a seam)",
        modules_under("scoring"),
        ("doceval.index",),
    ),
    ("common imports nothing of doceval but doceval.errors", modules_under("common"), ABOVE_COMMON),
    (
        "the run summary imports nothing of doceval but common and errors",
        modules_under("summary"),
        tuple(m for m in ABOVE_COMMON if m != "doceval.summary"),
    ),
    ("scoring never imports the system under test", modules_under("scoring"), ("doceval.system",)),
    (
        "the system never imports the harness or the scorers",
        modules_under("system"),
        ("doceval.harness", "doceval.scoring"),
    ),
    (
        "library code never imports the CLI",
        [p for p in MODULES if p not in modules_under("cli")],
        ("doceval.cli",),
    ),
    (
        "only doceval/tracking imports mlflow",
        [p for p in MODULES if p not in modules_under("tracking")],
        ("mlflow",),
    ),
    (
        "only doceval/index/store imports qdrant_client or qdrant_edge",
        [p for p in MODULES if p not in modules_under("index/store")],
        ("qdrant_client", "qdrant_edge"),
    ),
    (
        "drafting never imports the harness, the system under test or the scorers",
        modules_under("drafting"),
        ("doceval.harness", "doceval.system", "doceval.scoring"),
    ),
    ("only doceval/llm imports openai", [p for p in MODULES if p not in modules_under("llm")], ("openai",)),
    ("only doceval/engine imports ray", [p for p in MODULES if p not in modules_under("engine")], ("ray",)),
    (
        "config never imports the LLM client, the scorers or the harness",
        modules_under("config"),
        ("doceval.llm", "doceval.scoring", "doceval.harness"),
    ),
    ("the LLM client never imports config", modules_under("llm"), ("doceval.config",)),
]


@pytest.mark.parametrize(("rule", "paths", "forbidden"), RULES, ids=[r[0] for r in RULES])
def test_dependency_rule(rule: str, paths: list[Path], forbidden: tuple[str, ...]) -> None:
    assert paths, f"{rule}: no modules found; has the package moved?"
    assert not violations(paths, forbidden), f"{rule}: " + "; ".join(violations(paths, forbidden))


def test_the_configuration_loads_no_numpy() -> None:
    """Validating a gate's metric names must not load the scorers (numpy, ~0.25 s of every command's start-up)."""
    closure: dict[str, Path] = {}
    for path in modules_under("config"):
        closure.update(import_closure(module_name(path)))
    assert "doceval.config.schema" in closure
    heavy = sorted(f"{name} imports numpy" for name, path in closure.items() if any(within(i, "numpy")
                   for i in imports_of(path)))  # fmt: skip
    assert not heavy, "; ".join(heavy)


def test_the_rules_cover_the_modules_they_name() -> None:
    names = {module_name(p) for p in MODULES}
    assert {"doceval.scoring.judge", "doceval.scoring.judging", "doceval.system.docchat.runner"} <= names
    assert {"doceval.seam", "doceval.index.store", "doceval.llm.config", "doceval.tracking.runs"} <= names
    assert {"doceval.index.store.edge", "doceval.index.store.client"} <= names  # the two Qdrant importers
    assert "doceval.engine.cluster" in names  # the Ray importer
    assert "doceval.drafting.differences" in names
    assert {"doceval.summary.model", "doceval.summary.settings"} <= names


@pytest.mark.parametrize(
    ("source", "module", "is_package", "expected"),
    [
        ("import openai", "doceval.scoring.x", False, "openai"),
        ("from mlflow.entities import Metric", "doceval.results.x", False, "mlflow.entities"),
        (
            "def f():\n    from doceval.system.docchat import runner",
            "doceval.scoring.x",
            False,
            "doceval.system.docchat",
        ),
        ("from ..system import docchat", "doceval.scoring.judging", False, "doceval.system.docchat"),
        ("from . import judge", "doceval.scoring", True, "doceval.scoring.judge"),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import doceval.cli",
            "doceval.x",
            False,
            "doceval.cli",
        ),
    ],
)
def test_the_import_scan_sees_every_form_of_import(
    source: str, module: str, is_package: bool, expected: str
) -> None:
    """Guards the checker itself: a scan that missed function-level, relative or TYPE_CHECKING imports would
    pass every rule above vacuously."""
    assert expected in imported_modules(source, module, is_package)


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_import_circle() -> None:
    """Counted on every import statement (inside functions and under TYPE_CHECKING too): a lazy import or a
    type-only one still ties the two modules together."""
    graph = import_graph()
    found = [
        " <-> ".join(c) + " (" + "; ".join(f"{m} -> {', '.join(sorted(graph[m] & set(c)))}" for m in c) + ")"
        for c in import_circles(graph)
    ]
    assert not found, f"{len(found)} import circle(s): " + " | ".join(found)


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d"}}
    assert import_circles(graph) == [["a", "b", "c"]]  # a self-import is no circle of modules
    assert import_circles({"x": {"y"}, "y": {"x"}, "z": {"y"}}) == [["x", "y"]]
