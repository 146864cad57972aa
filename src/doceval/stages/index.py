"""DVC stage `index`: embed the corpus into the Qdrant index (data/index) with its manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.index.build import build_index
from doceval.index.embed import make_embedder
from doceval.inputs.corpus import load_corpus

if TYPE_CHECKING:
    from doceval.config.schema import Config


def run(cfg: Config, progress: bool = True) -> dict[str, Any]:
    paths = cfg.paths
    corpus = load_corpus(Path(paths.docs))
    embedder = make_embedder(cfg.embedder, Path(paths.cache) / "embeddings.sqlite")
    manifest = build_index(corpus, embedder, cfg.store, Path(paths.index), progress=progress)
    print(json.dumps({k: manifest[k] for k in ("model", "chunks", "content_hash", "embedding_cache")}))
    return manifest
