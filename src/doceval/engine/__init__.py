"""Where the work runs (``engine=local|ray``): the one package that imports ray (tests/test_dependency_rules.py).

``engine=local`` is today's behaviour and needs nothing from here. ``engine=ray`` joins (or starts) a Ray
cluster for the length of a command (:mod:`doceval.engine.cluster`); the index stage's embedding, the
evaluation fan-out and sweep points run on its workers, and only the driver reads and writes local stores
(docs/design.md, "The engine"). Import the submodules lazily: importing ray costs about a second.
"""

from __future__ import annotations

from doceval.config import schema


def uses_ray(engine: schema.Engine) -> bool:
    """True for ``engine=ray``."""
    return isinstance(engine, schema.EngineRay)
