"""The index stage's embedding on Ray (``engine=ray``): the cache misses go to ``engine.actors`` embedder actors.

The driver keeps every store: it finds the misses in its embedding cache, cuts their texts into batches of
``engine.batch_size`` (each with its positions) and hands them to the actors of the evaluation fan-out
(:func:`doceval.engine.fanout.iter_on_actors`), getting ``(positions, vectors)`` back as the actors finish
batches and writing each batch to the cache as it arrives (a stopped run keeps what it paid for). Workers never
open a driver path. Each actor builds the embedder once, with doceval's own construction
(:func:`doceval.index.embed.make_embedder`), so the vectors are those of ``engine=local``: same fingerprint, same
cache keys, same index hash. A lost node's batches go to the actors left (a lost actor is recreated where it
fits); when no node can host an actor, :class:`~doceval.errors.WorkersLost`: the index stage stops with exit 4,
its cache kept, and the rerun embeds only what is missing.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import ray

from doceval.config import schema
from doceval.engine.cluster import this_node
from doceval.engine.fanout import iter_on_actors
from doceval.errors import UsageError
from doceval.index.embed import make_embedder

log = logging.getLogger(__name__)

Batch = tuple[list[int], list[str]]  # positions into the texts, and those texts


def describe_embedder(embedder_cfg: schema.Embedder) -> dict[str, Any]:
    """What an actor's embedder is (fingerprint, dim, resolved precision and device), or why it could not be
    built (``error``): run where the actors run."""
    try:
        inner = make_embedder(embedder_cfg, None).inner
    except Exception as exc:  # noqa: BLE001 - reported to the driver with the node, as the user's problem
        return {
            "error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}",
            "node": this_node(),
        }
    resolved = getattr(inner, "resolved", None)
    return {
        "fingerprint": inner.fingerprint,
        "dim": inner.dim,
        "resolved": resolved() if callable(resolved) else None,
    }


def build_embedder(embedder_cfg: schema.Embedder) -> Any:
    """One actor's embedder (its model loaded once)."""
    return make_embedder(embedder_cfg, None).inner


def encode_batch(embedder: Any, batch: Batch) -> tuple[list[int], np.ndarray, str]:
    """On an actor: the batch's vectors, with the fingerprint of the embedder that made them."""
    positions, texts = batch
    return positions, np.asarray(embedder.encode(texts), dtype=np.float32), str(embedder.fingerprint)


class RayEmbedder:
    """The driver's stand-in for the embedder under ``engine=ray``: the fingerprint, dim and resolved device of
    the actors' embedder (asked of one worker with an actor's resources; the driver loads no model), and
    encoding on the actors. :meth:`doceval.index.embed.CachedEmbedder.prefetch` sends every miss of the index
    in one pass (:meth:`encode_stream`): the actors load the model once per run, not per partition."""

    def __init__(self, engine: schema.EngineRay, embedder_cfg: schema.Embedder) -> None:
        _check_resources(engine)
        self.engine = engine
        self.embedder_cfg = embedder_cfg
        probe = ray.remote(  # max_calls=1: the probe's worker exits and frees the model's memory
            num_cpus=engine.cpus_per_actor, num_gpus=engine.gpus_per_actor, max_calls=1
        )(describe_embedder)
        described = ray.get(probe.remote(embedder_cfg))
        if "error" in described:
            raise UsageError(
                f"engine=ray: building the embedder ({embedder_cfg.name}) failed on node {described['node']}: "
                f"{described['error']}; install doceval and its model on every node, or run with engine=local"
            )
        self.fingerprint: str = described["fingerprint"]
        self.dim: int = int(described["dim"])
        self._resolved: dict[str, str] | None = described["resolved"]

    def resolved(self) -> dict[str, str] | None:
        return self._resolved

    def record(self) -> dict[str, Any]:
        """``build.json``'s ``engine``: how the index was embedded (never part of its hash)."""
        e = self.engine
        return {
            "name": "ray",
            "actors": e.actors,
            "batch_size": e.batch_size,
            "gpus_per_actor": e.gpus_per_actor,
        }

    def encode_stream(self, texts: Sequence[str]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(positions into texts, vectors)`` per batch, in the order the actors finish them."""
        size = self.engine.batch_size
        batches: list[Batch] = [
            (list(range(i, min(i + size, len(texts)))), list(texts[i : i + size]))
            for i in range(0, len(texts), size)
        ]
        if not batches:
            return
        make = functools.partial(build_embedder, self.embedder_cfg)
        what = f"the embedder ({self.embedder_cfg.name})"
        for _, (positions, vectors, fingerprint) in iter_on_actors(
            make, encode_batch, batches, self.engine, 1, what=what
        ):
            if fingerprint != self.fingerprint:
                raise UsageError(
                    f"engine=ray: an embedder actor resolved {fingerprint}, another {self.fingerprint} "
                    "(nodes with different hardware); set embedder.device and embedder.precision explicitly "
                    "(e.g. embedder.device=cpu embedder.precision=fp32)"
                )
            yield np.asarray(positions, dtype=np.int64), vectors

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Vectors for ``texts`` in their order (a pass of its own)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        seen = np.zeros(len(texts), dtype=bool)
        for positions, vectors in self.encode_stream(texts):
            out[positions] = vectors
            seen[positions] = True
        if not seen.all():
            raise RuntimeError(
                f"engine=ray: {int((~seen).sum())} of {len(texts)} texts came back without a vector"
            )
        return out


def _check_resources(engine: schema.EngineRay) -> None:
    """Exit 2 when no node could ever host one actor (the actors would wait for one for ever)."""
    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    fits = any(
        r.get("CPU", 0) >= engine.cpus_per_actor and r.get("GPU", 0) >= engine.gpus_per_actor for r in nodes
    )
    if not fits:
        gpus = max((r.get("GPU", 0) for r in nodes), default=0)
        cpus = max((r.get("CPU", 0) for r in nodes), default=0)
        raise UsageError(
            f"engine=ray: no node has engine.cpus_per_actor={engine.cpus_per_actor:g} CPUs and "
            f"engine.gpus_per_actor={engine.gpus_per_actor:g} GPUs for an embedder actor (the largest node has "
            f"{cpus:g} CPUs, {gpus:g} GPUs); lower them, or join a cluster with such nodes"
        )
