"""DVC stage `index`: embed the corpus into the Qdrant index (data/index) with its manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.common.hints import stage_command
from doceval.config.schema import EngineRay
from doceval.engine import engine_session
from doceval.errors import RunIncomplete, WorkersLost
from doceval.index.build import build_index
from doceval.index.embed import CachedEmbedder, EmbeddingCache, make_embedder
from doceval.inputs.configured import refuse_stage_overlap
from doceval.inputs.corpus import load_corpus

if TYPE_CHECKING:
    from doceval.config.schema import Config


def run(cfg: Config, progress: bool = True) -> dict[str, Any]:
    paths = cfg.paths
    refuse_stage_overlap(cfg, [("paths.index", paths.index)], without=("index",))
    corpus = load_corpus(Path(paths.docs))
    cache = Path(paths.cache) / "embeddings.sqlite"
    engine = cfg.engine
    with engine_session(engine):
        record: dict[str, Any] | None = None  # the manifest's engine block ({"name": "local"} when None)
        if isinstance(engine, EngineRay):
            # lazy: imports ray (about a second); engine=local never loads it
            from doceval.engine.embedding import RayEmbedder

            # The actors embed the misses; the driver alone writes the cache, the store and the manifest.
            inner = RayEmbedder(engine, cfg.embedder)
            embedder: CachedEmbedder = CachedEmbedder(inner, EmbeddingCache(cache))
            record = inner.record()
        else:
            embedder = make_embedder(cfg.embedder, cache)
        try:
            manifest = build_index(corpus, embedder, cfg.store, Path(paths.index), progress, record)
        except WorkersLost as lost:  # engine=ray: no node left for the embedder; what was embedded is cached
            raise RunIncomplete(
                f"doceval index: incomplete, no index written: {lost} ({embedder.misses} vectors embedded this "
                f"run are kept in {cache}); rerun {stage_command('index')} to embed only what is missing"
            ) from None
    print(json.dumps({k: manifest[k] for k in ("model", "chunks", "content_hash", "embedding_cache")}))
    return manifest
