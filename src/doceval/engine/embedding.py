"""The index stage's embedding on Ray Data (``engine=ray``): the cache misses go to a pool of embedder actors.

The driver keeps every store: it finds the misses in its embedding cache, hands their texts (with their
positions) to Ray's object store through ``ray.data.from_items``, and gets ``(positions, vectors)`` back as the
actors finish batches, writing each batch to the cache as it arrives (a killed run keeps what it paid for).
Workers never open a driver path. Each actor builds the embedder once, with doceval's own construction
(:func:`doceval.index.embed.make_embedder`), so the vectors are those of ``engine=local``: same fingerprint,
same cache keys, same index hash.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import ray
import ray.data

from doceval.config import schema
from doceval.errors import UsageError
from doceval.index.embed import make_embedder

log = logging.getLogger(__name__)


def _quiet_ray_data() -> None:
    """doceval prints its own progress: no Ray Data bars or execution banners on the terminal."""
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.enable_operator_progress_bars = False
    ctx.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    # It says, once per process and as a warning, that the bars are off: as asked.
    logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)


def describe_embedder(embedder_cfg: schema.Embedder) -> dict[str, Any]:
    """What an actor's embedder is (fingerprint, dim, resolved precision and device): run where the actors run."""
    inner = make_embedder(embedder_cfg, None).inner
    resolved = getattr(inner, "resolved", None)
    return {
        "fingerprint": inner.fingerprint,
        "dim": inner.dim,
        "resolved": resolved() if callable(resolved) else None,
    }


class EmbedderActor:
    """One Ray Data actor: the embedder built once, then a batch of texts to vectors per call. Each row carries
    the actor's fingerprint, so the driver can refuse vectors from an embedder other than the one it keyed."""

    def __init__(self, embedder_cfg: schema.Embedder) -> None:
        self.embedder = make_embedder(embedder_cfg, None).inner

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        texts = [str(t) for t in batch["text"]]
        vectors = np.asarray(self.embedder.encode(texts), dtype=np.float32)
        return {
            "pos": np.asarray(batch["pos"], dtype=np.int64),
            "vector": vectors,
            "fingerprint": np.asarray([self.embedder.fingerprint] * len(texts), dtype=object),
        }


class RayEmbedder:
    """The driver's stand-in for the embedder under ``engine=ray``: the fingerprint, dim and resolved device of
    the actors' embedder (asked of one worker with an actor's resources; the driver loads no model), and
    encoding through a Ray Data pass. :meth:`doceval.index.embed.CachedEmbedder.prefetch` sends every miss of
    the index in one pass (:meth:`encode_stream`): the actors load the model once per run, not per partition."""

    def __init__(self, engine: schema.EngineRay, embedder_cfg: schema.Embedder) -> None:
        _check_resources(engine)
        _quiet_ray_data()
        self.engine = engine
        self.embedder_cfg = embedder_cfg
        probe = ray.remote(  # max_calls=1: the probe's worker exits and frees the model's memory
            num_cpus=engine.cpus_per_actor, num_gpus=engine.gpus_per_actor, max_calls=1
        )(describe_embedder)
        described = ray.get(probe.remote(embedder_cfg))
        self.fingerprint: str = described["fingerprint"]
        self.dim: int = int(described["dim"])
        self._resolved: dict[str, str] | None = described["resolved"]

    def resolved(self) -> dict[str, str] | None:
        return self._resolved

    def record(self) -> dict[str, Any]:
        """``manifest["engine"]``: how the index was embedded (never part of its hash)."""
        e = self.engine
        return {
            "name": "ray",
            "actors": e.actors,
            "batch_size": e.batch_size,
            "gpus_per_actor": e.gpus_per_actor,
        }

    def encode_stream(self, texts: Sequence[str]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(positions into texts, vectors)`` per batch, in the order the actors finish them."""
        if not texts:
            return
        e = self.engine
        items = ray.data.from_items([{"pos": i, "text": t} for i, t in enumerate(texts)])
        with warnings.catch_warnings():
            # Ray Data names no parameter for actor restarts yet: they go as the deprecated ray_remote_args.
            warnings.filterwarnings("ignore", message=".*ray_remote_args.* is deprecated")
            ds = items.map_batches(
                EmbedderActor,
                fn_constructor_args=(self.embedder_cfg,),
                compute=ray.data.ActorPoolStrategy(size=e.actors),
                batch_size=e.batch_size,
                batch_format="numpy",
                num_cpus=e.cpus_per_actor,
                num_gpus=e.gpus_per_actor,
                max_restarts=e.max_restarts,
                max_task_retries=e.max_task_retries,
            )
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
            wrong = {str(f) for f in batch["fingerprint"]} - {self.fingerprint}
            if wrong:
                raise UsageError(
                    f"engine=ray: an embedder actor resolved {sorted(wrong)[0]}, another {self.fingerprint} "
                    "(nodes with different hardware); set embedder.device and embedder.precision explicitly "
                    "(e.g. embedder.device=cpu embedder.precision=fp32)"
                )
            yield np.asarray(batch["pos"], dtype=np.int64), np.stack(list(batch["vector"])).astype(np.float32)

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Vectors for ``texts`` in their order (a Ray Data pass of its own)."""
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
    """Exit 2 when no node could ever host one actor (Ray Data would wait for it for minutes)."""
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
