"""Probe tasks, one pinned to each live node, asking what a worker there would find before any work is sent:
which file a module imports from (the user's code), and which of the driver's paths exist there."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from doceval.common.io import sha256_file
from doceval.engine.cluster import this_node

PROBE_TIMEOUT_S = 120.0  # a probe starts a worker process on each node: seconds, on a busy node more


def _origin(module: str) -> tuple[str, str | None, str]:
    """On a node: (node, the file ``module`` imports from, its sha256), or (node, None, why it does not import)."""
    try:
        spec = importlib.util.find_spec(module)
    except Exception as exc:  # noqa: BLE001 - a parent package missing or failing: that is the answer
        return this_node(), None, f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return this_node(), None, f"ModuleNotFoundError: no module named {module!r}"
    origin = Path(spec.origin).resolve()
    return this_node(), str(origin), sha256_file(origin)


def _present(paths: Sequence[str]) -> tuple[str, list[str]]:
    """On a node: (node, the paths of ``paths`` that do not exist there)."""
    return this_node(), [p for p in paths if not os.path.exists(p)]


def _on_every_node(fn: Any, *args: Any) -> list[Any]:
    """``fn(*args)`` once on each live node (no CPU held: a probe must not wait behind the run's actors)."""
    remote = ray.remote(num_cpus=0, max_retries=1)(fn)
    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
    refs = [
        remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote(*args)
        for n in nodes
    ]
    return list(ray.get(refs, timeout=PROBE_TIMEOUT_S))


def import_origins(module: str) -> list[tuple[str, str | None, str]]:
    """Per live node: (node, the file ``module`` imports from there or None, its sha256 or why it failed)."""
    return _on_every_node(_origin, module)


def missing_paths(paths: Sequence[str]) -> list[tuple[str, list[str]]]:
    """Per live node lacking any of ``paths``: (node, those it lacks)."""
    return [(node, lacking) for node, lacking in _on_every_node(_present, list(paths)) if lacking]
