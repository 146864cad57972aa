"""Where the work runs (``engine=local|ray``): the one package that imports ray (tests/test_dependency_rules.py).

``engine=local`` is today's behaviour and needs nothing from here. ``engine=ray`` joins (or starts) a Ray
cluster for the length of a command (:mod:`doceval.engine.cluster`): inside :func:`command_session` (the CLI
wraps every command in one) the first phase that needs Ray opens the session and every later phase reuses it,
so a command initialises Ray once. The index stage's embedding, the evaluation fan-out and sweep points run on
its workers, and only the driver reads and writes local stores (docs/design.md, "The engine"). Import the
submodules lazily: importing ray costs about a second.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from doceval.config import schema
    from doceval.engine.cluster import RaySession


class _Command:
    """The command's engine session, held from the first phase that opens it until the command ends."""

    stack: contextlib.ExitStack | None = None
    session: RaySession | None = None


@contextlib.contextmanager
def command_session() -> Iterator[None]:
    """Engine sessions opened inside the block stay open until it ends, shared by every phase (retrieval,
    answering, judging, the index stage under a pipeline): one ``ray.init`` per command. Nested blocks join
    the outer one; a block that never needs Ray costs nothing."""
    if _Command.stack is not None:
        yield
        return
    _Command.stack = contextlib.ExitStack()
    try:
        yield
    finally:
        stack, _Command.stack, _Command.session = _Command.stack, None, None
        stack.close()


def uses_ray(engine: schema.Engine) -> bool:
    """True for ``engine=ray``."""
    # lazy: the schema costs ~0.3 s to import, and the CLI imports this package for every command
    from doceval.config import schema

    return isinstance(engine, schema.EngineRay)


@contextlib.contextmanager
def engine_session(engine: schema.Engine) -> Iterator[RaySession | None]:
    """The Ray session of ``engine=ray`` for the block (joined or started, and left as found), or None for
    ``engine=local``, which needs nothing."""
    # lazy: as in uses_ray
    from doceval.config import schema

    if not isinstance(engine, schema.EngineRay):
        yield None
        return
    # lazy: ray costs about a second to import; engine=local never loads it
    from doceval.engine.cluster import ray_session

    if _Command.stack is None:
        with ray_session(engine) as session:
            yield session
        return
    if _Command.session is None:
        _Command.session = _Command.stack.enter_context(ray_session(engine))
    yield _Command.session
