"""Where the work runs (``engine=local|ray``): the one package that imports ray (tests/test_dependency_rules.py).

``engine=local`` is today's behaviour and needs nothing from here. ``engine=ray`` joins (or starts) a Ray
cluster for the length of a command (:mod:`doceval.engine.cluster`); the index stage's embedding, the
evaluation fan-out and sweep points run on its workers, and only the driver reads and writes local stores
(docs/design.md, "The engine"). Import the submodules lazily: importing ray costs about a second.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from doceval.config import schema

if TYPE_CHECKING:
    from doceval.engine.cluster import RaySession


def uses_ray(engine: schema.Engine) -> bool:
    """True for ``engine=ray``."""
    return isinstance(engine, schema.EngineRay)


@contextlib.contextmanager
def engine_session(engine: schema.Engine) -> Iterator[RaySession | None]:
    """The Ray session of ``engine=ray`` for the block (joined or started, and left as found), or None for
    ``engine=local``, which needs nothing."""
    if not isinstance(engine, schema.EngineRay):
        yield None
        return
    # lazy: ray costs about a second to import; engine=local never loads it
    from doceval.engine.cluster import ray_session

    with ray_session(engine) as session:
        yield session
